// Resource quantities and node labels, and parsing them from user input.
#pragma once

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

// Parses a flat JSON object of non-negative numbers: '{"tpu": 4, "ssd": 1.5}'.
// Returns InvalidArgument naming the offending part when the text is not such an
// object, a name is empty or reserved (CPU, GPU, memory have their own flags), or
// an amount is negative or not finite.
Result<ResourceMap> ParseResourcesJson(std::string_view json);

// Parses "k=v,k2=v2". Keys and values are [A-Za-z0-9_.-/]+; an empty string gives
// no labels. Returns InvalidArgument naming the bad pair otherwise.
Result<LabelMap> ParseLabels(std::string_view text);

// "CPU: 2/5, GPU: 0/2" style amount, trimming needless decimals ("4", "0.25").
std::string FormatAmount(double amount);

// A demand or bundle for messages: "{CPU: 1, GPU: 0.5}" (zero amounts left out).
std::string FormatResourceShape(const ResourceMap& resources);

// Memory in human units: "1.5 GiB".
std::string FormatBytes(double bytes);

}  // namespace rayx
