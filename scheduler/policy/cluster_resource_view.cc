// The cluster resource view and its indexes.
#include "policy/cluster_resource_view.h"

#include <algorithm>
#include <cmath>

#include "policy/resource_units.h"

namespace rayx::scheduler::policy {

namespace {

std::string DescribeBundle(size_t i, size_t n, const ResourceMap& demand, const Scheduled& where) {
  std::string out = "bundle " + std::to_string(i) + " of " + std::to_string(n) + " ({";
  bool first = true;
  for (const auto& [name, amount] : demand) {
    if (amount <= 0) continue;
    out += (first ? "" : ", ") + name + ": " + FormatAmount(amount);
    first = false;
  }
  out += "} on node " + where.node.Short();
  if (!where.gpu_ids.empty()) {
    out += ", GPU devices [";
    for (size_t k = 0; k < where.gpu_ids.size(); ++k) {
      out += (k ? "," : "") + std::to_string(where.gpu_ids[k]);
    }
    out += "]";
  }
  return out + ")";
}

}  // namespace

ClusterResourceView::ClusterResourceView() = default;

void ClusterResourceView::AddNode(const NodeId& id, const ResourceMap& total,
                                  const LabelMap& labels, const std::string& address) {
  if (index_.count(id)) RemoveNode(id);
  std::vector<uint32_t> declared;
  for (const auto& [name, amount] : total) declared.push_back(dims_.Intern(name));
  if (dims_.size() > stride_) GrowStride();

  std::vector<int64_t> units(stride_, 0);
  for (const auto& [name, amount] : total) {
    uint32_t dim = *dims_.Find(name);
    int64_t u = 0;
    if (std::isfinite(amount) && amount > 0) {
      u = ToUnits(std::min(amount, kMaxAmount)).value_or(0);
    }
    if (dim == ResourceDims::kGpu) u -= u % kUnitsPerWhole;  // whole devices
    units[dim] = u;
  }

  uint32_t index;
  if (!free_records_.empty()) {
    index = free_records_.back();
    free_records_.pop_back();
  } else {
    index = static_cast<uint32_t>(records_.size());
    records_.emplace_back();
    locations_.emplace_back();
  }
  records_[index].emplace(id, next_order_++, labels, std::move(units), std::move(declared),
                          address);
  NodeRecord& record = *records_[index];
  Location& where = locations_[index];
  where.group = GroupFor(labels, record.has_gpu());
  NodeGroup& group = groups_[where.group];
  where.slot = group.tree.Append(index, record);
  for (size_t d = 0; d < stride_; ++d) group.sum_total[d] += record.total(static_cast<uint32_t>(d));
  for (const auto& label : labels) ++label_counts_[label];
  index_.emplace(id, index);
}

void ClusterResourceView::RemoveNode(const NodeId& id) {
  auto it = index_.find(id);
  if (it == index_.end()) return;
  uint32_t index = it->second;
  index_.erase(it);
  NodeRecord& record = *records_[index];
  NodeGroup& group = groups_[locations_[index].group];
  group.tree.Erase(locations_[index].slot);
  for (size_t d = 0; d < stride_; ++d) group.sum_total[d] -= record.total(static_cast<uint32_t>(d));
  for (const auto& label : record.labels()) {
    auto lc = label_counts_.find(label);
    if (--lc->second == 0) label_counts_.erase(lc);
  }
  records_[index].reset();
  free_records_.push_back(index);
  // Erased slots stay in the tree; rebuild once they are most of it, so a
  // search never wades through more dead slots than live ones (amortized O(1)).
  if (group.tree.slots() > 64 && group.tree.slots() > 2 * group.tree.live()) Rebuild(group);
}

bool ClusterResourceView::Acquire(const NodeId& id, const ResourceMap& demand,
                                  const std::vector<int>& gpu_ids) {
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  Result<ResourceDemand> d = MakeDemand(demand);
  if (!d.ok() || !records_[it->second]->Acquire(*d, gpu_ids)) return false;
  Reindex(it->second);
  return true;
}

void ClusterResourceView::Release(const NodeId& id, const ResourceMap& demand,
                                  const std::vector<int>& gpu_ids) {
  auto it = index_.find(id);
  if (it == index_.end()) return;
  Result<ResourceDemand> d = MakeDemand(demand);
  if (!d.ok()) return;
  records_[it->second]->Release(*d, gpu_ids);
  Reindex(it->second);
}

Status ClusterResourceView::AcquireGroup(const GroupScheduled& group) {
  const size_t n = group.bundles.size();
  if (group.demands.size() != n) {
    return Status::InvalidArgument("a placement of " + std::to_string(n) + " bundles carries " +
                                   std::to_string(group.demands.size()) + " demands");
  }
  for (size_t i = 0; i < n; ++i) {
    const Scheduled& where = group.bundles[i];
    if (Acquire(where.node, group.demands[i], where.gpu_ids)) continue;
    for (size_t j = i; j-- > 0;) {
      Release(group.bundles[j].node, group.demands[j], group.bundles[j].gpu_ids);
    }
    std::string why = Lookup(where.node) == nullptr ? "the node is gone" : "it does not fit now";
    return Status::Unavailable(DescribeBundle(i, n, group.demands[i], where) + ": " + why +
                               "; nothing was reserved");
  }
  return Status::OK();
}

void ClusterResourceView::ReleaseGroup(const GroupScheduled& group) {
  for (size_t i = 0; i < group.bundles.size() && i < group.demands.size(); ++i) {
    Release(group.bundles[i].node, group.demands[i], group.bundles[i].gpu_ids);
  }
}

std::optional<NodeResources> ClusterResourceView::Find(const NodeId& id) const {
  const NodeRecord* record = Lookup(id);
  if (record == nullptr) return std::nullopt;
  NodeResources out;
  out.id = record->id();
  out.labels = record->labels();
  for (uint32_t dim : record->declared()) {
    out.total[dims_.Name(dim)] = FromUnits(record->total(dim));
    out.available[dims_.Name(dim)] = FromUnits(record->available(dim));
  }
  for (int64_t f : record->gpu_free()) out.gpu_free.push_back(FromUnits(f));
  out.utilization = record->utilization();
  return out;
}

const NodeRecord* ClusterResourceView::Lookup(const NodeId& id) const {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : &*records_[it->second];
}

bool ClusterResourceView::HasLabel(const std::string& key, const std::string& value) const {
  return label_counts_.count({key, value}) > 0;
}

uint32_t ClusterResourceView::GroupFor(const LabelMap& labels, bool has_gpu) {
  auto [it, added] =
      group_index_.try_emplace({labels, has_gpu}, static_cast<uint32_t>(groups_.size()));
  if (added) {
    groups_.push_back(
        NodeGroup{labels, has_gpu, NodeSearchTree(stride_), std::vector<WideAmount>(stride_, 0)});
  }
  return it->second;
}

void ClusterResourceView::Reindex(uint32_t index) {
  const Location& where = locations_[index];
  groups_[where.group].tree.Update(where.slot, *records_[index]);
}

void ClusterResourceView::Rebuild(NodeGroup& group) {
  NodeSearchTree tree(stride_);
  for (size_t slot = 0; slot < group.tree.slots(); ++slot) {
    uint32_t index = group.tree.NodeAt(slot);
    if (index == NodeSearchTree::kNoNode) continue;
    locations_[index].slot = tree.Append(index, *records_[index]);
  }
  group.tree = std::move(tree);
}

void ClusterResourceView::GrowStride() {
  while (stride_ < dims_.size()) stride_ *= 2;
  for (auto& record : records_) {
    if (record) record->Resize(stride_);
  }
  for (NodeGroup& group : groups_) {
    group.sum_total.resize(stride_, 0);
    Rebuild(group);
  }
}

Status ClusterResourceView::TEST_CheckInvariants() const {
  size_t live = 0;
  std::vector<std::vector<WideAmount>> sums(groups_.size(), std::vector<WideAmount>(stride_, 0));
  std::map<std::pair<std::string, std::string>, size_t> labels;
  for (const auto& [id, index] : index_) {
    if (index >= records_.size() || !records_[index]) {
      return Status::Internal("id " + id.Short() + " points at no record");
    }
    const NodeRecord& r = *records_[index];
    std::string who = "node " + id.Short() + ": ";
    if (r.id() != id) return Status::Internal(who + "record holds another id");
    ++live;
    int64_t gpu_sum = 0;
    for (int64_t f : r.gpu_free()) {
      if (f < 0 || f > kUnitsPerWhole) return Status::Internal(who + "device share out of range");
      gpu_sum += f;
    }
    if (r.has_gpu() && gpu_sum != r.available(ResourceDims::kGpu)) {
      return Status::Internal(who + "GPU available differs from the devices' free shares");
    }
    const Location& where = locations_[index];
    if (where.group >= groups_.size()) return Status::Internal(who + "bad group");
    const NodeGroup& g = groups_[where.group];
    for (uint32_t d = 0; d < stride_; ++d) {
      if (r.available(d) < 0 || r.available(d) > r.total(d)) {
        std::string name = d < dims_.size() ? dims_.Name(d) : "dimension " + std::to_string(d);
        return Status::Internal(who + name + " available outside [0, total]");
      }
      sums[where.group][d] += r.total(d);
    }
    if (g.labels != r.labels() || g.has_gpu != r.has_gpu()) {
      return Status::Internal(who + "in the wrong group");
    }
    if (where.slot >= g.tree.slots() || g.tree.NodeAt(where.slot) != index) {
      return Status::Internal(who + "its group's tree does not hold it at its slot");
    }
    for (const auto& label : r.labels()) ++labels[label];
  }
  size_t in_trees = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const NodeGroup& g = groups_[gi];
    in_trees += g.tree.live();
    if (g.sum_total != sums[gi]) return Status::Internal("group totals differ from the nodes'");
    size_t live_slots = 0;
    for (size_t slot = 0; slot < g.tree.slots(); ++slot) {
      uint32_t index = g.tree.NodeAt(slot);
      if (index == NodeSearchTree::kNoNode) continue;
      ++live_slots;
      if (!g.tree.LeafMatches(slot, *records_[index])) {
        return Status::Internal("node " + records_[index]->id().Short() +
                                ": its tree leaf is stale");
      }
    }
    if (live_slots != g.tree.live()) return Status::Internal("tree live count is wrong");
    if (!g.tree.InnerNodesConsistent()) {
      return Status::Internal("a search tree's inner nodes differ from their children");
    }
  }
  if (in_trees != live) return Status::Internal("trees hold a different number of nodes");
  if (labels != label_counts_) return Status::Internal("label counts are stale");
  return Status::OK();
}

}  // namespace rayx::scheduler::policy
