// One node's resources as the policy library keeps them: dense and fixed-point.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "policy/resource_demand.h"
#include "rayx/ids.h"
#include "rayx/resources.h"

namespace rayx::scheduler::policy {

// A node's totals, what is available now, its labels and the free share of each
// GPU device, in units per dimension of the view's ResourceDims. Owned by
// ClusterResourceView, which keeps its indexes in step with every change.
//
// Invariants: 0 <= available(d) <= total(d) for every dimension; each device's
// free share is in [0, kUnitsPerWhole]; available(GPU) is the sum of the devices'
// free shares; total(GPU) is a whole number of devices.
class NodeRecord {
 public:
  // `total` is indexed by dimension (missing dimensions are 0); the GPU total
  // must be whole devices. `declared` lists the dimensions the node named.
  // `address` only names the node in reasons (empty: its id names it).
  NodeRecord(NodeId id, uint64_t order, LabelMap labels, std::vector<int64_t> total,
             std::vector<uint32_t> declared, std::string address = {});

  const NodeId& id() const { return id_; }
  // Registration sequence: the stable order policies pack in.
  uint64_t order() const { return order_; }
  const LabelMap& labels() const { return labels_; }
  const std::string& address() const { return address_; }
  const std::vector<uint32_t>& declared() const { return declared_; }
  int64_t total(uint32_t dim) const { return dim < total_.size() ? total_[dim] : 0; }
  int64_t available(uint32_t dim) const { return dim < available_.size() ? available_[dim] : 0; }
  const std::vector<int64_t>& totals() const { return total_; }
  const std::vector<int64_t>& availables() const { return available_; }
  const std::vector<int64_t>& gpu_free() const { return gpu_free_; }
  size_t gpu_devices() const { return gpu_free_.size(); }
  bool has_gpu() const { return !gpu_free_.empty(); }

  // Devices entirely free, and the largest free share of any one device.
  int32_t whole_free_gpus() const { return whole_free_gpus_; }
  int64_t max_gpu_share() const { return max_gpu_share_; }
  // The most used resource's used fraction, max over d of 1 - available/total
  // (Ray's "critical resource utilization"); 0 for a node with no resources.
  double utilization() const { return utilization_; }

  // True when `demand` fits what is available now, GPU devices included.
  bool FitsAvailable(const ResourceDemand& demand) const;
  // True when `demand` fits the node's totals (it could run here once idle).
  bool FitsTotal(const ResourceDemand& demand) const;

  // The devices the packing rule picks for `demand` from `gpu_free` (free share
  // per device), or nullopt when none fit: a whole demand gets the lowest-
  // numbered entirely free devices; a share goes to the device with the least
  // room that still holds it (shares pack before a fresh device is used), the
  // lowest id on ties. Empty for a demand without GPUs.
  static std::optional<std::vector<int>> PickGpus(const std::vector<int64_t>& gpu_free,
                                                  const ResourceDemand& demand);
  // True when `gpu_ids` are exactly what `demand` needs and are free in
  // `gpu_free`: for n whole GPUs n distinct entirely free devices, for a share
  // one device with that much room, for none an empty list.
  static bool GpuIdsFit(const std::vector<int64_t>& gpu_free, const ResourceDemand& demand,
                        const std::vector<int>& gpu_ids);
  // Takes `demand` with the devices `gpu_ids` from `available` and `gpu_free`.
  // REQUIRES: the demand fits and GpuIdsFit.
  static void Take(std::vector<int64_t>& available, std::vector<int64_t>& gpu_free,
                   const ResourceDemand& demand, const std::vector<int>& gpu_ids);

  // Takes `demand` on the devices `gpu_ids`. Returns false, changing nothing,
  // when it does not fit now or the ids are not what the demand needs.
  bool Acquire(const ResourceDemand& demand, const std::vector<int>& gpu_ids);
  // Gives back what Acquire took, capped at the totals (a double release cannot
  // create resources). Ids outside the node's devices are ignored.
  void Release(const ResourceDemand& demand, const std::vector<int>& gpu_ids);

  // Grows the dense vectors to `dims` dimensions (new ones are 0).
  void Resize(size_t dims);

 private:
  void Refresh();

  NodeId id_;
  uint64_t order_;
  LabelMap labels_;
  std::string address_;
  std::vector<uint32_t> declared_;
  std::vector<int64_t> total_;
  std::vector<int64_t> available_;
  std::vector<int64_t> gpu_free_;
  int32_t whole_free_gpus_ = 0;
  int64_t max_gpu_share_ = 0;
  double utilization_ = 0;
};

}  // namespace rayx::scheduler::policy
