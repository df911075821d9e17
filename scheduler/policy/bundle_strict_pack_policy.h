// STRICT_PACK placement groups: every bundle on one node.
#pragma once

#include "policy/bundle_plan.h"
#include "policy/bundle_scheduling_policy.h"
#include "policy/hybrid_policy.h"

namespace rayx::scheduler::policy {

// Design: the group is one request for the sum of its bundles on a single node,
// placed by the hybrid rule (pack below the threshold in registration order,
// then least loaded), so a STRICT_PACK group goes where a task of that size
// would. The tree prunes with the summed amounts; each candidate node is then
// checked by planning the bundles onto it largest first, which gives every
// bundle its own devices (two 1-GPU bundles get two different devices; shares
// pack per the usual rule). Infeasible when no matching node's totals could
// hold the sum, or its devices could never take the bundles' GPU requests
// together (by the same largest-first planning this policy would use, so the
// verdict matches what it would ever do); Pending otherwise.
// Cost: O(groups x log n) tree searches plus O(bundles) per candidate checked.
class BundleStrictPackPolicy : public BundleSchedulingPolicy {
 public:
  explicit BundleStrictPackPolicy(HybridPolicy::Options options = {}) : hybrid_(options) {}

  GroupDecision Schedule(const ClusterResourceView& view,
                         const PlacementGroupRequest& request) override;

  // The node where all of `parsed`'s bundles fit now by the hybrid rule, with
  // each bundle's devices in `gpu_ids`; nullopt when none. Also PACK's first
  // try. `only`: that node or none (nil: any).
  std::optional<uint32_t> ChooseOneNode(const NodeSearch& search, const ParsedGroup& parsed,
                                        std::vector<std::vector<int>>* gpu_ids,
                                        const NodeId& only = NodeId()) const;

 private:
  HybridPolicy hybrid_;
};

}  // namespace rayx::scheduler::policy
