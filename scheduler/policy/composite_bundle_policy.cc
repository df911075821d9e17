// Strategy dispatch for placement groups.
#include "policy/composite_bundle_policy.h"

namespace rayx::scheduler::policy {

GroupDecision CompositeBundlePolicy::Schedule(const ClusterResourceView& view,
                                              const PlacementGroupRequest& request) {
  switch (request.strategy) {
    case PlacementStrategy::kPack:
      return pack_.Schedule(view, request);
    case PlacementStrategy::kSpread:
      return spread_.Schedule(view, request);
    case PlacementStrategy::kStrictPack:
      return strict_pack_.Schedule(view, request);
    case PlacementStrategy::kStrictSpread:
      return strict_spread_.Schedule(view, request);
  }
  return Infeasible{"unknown placement strategy"};
}

}  // namespace rayx::scheduler::policy
