// Strategy dispatch for single requests.
#include "policy/composite_policy.h"

namespace rayx::scheduler::policy {

SchedulingDecision CompositePolicy::Schedule(const ClusterResourceView& view,
                                             const SchedulingRequest& request) {
  if (std::holds_alternative<SpreadStrategy>(request.strategy)) {
    return spread_.Schedule(view, request);
  }
  if (std::holds_alternative<NodeAffinityStrategy>(request.strategy)) {
    return affinity_.Schedule(view, request);
  }
  return hybrid_.Schedule(view, request);
}

}  // namespace rayx::scheduler::policy
