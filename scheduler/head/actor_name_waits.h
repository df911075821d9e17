// Lookups of named actors parked in the head until the name has a worker.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "head/head_outbox.h"
#include "rayx/status.h"

namespace rayx::scheduler {

// Who waits, and for what: a worker other than `stale_worker`.
struct ActorWaiter {
  Requester to;
  std::string stale_worker;
};

// Design: a handle whose actor has no worker yet (its constructor runs) or no
// longer (it restarts) asks the head to answer once the name changes, instead
// of asking again and again. The owner of these waits (LeaseManager) takes
// every wait on a name whenever that name's entry changes and answers them
// with the entry as it is then; Expire ends the rest at their deadline.
// Bounded per peer and in total, like the KV store's waits; not persisted
// (a client whose head restarts asks again).
//
// Not thread-safe (the head's event loop owns it).
class ActorNameWaits {
 public:
  struct Limits {
    size_t max_per_peer = 1024;  // Default: 1024 parked lookups per peer
    size_t max_total = 65536;    // Default: 65536 in all
  };

  ActorNameWaits() = default;
  explicit ActorNameWaits(Limits limits) : limits_(limits) {}

  // Unavailable, naming the limit, when the peer or the head has too many
  // lookups parked.
  Status Park(const std::string& name, ActorWaiter waiter, int64_t deadline_ms);
  // Every wait on `name`, no longer parked.
  std::vector<ActorWaiter> Take(const std::string& name);
  // The waits whose deadline is at or before `now_ms`, with their names.
  std::vector<std::pair<std::string, ActorWaiter>> Expire(int64_t now_ms);

  size_t size() const { return waits_.size(); }

 private:
  struct Parked {
    std::string name;
    ActorWaiter waiter;
    int64_t deadline_ms = 0;
  };
  // Removes the wait from every index but by_name_.
  Parked Unpark(uint64_t id);

  Limits limits_;
  std::map<uint64_t, Parked> waits_;  // by wait id
  std::unordered_multimap<std::string, uint64_t> by_name_;
  std::set<std::pair<int64_t, uint64_t>> by_deadline_;
  std::unordered_map<std::string, size_t> per_peer_;
  uint64_t next_id_ = 1;
};

}  // namespace rayx::scheduler
