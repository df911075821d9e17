// Tentative bundle placements and placement group request helpers.
#include "policy/bundle_plan.h"

#include <algorithm>
#include <tuple>

#include "policy/reasons.h"
#include "policy/resource_units.h"

namespace rayx::scheduler::policy {

const BundlePlan::NodeUse* BundlePlan::Entry(uint32_t index) const {
  for (const NodeUse& use : uses_) {
    if (use.index == index) return &use;
  }
  return nullptr;
}

BundlePlan::NodeUse* BundlePlan::Entry(uint32_t index) {
  for (NodeUse& use : uses_) {
    if (use.index == index) return &use;
  }
  return nullptr;
}

bool BundlePlan::Fits(uint32_t index, const ResourceDemand& demand) const {
  const NodeUse* use = Entry(index);
  if (use == nullptr) {
    const NodeRecord& node = view_.node(index);
    return basis_ == NodeSearchTree::Basis::kAvailable ? node.FitsAvailable(demand)
                                                       : node.FitsTotal(demand);
  }
  if (!demand.unknown().empty()) return false;
  for (const auto& a : demand.amounts()) {
    if (a.dim >= use->available.size() || use->available[a.dim] < a.units) return false;
  }
  return NodeRecord::PickGpus(use->gpu_free, demand).has_value();
}

std::vector<int> BundlePlan::Place(uint32_t index, const ResourceDemand& demand) {
  NodeUse* use = Entry(index);
  if (use == nullptr) {
    const NodeRecord& node = view_.node(index);
    if (basis_ == NodeSearchTree::Basis::kAvailable) {
      uses_.push_back(NodeUse{index, node.availables(), node.gpu_free()});
    } else {
      uses_.push_back(
          NodeUse{index, node.totals(), std::vector<int64_t>(node.gpu_devices(), kUnitsPerWhole)});
    }
    nodes_.push_back(index);
    use = &uses_.back();
  }
  std::vector<int> gpus = NodeRecord::PickGpus(use->gpu_free, demand).value_or(std::vector<int>{});
  NodeRecord::Take(use->available, use->gpu_free, demand, gpus);
  return gpus;
}

bool BundlePlan::PlaceAll(uint32_t index, const std::vector<ResourceDemand>& demands,
                          const std::vector<size_t>& order,
                          std::vector<std::vector<int>>* gpu_ids) {
  for (size_t i : order) {
    if (!Fits(index, demands[i])) return false;
    std::vector<int> gpus = Place(index, demands[i]);
    if (gpu_ids) (*gpu_ids)[i] = std::move(gpus);
  }
  return true;
}

Result<ParsedGroup> ParseGroup(const ClusterResourceView& view,
                               const PlacementGroupRequest& request) {
  if (request.bundles.empty()) {
    return Status::InvalidArgument("a placement group needs at least one bundle");
  }
  ParsedGroup out;
  out.demands.reserve(request.bundles.size());
  for (size_t i = 0; i < request.bundles.size(); ++i) {
    Result<ResourceDemand> demand = view.MakeDemand(request.bundles[i]);
    if (!demand.ok()) {
      return Status::InvalidArgument("bundle " + std::to_string(i) + ": " +
                                     demand.status().message());
    }
    out.demands.push_back(*std::move(demand));
  }
  out.largest_first.resize(out.demands.size());
  for (size_t i = 0; i < out.largest_first.size(); ++i) out.largest_first[i] = i;
  auto key = [&](size_t i) {
    const ResourceDemand& d = out.demands[i];
    return std::make_tuple(d.units(ResourceDims::kGpu), d.units(ResourceDims::kCpu),
                           d.units(ResourceDims::kMemory));
  };
  std::stable_sort(out.largest_first.begin(), out.largest_first.end(),
                   [&](size_t a, size_t b) { return key(a) > key(b); });
  return out;
}

GroupScheduled MakeGroupScheduled(const ClusterResourceView& view,
                                  const PlacementGroupRequest& request,
                                  const std::vector<uint32_t>& nodes,
                                  std::vector<std::vector<int>> gpu_ids) {
  GroupScheduled out;
  out.demands = request.bundles;
  out.bundles.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    out.bundles.push_back(Scheduled{view.node(nodes[i]).id(), std::move(gpu_ids[i])});
  }
  return out;
}

ResourceMap SumOfBundles(const PlacementGroupRequest& request) {
  ResourceMap sum;
  for (const ResourceMap& bundle : request.bundles) {
    for (const auto& [name, amount] : bundle) {
      if (amount > 0) sum[name] += amount;
    }
  }
  return sum;
}

GroupDecision BestEffortNotNow(const NodeSearch& search, const LabelSelector& selector,
                               const PlacementGroupRequest& request, const ParsedGroup& parsed,
                               size_t failed) {
  for (size_t i = 0; i < parsed.demands.size(); ++i) {
    if (!search.AnyCouldHold(parsed.demands[i], AcceptAll)) {
      return Infeasible{BundleNeverFitsReason(search, selector, i, request.bundles[i])};
    }
  }
  const ResourceMap sum = SumOfBundles(request);
  const ClusterResourceView& view = search.view();
  std::string missing, have;
  for (const auto& [name, amount] : sum) {
    std::optional<uint32_t> dim = view.dims().Find(name);
    WideAmount needed = 0;
    for (const ResourceDemand& d : parsed.demands) needed += dim ? d.units(*dim) : 0;
    WideAmount there = dim ? search.SumTotal(*dim) : 0;
    if (needed <= there) continue;
    missing += (missing.empty() ? "" : ", ") + name + ": " + FormatAmount(amount);
    have += (have.empty() ? "" : ", ") + name + " " +
            FormatAmount(static_cast<double>(there) / static_cast<double>(kUnitsPerWhole));
  }
  if (!missing.empty()) {
    return Pending{NeedsMoreNodesReason(
        "needs {" + missing + "} in all; " +
        (selector.empty() ? "the alive nodes"
                          : "the alive nodes with labels " + selector.ToString()) +
        " have " + have + " in all " + NodeCount(search, selector))};
  }
  return Pending{GroupWaitReason("bundle " + std::to_string(failed) + " " +
                                     FormatDemand(request.bundles[failed]) +
                                     " finds no node with room beside the bundles placed before it",
                                 search, request.bundles)};
}

}  // namespace rayx::scheduler::policy
