// The placement group front door: picks the policy a group's strategy names.
#pragma once

#include "policy/bundle_pack_policy.h"
#include "policy/bundle_scheduling_policy.h"
#include "policy/bundle_spread_policy.h"
#include "policy/bundle_strict_pack_policy.h"
#include "policy/bundle_strict_spread_policy.h"

namespace rayx::scheduler::policy {

// Dispatches PACK, SPREAD, STRICT_PACK and STRICT_SPREAD to their policies, all
// sharing the same hybrid options. Stateless between calls. Not thread-safe.
class CompositeBundlePolicy : public BundleSchedulingPolicy {
 public:
  CompositeBundlePolicy() : CompositeBundlePolicy(HybridPolicy::Options{}) {}
  explicit CompositeBundlePolicy(HybridPolicy::Options options)
      : pack_(options), strict_pack_(options), strict_spread_(options) {}

  GroupDecision Schedule(const ClusterResourceView& view,
                         const PlacementGroupRequest& request) override;

 private:
  BundlePackPolicy pack_;
  BundleSpreadPolicy spread_;
  BundleStrictPackPolicy strict_pack_;
  BundleStrictSpreadPolicy strict_spread_;
};

}  // namespace rayx::scheduler::policy
