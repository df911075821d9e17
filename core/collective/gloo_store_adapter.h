// GlooStoreAdapter: Gloo's rendezvous::Store over a rayx RendezvousStore.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "collective/rendezvous_store.h"

namespace rayx::collective {

// Gloo's three store calls on `store` under `prefix`, every wait bounded by
// `deadline` (Gloo's own waits have none). A wait that passes the deadline
// throws gloo::IoException and records the keys still missing. `after_read`,
// when set, runs after every successful get (on the caller's thread).
// Thread-safe; `store` must outlive the adapter.
class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(RendezvousStore& store, std::string prefix,
                   std::chrono::steady_clock::time_point deadline,
                   std::function<void()> after_read = nullptr);
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;
  // Gloo's keys that a wait gave up on (without the prefix).
  std::vector<std::string> missing_keys();
  // The Gloo key last read (without the prefix); empty before any.
  std::string last_read();

 private:
  RendezvousStore& store_;
  const std::string prefix_;
  const std::chrono::steady_clock::time_point deadline_;
  const std::function<void()> after_read_;
  std::mutex mu_;
  std::vector<std::string> missing_;
  std::string last_read_;
};

}  // namespace rayx::collective
