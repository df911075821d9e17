// Searches across node groups.
#include "policy/node_search.h"

#include <algorithm>
#include <limits>

namespace rayx::scheduler::policy {

NodeSearch::NodeSearch(const ClusterResourceView& view, const LabelSelector& selector)
    : view_(view) {
  for (const NodeGroup& group : view.groups()) {
    if (group.tree.live() == 0 || !selector.Matches(group.labels)) continue;
    groups_.push_back(&group);
    matching_nodes_ += group.tree.live();
  }
}

bool NodeSearch::Wanted(const NodeGroup& group, Gpus gpus) const {
  switch (gpus) {
    case Gpus::kAny:
      return true;
    case Gpus::kWithout:
      return !group.has_gpu;
    case Gpus::kWith:
      return group.has_gpu;
  }
  return true;
}

bool NodeSearch::AnyGroupHas(Gpus gpus) const {
  for (const NodeGroup* group : groups_) {
    if (Wanted(*group, gpus)) return true;
  }
  return false;
}

std::vector<uint32_t> NodeSearch::InOrder(const ResourceDemand& demand, NodeSearchTree::Basis basis,
                                          double util_below, size_t k, Gpus gpus, Accept accept,
                                          uint64_t min_order) const {
  std::vector<uint32_t> found;
  if (k == 0) return found;
  for (const NodeGroup* group : groups_) {
    if (!Wanted(*group, gpus)) continue;
    size_t from_group = 0;
    size_t from_slot = min_order == 0 ? 0 : group->tree.LowerBound(min_order);
    group->tree.VisitInOrder(demand, basis, util_below, from_slot, [&](uint32_t node) {
      if (!accept(node)) return false;
      found.push_back(node);
      return ++from_group == k;
    });
  }
  if (groups_.size() > 1) {
    auto by_order = [this](uint32_t a, uint32_t b) {
      return view_.node(a).order() < view_.node(b).order();
    };
    std::sort(found.begin(), found.end(), by_order);
    if (found.size() > k) found.resize(k);
  }
  return found;
}

std::vector<uint32_t> NodeSearch::ByLoad(const ResourceDemand& demand, size_t k, Gpus gpus,
                                         uint64_t min_order, Accept accept) const {
  std::vector<uint32_t> found;
  if (k == 0) return found;
  for (const NodeGroup* group : groups_) {
    if (!Wanted(*group, gpus)) continue;
    size_t from_slot = min_order == 0 ? 0 : group->tree.LowerBound(min_order);
    size_t from_group = 0;
    group->tree.VisitByLoad(demand, from_slot, [&](uint32_t node) {
      if (!accept(node)) return false;
      found.push_back(node);
      return ++from_group == k;
    });
  }
  if (groups_.size() > 1) {
    auto by_load = [this](uint32_t a, uint32_t b) {
      const NodeRecord& x = view_.node(a);
      const NodeRecord& y = view_.node(b);
      if (x.utilization() != y.utilization()) return x.utilization() < y.utilization();
      return x.order() < y.order();
    };
    std::sort(found.begin(), found.end(), by_load);
    if (found.size() > k) found.resize(k);
  }
  return found;
}

std::optional<uint32_t> NodeSearch::FirstInOrder(const ResourceDemand& demand,
                                                 NodeSearchTree::Basis basis, double util_below,
                                                 Gpus gpus, Accept accept,
                                                 uint64_t min_order) const {
  std::optional<uint32_t> best;
  for (const NodeGroup* group : groups_) {
    if (!Wanted(*group, gpus)) continue;
    size_t from_slot = min_order == 0 ? 0 : group->tree.LowerBound(min_order);
    group->tree.VisitInOrder(demand, basis, util_below, from_slot, [&](uint32_t node) {
      // Slots follow registration order: past the best so far nothing can win.
      if (best && view_.node(node).order() > view_.node(*best).order()) return true;
      if (!accept(node)) return false;
      best = node;
      return true;
    });
  }
  return best;
}

std::optional<uint32_t> NodeSearch::LeastLoaded(const ResourceDemand& demand, Gpus gpus,
                                                uint64_t min_order, Accept accept) const {
  std::optional<uint32_t> best;
  for (const NodeGroup* group : groups_) {
    if (!Wanted(*group, gpus)) continue;
    size_t from_slot = min_order == 0 ? 0 : group->tree.LowerBound(min_order);
    // Only a node at most as loaded as the best so far can win.
    double bound = best ? view_.node(*best).utilization() : std::numeric_limits<double>::infinity();
    std::optional<uint32_t> node = group->tree.LeastLoaded(demand, from_slot, bound, accept);
    if (!node) continue;
    const NodeRecord& x = view_.node(*node);
    if (!best || x.utilization() < view_.node(*best).utilization() ||
        (x.utilization() == view_.node(*best).utilization() &&
         x.order() < view_.node(*best).order())) {
      best = node;
    }
  }
  return best;
}

bool NodeSearch::AnyCouldHold(const ResourceDemand& demand, Accept accept) const {
  return FirstInOrder(demand, NodeSearchTree::Basis::kTotal,
                      std::numeric_limits<double>::infinity(), Gpus::kAny, accept)
      .has_value();
}

int64_t NodeSearch::LargestTotal(uint32_t dim) const {
  int64_t most = 0;
  for (const NodeGroup* group : groups_) most = std::max(most, group->tree.MaxTotal(dim));
  return most;
}

WideAmount NodeSearch::SumTotal(uint32_t dim) const {
  WideAmount sum = 0;
  for (const NodeGroup* group : groups_) {
    if (dim < group->sum_total.size()) sum += group->sum_total[dim];
  }
  return sum;
}

}  // namespace rayx::scheduler::policy
