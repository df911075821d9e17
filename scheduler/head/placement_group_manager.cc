// Placement groups on the head.
#include "head/placement_group_manager.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "common/clock.h"
#include "common/logging.h"
#include "policy/resource_demand.h"

namespace rayx::scheduler {

namespace {

using State = protocol::PlacementGroupState;
using Strategy = protocol::PlacementStrategy;

std::string GroupShape(const protocol::PlacementGroupInfo& info) {
  // "[{GPU: 4} x 3]" for equal bundles, else each listed.
  bool equal = std::all_of(info.bundles.begin(), info.bundles.end(),
                           [&](const ResourceMap& b) { return b == info.bundles.front(); });
  std::string shape = "[";
  if (equal && !info.bundles.empty()) {
    shape += FormatResourceShape(info.bundles.front()) + " x " + std::to_string(info.bundles.size());
  } else {
    for (size_t i = 0; i < info.bundles.size(); ++i) {
      shape += (i ? ", " : "") + FormatResourceShape(info.bundles[i]);
    }
  }
  return shape + "]";
}

}  // namespace

PlacementGroupManager::PlacementGroupManager(NodeTable& nodes, HeadOutbox& outbox)
    : nodes_(nodes), outbox_(outbox) {}

Result<protocol::PlacementGroupInfo> PlacementGroupManager::Create(
    const protocol::CreatePlacementGroupRequest& req) {
  if (!protocol::IsKnown(req.strategy)) {  // decoding refuses these; an in-process caller may not
    return Status::InvalidArgument("unknown placement strategy: use " +
                                   protocol::NameList<Strategy>());
  }
  if (req.bundles.empty()) {
    return Status::InvalidArgument("a placement group needs at least one bundle");
  }
  if (req.bundles.size() > 10000) {
    return Status::InvalidArgument("a placement group may have at most 10000 bundles");
  }
  for (size_t i = 0; i < req.bundles.size(); ++i) {
    bool any = false;
    for (const auto& [name, amount] : req.bundles[i]) {
      if (!std::isfinite(amount) || amount < 0) {
        return Status::InvalidArgument("bundle " + std::to_string(i) + ": invalid amount of \"" +
                                       name + "\"");
      }
      any = any || amount > 0;
    }
    if (!any) {
      return Status::InvalidArgument("bundle " + std::to_string(i) +
                                     " is empty: every bundle must reserve some resource");
    }
    if (auto gpu = req.bundles[i].find(kGpu); gpu != req.bundles[i].end()) {
      if (Status bad = policy::ResourceDemand::CheckGpuAmount(gpu->second); !bad.ok()) {
        return Status::InvalidArgument("bundle " + std::to_string(i) + ": " + bad.message());
      }
    }
  }
  if (!req.placement_group_id.IsNil() &&
      (req.placement_group_id.Hex().size() > 64 || groups_.count(req.placement_group_id))) {
    return Status::InvalidArgument("placement group id '" +
                                   req.placement_group_id.Hex().substr(0, 64) +
                                   "' is taken or too long");
  }
  Group group;
  // The caller may choose the id (so it can create without waiting).
  group.info.placement_group_id = req.placement_group_id.IsNil()
                                      ? PlacementGroupId::FromSecureRandom()
                                      : req.placement_group_id;
  group.info.name = req.name;
  group.info.job_id = req.job_id;
  group.info.strategy = req.strategy;
  group.info.bundles = req.bundles;
  group.info.detached = req.detached;
  group.info.state = State::kPending;
  group.label_selector = req.label_selector;
  PlacementGroupId id = group.info.placement_group_id;
  auto& stored = groups_[id] = std::move(group);
  if (!TryPlace(stored, /*explain=*/true)) {  // placed: MarkCreated saved it
    pending_.push_back(id);
    Save(stored);
  }
  // Routine creations and removals are not logged (rayx list shows them): a
  // log line each would cost more than placing the group.
  if (stored.info.state != State::kCreated) {
    RAYX_LOG(Info) << "placement group " << id.Short() << " "
                   << protocol::Name(stored.info.strategy) << " " << GroupShape(stored.info) << ": "
                   << protocol::Name(stored.info.state) << " (" << stored.info.reason << ")";
  }
  return stored.info;
}

bool PlacementGroupManager::Reserve(const NodeId& node, const ResourceMap& bundle,
                                    const std::vector<int>& devices, Bundle* out) {
  if (!nodes_.AcquireExact(node, bundle, devices)) return false;
  const std::vector<int>& gpus = devices;
  out->total = bundle;
  out->available = bundle;
  out->node = node;
  out->devices = gpus;
  double gpu = bundle.count(kGpu) ? bundle.at(kGpu) : 0;
  out->device_free.assign(gpus.size(), gpu < 1 ? gpu : 1.0);
  return true;
}

bool PlacementGroupManager::AcquireExact(const PlacementGroupId& group_id, int32_t bundle_index,
                                         const ResourceMap& demand,
                                         const std::vector<int>& gpu_ids, bool overdraw_cpu) {
  if (overdraw_cpu && demand.count(kCpu) && demand.at(kCpu) > 0) {
    ResourceMap rest = demand;
    double cpu = rest[kCpu];
    rest.erase(kCpu);
    if (!AcquireExact(group_id, bundle_index, rest, gpu_ids)) return false;
    ReclaimCpu(group_id, bundle_index, cpu);
    return true;
  }
  auto it = groups_.find(group_id);
  if (it == groups_.end() || bundle_index < 0 ||
      static_cast<size_t>(bundle_index) >= it->second.bundles.size()) {
    return false;
  }
  Bundle& b = it->second.bundles[static_cast<size_t>(bundle_index)];
  if (b.node.IsNil() || b.restoring || !NodeTable::Fits(b.available, demand)) return false;
  double gpus = demand.count(kGpu) ? demand.at(kGpu) : 0;
  double share = gpus < 1 ? gpus : 1.0;
  std::vector<size_t> slots;
  for (int id : gpu_ids) {
    auto d = std::find(b.devices.begin(), b.devices.end(), id);
    if (d == b.devices.end()) return false;
    size_t slot = static_cast<size_t>(d - b.devices.begin());
    if (b.device_free[slot] + 1e-9 < share) return false;
    slots.push_back(slot);
  }
  for (size_t slot : slots) b.device_free[slot] -= share;
  for (const auto& [name, amount] : demand) {
    if (amount > 0) b.available[name] -= amount;
  }
  return true;
}

void PlacementGroupManager::MarkCreated(Group& group) {
  group.info.state = State::kCreated;
  group.info.reason.clear();
  group.info.locations.clear();
  for (const Bundle& b : group.bundles) {
    protocol::BundleLocation loc;
    loc.node_id = b.node.Hex();
    if (const NodeInfo* node = nodes_.FindAlive(b.node)) {
      loc.node_address = node->address;
      loc.object_address = node->object_address;
    }
    loc.gpu_ids = b.devices;
    group.info.locations.push_back(std::move(loc));
  }
  Save(group);
}

bool PlacementGroupManager::PlaceLost(Group& group) {
  std::vector<size_t> lost;
  std::set<NodeId> used;
  for (size_t i = 0; i < group.bundles.size(); ++i) {
    if (group.bundles[i].node.IsNil()) {
      lost.push_back(i);
    } else {
      used.insert(group.bundles[i].node);
    }
  }
  if (lost.empty()) return true;
  // Where each lost bundle goes is the policy's plan, with the survivors as
  // constraints: STRICT_PACK joins their node, STRICT_SPREAD avoids theirs.
  policy::PlacementGroupRequest request = RequestFor(group, lost);
  if (group.info.strategy == Strategy::kStrictPack && !used.empty()) {
    request.only_node = *used.begin();
  }
  if (group.info.strategy == Strategy::kStrictSpread) {
    request.avoid_nodes.assign(used.begin(), used.end());
  }
  auto decision = policy_.Schedule(nodes_.view(), request);
  const auto* plan = std::get_if<policy::GroupScheduled>(&decision);
  if (plan == nullptr) return false;
  std::vector<Bundle> placed(lost.size());
  for (size_t k = 0; k < lost.size(); ++k) {
    const policy::Scheduled& target = plan->bundles[k];
    if (!Reserve(target.node, group.info.bundles[lost[k]], target.gpu_ids, &placed[k])) {
      for (size_t j = 0; j < k; ++j) nodes_.Release(placed[j].node, placed[j].total, placed[j].devices);
      return false;
    }
  }
  for (size_t k = 0; k < lost.size(); ++k) group.bundles[lost[k]] = std::move(placed[k]);
  MarkCreated(group);
  return true;
}

policy::PlacementGroupRequest PlacementGroupManager::RequestFor(
    const Group& group, const std::vector<size_t>& which) const {
  policy::PlacementGroupRequest request;
  for (size_t i : which) request.bundles.push_back(group.info.bundles[i]);
  request.label_selector = group.label_selector;
  request.strategy = group.info.strategy;
  return request;
}

std::vector<size_t> PlacementGroupManager::AllBundles(const Group& group) {
  std::vector<size_t> all(group.info.bundles.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return all;
}

std::vector<size_t> PlacementGroupManager::LostBundles(const Group& group) {
  std::vector<size_t> lost;
  for (size_t i = 0; i < group.bundles.size(); ++i) {
    if (group.bundles[i].node.IsNil()) lost.push_back(i);
  }
  return lost;
}

bool PlacementGroupManager::TryPlace(Group& group, bool explain) {
  if (!group.bundles.empty()) {
    // Some bundles survived a node's death: only the lost ones are placed.
    if (PlaceLost(group)) return true;
    if (explain) Explain(group);
    return false;
  }
  // The policy library plans (STRICT_SPREAD as an exact matching, the rest by
  // the hybrid rule) in time logarithmic in the node count; the node table
  // then takes every bundle, and gives all back if one no longer fits.
  policy::GroupDecision decision =
      policy_.Schedule(nodes_.view(), RequestFor(group, AllBundles(group)));
  if (const auto* plan = std::get_if<policy::GroupScheduled>(&decision)) {
    std::vector<Bundle> placed;
    for (size_t i = 0; i < plan->bundles.size(); ++i) {
      Bundle b;
      if (!Reserve(plan->bundles[i].node, group.info.bundles[i], plan->bundles[i].gpu_ids, &b)) {
        break;
      }
      placed.push_back(std::move(b));
    }
    if (placed.size() == group.info.bundles.size()) {
      group.bundles = std::move(placed);
      MarkCreated(group);
      return true;
    }
    for (const Bundle& b : placed) nodes_.Release(b.node, b.total, b.devices);
  }
  if (explain) SetOutcome(group, decision);
  return false;
}

void PlacementGroupManager::SetOutcome(Group& group, const policy::GroupDecision& decision) {
  if (const auto* infeasible = std::get_if<policy::Infeasible>(&decision)) {
    group.info.state = State::kInfeasible;
    group.info.reason = infeasible->reason;
  } else if (const auto* pending = std::get_if<policy::Pending>(&decision)) {
    group.info.state = State::kPending;
    group.info.reason = pending->reason;
  } else {
    // The policy found room the node table could not take (or it freed up
    // since the last scheduling pass): the next pass places it.
    group.info.state = State::kPending;
    group.info.reason = "its resources are free now; it is placed at the next scheduling pass";
  }
}

void PlacementGroupManager::Explain(Group& group) {
  // The policy decides the whole group: a group that could never fit is
  // INFEASIBLE whatever it holds now.
  SetOutcome(group, policy_.Schedule(nodes_.view(), RequestFor(group, AllBundles(group))));
  std::vector<size_t> lost = LostBundles(group);
  if (lost.empty() || group.info.state == State::kInfeasible) return;
  // Some bundles survive: say what holds back the lost ones.
  std::string which;
  for (size_t i : lost) which += (which.empty() ? "" : ", ") + std::to_string(i);
  auto decision = policy_.Schedule(nodes_.view(), RequestFor(group, lost));
  const auto* pending = std::get_if<policy::Pending>(&decision);
  group.info.reason =
      "bundle(s) " + which + " are placed again, the other bundles keep theirs; " +
      (pending ? pending->reason
               : "no node has room for them that keeps " +
                     std::string(protocol::Name(group.info.strategy)) +
                     " beside the surviving bundles; the group waits until resources are "
                     "released or a node joins");
}

void PlacementGroupManager::Unreserve(Group& group) {
  for (const Bundle& b : group.bundles) {
    if (!b.restoring) nodes_.Release(b.node, b.total, b.devices);
  }
  group.bundles.clear();
  group.info.locations.clear();
}

void PlacementGroupManager::Wait(const std::string& peer, uint64_t request_id,
                                 const PlacementGroupId& group_id, int64_t timeout_ms,
                                 int64_t now_ms) {
  auto it = groups_.find(group_id);
  Waiter waiter{peer, request_id, group_id,
                now_ms + std::clamp<int64_t>(timeout_ms, 0, kLongestWaitMs)};
  if (it == groups_.end()) {
    outbox_.Fail({peer, request_id}, Status::NotFound("no placement group " + group_id.Hex() +
                                                      " (removed, or its job "
                                                      "ended)"));
    return;
  }
  // An infeasible group may fit once the nodes of a restarted head rejoin.
  bool may_fit = it->second.info.state == State::kInfeasible && nodes_.rejoining_count() > 0;
  if ((it->second.info.state != State::kPending && !may_fit) || timeout_ms <= 0) {
    if (it->second.info.state != State::kCreated) Explain(it->second);
    Answer(waiter, it->second.info);
    return;
  }
  if (waiters_.size() >= 100000) {
    outbox_.Fail({peer, request_id}, Status::Unavailable("too many waiters"));
    return;
  }
  waiters_.push_back(std::move(waiter));
}

void PlacementGroupManager::Answer(const Waiter& waiter, const protocol::PlacementGroupInfo& info) {
  protocol::WaitPlacementGroupReply reply;
  reply.group = info;
  outbox_.PlacementGroupWaitDone({waiter.peer, waiter.request_id}, reply);
}

void PlacementGroupManager::AnswerWaiters(const PlacementGroupId& group_id) {
  auto it = groups_.find(group_id);
  protocol::PlacementGroupInfo removed;
  removed.placement_group_id = group_id;
  removed.state = State::kRemoved;
  const protocol::PlacementGroupInfo& info = it == groups_.end() ? removed : it->second.info;
  std::erase_if(waiters_, [&](const Waiter& w) {
    if (w.group_id != group_id) return false;
    Answer(w, info);
    return true;
  });
}

void PlacementGroupManager::ExpireWaits(int64_t now_ms) {
  std::erase_if(waiters_, [&](const Waiter& w) {
    if (w.deadline_ms > now_ms) return false;
    auto it = groups_.find(w.group_id);
    if (it != groups_.end()) {
      if (it->second.info.state != State::kCreated) Explain(it->second);
      Answer(w, it->second.info);
    }
    return true;
  });
}

bool PlacementGroupManager::Remove(const PlacementGroupId& group_id) {
  auto it = groups_.find(group_id);
  if (it == groups_.end()) return false;
  Unreserve(it->second);
  std::erase(pending_, group_id);
  groups_.erase(it);
  if (store_) store_->DeletePlacementGroup(group_id);
  AnswerWaiters(group_id);
  return true;
}

void PlacementGroupManager::SchedulePending() {
  std::erase_if(pending_, [&](const PlacementGroupId& id) {
    auto it = groups_.find(id);
    if (it == groups_.end()) return true;
    State before = it->second.info.state;
    // Re-examined on every release: no O(nodes) explanation here.
    bool placed = TryPlace(it->second, /*explain=*/false);
    if (placed || it->second.info.state != before) AnswerWaiters(id);
    if (placed) {
      RAYX_LOG(Info) << "placement group " << id.Short() << " created";
    }
    return placed;
  });
}

Result<std::optional<PlacementGroupManager::BundleGrant>> PlacementGroupManager::TryAcquire(
    const PlacementGroupId& group_id, int32_t bundle_index, const ResourceMap& demand) {
  auto it = groups_.find(group_id);
  if (it == groups_.end()) {
    return Status::NotFound("no placement group " + group_id.Hex() +
                            " (removed, or its job ended)");
  }
  Group& group = it->second;
  int32_t n = static_cast<int32_t>(group.info.bundles.size());
  if (bundle_index < -1 || bundle_index >= n) {
    return Status::InvalidArgument("placement group " + group_id.Short() + " has " +
                                   std::to_string(n) + " bundles; bundle index " +
                                   std::to_string(bundle_index) + " does not exist");
  }
  bool could_ever = false;
  for (int32_t i = 0; i < n; ++i) {
    if (bundle_index >= 0 && i != bundle_index) continue;
    if (NodeTable::Fits(group.info.bundles[static_cast<size_t>(i)], demand)) could_ever = true;
  }
  if (!could_ever) {
    return Status::Infeasible(
        "infeasible: " + FormatResourceShape(demand) + " does not fit in " +
        (bundle_index >= 0
             ? "bundle " + std::to_string(bundle_index) + " " +
                   FormatResourceShape(group.info.bundles[static_cast<size_t>(bundle_index)])
             : "any bundle of the group " + GroupShape(group.info)) +
        " of placement group " + group_id.Short());
  }
  // Bundles that are reserved take leases even while lost ones are re-placed.
  if (group.bundles.empty()) return std::optional<BundleGrant>();
  double gpus = demand.count(kGpu) ? demand.at(kGpu) : 0;
  for (int32_t i = 0; i < n; ++i) {
    if (bundle_index >= 0 && i != bundle_index) continue;
    Bundle& b = group.bundles[static_cast<size_t>(i)];
    if (b.node.IsNil() || b.restoring || !NodeTable::Fits(b.available, demand)) continue;
    auto picked = NodeTable::PickGpuDevices(b.device_free, gpus);
    if (!picked) continue;
    BundleGrant grant;
    grant.bundle_index = i;
    grant.node = b.node;
    double share = gpus < 1 ? gpus : 1.0;
    for (int d : *picked) {
      b.device_free[static_cast<size_t>(d)] -= share;
      grant.gpu_ids.push_back(b.devices[static_cast<size_t>(d)]);
    }
    for (const auto& [name, amount] : demand) {
      if (amount > 0) b.available[name] -= amount;
    }
    return std::optional<BundleGrant>(std::move(grant));
  }
  return std::optional<BundleGrant>();
}

void PlacementGroupManager::Release(const PlacementGroupId& group_id, int32_t bundle_index,
                                    const ResourceMap& demand, const std::vector<int>& gpu_ids) {
  auto it = groups_.find(group_id);
  if (it == groups_.end()) return;
  if (bundle_index < 0 || static_cast<size_t>(bundle_index) >= it->second.bundles.size()) return;
  Bundle& b = it->second.bundles[static_cast<size_t>(bundle_index)];
  if (b.node.IsNil()) return;  // lost with its node
  auto cpu = demand.find(kCpu);
  if (b.cpu_overdrawn > 0 && cpu != demand.end() && cpu->second > 0) {
    // CPU leased beyond the bundle's total is paid back first.
    double paid = std::min(b.cpu_overdrawn, cpu->second);
    b.cpu_overdrawn = b.cpu_overdrawn - paid < 1e-9 ? 0 : b.cpu_overdrawn - paid;
    ResourceMap rest = demand;
    rest[kCpu] = cpu->second - paid;
    Release(group_id, bundle_index, rest, gpu_ids);
    return;
  }
  double gpus = demand.count(kGpu) ? demand.at(kGpu) : 0;
  double share = gpus < 1 ? gpus : 1.0;
  for (int id : gpu_ids) {
    for (size_t d = 0; d < b.devices.size(); ++d) {
      if (b.devices[d] == id) b.device_free[d] = std::min(1.0, b.device_free[d] + share);
    }
  }
  for (const auto& [name, amount] : demand) {
    if (amount <= 0) continue;
    double total = b.total.count(name) ? b.total.at(name) : 0;
    b.available[name] = std::min(total, b.available[name] + amount);
  }
}

void PlacementGroupManager::ReclaimCpu(const PlacementGroupId& group_id, int32_t bundle_index,
                                       double cpu) {
  auto it = groups_.find(group_id);
  if (it == groups_.end() || bundle_index < 0 ||
      static_cast<size_t>(bundle_index) >= it->second.bundles.size() || !(cpu > 0)) {
    return;
  }
  Bundle& b = it->second.bundles[static_cast<size_t>(bundle_index)];
  if (b.node.IsNil()) return;  // lost with its node
  double& available = b.available[kCpu];
  double take = std::min(available, cpu);
  available = available - take < 1e-9 ? 0 : available - take;
  if (cpu - take > 1e-9) b.cpu_overdrawn += cpu - take;
}

void PlacementGroupManager::ForEachBundle(
    const std::function<void(const PlacementGroupId& group, int32_t index, const NodeId& node,
                             const ResourceMap& total, const ResourceMap& available,
                             double cpu_overdrawn)>& fn) const {
  for (const auto& [id, group] : groups_) {
    for (size_t i = 0; i < group.bundles.size(); ++i) {
      const Bundle& b = group.bundles[i];
      if (b.node.IsNil() || b.restoring) continue;
      fn(id, static_cast<int32_t>(i), b.node, b.total, b.available, b.cpu_overdrawn);
    }
  }
}

std::vector<int> PlacementGroupManager::DevicesOn(const PlacementGroupId& group_id,
                                                  const NodeId& node) const {
  std::vector<int> out;
  auto it = groups_.find(group_id);
  if (it == groups_.end()) return out;
  for (const Bundle& b : it->second.bundles) {
    if (!b.node.IsNil() && b.node == node) out.insert(out.end(), b.devices.begin(), b.devices.end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<PlacementGroupId> PlacementGroupManager::GroupsOfJob(const JobId& job_id) const {
  std::vector<PlacementGroupId> out;
  for (const auto& [id, group] : groups_) {
    if (group.info.job_id == job_id && !group.info.detached) out.push_back(id);
  }
  return out;
}

const protocol::PlacementGroupInfo* PlacementGroupManager::Find(
    const PlacementGroupId& group_id) const {
  auto it = groups_.find(group_id);
  return it == groups_.end() ? nullptr : &it->second.info;
}

std::vector<protocol::PlacementGroupInfo> PlacementGroupManager::List() const {
  std::vector<protocol::PlacementGroupInfo> out;
  out.reserve(groups_.size());
  for (const auto& [id, group] : groups_) out.push_back(group.info);
  return out;
}

void PlacementGroupManager::AddDemands(std::map<std::string, int>* pending,
                                       std::map<std::string, std::string>* infeasible) const {
  for (const auto& id : pending_) {
    auto it = groups_.find(id);
    if (it == groups_.end()) continue;
    std::string key = "placement group " +
                      std::string(protocol::Name(it->second.info.strategy)) + " " +
                      GroupShape(it->second.info);
    if (it->second.info.state == State::kInfeasible) {
      (*infeasible)[key] = it->second.info.reason;
    } else {
      ++(*pending)[key];
    }
  }
}

}  // namespace rayx::scheduler
