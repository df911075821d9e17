// LeaseManager's lending half: a lease whose worker is blocked in get/wait
// lends its CPU to its node or bundle and takes it back when it resumes, and
// the check that the books agree. Part of LeaseManager (lease_manager.h).
#include <cmath>
#include <map>
#include <utility>

#include "common/logging.h"
#include "head/lease_manager.h"

namespace rayx::scheduler {

namespace {

double CpuOf(const ResourceMap& resources) {
  auto it = resources.find(kCpu);
  return it == resources.end() ? 0 : it->second;
}

}  // namespace

ResourceMap LeaseManager::Held(const Lease& lease) {
  ResourceMap held = lease.resources;
  if (lease.lent_cpu > 0) held[kCpu] = CpuOf(held) - lease.lent_cpu;
  return held;
}

Status LeaseManager::SetLeaseBlocked(const std::string& peer, const LeaseId& lease_id,
                                     bool blocked) {
  auto it = leases_.find(lease_id);
  bool unconfirmed = it == leases_.end() && IsUnconfirmed(lease_id);
  if (it == leases_.end() && !unconfirmed) {
    return Status::NotFound("no lease " + lease_id.Hex() + " (it ended)");
  }
  // Only the worker itself knows whether its calls wait: another runtime of
  // the same job may not lend its CPU away.
  auto host = host_lease_of_peer_.find(peer);
  if (host == host_lease_of_peer_.end() || host->second != lease_id) {
    return Status::Unauthenticated("only the runtime inside lease " + lease_id.Short() +
                                   "'s worker says whether that worker is blocked");
  }
  if (unconfirmed) {
    // After a head restart, before the lease's node rejoined: applied then.
    if (blocked) {
      blocked_unconfirmed_.insert(lease_id);
    } else {
      blocked_unconfirmed_.erase(lease_id);
    }
    return Status::OK();
  }
  Lease& lease = it->second;
  if (blocked == lease.blocked) return Status::OK();  // said again (a resync)
  if (blocked) {
    Lend(lease);
    if (lease.lent_cpu > 0) SchedulePending();
  } else {
    Reclaim(lease);
  }
  return Status::OK();
}

void LeaseManager::Lend(Lease& lease) {
  RAYX_DCHECK(!lease.blocked);
  lease.blocked = true;
  ++blocked_leases_;
  double cpu = CpuOf(lease.resources);
  if (cpu <= 0) return;  // nothing to lend; still shown as blocked
  lease.lent_cpu = cpu;
  lent_cpu_ += cpu;
  if (lease.group_id.IsNil()) {
    nodes_.LendCpu(lease.node, cpu);
  } else {
    groups_.LendCpu(lease.group_id, lease.bundle_index, cpu);
  }
}

void LeaseManager::Reclaim(Lease& lease) {
  RAYX_DCHECK(lease.blocked);
  if (lease.lent_cpu > 0) {
    if (lease.group_id.IsNil()) {
      nodes_.ReclaimCpu(lease.node, lease.lent_cpu);
    } else {
      groups_.ReclaimCpu(lease.group_id, lease.bundle_index, lease.lent_cpu);
    }
  }
  ForgetBlocked(lease);
  lease.blocked = false;
  lease.lent_cpu = 0;
}

void LeaseManager::ForgetBlocked(const Lease& lease) {
  if (!lease.blocked) return;
  --blocked_leases_;
  lent_cpu_ -= lease.lent_cpu;
  if (blocked_leases_ == 0) lent_cpu_ = 0;  // no rounding residue
}

Status LeaseManager::CheckAccounting() const {
  constexpr double kEps = 1e-6;
  // What the leases say is taken, per node (outside groups) and per bundle.
  std::map<NodeId, ResourceMap> node_taken;
  std::map<std::pair<PlacementGroupId, int32_t>, ResourceMap> bundle_taken;
  std::map<std::pair<NodeId, int>, double> device_use;  // the share leased, per device
  size_t blocked = 0;
  double lent = 0;
  for (const auto& [id, lease] : leases_) {
    std::string who = "lease " + id.Short() + ": ";
    double cpu = CpuOf(lease.resources);
    if (lease.blocked) ++blocked;
    lent += lease.lent_cpu;
    if (!lease.blocked && lease.lent_cpu != 0) {
      return Status::Internal(who + "lends CPU without being blocked");
    }
    if (lease.blocked && std::abs(lease.lent_cpu - std::max(cpu, 0.0)) > kEps) {
      return Status::Internal(who + "is blocked but lends " + std::to_string(lease.lent_cpu) +
                              " of its " + std::to_string(cpu) + " CPU");
    }
    if (nodes_.FindAlive(lease.node) == nullptr) {
      return Status::Internal(who + "is on node " + lease.node.Short() + ", which is not alive");
    }
    ResourceMap& taken = lease.group_id.IsNil()
                             ? node_taken[lease.node]
                             : bundle_taken[{lease.group_id, lease.bundle_index}];
    for (const auto& [name, amount] : Held(lease)) {
      if (amount > 0) taken[name] += amount;
    }
    auto gpu = lease.resources.find(kGpu);
    const double share = gpu == lease.resources.end() || gpu->second >= 1 ? 1.0 : gpu->second;
    for (int d : lease.gpu_ids) {
      double& use = device_use[{lease.node, d}];
      use += share;
      if (use > 1.0 + kEps) {
        return Status::Internal(who + "device " + std::to_string(d) + " of node " +
                                lease.node.Short() + " is leased " + std::to_string(use) +
                                " times over");
      }
    }
  }
  if (blocked != blocked_leases_ || std::abs(lent - lent_cpu_) > kEps) {
    return Status::Internal("the blocked counts say " + std::to_string(blocked_leases_) +
                            " leases lend " + std::to_string(lent_cpu_) + " CPU; the leases say " +
                            std::to_string(blocked) + " lend " + std::to_string(lent));
  }
  // Each used amount against what is taken: `used` is total - available,
  // plus the CPU overdrawn.
  auto compare = [&](const std::string& who, const ResourceMap& total,
                     const ResourceMap& available, double overdrawn,
                     const ResourceMap& expected) -> Status {
    std::map<std::string, double> names(expected.begin(), expected.end());
    for (const auto& [name, amount] : total) names.emplace(name, 0);
    for (const auto& [name, want] : names) {
      double t = total.count(name) ? total.at(name) : 0;
      double a = available.count(name) ? available.at(name) : t;
      double used = t - a + (name == kCpu ? overdrawn : 0);
      if (a < -kEps || a > t + kEps || std::abs(used - want) > kEps) {
        return Status::Internal(who + name + " used " + std::to_string(used) + " (total " +
                                std::to_string(t) + ", available " + std::to_string(a) +
                                ", overdrawn " + std::to_string(overdrawn) +
                                "), but its leases and bundles hold " + std::to_string(want));
      }
    }
    return Status::OK();
  };
  Status bad;
  groups_.ForEachBundle([&](const PlacementGroupId& group, int32_t index, const NodeId& node,
                            const ResourceMap& total, const ResourceMap& available,
                            double overdrawn) {
    for (const auto& [name, amount] : total) {
      if (amount > 0) node_taken[node][name] += amount;
    }
    if (!bad.ok()) return;
    auto taken = bundle_taken.find({group, index});
    bad = compare("bundle " + std::to_string(index) + " of group " + group.Short() + ": ", total,
                  available, overdrawn, taken == bundle_taken.end() ? ResourceMap{} : taken->second);
    if (taken != bundle_taken.end()) bundle_taken.erase(taken);
  });
  RAYX_RETURN_IF_ERROR(bad);
  if (!bundle_taken.empty()) {
    return Status::Internal("lease(s) in bundle " + std::to_string(bundle_taken.begin()->first.second) +
                            " of group " + bundle_taken.begin()->first.first.Short() +
                            ", which holds no reservation");
  }
  for (const NodeId& node : nodes_.AliveInOrder()) {
    const NodeInfo* info = nodes_.FindAlive(node);
    std::string who = "node " + node.Short() + ": ";
    auto taken = node_taken.find(node);
    RAYX_RETURN_IF_ERROR(compare(who, info->total, info->available, info->cpu_overcommitted,
                                 taken == node_taken.end() ? ResourceMap{} : taken->second));
    // The policy view decides on the same free amounts (in its fixed point).
    auto view = nodes_.view().Find(node);
    if (!view) return Status::Internal(who + "missing from the policy view");
    for (const auto& [name, amount] : info->available) {
      double seen = view->available.count(name) ? view->available.at(name) : 0;
      if (std::abs(seen - amount) > 1e-3) {
        return Status::Internal(who + "the policy view has " + std::to_string(seen) + " " + name +
                                " free, the node table " + std::to_string(amount));
      }
    }
  }
  return Status::OK();
}

}  // namespace rayx::scheduler
