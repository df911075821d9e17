// An aggregate tree over a group of nodes, for finding nodes that fit a demand
// without looking at every node.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <queue>
#include <vector>

#include "policy/node_record.h"
#include "policy/resource_demand.h"

namespace rayx::scheduler::policy {

// A segment tree over slots (nodes in registration order). Every tree node
// keeps, over the nodes below it: the largest available and total amount per
// resource dimension, the most entirely free GPU devices and the largest free
// share of one device, and the lowest utilization. These are upper bounds (and
// a lower bound for utilization) on any single node below, so a search skips
// every subtree that cannot contain a fitting node. For one demand a leaf that
// passes is a node that fits exactly; callers still pass an `accept` check for
// what the tree does not know (tentative placements of a group, exclusions).
//
// Cost: Update is O(D log S) for D dimensions and S slots. A search visits
// O(log S) tree nodes per node it reports or rejects; it degrades towards O(S)
// only when free resources are fragmented across dimensions (many nodes each
// having enough of one resource but not of another). Erased slots stay empty
// until the owner rebuilds the tree. Not thread-safe.
class NodeSearchTree {
 public:
  enum class Basis { kAvailable, kTotal };
  static constexpr uint32_t kNoNode = std::numeric_limits<uint32_t>::max();

  // `stride`: dimensions kept per tree node (the view's capacity; >= its dims).
  explicit NodeSearchTree(size_t stride);

  size_t stride() const { return stride_; }
  // Slots ever used (live or erased) and live ones.
  size_t slots() const { return size_; }
  size_t live() const { return live_; }
  // The node in `slot`, or kNoNode when it was erased.
  uint32_t NodeAt(size_t slot) const { return slot_node_[slot]; }

  // Puts `node` (whose order is not below any slot's) in a new slot; returns it.
  size_t Append(uint32_t node, const NodeRecord& record);
  // Re-reads the record of the node in `slot` after it changed.
  void Update(size_t slot, const NodeRecord& record);
  // Empties `slot`.
  void Erase(size_t slot);
  // The first slot whose node registered at or after `order`.
  size_t LowerBound(uint64_t order) const;
  // The largest total of `dim` over live nodes (0 when none).
  int64_t MaxTotal(uint32_t dim) const;

  // For invariant checks: whether the leaf of `slot` holds `record`'s current
  // state, and whether every inner tree node equals the merge of its children.
  bool LeafMatches(size_t slot, const NodeRecord& record) const;
  bool InnerNodesConsistent() const;

  // Calls visit(node) for each live node in slot order, from `from_slot`, whose
  // utilization is below `util_below` and whose resources (per `basis`) could
  // hold `demand`, until visit returns true. Returns whether it did.
  template <typename Visit>
  bool VisitInOrder(const ResourceDemand& demand, Basis basis, double util_below, size_t from_slot,
                    Visit&& visit) const {
    if (size_ == 0) return false;
    return InOrder(1, 0, cap_, demand, basis, util_below, from_slot, visit);
  }

  // The live node from `from_slot` with the lowest (utilization, slot) among
  // those whose available resources could hold `demand`, whose utilization is
  // at most `util_at_most`, and for which accept(node) is true; nullopt when
  // none. Branch and bound: descends into the child with the lower utilization
  // first and skips every subtree that cannot beat the best node found so far,
  // so finding a node that fits costs about one root-to-leaf path.
  template <typename Accept>
  std::optional<uint32_t> LeastLoaded(const ResourceDemand& demand, size_t from_slot,
                                      double util_at_most, Accept&& accept) const {
    if (size_ == 0) return std::nullopt;
    Best best{util_at_most, kNoSlot};
    LeastLoadedIn(1, 0, cap_, demand, from_slot, accept, best);
    if (best.slot == kNoSlot) return std::nullopt;
    return slot_node_[best.slot];
  }

