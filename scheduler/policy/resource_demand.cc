// Demand validation and conversion.
#include "policy/resource_demand.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "policy/resource_units.h"

namespace rayx::scheduler::policy {

Status ResourceDemand::CheckGpuAmount(double amount) {
  if (amount > 1 && amount != std::floor(amount)) {
    return Status::InvalidArgument("invalid amount " + FormatAmount(amount) +
                                   " of GPU: an amount above 1 must be a "
                                   "whole number of devices (a share never spans two devices)");
  }
  return Status::OK();
}

Result<ResourceDemand> ResourceDemand::Make(const ResourceMap& demand, const ResourceDims& dims) {
  ResourceDemand out;
  for (const auto& [name, amount] : demand) {
    std::optional<int64_t> units = ToUnits(amount);
    if (!units) {
      return Status::InvalidArgument("invalid amount " + FormatAmount(amount) + " of " + name +
                                     ": amounts must be finite, non-negative and at most " +
                                     FormatAmount(kMaxAmount));
    }
    if (*units == 0) continue;
    std::optional<uint32_t> dim = dims.Find(name);
    if (!dim) {
      out.unknown_.push_back(name);
      continue;
    }
    if (*dim == ResourceDims::kGpu) {
      if (*units >= kUnitsPerWhole) {
        if (*units % kUnitsPerWhole != 0) return CheckGpuAmount(amount);
        out.whole_gpus_ = static_cast<int32_t>(*units / kUnitsPerWhole);
      } else {
        out.gpu_share_ = *units;
      }
    }
    out.amounts_.push_back(Amount{*dim, *units});
  }
  std::sort(out.amounts_.begin(), out.amounts_.end(),
            [](const Amount& a, const Amount& b) { return a.dim < b.dim; });
  return out;
}

ResourceDemand ResourceDemand::SumForSearch(const std::vector<ResourceDemand>& parts) {
  std::map<uint32_t, int64_t> sums;
  ResourceDemand out;
  for (const ResourceDemand& part : parts) {
    for (const Amount& a : part.amounts_) sums[a.dim] = SaturatingAdd(sums[a.dim], a.units);
    for (const std::string& name : part.unknown_) {
      if (std::find(out.unknown_.begin(), out.unknown_.end(), name) == out.unknown_.end()) {
        out.unknown_.push_back(name);
      }
    }
    out.whole_gpus_ += part.whole_gpus_;
    out.gpu_share_ = std::max(out.gpu_share_, part.gpu_share_);
  }
  out.amounts_.reserve(sums.size());
  for (const auto& [dim, units] : sums) out.amounts_.push_back(Amount{dim, units});
  return out;
}

int64_t ResourceDemand::units(uint32_t dim) const {
  for (const Amount& a : amounts_) {
    if (a.dim == dim) return a.units;
  }
  return 0;
}

}  // namespace rayx::scheduler::policy
