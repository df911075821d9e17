// The aggregate tree's maintenance; the searches are templates in the header.
#include "policy/node_search_tree.h"

#include <algorithm>

namespace rayx::scheduler::policy {

namespace {
constexpr int64_t kNone = -1;  // below any amount, so an empty subtree admits nothing
}  // namespace

NodeSearchTree::NodeSearchTree(size_t stride)
    : stride_(stride),
      avail_(2 * stride, kNone),
      total_(2 * stride, kNone),
      whole_(2, -1),
      share_(2, kNone),
      min_util_(2, kEmptyUtil) {}

size_t NodeSearchTree::Append(uint32_t node, const NodeRecord& record) {
  if (size_ == cap_) Grow();
  size_t slot = size_++;
  slot_node_.push_back(node);
  slot_order_.push_back(record.order());
  ++live_;
  SetLeaf(slot, &record);
  return slot;
}

void NodeSearchTree::Update(size_t slot, const NodeRecord& record) { SetLeaf(slot, &record); }

void NodeSearchTree::Erase(size_t slot) {
  if (slot_node_[slot] == kNoNode) return;
  slot_node_[slot] = kNoNode;
  --live_;
  SetLeaf(slot, nullptr);
}

size_t NodeSearchTree::LowerBound(uint64_t order) const {
  return static_cast<size_t>(std::lower_bound(slot_order_.begin(), slot_order_.end(), order) -
                             slot_order_.begin());
}

int64_t NodeSearchTree::MaxTotal(uint32_t dim) const {
  if (dim >= stride_) return 0;
  return std::max<int64_t>(0, total_[1 * stride_ + dim]);
}

bool NodeSearchTree::LeafMatches(size_t slot, const NodeRecord& record) const {
  size_t t = cap_ + slot;
  for (size_t d = 0; d < stride_; ++d) {
    if (avail_[t * stride_ + d] != record.available(static_cast<uint32_t>(d)) ||
        total_[t * stride_ + d] != record.total(static_cast<uint32_t>(d))) {
      return false;
    }
  }
  return whole_[t] == record.whole_free_gpus() && share_[t] == record.max_gpu_share() &&
         min_util_[t] == record.utilization();
}

bool NodeSearchTree::InnerNodesConsistent() const {
  for (size_t t = cap_ - 1; t >= 1; --t) {
    const size_t l = 2 * t, r = 2 * t + 1;
    for (size_t d = 0; d < stride_; ++d) {
      if (avail_[t * stride_ + d] != std::max(avail_[l * stride_ + d], avail_[r * stride_ + d]) ||
          total_[t * stride_ + d] != std::max(total_[l * stride_ + d], total_[r * stride_ + d])) {
        return false;
      }
    }
    if (whole_[t] != std::max(whole_[l], whole_[r]) ||
        share_[t] != std::max(share_[l], share_[r]) ||
        min_util_[t] != std::min(min_util_[l], min_util_[r])) {
      return false;
    }
  }
  for (size_t slot = size_; slot < cap_; ++slot) {
    if (min_util_[cap_ + slot] != kEmptyUtil) return false;
  }
  return true;
}

void NodeSearchTree::SetLeaf(size_t slot, const NodeRecord* record) {
  size_t t = cap_ + slot;
  int64_t* avail = &avail_[t * stride_];
  int64_t* total = &total_[t * stride_];
  if (record == nullptr) {
    std::fill(avail, avail + stride_, kNone);
    std::fill(total, total + stride_, kNone);
    whole_[t] = -1;
    share_[t] = kNone;
    min_util_[t] = kEmptyUtil;
  } else {
    for (size_t d = 0; d < stride_; ++d) {
      avail[d] = record->available(static_cast<uint32_t>(d));
      total[d] = record->total(static_cast<uint32_t>(d));
    }
    whole_[t] = record->whole_free_gpus();
    share_[t] = record->max_gpu_share();
    min_util_[t] = record->utilization();
  }
  for (t /= 2; t >= 1; t /= 2) Pull(t);
}

void NodeSearchTree::Pull(size_t t) {
  const size_t l = 2 * t, r = 2 * t + 1;
  for (size_t d = 0; d < stride_; ++d) {
    avail_[t * stride_ + d] = std::max(avail_[l * stride_ + d], avail_[r * stride_ + d]);
    total_[t * stride_ + d] = std::max(total_[l * stride_ + d], total_[r * stride_ + d]);
  }
  whole_[t] = std::max(whole_[l], whole_[r]);
  share_[t] = std::max(share_[l], share_[r]);
  min_util_[t] = std::min(min_util_[l], min_util_[r]);
}

void NodeSearchTree::Grow() {
  size_t new_cap = cap_ * 2;
  std::vector<int64_t> avail(2 * new_cap * stride_, kNone);
  std::vector<int64_t> total(2 * new_cap * stride_, kNone);
  std::vector<int32_t> whole(2 * new_cap, -1);
  std::vector<int64_t> share(2 * new_cap, kNone);
  std::vector<double> min_util(2 * new_cap, kEmptyUtil);
  for (size_t slot = 0; slot < size_; ++slot) {
    size_t from = cap_ + slot, to = new_cap + slot;
    std::copy_n(&avail_[from * stride_], stride_, &avail[to * stride_]);
    std::copy_n(&total_[from * stride_], stride_, &total[to * stride_]);
    whole[to] = whole_[from];
    share[to] = share_[from];
    min_util[to] = min_util_[from];
  }
  cap_ = new_cap;
  avail_ = std::move(avail);
  total_ = std::move(total);
  whole_ = std::move(whole);
  share_ = std::move(share);
  min_util_ = std::move(min_util);
  for (size_t t = cap_ - 1; t >= 1; --t) Pull(t);
}

}  // namespace rayx::scheduler::policy