  // Calls visit(node) for each live node from `from_slot` whose available
  // resources could hold `demand`, by ascending (utilization, slot), until visit
  // returns true. Returns whether it did. Best-first: the utilization of a tree
  // node is a lower bound on everything below it.
  template <typename Visit>
  bool VisitByLoad(const ResourceDemand& demand, size_t from_slot, Visit&& visit) const {
    if (size_ == 0) return false;
    struct Entry {
      double util;
      size_t lo;
      size_t t;
      size_t width;
      bool operator>(const Entry& o) const { return util != o.util ? util > o.util : lo > o.lo; }
    };
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
    auto push = [&](size_t t, size_t lo, size_t width) {
      if (lo + width <= from_slot || lo >= size_) return;
      if (!Admits(t, demand, Basis::kAvailable, kNoLimit)) return;
      heap.push(Entry{min_util_[t], lo, t, width});
    };
    push(1, 0, cap_);
    while (!heap.empty()) {
      Entry e = heap.top();
      heap.pop();
      if (e.width == 1) {
        if (visit(slot_node_[e.lo])) return true;
        continue;
      }
      size_t half = e.width / 2;
      push(2 * e.t, e.lo, half);
      push(2 * e.t + 1, e.lo + half, half);
    }
    return false;
  }

 private:
  static constexpr double kNoLimit = std::numeric_limits<double>::infinity();
  static constexpr double kEmptyUtil = std::numeric_limits<double>::infinity();

  bool Admits(size_t t, const ResourceDemand& demand, Basis basis, double util_below) const {
    if (!(min_util_[t] < util_below) || min_util_[t] == kEmptyUtil) return false;
    const int64_t* have =
        (basis == Basis::kAvailable ? avail_.data() : total_.data()) + t * stride_;
    for (const auto& a : demand.amounts()) {
      if (have[a.dim] < a.units) return false;
    }
    if (basis == Basis::kAvailable) {
      if (demand.whole_gpus() > whole_[t]) return false;
      if (demand.gpu_share() > share_[t]) return false;
    }
    return demand.unknown().empty();
  }

  static constexpr size_t kNoSlot = std::numeric_limits<size_t>::max();
  struct Best {
    double util;  // the best utilization so far, or the bound before one is found
    size_t slot;  // kNoSlot before one is found
  };

  template <typename Accept>
  void LeastLoadedIn(size_t t, size_t lo, size_t width, const ResourceDemand& demand,
                     size_t from_slot, Accept& accept, Best& best) const {
    if (lo + width <= from_slot || lo >= size_) return;
    if (!Admits(t, demand, Basis::kAvailable, kNoLimit)) return;
    // Everything below has utilization >= min_util_[t] and slot >= lo.
    if (min_util_[t] > best.util || (min_util_[t] == best.util && lo >= best.slot)) return;
    if (width == 1) {
      if (accept(slot_node_[lo])) best = Best{min_util_[t], lo};
      return;
    }
    size_t half = width / 2;
    if (min_util_[2 * t + 1] < min_util_[2 * t]) {
      LeastLoadedIn(2 * t + 1, lo + half, half, demand, from_slot, accept, best);
      LeastLoadedIn(2 * t, lo, half, demand, from_slot, accept, best);
    } else {
      LeastLoadedIn(2 * t, lo, half, demand, from_slot, accept, best);
      LeastLoadedIn(2 * t + 1, lo + half, half, demand, from_slot, accept, best);
    }
  }

  template <typename Visit>
  bool InOrder(size_t t, size_t lo, size_t width, const ResourceDemand& demand, Basis basis,
               double util_below, size_t from_slot, Visit& visit) const {
    if (lo + width <= from_slot || lo >= size_) return false;
    if (!Admits(t, demand, basis, util_below)) return false;
    if (width == 1) return visit(slot_node_[lo]);
    size_t half = width / 2;
    return InOrder(2 * t, lo, half, demand, basis, util_below, from_slot, visit) ||
           InOrder(2 * t + 1, lo + half, half, demand, basis, util_below, from_slot, visit);
  }

  void SetLeaf(size_t slot, const NodeRecord* record);
  void Pull(size_t t);
  void Grow();

  size_t stride_;
  size_t cap_ = 1;   // leaves; a power of two
  size_t size_ = 0;  // slots used
  size_t live_ = 0;
  // Per tree node t (1 .. 2*cap_-1; leaves at cap_ + slot).
  std::vector<int64_t> avail_;  // [t * stride_ + dim]
  std::vector<int64_t> total_;  // [t * stride_ + dim]
  std::vector<int32_t> whole_;
  std::vector<int64_t> share_;
  std::vector<double> min_util_;  // kEmptyUtil for a subtree with no live node
  // Per slot.
  std::vector<uint32_t> slot_node_;
  std::vector<uint64_t> slot_order_;  // non-decreasing
};

}  // namespace rayx::scheduler::policy
