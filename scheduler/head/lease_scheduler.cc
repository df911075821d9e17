#include "head/lease_scheduler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "policy/resource_demand.h"

namespace rayx::scheduler {

namespace {

// Requests with equal keys ask for the same thing in the same place: when one
// does not fit, neither do the others (a 64-bit hash; a collision only makes a
// request wait for the next pass in which the other fits or is gone).
size_t DemandKey(const protocol::RequestLeaseRequest& req) {
  size_t h = 0;
  auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  for (const auto& [name, amount] : req.resources) {
    mix(std::hash<std::string>{}(name));
    mix(std::hash<double>{}(amount));
  }
  mix(std::hash<PlacementGroupId>{}(req.placement_group_id));
  mix(static_cast<size_t>(req.bundle_index));
  mix(static_cast<size_t>(req.strategy));
  mix(std::hash<std::string>{}(req.affinity_node_id));
  mix(req.affinity_soft);
  for (const auto& [key, value] : req.label_selector) {
    mix(std::hash<std::string>{}(key));
    mix(std::hash<std::string>{}(value));
  }
  return h;
}

}  // namespace

Status LeaseScheduler::Check(const protocol::RequestLeaseRequest& req) {
  for (const auto& [name, amount] : req.resources) {
    if (!std::isfinite(amount) || amount < 0) {
      return Status::InvalidArgument("invalid amount of \"" + name +
                                     "\": " + std::to_string(amount));
    }
  }
  if (auto gpu = req.resources.find(kGpu); gpu != req.resources.end()) {
    RAYX_RETURN_IF_ERROR(policy::ResourceDemand::CheckGpuAmount(gpu->second));
  }
  if (!protocol::IsKnown(req.strategy)) {  // decoding refuses these; an in-process caller may not
    return Status::InvalidArgument("unknown scheduling strategy: use " +
                                   protocol::NameList<protocol::LeaseStrategy>());
  }
  if (req.strategy == protocol::LeaseStrategy::kNodeAffinity &&
      !NodeId::FromHex(req.affinity_node_id).ok()) {
    return Status::InvalidArgument("node affinity: '" + req.affinity_node_id.substr(0, 64) +
                                   "' is not a node id (the 32 hex digits `rayx list nodes` "
                                   "shows)");
  }
  return Status::OK();
}

policy::SchedulingDecision LeaseScheduler::Decide(const protocol::RequestLeaseRequest& req) {
  policy::SchedulingRequest request;
  request.demand = req.resources;
  request.label_selector = req.label_selector;
  switch (req.strategy) {
    case protocol::LeaseStrategy::kDefault:
      break;
    case protocol::LeaseStrategy::kSpread:
      request.strategy = policy::SpreadStrategy{};
      break;
    case protocol::LeaseStrategy::kNodeAffinity: {
      auto node = NodeId::FromHex(req.affinity_node_id);
      if (node.ok()) request.strategy = policy::NodeAffinityStrategy{*node, req.affinity_soft};
      break;
    }
  }
  ++decisions_;
  return policy_.Schedule(nodes_.view(), request);
}

void LeaseScheduler::Pass(const std::function<bool(const PendingLease&)>& eligible,
                          const std::function<bool(PendingLease&)>& grant) {
  std::unordered_set<size_t> full;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!eligible(*it)) {
      ++it;
      continue;
    }
    size_t key = DemandKey(it->req);
    if (full.count(key)) {
      ++it;
      continue;
    }
    if (grant(*it)) {
      it = pending_.erase(it);
    } else {
      full.insert(key);
      ++it;
    }
  }
}

size_t LeaseScheduler::Drop(const std::function<bool(PendingLease&)>& drop) {
  return std::erase_if(pending_, drop);
}

bool LeaseScheduler::DropFirst(const std::function<bool(const PendingLease&)>& match) {
  auto it = std::find_if(pending_.begin(), pending_.end(), match);
  if (it == pending_.end()) return false;
  pending_.erase(it);
  return true;
}

void LeaseScheduler::CountShapes(std::map<std::string, int>* out) const {
  for (const auto& p : pending_) ++(*out)[FormatResourceShape(p.req.resources)];
}

}  // namespace rayx::scheduler
