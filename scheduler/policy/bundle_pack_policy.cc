// The PACK placement group policy.
#include "policy/bundle_pack_policy.h"

#include "policy/bundle_plan.h"

namespace rayx::scheduler::policy {

GroupDecision BundlePackPolicy::Schedule(const ClusterResourceView& view,
                                         const PlacementGroupRequest& request) {
  Result<ParsedGroup> parsed = ParseGroup(view, request);
  if (!parsed.ok()) return Infeasible{parsed.status().message()};
  LabelSelector selector(request.label_selector);
  NodeSearch search(view, selector);
  const size_t n = request.bundles.size();

  std::vector<std::vector<int>> gpu_ids(n);
  if (auto node = strict_pack_.ChooseOneNode(search, *parsed, &gpu_ids)) {
    return MakeGroupScheduled(view, request, std::vector<uint32_t>(n, *node), std::move(gpu_ids));
  }

  BundlePlan plan(view, NodeSearchTree::Basis::kAvailable);
  std::vector<uint32_t> nodes(n);
  for (size_t i : parsed->largest_first) {
    const ResourceDemand& demand = parsed->demands[i];
    std::optional<uint32_t> node;
    for (uint32_t used : plan.nodes()) {
      if (plan.Fits(used, demand)) {
        node = used;
        break;
      }
    }
    if (!node) {
      node =
          hybrid_.Choose(search, demand, [&](uint32_t candidate) { return !plan.Uses(candidate); });
    }
    if (!node) return BestEffortNotNow(search, selector, request, *parsed, i);
    nodes[i] = *node;
    gpu_ids[i] = plan.Place(*node, demand);
  }
  return MakeGroupScheduled(view, request, nodes, std::move(gpu_ids));
}

}  // namespace rayx::scheduler::policy
