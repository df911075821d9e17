// The hybrid (default) scheduling policy.
#include "policy/hybrid_policy.h"

#include <algorithm>
#include <limits>

#include "policy/reasons.h"

namespace rayx::scheduler::policy {

using Basis = NodeSearchTree::Basis;

Scheduled ScheduledOn(const ClusterResourceView& view, uint32_t index,
                      const ResourceDemand& demand) {
  const NodeRecord& node = view.node(index);
  std::optional<std::vector<int>> gpus = NodeRecord::PickGpus(node.gpu_free(), demand);
  return Scheduled{node.id(), gpus ? *std::move(gpus) : std::vector<int>{}};
}

SchedulingDecision NotNow(const NodeSearch& search, const LabelSelector& selector,
                          const ResourceMap& demand, const ResourceDemand& parsed) {
  if (search.AnyCouldHold(parsed, AcceptAll)) return Pending{WaitReason(selector, demand, parsed)};
  return Infeasible{NeverFitsReason(search, selector, demand)};
}

std::vector<NodeSearch::Gpus> HybridPolicy::Tiers(const NodeSearch& search,
                                                  const ResourceDemand& demand) const {
  if (options_.avoid_gpu_nodes && !demand.needs_gpu() &&
      search.AnyGroupHas(NodeSearch::Gpus::kWithout) &&
      search.AnyGroupHas(NodeSearch::Gpus::kWith)) {
    return {NodeSearch::Gpus::kWithout, NodeSearch::Gpus::kWith};
  }
  return {NodeSearch::Gpus::kAny};
}

std::optional<uint32_t> HybridPolicy::Choose(const NodeSearch& search, const ResourceDemand& demand,
                                             NodeSearch::Accept accept) const {
  for (NodeSearch::Gpus tier : Tiers(search, demand)) {
    if (auto node = search.FirstInOrder(demand, Basis::kAvailable, options_.spread_threshold, tier,
                                        accept)) {
      return node;
    }
    if (auto node = search.LeastLoaded(demand, tier, 0, accept)) return node;
  }
  return std::nullopt;
}

std::vector<uint32_t> HybridPolicy::Candidates(const NodeSearch& search,
                                               const ResourceDemand& demand, size_t k,
                                               NodeSearch::Accept accept) const {
  std::vector<uint32_t> out;
  const double threshold = options_.spread_threshold;
  for (NodeSearch::Gpus tier : Tiers(search, demand)) {
    if (out.size() >= k) break;
    // Below the threshold, in registration order; then the rest by load.
    for (uint32_t node :
         search.InOrder(demand, Basis::kAvailable, threshold, k - out.size(), tier, accept)) {
      out.push_back(node);
    }
    if (out.size() >= k) break;
    const ClusterResourceView& view = search.view();
    auto at_or_above = [&](uint32_t node) {
      return !(view.node(node).utilization() < threshold) && accept(node);
    };
    for (uint32_t node : search.ByLoad(demand, k - out.size(), tier, 0, at_or_above)) {
      out.push_back(node);
    }
  }
  return out;
}

SchedulingDecision HybridPolicy::Schedule(const ClusterResourceView& view,
                                          const SchedulingRequest& request) {
  Result<ResourceDemand> demand = view.MakeDemand(request.demand);
  if (!demand.ok()) return Infeasible{demand.status().message()};
  LabelSelector selector(request.label_selector);
  NodeSearch search(view, selector);
  if (auto node = Choose(search, *demand, AcceptAll)) return ScheduledOn(view, *node, *demand);
  return NotNow(search, selector, request.demand, *demand);
}

}  // namespace rayx::scheduler::policy
