// Tentative placements of a placement group's bundles while a policy decides.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "policy/cluster_resource_view.h"
#include "policy/label_selector.h"
#include "policy/node_search.h"
#include "policy/node_search_tree.h"
#include "policy/resource_demand.h"
#include "policy/scheduling_types.h"

namespace rayx::scheduler::policy {

// What a group decision has placed so far, on top of a read-only view: per node
// it touched, a copy of the node's free resources and devices minus the bundles
// placed there. Two bundles on one node therefore get distinct devices (or
// shares packed per the usual rule), exactly as committing them one after the
// other would. With Basis::kTotal it starts every node empty, to ask whether a
// set of bundles could ever sit on it. Small: one entry per node used.
class BundlePlan {
 public:
  // REQUIRES: `view` outlives the plan and does not change meanwhile.
  BundlePlan(const ClusterResourceView& view, NodeSearchTree::Basis basis)
      : view_(view), basis_(basis) {}

  // True when `demand` fits on the view's node `index` beside what the plan
  // placed there already.
  bool Fits(uint32_t index, const ResourceDemand& demand) const;
  // Places `demand` there and returns the devices it gets. REQUIRES: Fits.
  std::vector<int> Place(uint32_t index, const ResourceDemand& demand);
  // Places every demand of `order` (indexes into `demands`) on `index` in that
  // order; returns false (the plan then holds a partial placement) when one
  // does not fit. `gpu_ids`, when given, receives each demand's devices.
  bool PlaceAll(uint32_t index, const std::vector<ResourceDemand>& demands,
                const std::vector<size_t>& order, std::vector<std::vector<int>>* gpu_ids = nullptr);
  bool Uses(uint32_t index) const { return Entry(index) != nullptr; }
  // Nodes used, in the order first used.
  const std::vector<uint32_t>& nodes() const { return nodes_; }

 private:
  struct NodeUse {
    uint32_t index;
    std::vector<int64_t> available;
    std::vector<int64_t> gpu_free;
  };
  const NodeUse* Entry(uint32_t index) const;
  NodeUse* Entry(uint32_t index);

  const ClusterResourceView& view_;
  NodeSearchTree::Basis basis_;
  std::vector<NodeUse> uses_;
  std::vector<uint32_t> nodes_;
};

// A placement group request converted once per decision.
struct ParsedGroup {
  std::vector<ResourceDemand> demands;  // per bundle
  // Bundle indexes, largest first (GPU, then CPU, then memory; index on ties):
  // placing big bundles first leaves the small ones to fill the gaps.
  std::vector<size_t> largest_first;
};

// Converts `request`. Returns InvalidArgument for a group without bundles or a
// malformed bundle ("bundle 2: invalid amount -1 of CPU ...").
Result<ParsedGroup> ParseGroup(const ClusterResourceView& view,
                               const PlacementGroupRequest& request);

// The decision that puts bundle i on `nodes[i]` with `gpu_ids[i]`.
GroupScheduled MakeGroupScheduled(const ClusterResourceView& view,
                                  const PlacementGroupRequest& request,
                                  const std::vector<uint32_t>& nodes,
                                  std::vector<std::vector<int>> gpu_ids);

// The per-resource sum of the bundles, for reasons ("{CPU: 16, GPU: 8}").
ResourceMap SumOfBundles(const PlacementGroupRequest& request);

// For a best-effort group (PACK, SPREAD) whose bundle `failed` found no room:
// Infeasible when a bundle fits no matching node's totals; Pending otherwise,
// waiting for more nodes when the bundles need more of a resource in all than
// the matching nodes have in all (two 4-GPU bundles on a cluster with one 4-GPU
// node: a node may join), else for resources. Deciding exactly whether bundles
// could ever be packed onto the nodes is bin packing, so the rarer never-fitting
// groups (GPU shares that no devices can take together) show as Pending.
GroupDecision BestEffortNotNow(const NodeSearch& search, const LabelSelector& selector,
                               const PlacementGroupRequest& request, const ParsedGroup& parsed,
                               size_t failed);

}  // namespace rayx::scheduler::policy
