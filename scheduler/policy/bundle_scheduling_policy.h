// The interface of the placement group (bundle) scheduling policies.
#pragma once

#include "policy/cluster_resource_view.h"
#include "policy/scheduling_types.h"

namespace rayx::scheduler::policy {

// Decides where every bundle of a placement group goes, all at once:
// GroupScheduled (one Scheduled per bundle, in the request's order), Pending
// (it could fit once resources are released) or Infeasible (never on the current
// nodes, or malformed). Deciding never changes the view; the caller commits the
// whole group with ClusterResourceView::AcquireGroup, which takes all bundles or
// none. Bundles planned onto one node get distinct GPU devices (BundlePlan).
// Every bundle obeys the request's label selector. Not thread-safe.
class BundleSchedulingPolicy {
 public:
  virtual ~BundleSchedulingPolicy() = default;
  virtual GroupDecision Schedule(const ClusterResourceView& view,
                                 const PlacementGroupRequest& request) = 0;
};

}  // namespace rayx::scheduler::policy
