// Resource quantities and node labels, and parsing them from user input.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "rayx/status.h"

namespace rayx {

// Resource name -> amount, e.g. {"CPU": 8, "GPU": 2, "memory": 3.4e10, "tpu": 4}.
// Ordered so printing and comparison are deterministic.
using ResourceMap = std::map<std::string, double>;

// Label key -> value, e.g. {"accelerator": "H100", "zone": "a"}.
using LabelMap = std::map<std::string, std::string>;

// Well-known resource names.
inline constexpr const char* kCpu = "CPU";
inline constexpr const char* kGpu = "GPU";
inline constexpr const char* kMemory = "memory";

// The most GPUs one node may offer (each is a device, numbered 0..n-1).
inline constexpr int kMaxNodeGpus = 65536;

// The largest amount of one resource: 1e14 (100 TB of memory in bytes), so
// that eight such amounts still add up inside the scheduler's fixed-point
// int64 (scheduler/policy/resource_units.h).
inline constexpr double kMaxResourceAmount = 1e14;

// Bounds on what ParseResourcesJson and ParseLabels read: text length, number
// of entries, and bytes of one name, key or value.
inline constexpr size_t kMaxResourceTextBytes = 64 * 1024;
inline constexpr size_t kMaxResourceEntries = 1024;
inline constexpr size_t kMaxResourceNameBytes = 256;

// Parses a flat JSON object of non-negative numbers: '{"tpu": 4, "ssd": 1.5}'.
// Returns InvalidArgument naming the offending part when the text is not such an
// object, a name is empty or reserved (CPU, GPU, memory have their own flags),
// an amount is negative, not finite or over kMaxResourceAmount, or the text,
// a name or the number of entries is over its bound above.
Result<ResourceMap> ParseResourcesJson(std::string_view json);

// Parses "k=v,k2=v2". Keys and values are [A-Za-z0-9_.-/]+; an empty string gives
// no labels. Returns InvalidArgument naming the bad pair otherwise, or when the
// text, a key, a value or the number of labels is over its bound above.
Result<LabelMap> ParseLabels(std::string_view text);

// "CPU: 2/5, GPU: 0/2" style amount, trimming needless decimals ("4", "0.25").
std::string FormatAmount(double amount);

// A demand or bundle for messages: "{CPU: 1, GPU: 0.5}" (zero amounts left out).
std::string FormatResourceShape(const ResourceMap& resources);

// Memory in human units: "1.5 GiB".
std::string FormatBytes(double bytes);

}  // namespace rayx
