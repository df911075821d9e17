// The default strategy: Ray's hybrid policy (pack, then spread).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "policy/node_search.h"
#include "policy/scheduling_policy.h"

namespace rayx::scheduler::policy {

// Design (Ray's HybridSchedulingPolicy, minus its random top-k):
// - Packs: among the nodes that can hold the request now, the earliest
//   registered one whose utilization (its most used resource's used fraction,
//   measured before this request) is below `spread_threshold` wins. Filling
//   nodes in a stable order keeps the others idle for large requests and lets
//   an autoscaler drain them.
// - Spreads: once every node that could take the request is at or above the
//   threshold, the least utilized one wins (earliest registered among equals),
//   so load evens out instead of piling onto the first nodes.
// - Keeps GPU nodes for GPU work (Ray's scheduler_avoid_gpu_nodes): a request
//   without GPUs goes to a node without GPUs whenever one can take it, and to
//   GPU nodes only otherwise.
// - Deterministic: Ray picks at random among the best k nodes so that many
//   raylets deciding at once do not all choose the same node; rayx decides in
//   one place (the head), so the same view and request always give the same
//   node, which makes decisions reproducible and testable.
// - Pending when some matching node's totals could hold the request, otherwise
//   Infeasible with the reason (reasons.h).
// Cost: O(groups x log n) tree steps (NodeSearch), never a scan of all nodes
// (see NodeSearchTree for the fragmented worst case).
class HybridPolicy : public SchedulingPolicy {
 public:
  struct Options {
    // Utilization below which a node is packed. Default 0.5 (Ray's). 0 spreads
    // always (least utilized first); above 1 packs always (first fit).
    double spread_threshold = 0.5;
    // Keep requests without GPUs off GPU nodes while other nodes can take them.
    // Default true (Ray's scheduler_avoid_gpu_nodes).
    bool avoid_gpu_nodes = true;
  };

  HybridPolicy() : HybridPolicy(Options{}) {}
  explicit HybridPolicy(Options options) : options_(options) {}

  SchedulingDecision Schedule(const ClusterResourceView& view,
                              const SchedulingRequest& request) override;

  // The node the hybrid rule picks among those `search` admits that have
  // `demand` available and pass `accept`, or nullopt. For other policies that
  // place with hybrid preferences (placement groups).
  std::optional<uint32_t> Choose(const NodeSearch& search, const ResourceDemand& demand,
                                 NodeSearch::Accept accept) const;
  // Up to `k` such nodes, best first (all of them when fewer exist).
  std::vector<uint32_t> Candidates(const NodeSearch& search, const ResourceDemand& demand, size_t k,
                                   NodeSearch::Accept accept) const;

 private:
  // The group tiers to try in turn for `demand`.
  std::vector<NodeSearch::Gpus> Tiers(const NodeSearch& search, const ResourceDemand& demand) const;

  Options options_;
};

// Scheduled on the view's node `index` for `demand`, with the devices the
// packing rule picks there. REQUIRES: the demand fits that node now.
Scheduled ScheduledOn(const ClusterResourceView& view, uint32_t index,
                      const ResourceDemand& demand);

// Pending or Infeasible for a request no node can take now.
SchedulingDecision NotNow(const NodeSearch& search, const LabelSelector& selector,
                          const ResourceMap& demand, const ResourceDemand& parsed);

}  // namespace rayx::scheduler::policy
