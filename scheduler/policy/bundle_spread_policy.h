// SPREAD placement groups: distinct nodes where possible, best effort.
#pragma once

#include "policy/bundle_scheduling_policy.h"

namespace rayx::scheduler::policy {

// Design (Ray's BundleSpreadSchedulingPolicy, greedy): bundles largest first;
// each goes to the least utilized node this group does not use yet that can
// hold it now (earliest registered among equals, as SpreadPolicy without its
// cursor), and only when no such node exists to the least utilized node the
// group already uses that still has room beside the bundles placed there.
// Tentative placements are tracked per node, so bundles that share a node get
// distinct GPU devices. When a bundle finds no room the group is Pending or
// Infeasible (BestEffortNotNow).
// Cost: per bundle one least-loaded search, O(groups x log n), plus O(B) plan
// checks when it has to share a node.
class BundleSpreadPolicy : public BundleSchedulingPolicy {
 public:
  GroupDecision Schedule(const ClusterResourceView& view,
                         const PlacementGroupRequest& request) override;
};

}  // namespace rayx::scheduler::policy
