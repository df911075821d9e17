// STRICT_SPREAD placement groups: every bundle on a different node.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "policy/bundle_scheduling_policy.h"
#include "policy/hybrid_policy.h"

namespace rayx::scheduler::policy {

// Design: placing bundles on distinct nodes is a bipartite matching of bundles
// to nodes. Each bundle (bundles with equal demands share the work) lists up to
// B nodes that can hold it now, B being the number of bundles, best first by the
// hybrid rule; a maximum matching (augmenting paths, bundles largest first) then
// assigns distinct nodes. Listing B is enough to be exact: a bundle with B
// candidates always finds one the other B-1 bundles left free, and one with
// fewer lists every node that could take it. So the group is Pending only when
// no assignment exists at all, never because a greedy pass chose badly.
// Infeasible when a bundle fits no matching node's totals. When the same
// matching over totals covers fewer than B bundles, the group waits for more
// nodes (Pending: "STRICT_SPREAD needs 4 distinct nodes that can each hold
// {CPU: 1}; the cluster has 3: waiting for more nodes to join"), as Ray keeps
// such a group pending; otherwise it waits for resources. One bundle per
// node means each takes its devices alone, so GPU ids are picked per node.
// Cost: O(B) tree searches of up to B nodes each, plus O(B^3) matching.
class BundleStrictSpreadPolicy : public BundleSchedulingPolicy {
 public:
  explicit BundleStrictSpreadPolicy(HybridPolicy::Options options = {}) : hybrid_(options) {}

  GroupDecision Schedule(const ClusterResourceView& view,
                         const PlacementGroupRequest& request) override;

 private:
  HybridPolicy hybrid_;
};

}  // namespace rayx::scheduler::policy
