// Node membership bookkeeping.
#include "head/node_table.h"

#include <algorithm>
#include <cmath>

namespace rayx::scheduler {

NodeId NodeTable::Register(NodeInfo info, int64_t now_ms, int64_t wall_ms) {
  NodeId id = NodeId::FromSecureRandom();  // the agent's credential for heartbeats
  info.node_id = id;
  info.alive = true;
  info.death_reason.clear();
  info.registered_at_ms = wall_ms;
  info.cpu_overcommitted = 0;
  if (info.available.empty()) info.available = info.total;
  view_.AddNode(id, info.total, info.labels, info.address);
  uint64_t epoch = next_epoch_++;
  if (store_) {
    store_->PutMeta("next_epoch", std::to_string(next_epoch_));
    store_->PutNode(info, epoch);
  }
  alive_[id] = Entry{std::move(info), now_ms, next_order_++, epoch};
  return id;
}

void NodeTable::Restore(const std::vector<StoredNode>& nodes, uint64_t next_epoch,
                        int64_t now_ms) {
  next_epoch_ = std::max(next_epoch_, next_epoch);
  for (const auto& node : nodes) {
    if (node.info.node_id.IsNil() || node.epoch == 0) continue;
    next_epoch_ = std::max(next_epoch_, node.epoch + 1);
    rejoining_[node.info.node_id] = Rejoining{node.info, node.epoch, now_ms};
  }
}

uint64_t NodeTable::RejoiningEpochOf(const NodeId& id) const {
  auto it = rejoining_.find(id);
  return it == rejoining_.end() ? 0 : it->second.epoch;
}

bool NodeTable::Rejoin(const NodeId& id, NodeInfo info, int64_t now_ms, int64_t wall_ms) {
  auto it = rejoining_.find(id);
  if (it == rejoining_.end()) return false;
  uint64_t epoch = it->second.epoch;
  int64_t registered = it->second.info.registered_at_ms;
  rejoining_.erase(it);
  info.node_id = id;
  info.alive = true;
  info.death_reason.clear();
  info.registered_at_ms = registered ? registered : wall_ms;
  info.available = info.total;
  info.cpu_overcommitted = 0;
  view_.AddNode(id, info.total, info.labels, info.address);
  if (store_) store_->PutNode(info, epoch);
  alive_[id] = Entry{std::move(info), now_ms, next_order_++, epoch};
  return true;
}

bool NodeTable::AcquireExact(const NodeId& id, const ResourceMap& demand,
                             const std::vector<int>& gpu_ids, bool overdraw_cpu) {
  if (overdraw_cpu && demand.count(kCpu) && demand.at(kCpu) > 0) {
    ResourceMap rest = demand;
    double cpu = rest[kCpu];
    rest.erase(kCpu);
    if (!AcquireExact(id, rest, gpu_ids)) return false;
    ReclaimCpu(id, cpu);
    return true;
  }
  auto it = alive_.find(id);
  if (it == alive_.end() || !Fits(it->second.info.available, demand)) return false;
  // The devices are the view's: it refuses ids that are not free or not
  // what the demand needs.
  if (!view_.Acquire(id, demand, gpu_ids)) return false;
  for (const auto& [name, amount] : demand) {
    if (amount > 0) it->second.info.available[name] -= amount;
  }
  return true;
}

uint64_t NodeTable::EpochOf(const NodeId& id) const {
  auto it = alive_.find(id);
  return it == alive_.end() ? 0 : it->second.epoch;
}

bool NodeTable::Heartbeat(const NodeId& id, int64_t now_ms,
                          NodeStoreUse store, std::vector<GpuUsage> gpus) {
  auto it = alive_.find(id);
  if (it == alive_.end()) return false;
  it->second.last_heartbeat_ms = now_ms;
  NodeInfo& info = it->second.info;
  info.object_store_bytes = store.bytes;
  info.object_store_capacity = store.capacity;
  info.object_store_objects = store.objects;
  info.object_spilled_bytes = store.spilled_bytes;
  info.object_spilled_objects = store.spilled_objects;
  if (!gpus.empty()) {
    constexpr size_t kMaxGpuSamples = 256;  // more than any machine has
    if (gpus.size() > kMaxGpuSamples) gpus.resize(kMaxGpuSamples);
    for (auto& g : gpus) {
      if (g.name.size() > 128) g.name.resize(128);
    }
    it->second.info.gpu_usage = std::move(gpus);
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
  if (store_) store_->DeleteNode(entry.info.node_id);
  view_.RemoveNode(entry.info.node_id);
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
  std::vector<NodeId> late;
  for (const auto& [id, node] : rejoining_) {
    if (now_ms - node.since_ms > options_.rejoin_timeout_ms) late.push_back(id);
  }
  for (const auto& id : late) {
    auto it = rejoining_.find(id);
    if (store_) store_->DeleteNode(id);
    NodeInfo info = std::move(it->second.info);
    rejoining_.erase(it);
    info.alive = false;
    info.available.clear();
    info.death_reason = "its agent did not rejoin within " +
                        std::to_string(options_.rejoin_timeout_ms) +
                        " ms after the head restarted: the node agent died meanwhile";
    dead_.push_front(std::move(info));
    while (dead_.size() > options_.max_dead_nodes) dead_.pop_back();
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
  expired.insert(expired.end(), late.begin(), late.end());
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
  for (const auto& [id, node] : rejoining_) {
    out.push_back(node.info);
    out.back().alive = false;
    out.back().available.clear();
    out.back().death_reason = "the head restarted: waiting for its agent to rejoin";
    out.back().last_heartbeat_age_ms = now_ms - node.since_ms;
  }
  out.insert(out.end(), dead_.begin(), dead_.end());
  return out;
}

bool NodeTable::Fits(const ResourceMap& have, const ResourceMap& demand) {
  for (const auto& [name, amount] : demand) {
    if (amount <= 0) continue;
    auto it = have.find(name);
    if (it == have.end() || it->second + 1e-9 < amount) return false;
  }
  return true;
}

std::optional<std::vector<int>> NodeTable::PickGpuDevices(const std::vector<double>& free,
                                                          double amount) {
  std::vector<int> ids;
  if (amount <= 0) return ids;
  if (amount < 1) {
    // Pack shares: the device with the least room that still fits.
    int best = -1;
    for (size_t d = 0; d < free.size(); ++d) {
      if (free[d] + 1e-9 < amount) continue;
      if (best < 0 || free[d] < free[static_cast<size_t>(best)]) best = static_cast<int>(d);
    }
    if (best < 0) return std::nullopt;
    return std::vector<int>{best};
  }
  if (amount != std::floor(amount)) return std::nullopt;  // never spans devices
  for (size_t d = 0; d < free.size() && ids.size() < static_cast<size_t>(amount); ++d) {
    if (free[d] >= 1.0 - 1e-9) ids.push_back(static_cast<int>(d));
  }
  if (ids.size() < static_cast<size_t>(amount)) return std::nullopt;
  return ids;
}

std::optional<std::vector<int>> NodeTable::FreeGpuDevices(const NodeId& id,
                                                          const ResourceMap& demand) const {
  const policy::NodeRecord* record = view_.Lookup(id);
  auto wanted = view_.MakeDemand(demand);
  if (record == nullptr || !wanted.ok()) return std::nullopt;
  return policy::NodeRecord::PickGpus(record->gpu_free(), *wanted);
}

bool NodeTable::TryAcquire(const NodeId& id, const ResourceMap& demand,
                           std::vector<int>* gpu_ids) {
  auto it = alive_.find(id);
  if (it == alive_.end() || !Fits(it->second.info.available, demand)) return false;
  auto picked = FreeGpuDevices(id, demand);
  if (!picked || !view_.Acquire(id, demand, *picked)) return false;
  if (gpu_ids) *gpu_ids = *picked;
  for (const auto& [name, amount] : demand) {
    if (amount > 0) it->second.info.available[name] -= amount;
  }
  return true;
}

void NodeTable::Release(const NodeId& id, const ResourceMap& demand,
                        const std::vector<int>& gpu_ids) {
  auto it = alive_.find(id);
  if (it == alive_.end()) return;
  double& overdrawn = it->second.info.cpu_overcommitted;
  auto cpu = demand.find(kCpu);
  if (overdrawn > 0 && cpu != demand.end() && cpu->second > 0) {
    // CPU leased beyond the total is paid back first: none of it was free.
    double paid = std::min(overdrawn, cpu->second);
    overdrawn = overdrawn - paid < 1e-9 ? 0 : overdrawn - paid;
    ResourceMap rest = demand;
    rest[kCpu] = cpu->second - paid;
    Release(id, rest, gpu_ids);
    return;
  }
  view_.Release(id, demand, gpu_ids);
  for (const auto& [name, amount] : demand) {
    if (amount <= 0) continue;
    double total = it->second.info.total.count(name) ? it->second.info.total.at(name) : 0;
    double& avail = it->second.info.available[name];
    avail = std::min(total, avail + amount);
  }
}

void NodeTable::ReclaimCpu(const NodeId& id, double cpu) {
  auto it = alive_.find(id);
  if (it == alive_.end() || !(cpu > 0)) return;
  double& available = it->second.info.available[kCpu];
  double take = std::min(available, cpu);
  // Both books take the same amount: what the policy view cannot take (a
  // rounding difference) is overdrawn instead.
  if (take > 0 && !view_.Acquire(id, {{kCpu, take}}, {})) take = 0;
  available -= take;
  if (available < 1e-9) available = 0;
  if (cpu - take > 1e-9) it->second.info.cpu_overcommitted += cpu - take;
}

std::optional<NodeId> NodeTable::FindNodeWithAvailable(const ResourceMap& demand) const {
  const Entry* best = nullptr;
  for (const auto& [id, entry] : alive_) {
    if (!Fits(entry.info.available, demand)) continue;
    if (!FreeGpuDevices(id, demand)) continue;
    if (best == nullptr || entry.order < best->order) best = &entry;
  }
  if (best == nullptr) return std::nullopt;
  return best->info.node_id;
}

std::vector<NodeId> NodeTable::AliveInOrder() const {
  std::vector<std::pair<uint64_t, NodeId>> ordered;
  ordered.reserve(alive_.size());
  for (const auto& [id, entry] : alive_) ordered.emplace_back(entry.order, id);
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<NodeId> out;
  out.reserve(ordered.size());
  for (auto& [order, id] : ordered) out.push_back(id);
  return out;
}

const NodeInfo* NodeTable::FindAlive(const NodeId& id) const {
  auto it = alive_.find(id);
  return it == alive_.end() ? nullptr : &it->second.info;
}

const NodeInfo* NodeTable::FindAliveByAddress(const std::string& address) const {
  for (const auto& [id, entry] : alive_) {
    if (entry.info.address == address) return &entry.info;
  }
  return nullptr;
}

const NodeInfo* NodeTable::FindAny(const NodeId& id) const {
  if (const NodeInfo* alive = FindAlive(id)) return alive;
  for (const NodeInfo& dead : dead_) {
    if (dead.node_id == id) return &dead;
  }
  return nullptr;
}

}  // namespace rayx::scheduler
