// RendezvousStore: the key-value store through which a group's ranks find
// each other, and an in-memory implementation for one-process tests.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "rayx/status.h"

namespace rayx::collective {

// A key-value store shared by every rank of a group (the head's KV in a
// cluster). Keys of one group attempt share the prefix "<group>/<attempt>/",
// so a re-created group never reads an old attempt's keys; whoever owns the
// store removes that prefix when the group ends.
// Implementations are thread-safe.
class RendezvousStore {
 public:
  virtual ~RendezvousStore() = default;
  // Sets `key` to `value`, replacing any old value. Unavailable when the store
  // cannot be reached.
  virtual Status Set(const std::string& key, const std::string& value) = 0;
  // The value of `key`, or nullopt when it is not set (or cannot be read).
  virtual std::optional<std::string> Get(const std::string& key) = 0;
  // Returns OK once every key is set; TimedOut naming the missing keys when
  // `deadline` passes first.
  virtual Status Wait(const std::vector<std::string>& keys,
                      std::chrono::steady_clock::time_point deadline) = 0;
  // Sets `key` to `value` unless it is set already, atomically: true when this
  // call set it. Internal from stores that cannot (only in-actor groups
  // need it, to agree on an attempt: AgreeOnAttempt).
  virtual Result<bool> SetIfAbsent(const std::string& key, const std::string& value) {
    (void)key;
    (void)value;
    return Status::Internal("this rendezvous store cannot set a key only if it is absent");
  }
  // Deletes every key that starts with `prefix` (not empty). Internal from
  // stores that cannot (in-actor groups then keep finished attempts' keys
  // until the store's owner removes them).
  virtual Status DeletePrefix(const std::string& prefix) {
    (void)prefix;
    return Status::Internal("this rendezvous store cannot delete keys");
  }
};

// RendezvousStore in this process's memory: for ranks that are threads of one
// process (tests, benchmarks). Thread-safe.
class InMemoryRendezvousStore : public RendezvousStore {
 public:
  Status Set(const std::string& key, const std::string& value) override;
  std::optional<std::string> Get(const std::string& key) override;
  Status Wait(const std::vector<std::string>& keys,
              std::chrono::steady_clock::time_point deadline) override;
  Result<bool> SetIfAbsent(const std::string& key, const std::string& value) override;
  Status DeletePrefix(const std::string& prefix) override;
  // Number of keys that start with `prefix`.
  size_t CountPrefix(const std::string& prefix);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> values_;
};

}  // namespace rayx::collective
