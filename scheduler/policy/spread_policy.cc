// The SPREAD scheduling policy.
#include "policy/spread_policy.h"

#include <cmath>
#include <limits>

#include "policy/hybrid_policy.h"

namespace rayx::scheduler::policy {

std::optional<uint32_t> SpreadPolicy::Choose(const NodeSearch& search, const ResourceDemand& demand,
                                             std::optional<uint64_t> after,
                                             NodeSearch::Accept accept) {
  std::optional<uint32_t> best = search.LeastLoaded(demand, NodeSearch::Gpus::kAny, 0, accept);
  if (!best || !after) return best;
  const ClusterResourceView& view = search.view();
  if (view.node(*best).order() > *after) return best;
  // The round robin: the first node after the cursor as little loaded as the
  // least loaded (so exactly as loaded), else the least loaded (which wraps).
  const double least = view.node(*best).utilization();
  std::optional<uint32_t> later =
      search.FirstInOrder(demand, NodeSearchTree::Basis::kAvailable,
                          std::nextafter(least, std::numeric_limits<double>::infinity()),
                          NodeSearch::Gpus::kAny, accept, *after + 1);
  return later ? later : best;
}

SchedulingDecision SpreadPolicy::Schedule(const ClusterResourceView& view,
                                          const SchedulingRequest& request) {
  Result<ResourceDemand> demand = view.MakeDemand(request.demand);
  if (!demand.ok()) return Infeasible{demand.status().message()};
  LabelSelector selector(request.label_selector);
  NodeSearch search(view, selector);
  std::optional<uint32_t> node = Choose(search, *demand, last_order_, AcceptAll);
  if (!node) return NotNow(search, selector, request.demand, *demand);
  last_order_ = view.node(*node).order();
  return ScheduledOn(view, *node, *demand);
}

}  // namespace rayx::scheduler::policy
