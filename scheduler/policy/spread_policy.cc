// The SPREAD scheduling policy.
#include "policy/spread_policy.h"

#include "policy/hybrid_policy.h"

namespace rayx::scheduler::policy {

std::optional<uint32_t> SpreadPolicy::Choose(const NodeSearch& search,
                                             const ResourceDemand& demand,
                                             std::optional<uint64_t> after,
                                             NodeSearch::Accept accept) {
  std::optional<uint32_t> best = search.LeastLoaded(demand, NodeSearch::Gpus::kAny, 0, accept);
  if (!best || !after) return best;
  // The least loaded among nodes registered after the cursor wins a tie with
  // the overall least loaded (which is then at or before the cursor).
  std::optional<uint32_t> later =
      search.LeastLoaded(demand, NodeSearch::Gpus::kAny, *after + 1, accept);
  const ClusterResourceView& view = search.view();
  if (later && view.node(*later).utilization() <= view.node(*best).utilization()) return later;
  return best;
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
