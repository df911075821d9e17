// The interface of the placement group (bundle) scheduling policies.
#pragma once

#include "policy/cluster_resource_view.h"
#include "policy/scheduling_types.h"

namespace rayx::scheduler::policy {

// Decides where every bundle of a placement group goes, all at once:
// GroupScheduled (one Scheduled per bundle, in the request's order), Pending
// (it could fit once resources are released or more nodes join) or Infeasible (a
// bundle, or for STRICT_PACK the whole group, fits no node of the current ones,
// or the request is malformed). The reasons are the ones users see, worded in
// reasons.h. Deciding never changes the view; the caller commits the
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
