// The SPREAD placement group policy.
#include "policy/bundle_spread_policy.h"

#include "policy/bundle_plan.h"
#include "policy/spread_policy.h"

namespace rayx::scheduler::policy {

GroupDecision BundleSpreadPolicy::Schedule(const ClusterResourceView& view,
                                           const PlacementGroupRequest& request) {
  Result<ParsedGroup> parsed = ParseGroup(view, request);
  if (!parsed.ok()) return Infeasible{parsed.status().message()};
  LabelSelector selector(request.label_selector);
  NodeSearch search(view, selector);
  const size_t n = request.bundles.size();

  BundlePlan plan(view, NodeSearchTree::Basis::kAvailable);
  std::vector<uint32_t> nodes(n);
  std::vector<std::vector<int>> gpu_ids(n);
  for (size_t i : parsed->largest_first) {
    const ResourceDemand& demand = parsed->demands[i];
    std::optional<uint32_t> node = SpreadPolicy::Choose(
        search, demand, std::nullopt, [&](uint32_t candidate) { return !plan.Uses(candidate); });
    if (!node) {
      for (uint32_t used : plan.nodes()) {
        if (!plan.Fits(used, demand)) continue;
        if (!node || view.node(used).utilization() < view.node(*node).utilization()) node = used;
      }
    }
    if (!node) return BestEffortNotNow(search, selector, request, *parsed, i);
    nodes[i] = *node;
    gpu_ids[i] = plan.Place(*node, demand);
  }
  return MakeGroupScheduled(view, request, nodes, std::move(gpu_ids));
}

}  // namespace rayx::scheduler::policy
