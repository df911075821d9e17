// rayx::CreatePlacementGroup, PlacementGroup::Wait, RemovePlacementGroup.
#include <cmath>
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

PlacementGroupPtr CreatePlacementGroup(const std::string& name,
                                       const std::vector<ResourceMap>& bundles,
                                       const std::string& strategy) {
  return RequireRuntime().CreatePlacementGroup(name, bundles, strategy);
}
const std::string& PlacementGroupIdOf(const PlacementGroupPtr& group) { return group->id; }
PlacementGroupState WaitPlacementGroup(const PlacementGroupPtr& group, int64_t timeout_ms) {
  return RequireRuntime().WaitPlacementGroup(group, timeout_ms);
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
  // What the head would refuse, refused here at once (creation is not awaited).
  if (options.bundles.empty()) {
    throw std::invalid_argument("CreatePlacementGroup: a placement group needs at least one bundle");
  }
  for (size_t i = 0; i < options.bundles.size(); ++i) {
    bool any = false;
    for (const auto& [name, amount] : options.bundles[i]) {
      if (!std::isfinite(amount) || amount < 0) {
        throw std::invalid_argument("CreatePlacementGroup: bundle " + std::to_string(i) +
                                    ": invalid amount of \"" + name + "\"");
      }
      any = any || amount > 0;
    }
    if (!any) {
      throw std::invalid_argument("CreatePlacementGroup: bundle " + std::to_string(i) +
                                  " is empty: every bundle must reserve some resource");
    }
  }
  PlacementGroup group;
  group.core_ = detail::CreatePlacementGroup(options.name, options.bundles,
                                             StrategyName(options.strategy));
  group.id_ = detail::PlacementGroupIdOf(group.core_);
  group.state_ = "PENDING";
  group.bundles_ = options.bundles.size();
  return group;
}

bool PlacementGroup::Wait(int timeout_seconds) {
  if (id_.empty()) throw std::logic_error("PlacementGroup::Wait on a group never created");
  if (state_ != "CREATED") {
    auto state = detail::WaitPlacementGroup(core_, int64_t{timeout_seconds} * 1000);
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
