// RendezvousStore on the head's key-value store: how the ranks of a collective
// group in different processes and nodes find each other.
#pragma once

#include "collective/rendezvous_store.h"

namespace rayx::collective {

// Keys live in the KV namespace "collective", scoped to the job (the head
// removes them when the job ends; DestroyCollectiveGroup removes them sooner).
// Wait parks in the head: no polling. Thread-safe (each call is one head call).
class KvRendezvousStore : public RendezvousStore {
 public:
  static constexpr const char* kNamespace = "collective";

  Status Set(const std::string& key, const std::string& value) override;
  std::optional<std::string> Get(const std::string& key) override;
  Status Wait(const std::vector<std::string>& keys,
              std::chrono::steady_clock::time_point deadline) override;
  // A put without overwrite: the head decides atomically.
  Result<bool> SetIfAbsent(const std::string& key, const std::string& value) override;
  Status DeletePrefix(const std::string& prefix) override;
};

}  // namespace rayx::collective
