// Searches for nodes that fit one demand, across the node groups a label
// selector admits.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "policy/cluster_resource_view.h"
#include "policy/function_ref.h"
#include "policy/label_selector.h"
#include "policy/node_search_tree.h"
#include "policy/resource_demand.h"

namespace rayx::scheduler::policy {

// The search primitives every policy is built from. Constructed per decision:
// it selects the matching groups once (O(groups)); each search then runs one
// NodeSearchTree search per group and merges the answers. Results are node
// indexes into the view (ClusterResourceView::node). Read-only on the view.
class NodeSearch {
 public:
  // Which groups a search looks at (the hybrid policy keeps CPU-only work off
  // GPU nodes while other nodes can take it).
  enum class Gpus { kAny, kWithout, kWith };
  // An exact check a candidate must also pass (tentative placements of a
  // group, exclusions). The tree already guarantees that a single demand fits.
  using Accept = FunctionRef<bool(uint32_t)>;

  // REQUIRES: `view` and `selector` outlive this object and `view` is not
  // changed meanwhile.
  NodeSearch(const ClusterResourceView& view, const LabelSelector& selector);

  const ClusterResourceView& view() const { return view_; }
  // Nodes in the matching groups.
  size_t matching_nodes() const { return matching_nodes_; }
  bool AnyGroupHas(Gpus gpus) const;

  // Up to `k` accepted nodes in registration order, registered at or after
  // `min_order`, whose utilization is below `util_below` and whose available
  // (or, for Basis::kTotal, total) resources hold `demand`.
  std::vector<uint32_t> InOrder(const ResourceDemand& demand, NodeSearchTree::Basis basis,
                                double util_below, size_t k, Gpus gpus, Accept accept,
                                uint64_t min_order = 0) const;
  // Up to `k` accepted nodes with `demand` available, registered at or after
  // `min_order`, by ascending (utilization, registration order).
  std::vector<uint32_t> ByLoad(const ResourceDemand& demand, size_t k, Gpus gpus,
                               uint64_t min_order, Accept accept) const;

  // The first of InOrder, or nullopt.
  std::optional<uint32_t> FirstInOrder(const ResourceDemand& demand, NodeSearchTree::Basis basis,
                                       double util_below, Gpus gpus, Accept accept,
                                       uint64_t min_order = 0) const;
  // The first of ByLoad, or nullopt (a branch-and-bound search, cheaper than ByLoad).
  std::optional<uint32_t> LeastLoaded(const ResourceDemand& demand, Gpus gpus, uint64_t min_order,
                                      Accept accept) const;

  // Whether some matching node's totals could hold `demand` (and pass `accept`).
  bool AnyCouldHold(const ResourceDemand& demand, Accept accept) const;
  // The largest total of `dim` over matching nodes.
  int64_t LargestTotal(uint32_t dim) const;
  // The sum of `dim`'s totals over matching nodes.
  WideAmount SumTotal(uint32_t dim) const;

 private:
  bool Wanted(const NodeGroup& group, Gpus gpus) const;

  const ClusterResourceView& view_;
  std::vector<const NodeGroup*> groups_;
  size_t matching_nodes_ = 0;
};

// Accepts every node.
inline constexpr auto AcceptAll = [](uint32_t) { return true; };

}  // namespace rayx::scheduler::policy
