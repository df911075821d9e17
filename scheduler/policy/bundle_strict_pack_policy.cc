// The STRICT_PACK placement group policy.
#include "policy/bundle_strict_pack_policy.h"

#include "policy/bundle_plan.h"
#include "policy/reasons.h"

namespace rayx::scheduler::policy {

using Basis = NodeSearchTree::Basis;

std::optional<uint32_t> BundleStrictPackPolicy::ChooseOneNode(
    const NodeSearch& search, const ParsedGroup& parsed, std::vector<std::vector<int>>* gpu_ids,
    const NodeId& only) const {
  const ClusterResourceView& view = search.view();
  const ResourceDemand sum = ResourceDemand::SumForSearch(parsed.demands);
  auto holds_all = [&](uint32_t node) {
    if (!only.IsNil() && view.node(node).id() != only) return false;
    BundlePlan plan(view, Basis::kAvailable);
    return plan.PlaceAll(node, parsed.demands, parsed.largest_first);
  };
  std::optional<uint32_t> node = hybrid_.Choose(search, sum, holds_all);
  if (node && gpu_ids) {
    gpu_ids->assign(parsed.demands.size(), {});
    BundlePlan plan(view, Basis::kAvailable);
    plan.PlaceAll(*node, parsed.demands, parsed.largest_first, gpu_ids);
  }
  return node;
}

GroupDecision BundleStrictPackPolicy::Schedule(const ClusterResourceView& view,
                                               const PlacementGroupRequest& request) {
  Result<ParsedGroup> parsed = ParseGroup(view, request);
  if (!parsed.ok()) return Infeasible{parsed.status().message()};
  LabelSelector selector(request.label_selector);
  NodeSearch search(view, selector);
  std::vector<std::vector<int>> gpu_ids;
  if (auto node = ChooseOneNode(search, *parsed, &gpu_ids, request.only_node)) {
    return MakeGroupScheduled(view, request, std::vector<uint32_t>(request.bundles.size(), *node),
                              std::move(gpu_ids));
  }
  if (!request.only_node.IsNil()) {
    // Lost bundles joining their group's survivors: only that node will do,
    // and it may have room again later.
    const NodeRecord* only = view.Lookup(request.only_node);
    return Pending{"STRICT_PACK needs " + FormatDemand(SumOfBundles(request)) +
                   " free on the node its other bundles are on (" +
                   (only ? only->address() : request.only_node.Short()) + ")"};
  }

  const ResourceMap sum_map = SumOfBundles(request);
  const ResourceDemand sum = ResourceDemand::SumForSearch(parsed->demands);
  auto could_hold_all = [&](uint32_t node) {
    BundlePlan plan(view, Basis::kTotal);
    return plan.PlaceAll(node, parsed->demands, parsed->largest_first);
  };
  if (search.AnyCouldHold(sum, could_hold_all)) {
    return Pending{
        GroupWaitReason("STRICT_PACK needs " + FormatDemand(sum_map) + " free on one node" +
                            (selector.empty() ? "" : " with labels " + selector.ToString()),
                        search, request.bundles)};
  }
  if (search.AnyCouldHold(sum, AcceptAll)) {
    // Some node has the amounts, but its devices cannot take the GPU requests
    // together (each request needs its own device or room on one).
    return Infeasible{"STRICT_PACK needs " + FormatDemand(sum_map) +
                      " on one node, with each bundle's GPUs on its own devices; no node's GPU "
                      "devices can hold the bundles' GPU requests together (a share never spans "
                      "two devices) " +
                      NodeCount(search, selector)};
  }
  return Infeasible{"STRICT_PACK " + NeverFitsReason(search, selector, sum_map)};
}

}  // namespace rayx::scheduler::policy
