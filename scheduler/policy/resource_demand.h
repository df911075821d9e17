// A request's resources, validated and converted to dense fixed-point form.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/resource_dims.h"
#include "rayx/resources.h"
#include "rayx/status.h"

namespace rayx::scheduler::policy {

// What one task, actor or bundle needs on a single node, in units (see
// resource_units.h) per dimension of a ResourceDims. Built once per decision;
// cheap to check against many nodes.
//
// GPU rules (as the head's NodeTable): an amount >= 1 is a number of whole
// devices and must be whole; an amount in (0, 1) is a share of one device.
class ResourceDemand {
 public:
  struct Amount {
    uint32_t dim;
    int64_t units;
  };

  ResourceDemand() = default;

  // Converts `demand`. Amounts of zero are ignored. Returns InvalidArgument naming
  // the resource when an amount is negative, not finite or above kMaxAmount, or
  // when a GPU amount above 1 is not whole (a request never spans two devices).
  // A resource no node ever declared is kept in unknown(): such a demand fits
  // no node.
  static Result<ResourceDemand> Make(const ResourceMap& demand, const ResourceDims& dims);

  // The one rule for an amount of GPU, wherever one is asked for (a lease, a
  // bundle, `rayx launch --gpus-per-proc`): a share below 1 (of one device)
  // or a whole number of devices. InvalidArgument saying so otherwise.
  static Status CheckGpuAmount(double amount);

  // The sum of `parts`, for searching a node that must hold all of them (a
  // STRICT_PACK group). Its GPU fields bound the parts (whole devices added up,
  // the largest share kept); use it to prune a search, never to acquire.
  static ResourceDemand SumForSearch(const std::vector<ResourceDemand>& parts);

  // The positive amounts of known resources, ordered by dimension.
  const std::vector<Amount>& amounts() const { return amounts_; }
  // Resources demanded that no node has ever declared.
  const std::vector<std::string>& unknown() const { return unknown_; }
  // The amount of dimension `dim` (0 when not demanded). O(amounts).
  int64_t units(uint32_t dim) const;

  // Whole GPU devices wanted (0 for none or a share).
  int32_t whole_gpus() const { return whole_gpus_; }
  // A share of one device in units, in (0, kUnitsPerWhole); 0 when none.
  int64_t gpu_share() const { return gpu_share_; }
  bool needs_gpu() const { return whole_gpus_ > 0 || gpu_share_ > 0; }

 private:
  std::vector<Amount> amounts_;
  std::vector<std::string> unknown_;
  int32_t whole_gpus_ = 0;
  int64_t gpu_share_ = 0;
};

}  // namespace rayx::scheduler::policy
