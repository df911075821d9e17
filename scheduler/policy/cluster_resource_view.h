// The policy library's picture of the cluster: every node's resources, labels
// and GPU devices, indexed so that decisions need not scan every node.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "policy/node_record.h"
#include "policy/node_search_tree.h"
#include "policy/resource_demand.h"
#include "policy/resource_dims.h"
#include "policy/scheduling_types.h"
#include "rayx/ids.h"
#include "rayx/resources.h"
#include "rayx/status.h"

namespace rayx::scheduler::policy {

__extension__ typedef __int128 WideAmount;  // sums of units over many nodes

// A copy of one node's state, in the public units (amounts, not fixed point).
struct NodeResources {
  NodeId id;
  ResourceMap total;      // the resources the node declared
  ResourceMap available;  // free now
  LabelMap labels;
  std::vector<double> gpu_free;  // per device, 1 = entirely free
  double utilization = 0;        // the most used resource's used fraction
};

// Nodes with the same labels and the same "has GPUs" bit: a label selector or
// the hybrid policy's GPU avoidance picks whole groups, and each group has its
// own search tree. Clusters have few distinct label sets; every extra group
// costs each decision one more O(log n) tree search.
struct NodeGroup {
  LabelMap labels;
  bool has_gpu = false;
  NodeSearchTree tree;
  std::vector<WideAmount> sum_total;  // per dimension, over the group's live nodes
};

// Owns the resource state the policies decide on. Policies read it (const);
// the owner commits their decisions with Acquire/AcquireGroup and gives them
// back with Release/ReleaseGroup. Not thread-safe; owned by the head's event loop.
//
// GPUs are devices, as in the head's NodeTable: a node with "GPU": 4 has
// devices 0..3 (a fractional total is rounded down to whole devices); a demand
// of n >= 1 GPUs takes n entirely free devices, a share below 1 takes part of
// one device, packed onto the fullest device that still has room; a demand
// never spans two devices and an amount above 1 must be whole.
//
// Indexes, kept up to date on every change: nodes by id (hash map); nodes by
// group (labels, has GPUs); per group a NodeSearchTree of nodes in registration
// order; per group the sum of totals; label pairs with node counts. AddNode,
// RemoveNode, Acquire and Release cost O(D log n) for D resource names.
class ClusterResourceView {
 public:
  ClusterResourceView();

  // Adds a node with everything free. Amounts that are negative or not finite
  // count as 0, amounts above kMaxAmount as kMaxAmount. Adding an id that is
  // already present replaces that node (its acquisitions are forgotten).
  // `address` only names the node in reasons ("node 10.0.0.2 (1a2b3c4d)").
  void AddNode(const NodeId& id, const ResourceMap& total, const LabelMap& labels,
               const std::string& address = {});
  // Forgets the node; a no-op for an unknown id.
  void RemoveNode(const NodeId& id);

  // Takes `demand` on `id` with exactly the devices `gpu_ids` (as a decision
  // chose them). Returns false and changes nothing when the node is unknown,
  // the demand is malformed, it does not fit now, or the ids are not free
  // devices matching the demand (n distinct whole devices, or one device with
  // room for the share).
  bool Acquire(const NodeId& id, const ResourceMap& demand, const std::vector<int>& gpu_ids);
  // Gives back what Acquire took, capped at the node's totals. A no-op for an
  // unknown (removed) node or a malformed demand.
  void Release(const NodeId& id, const ResourceMap& demand, const std::vector<int>& gpu_ids);

  // Takes every bundle of `group`, or none: when one does not fit any more the
  // ones already taken are given back and the view is as before. Returns
  // InvalidArgument when bundles and demands differ in number, Unavailable
  // naming the first bundle that did not fit otherwise.
  Status AcquireGroup(const GroupScheduled& group);
  // Gives back every bundle of a group taken by AcquireGroup.
  void ReleaseGroup(const GroupScheduled& group);

  // A copy of the node's state, or nullopt for an unknown id.
  std::optional<NodeResources> Find(const NodeId& id) const;
  size_t node_count() const { return index_.size(); }

  // For policies.

  // `demand` in this view's dimensions; see ResourceDemand::Make.
  Result<ResourceDemand> MakeDemand(const ResourceMap& demand) const {
    return ResourceDemand::Make(demand, dims_);
  }
  const ResourceDims& dims() const { return dims_; }
  // The node's record, or nullptr.
  const NodeRecord* Lookup(const NodeId& id) const;
  // REQUIRES: `index` was reported by a search of this view since its last change.
  const NodeRecord& node(uint32_t index) const { return *records_[index]; }
  const std::vector<NodeGroup>& groups() const { return groups_; }
  // True when some node has label `key` = `value`.
  bool HasLabel(const std::string& key, const std::string& value) const;

  // Checks every index against the records (O(n)); for tests. Returns Internal
  // naming the first inconsistency.
  Status TEST_CheckInvariants() const;

 private:
  uint32_t GroupFor(const LabelMap& labels, bool has_gpu);
  void Reindex(uint32_t index);
  void Rebuild(NodeGroup& group);
  void GrowStride();

  // Where a record sits in the group trees.
  struct Location {
    uint32_t group = 0;
    size_t slot = 0;
  };

  ResourceDims dims_;
  size_t stride_ = 4;  // dimensions stored per node and tree node; >= dims_.size()
  uint64_t next_order_ = 0;
  std::vector<std::optional<NodeRecord>> records_;  // by index; nullopt when free
  std::vector<Location> locations_;                 // by index, as records_
  std::vector<uint32_t> free_records_;
  std::unordered_map<NodeId, uint32_t> index_;
  std::vector<NodeGroup> groups_;
  std::map<std::pair<LabelMap, bool>, uint32_t> group_index_;
  std::map<std::pair<std::string, std::string>, size_t> label_counts_;
};

}  // namespace rayx::scheduler::policy
