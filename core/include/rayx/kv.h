// The cluster's key-value store, kept by the head: small values shared by every
// job and process of the cluster (Ray's internal KV). Collective groups meet
// through it; users may keep their own keys in it too.
//
//   rayx::kv::Put("model/version", "42");
//   std::optional<std::string> v = rayx::kv::Get("model/version");
//   std::string id = rayx::kv::Wait("run/7/ready", 10'000);   // parked in the head
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rayx::kv {

// Limits, checked by the head (and here, before sending).
inline constexpr size_t kMaxKeyBytes = 1024;
inline constexpr size_t kMaxValueBytes = 1 << 20;
inline constexpr size_t kMaxNamespaceBytes = 256;

// Every call works in a namespace; "" is the default one. Keys put through this
// API stay until deleted, across jobs. Every call needs rayx::Init (or runs in
// a task or actor) and throws std::invalid_argument for a key, value or
// namespace over its limit (naming the limit), std::runtime_error when the head
// cannot be reached or refuses.

// Stores `value` under `key`. Returns true when the key was new. With
// `overwrite = false` an existing key is left as it is (and false returned).
bool Put(const std::string& key, const std::string& value, bool overwrite = true,
         const std::string& ns = "");
// The value, or nullopt when the key is absent.
std::optional<std::string> Get(const std::string& key, const std::string& ns = "");
// Waits until the key exists (the request waits in the head, no polling) and
// returns its value. Throws rayx::GetTimeoutError after `timeout_ms`.
std::string Wait(const std::string& key, int64_t timeout_ms, const std::string& ns = "");
// Returns true when the key existed.
bool Delete(const std::string& key, const std::string& ns = "");
// Deletes every key that starts with `prefix` (not empty: throws
// std::invalid_argument) and returns how many there were.
size_t DeletePrefix(const std::string& prefix, const std::string& ns = "");
// The keys that start with `prefix`, sorted (at most 10,000).
std::vector<std::string> List(const std::string& prefix, const std::string& ns = "");

}  // namespace rayx::kv
