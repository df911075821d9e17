// PACK placement groups: as few nodes as possible, best effort.
#pragma once

#include "policy/bundle_scheduling_policy.h"
#include "policy/bundle_strict_pack_policy.h"
#include "policy/hybrid_policy.h"

namespace rayx::scheduler::policy {

// Design (Ray's BundlePackSchedulingPolicy, greedy):
// 1. All bundles on one node when some node can take them all now (chosen as
//    STRICT_PACK chooses).
// 2. Otherwise bundles largest first: each goes to a node this group already
//    uses when it fits there (in the order those nodes were first used), else
//    to a fresh node chosen by the hybrid rule. Tentative placements are
//    tracked per node, so bundles sharing a node get distinct GPU devices.
// Greedy, not optimal: packing onto the fewest nodes is bin packing. When a
// bundle finds no room the group is Pending or Infeasible (BestEffortNotNow).
// Cost: one STRICT_PACK search, then per bundle O(B) plan checks plus one
// hybrid search, O(B x groups x log n).
class BundlePackPolicy : public BundleSchedulingPolicy {
 public:
  explicit BundlePackPolicy(HybridPolicy::Options options = {})
      : hybrid_(options), strict_pack_(options) {}

  GroupDecision Schedule(const ClusterResourceView& view,
                         const PlacementGroupRequest& request) override;

 private:
  HybridPolicy hybrid_;
  BundleStrictPackPolicy strict_pack_;
};

}  // namespace rayx::scheduler::policy
