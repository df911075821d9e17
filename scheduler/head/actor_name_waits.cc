#include "head/actor_name_waits.h"

namespace rayx::scheduler {

Status ActorNameWaits::Park(const std::string& name, ActorWaiter waiter, int64_t deadline_ms) {
  size_t& mine = per_peer_[waiter.to.peer];
  if (mine >= limits_.max_per_peer || waits_.size() >= limits_.max_total) {
    if (mine == 0) per_peer_.erase(waiter.to.peer);
    return Status::Unavailable(
        "too many actor lookups waiting in the head (at most " +
        std::to_string(limits_.max_per_peer) + " per client and " +
        std::to_string(limits_.max_total) + " in all); ask again later");
  }
  ++mine;
  uint64_t id = next_id_++;
  by_name_.emplace(name, id);
  by_deadline_.emplace(deadline_ms, id);
  waits_.emplace(id, Parked{name, std::move(waiter), deadline_ms});
  return Status::OK();
}

ActorNameWaits::Parked ActorNameWaits::Unpark(uint64_t id) {
  auto it = waits_.find(id);
  Parked parked = std::move(it->second);
  waits_.erase(it);
  by_deadline_.erase({parked.deadline_ms, id});
  auto peer = per_peer_.find(parked.waiter.to.peer);
  if (peer != per_peer_.end() && --peer->second == 0) per_peer_.erase(peer);
  return parked;
}

std::vector<ActorWaiter> ActorNameWaits::Take(const std::string& name) {
  std::vector<ActorWaiter> out;
  auto [begin, end] = by_name_.equal_range(name);
  for (auto it = begin; it != end; ++it) out.push_back(Unpark(it->second).waiter);
  by_name_.erase(begin, end);
  return out;
}

std::vector<std::pair<std::string, ActorWaiter>> ActorNameWaits::Expire(int64_t now_ms) {
  std::vector<std::pair<std::string, ActorWaiter>> out;
  while (!by_deadline_.empty() && by_deadline_.begin()->first <= now_ms) {
    uint64_t id = by_deadline_.begin()->second;
    Parked parked = Unpark(id);
    auto [begin, end] = by_name_.equal_range(parked.name);
    for (auto it = begin; it != end; ++it) {
      if (it->second == id) {
        by_name_.erase(it);
        break;
      }
    }
    out.emplace_back(std::move(parked.name), std::move(parked.waiter));
  }
  return out;
}

}  // namespace rayx::scheduler
