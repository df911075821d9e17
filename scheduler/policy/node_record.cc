// A node's dense resource state and the GPU device rules.
#include "policy/node_record.h"

#include <algorithm>

#include "policy/resource_units.h"

namespace rayx::scheduler::policy {

NodeRecord::NodeRecord(NodeId id, uint64_t order, LabelMap labels, std::vector<int64_t> total,
                       std::vector<uint32_t> declared, std::string address)
    : id_(std::move(id)),
      order_(order),
      labels_(std::move(labels)),
      address_(std::move(address)),
      declared_(std::move(declared)),
      total_(std::move(total)),
      available_(total_) {
  size_t devices = static_cast<size_t>(this->total(ResourceDims::kGpu) / kUnitsPerWhole);
  gpu_free_.assign(devices, kUnitsPerWhole);
  Refresh();
}

void NodeRecord::Resize(size_t dims) {
  if (total_.size() < dims) total_.resize(dims, 0);
  if (available_.size() < dims) available_.resize(dims, 0);
}

bool NodeRecord::FitsTotal(const ResourceDemand& demand) const {
  if (!demand.unknown().empty()) return false;
  for (const auto& a : demand.amounts()) {
    if (total(a.dim) < a.units) return false;
  }
  return true;
}

bool NodeRecord::FitsAvailable(const ResourceDemand& demand) const {
  if (!demand.unknown().empty()) return false;
  for (const auto& a : demand.amounts()) {
    if (available(a.dim) < a.units) return false;
  }
  if (demand.whole_gpus() > whole_free_gpus_) return false;
  if (demand.gpu_share() > max_gpu_share_) return false;
  return true;
}

std::optional<std::vector<int>> NodeRecord::PickGpus(const std::vector<int64_t>& gpu_free,
                                                     const ResourceDemand& demand) {
  std::vector<int> ids;
  if (demand.gpu_share() > 0) {
    int best = -1;
    for (size_t d = 0; d < gpu_free.size(); ++d) {
      if (gpu_free[d] < demand.gpu_share()) continue;
      if (best < 0 || gpu_free[d] < gpu_free[static_cast<size_t>(best)]) {
        best = static_cast<int>(d);
      }
    }
    if (best < 0) return std::nullopt;
    ids.push_back(best);
    return ids;
  }
  size_t want = static_cast<size_t>(demand.whole_gpus());
  for (size_t d = 0; d < gpu_free.size() && ids.size() < want; ++d) {
    if (gpu_free[d] == kUnitsPerWhole) ids.push_back(static_cast<int>(d));
  }
  if (ids.size() < want) return std::nullopt;
  return ids;
}

bool NodeRecord::GpuIdsFit(const std::vector<int64_t>& gpu_free, const ResourceDemand& demand,
                           const std::vector<int>& gpu_ids) {
  auto valid = [&](int d) { return d >= 0 && static_cast<size_t>(d) < gpu_free.size(); };
  if (demand.gpu_share() > 0) {
    return gpu_ids.size() == 1 && valid(gpu_ids[0]) &&
           gpu_free[static_cast<size_t>(gpu_ids[0])] >= demand.gpu_share();
  }
  if (gpu_ids.size() != static_cast<size_t>(demand.whole_gpus())) return false;
  for (size_t i = 0; i < gpu_ids.size(); ++i) {
    int d = gpu_ids[i];
    if (!valid(d) || gpu_free[static_cast<size_t>(d)] != kUnitsPerWhole) return false;
    for (size_t j = 0; j < i; ++j) {
      if (gpu_ids[j] == d) return false;  // the same device twice
    }
  }
  return true;
}

void NodeRecord::Take(std::vector<int64_t>& available, std::vector<int64_t>& gpu_free,
                      const ResourceDemand& demand, const std::vector<int>& gpu_ids) {
  for (const auto& a : demand.amounts()) available[a.dim] -= a.units;
  int64_t per_device = demand.gpu_share() > 0 ? demand.gpu_share() : kUnitsPerWhole;
  for (int d : gpu_ids) gpu_free[static_cast<size_t>(d)] -= per_device;
}

bool NodeRecord::Acquire(const ResourceDemand& demand, const std::vector<int>& gpu_ids) {
  if (!FitsAvailable(demand) || !GpuIdsFit(gpu_free_, demand, gpu_ids)) return false;
  Take(available_, gpu_free_, demand, gpu_ids);
  Refresh();
  return true;
}

void NodeRecord::Release(const ResourceDemand& demand, const std::vector<int>& gpu_ids) {
  for (const auto& a : demand.amounts()) {
    if (a.dim == ResourceDims::kGpu) continue;  // recomputed from the devices below
    available_[a.dim] = std::min(total_[a.dim], SaturatingAdd(available_[a.dim], a.units));
  }
  int64_t per_device = demand.gpu_share() > 0 ? demand.gpu_share() : kUnitsPerWhole;
  if (demand.needs_gpu()) {
    for (int d : gpu_ids) {
      if (d < 0 || static_cast<size_t>(d) >= gpu_free_.size()) continue;
      int64_t& f = gpu_free_[static_cast<size_t>(d)];
      f = std::min(kUnitsPerWhole, f + per_device);
    }
  }
  Refresh();
}

void NodeRecord::Refresh() {
  if (!gpu_free_.empty()) {
    int64_t sum = 0;
    whole_free_gpus_ = 0;
    max_gpu_share_ = 0;
    for (int64_t f : gpu_free_) {
      sum += f;
      if (f == kUnitsPerWhole) ++whole_free_gpus_;
      max_gpu_share_ = std::max(max_gpu_share_, f);
    }
    available_[ResourceDims::kGpu] = sum;
  }
  utilization_ = 0;
  for (size_t d = 0; d < total_.size(); ++d) {
    if (total_[d] <= 0) continue;
    double used = static_cast<double>(total_[d] - available_[d]) / static_cast<double>(total_[d]);
    utilization_ = std::max(utilization_, used);
  }
}

}  // namespace rayx::scheduler::policy
