// Node membership bookkeeping.
#include "head/node_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace rayx::scheduler {

NodeId NodeTable::Register(NodeInfo info, int64_t now_ms, int64_t wall_ms) {
  NodeId id = NodeId::FromRandom();
  info.node_id = id;
  info.alive = true;
  info.death_reason.clear();
  info.registered_at_ms = wall_ms;
  if (info.available.empty()) info.available = info.total;
  alive_[id] = Entry{std::move(info), now_ms, next_order_++};
  return id;
}

bool NodeTable::Heartbeat(const NodeId& id, const ResourceMap& available, int64_t now_ms,
                          uint64_t store_bytes) {
  auto it = alive_.find(id);
  if (it == alive_.end()) return false;
  it->second.last_heartbeat_ms = now_ms;
  it->second.info.object_store_bytes = store_bytes;
  // An agent reports availability only for resources it registered.
  for (const auto& [name, amount] : available) {
    if (!std::isfinite(amount)) continue;
    auto total = it->second.info.total.find(name);
    if (total != it->second.info.total.end()) {
      it->second.info.available[name] = std::clamp(amount, 0.0, total->second);
    }
  }
  return true;
}

bool NodeTable::MarkDead(const NodeId& id, const std::string& reason) {
  auto it = alive_.find(id);
  if (it == alive_.end()) return false;
  Entry entry = std::move(it->second);
  alive_.erase(it);
  Bury(std::move(entry), reason);
  return true;
}

void NodeTable::Bury(Entry entry, const std::string& reason) {
  entry.info.alive = false;
  entry.info.death_reason = reason;
  entry.info.available.clear();
  dead_.push_front(std::move(entry.info));
  while (dead_.size() > options_.max_dead_nodes) dead_.pop_back();
}

std::vector<NodeId> NodeTable::ExpireSilentNodes(int64_t now_ms) {
  std::vector<NodeId> expired;
  for (const auto& [id, entry] : alive_) {
    if (now_ms - entry.last_heartbeat_ms > options_.node_timeout_ms) expired.push_back(id);
  }
  for (const auto& id : expired) {
    auto it = alive_.find(id);
    int64_t silent = now_ms - it->second.last_heartbeat_ms;
    Entry entry = std::move(it->second);
    alive_.erase(it);
    Bury(std::move(entry), "no heartbeat for " + std::to_string(silent) + " ms (timeout " +
                               std::to_string(options_.node_timeout_ms) +
                               " ms): the node agent died or the network failed");
  }
  return expired;
}

std::vector<NodeInfo> NodeTable::Snapshot(int64_t now_ms) const {
  std::vector<const Entry*> alive;
  alive.reserve(alive_.size());
  for (const auto& [id, entry] : alive_) alive.push_back(&entry);
  std::sort(alive.begin(), alive.end(),
            [](const Entry* a, const Entry* b) { return a->order < b->order; });
  std::vector<NodeInfo> out;
  out.reserve(alive.size() + dead_.size());
  for (const Entry* entry : alive) {
    out.push_back(entry->info);
    out.back().last_heartbeat_age_ms = now_ms - entry->last_heartbeat_ms;
  }
  out.insert(out.end(), dead_.begin(), dead_.end());
  return out;
}

namespace {
bool Fits(const ResourceMap& have, const ResourceMap& demand) {
  for (const auto& [name, amount] : demand) {
    if (amount <= 0) continue;
    auto it = have.find(name);
    if (it == have.end() || it->second + 1e-9 < amount) return false;
  }
  return true;
}
}  // namespace

bool NodeTable::TryAcquire(const NodeId& id, const ResourceMap& demand) {
  auto it = alive_.find(id);
  if (it == alive_.end() || !Fits(it->second.info.available, demand)) return false;
  for (const auto& [name, amount] : demand) {
    if (amount > 0) it->second.info.available[name] -= amount;
  }
  return true;
}

void NodeTable::Release(const NodeId& id, const ResourceMap& demand) {
  auto it = alive_.find(id);
  if (it == alive_.end()) return;
  for (const auto& [name, amount] : demand) {
    if (amount <= 0) continue;
    double total = it->second.info.total.count(name) ? it->second.info.total.at(name) : 0;
    double& avail = it->second.info.available[name];
    avail = std::min(total, avail + amount);
  }
}

bool NodeTable::AnyNodeCouldFit(const ResourceMap& demand, std::string* why) const {
  ResourceMap largest;
  for (const auto& [id, entry] : alive_) {
    if (Fits(entry.info.total, demand)) return true;
    for (const auto& [name, amount] : entry.info.total) {
      largest[name] = std::max(largest[name], amount);
    }
  }
  std::string need, have;
  for (const auto& [name, amount] : demand) {
    if (amount <= 0) continue;
    double most = largest.count(name) ? largest[name] : 0;
    if (most + 1e-9 >= amount) continue;
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s%s: %g", need.empty() ? "" : ", ", name.c_str(), amount);
    need += buf;
    std::snprintf(buf, sizeof buf, "%s%s %g", have.empty() ? "" : ", ", name.c_str(), most);
    have += buf;
  }
  if (need.empty()) {
    // Each resource exists somewhere, but no node has them all together.
    for (const auto& [name, amount] : demand) {
      if (amount <= 0) continue;
      char buf[128];
      std::snprintf(buf, sizeof buf, "%s%s: %g", need.empty() ? "" : ", ", name.c_str(), amount);
      need += buf;
    }
    *why = "needs {" + need + "} on one node; each exists on some node, but no single alive node "
           "has all of it (" + std::to_string(alive_.size()) + " alive nodes)";
    return false;
  }
  *why = "needs {" + need + "} on one node; the largest alive node has " + have +
         " (" + std::to_string(alive_.size()) + " alive nodes)";
  return false;
}

std::optional<NodeId> NodeTable::FindNodeWithAvailable(const ResourceMap& demand) const {
  const Entry* best = nullptr;
  for (const auto& [id, entry] : alive_) {
    if (!Fits(entry.info.available, demand)) continue;
    if (best == nullptr || entry.order < best->order) best = &entry;
  }
  if (best == nullptr) return std::nullopt;
  return best->info.node_id;
}

const NodeInfo* NodeTable::FindAlive(const NodeId& id) const {
  auto it = alive_.find(id);
  return it == alive_.end() ? nullptr : &it->second.info;
}

}  // namespace rayx::scheduler
