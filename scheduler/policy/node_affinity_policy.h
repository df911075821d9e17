// Node affinity: run on one named node, hard or soft.
#pragma once

#include "policy/hybrid_policy.h"
#include "policy/scheduling_policy.h"

namespace rayx::scheduler::policy {

// Design: reads the NodeAffinityStrategy of the request (a request with another
// strategy is handed to the fallback unchanged).
// - Hard: only the named node. Infeasible when it is not in the view (dead or
//   never joined: node ids are never reused, so it will not come back), when its
//   labels do not match the request's selector, or when its totals could never
//   hold the request; Pending while it is busy; otherwise Scheduled there.
// - Soft: the named node when it can take the request now; otherwise (gone,
//   unmatched, too small or busy) whatever the fallback (the hybrid policy)
//   decides. Falling back as soon as the node is busy is Ray's soft affinity
//   with spill_on_unavailable: rayx queues at the head, not on a node, so
//   waiting for one busy node would only idle the rest.
// Cost: one hash lookup, plus the fallback's cost when it falls back.
class NodeAffinityPolicy : public SchedulingPolicy {
 public:
  // REQUIRES: `fallback` outlives this policy.
  explicit NodeAffinityPolicy(SchedulingPolicy& fallback) : fallback_(fallback) {}

  SchedulingDecision Schedule(const ClusterResourceView& view,
                              const SchedulingRequest& request) override;

 private:
  SchedulingPolicy& fallback_;
};

}  // namespace rayx::scheduler::policy
