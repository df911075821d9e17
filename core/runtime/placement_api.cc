// rayx::CreatePlacementGroup, PlacementGroup::Wait, RemovePlacementGroup.
#include <stdexcept>

#include "rayx/rayx.h"
#include "runtime/runtime.h"

namespace rayx {

namespace detail {

std::string Placement::Key() const {
  std::string key = "pg=" + placement_group_id + "/" + std::to_string(bundle_index) +
                    (group_visible_devices ? "/all" : "") + ";s=" + strategy + ":" +
                    affinity_node_id + (affinity_soft ? "~" : "") + ";l=";
  for (const auto& [k, v] : label_selector) key += k + "=" + v + ",";
  return key;
}

Runtime& RequireRuntime();

PlacementGroupState CreatePlacementGroup(const std::string& name,
                                         const std::vector<ResourceMap>& bundles,
                                         const std::string& strategy) {
  return RequireRuntime().CreatePlacementGroup(name, bundles, strategy);
}
PlacementGroupState WaitPlacementGroup(const std::string& id, int64_t timeout_ms) {
  return RequireRuntime().WaitPlacementGroup(id, timeout_ms);
}
void RemovePlacementGroup(const std::string& id) { RequireRuntime().RemovePlacementGroup(id); }

}  // namespace detail

namespace {
const char* StrategyName(PlacementStrategy s) {
  switch (s) {
    case PlacementStrategy::PACK: return "PACK";
    case PlacementStrategy::SPREAD: return "SPREAD";
    case PlacementStrategy::STRICT_PACK: return "STRICT_PACK";
    case PlacementStrategy::STRICT_SPREAD: return "STRICT_SPREAD";
  }
  return "PACK";
}
}  // namespace

PlacementGroup CreatePlacementGroup(const PlacementGroupCreationOptions& options) {
  auto state = detail::CreatePlacementGroup(options.name, options.bundles,
                                            StrategyName(options.strategy));
  PlacementGroup group;
  group.id_ = state.id;
  group.state_ = state.state;
  group.reason_ = state.reason;
  group.bundles_ = options.bundles.size();
  return group;
}

bool PlacementGroup::Wait(int timeout_seconds) {
  if (id_.empty()) throw std::logic_error("PlacementGroup::Wait on a group never created");
  if (state_ != "CREATED") {
    auto state = detail::WaitPlacementGroup(id_, int64_t{timeout_seconds} * 1000);
    state_ = state.state;
    reason_ = state.reason;
  }
  if (state_ == "INFEASIBLE") {
    throw std::runtime_error("placement group " + id_.substr(0, 8) + " can never be placed: " +
                             reason_);
  }
  if (state_ == "REMOVED") {
    throw std::runtime_error("placement group " + id_.substr(0, 8) + " was removed");
  }
  return state_ == "CREATED";
}

void RemovePlacementGroup(const std::string& placement_group_id) {
  detail::RemovePlacementGroup(placement_group_id);
}

}  // namespace rayx
