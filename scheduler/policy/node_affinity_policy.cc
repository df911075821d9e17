// The node affinity scheduling policy.
#include "policy/node_affinity_policy.h"

#include "policy/label_selector.h"
#include "policy/reasons.h"
#include "policy/resource_units.h"

namespace rayx::scheduler::policy {

namespace {

// "node 1a2b3c4d has GPU 4, CPU 8" for the demanded resources it lacks.
std::string Shortfall(const ClusterResourceView& view, const NodeRecord& node,
                      const ResourceMap& demand) {
  std::string have;
  for (const auto& [name, amount] : demand) {
    if (!(amount > 0)) continue;
    std::optional<uint32_t> dim = view.dims().Find(name);
    int64_t total = dim ? node.total(*dim) : 0;
    std::optional<int64_t> units = ToUnits(amount);
    if (units && total >= *units) continue;
    have += (have.empty() ? "" : ", ") + name + " " + FormatAmount(FromUnits(total));
  }
  return have;
}

}  // namespace

SchedulingDecision NodeAffinityPolicy::Schedule(const ClusterResourceView& view,
                                                const SchedulingRequest& request) {
  const auto* affinity = std::get_if<NodeAffinityStrategy>(&request.strategy);
  if (affinity == nullptr) return fallback_.Schedule(view, request);
  Result<ResourceDemand> demand = view.MakeDemand(request.demand);
  if (!demand.ok()) return Infeasible{demand.status().message()};

  const std::string who = "node affinity to " + affinity->node.Short() + ": ";
  const NodeRecord* node = view.Lookup(affinity->node);
  LabelSelector selector(request.label_selector);
  std::optional<std::string> never;
  if (node == nullptr) {
    never = who + "node " + affinity->node.Short() +
            " is not in the cluster (it died or never joined; a node that rejoins gets a new id)";
  } else if (!selector.Matches(node->labels())) {
    never = who + "node " + node->id().Short() + " does not have the labels " + selector.ToString();
  } else if (!node->FitsTotal(*demand)) {
    never = who + "needs " + FormatDemand(request.demand) + " on node " + node->id().Short() +
            ", which has " + Shortfall(view, *node, request.demand);
  } else if (node->FitsAvailable(*demand)) {
    std::optional<std::vector<int>> gpus = NodeRecord::PickGpus(node->gpu_free(), *demand);
    return Scheduled{node->id(), gpus ? *std::move(gpus) : std::vector<int>{}};
  }

  if (affinity->soft) {
    SchedulingRequest fallback = request;
    fallback.strategy = DefaultStrategy{};
    return fallback_.Schedule(view, fallback);
  }
  if (never) return Infeasible{*never};
  return Pending{who + "node " + node->id().Short() + " does not have " +
                 FormatDemand(request.demand) + " free now; it waits for that node"};
}

}  // namespace rayx::scheduler::policy
