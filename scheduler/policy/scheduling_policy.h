// The interface of the single-request scheduling policies.
#pragma once

#include "policy/cluster_resource_view.h"
#include "policy/scheduling_types.h"

namespace rayx::scheduler::policy {

// Decides where one request goes: a node and its GPU devices (Scheduled),
// nowhere yet (Pending), or nowhere ever on the current nodes (Infeasible).
// Deciding never changes the view; the caller commits a Scheduled decision with
// ClusterResourceView::Acquire(node, request.demand, gpu_ids) before the view
// changes otherwise. Implementations use no clocks, threads, I/O or globals;
// one whose decisions depend on earlier ones (SPREAD's round robin) keeps that
// state in the policy object. Not thread-safe.
class SchedulingPolicy {
 public:
  virtual ~SchedulingPolicy() = default;
  virtual SchedulingDecision Schedule(const ClusterResourceView& view,
                                      const SchedulingRequest& request) = 0;
};

}  // namespace rayx::scheduler::policy
