// Placement groups and scheduling strategies (Ray's names): where tasks and
// actors go.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "rayx/resources.h"

namespace rayx {
namespace detail {
struct PlacementGroupCore;
}

// How a placement group's bundles are spread over nodes.
enum class PlacementStrategy : uint8_t {
  PACK = 0,           // as few nodes as possible (best effort)
  SPREAD = 1,         // distinct nodes where possible (best effort)
  STRICT_PACK = 2,    // all bundles on one node
  STRICT_SPREAD = 3,  // every bundle on a different node
};

// Where a placement group stands: waiting for resources, every bundle
// reserved, never placeable on the alive nodes (looked at again when nodes
// join), or removed.
enum class PlacementGroupState : uint8_t {
  PENDING = 0,
  CREATED = 1,
  INFEASIBLE = 2,
  REMOVED = 3,
};
// "PENDING", "CREATED", "INFEASIBLE" or "REMOVED" (the names `rayx list
// placement-groups` and Python show).
const std::string& PlacementGroupStateName(PlacementGroupState state);

struct PlacementGroupCreationOptions {
  std::string name;                  // shown by `rayx list placement-groups`
  std::vector<ResourceMap> bundles;  // e.g. {{{"GPU", 1}, {"CPU", 4}}, {{"GPU", 1}}}
  PlacementStrategy strategy = PlacementStrategy::PACK;
  // Outlives the job that made it (until RemovePlacementGroup), like the
  // detached actors placed in it. Default: ends with its job.
  bool detached = false;
};

// Resources reserved together on the cluster, all bundles or none. Tasks and
// actors placed in it (SetPlacementGroup) draw from its bundles. A group ends
// with its job, or with RemovePlacementGroup, which stops what runs in it.
class PlacementGroup {
 public:
  PlacementGroup() = default;

  const std::string& GetID() const { return id_; }
  // Waits up to `timeout_seconds` for every bundle to be reserved. Returns true
  // when they are, false when the group still waits for resources (Reason()
  // says for what). Throws std::runtime_error with the reason when no set of
  // nodes could ever hold the group, or when it was removed.
  bool Wait(int timeout_seconds);
  // PENDING, CREATED, INFEASIBLE or REMOVED, as of the last Wait.
  const std::string& State() const { return PlacementGroupStateName(state_); }
  PlacementGroupState StateValue() const { return state_; }
  const std::string& Reason() const { return reason_; }
  size_t BundleCount() const { return bundles_; }

 private:
  friend PlacementGroup CreatePlacementGroup(const PlacementGroupCreationOptions& options);
  std::string id_, reason_;
  PlacementGroupState state_ = PlacementGroupState::PENDING;
  size_t bundles_ = 0;
  std::shared_ptr<detail::PlacementGroupCore> core_;
};

// Asks the head to reserve the group and returns at once, without waiting for
// the head (Wait for it). Throws std::invalid_argument for no bundles, an empty
// bundle or a bad amount.
PlacementGroup CreatePlacementGroup(const PlacementGroupCreationOptions& options);
// Frees the group's bundles and stops the tasks and actors placed in it.
// Returns without waiting for the head.
void RemovePlacementGroup(const std::string& placement_group_id);

// Scheduling strategies for tasks and actors outside placement groups.
struct DefaultSchedulingStrategy {};  // pack a node to half, then the least loaded
struct SpreadSchedulingStrategy {};   // a different node each time, least loaded first
// That node only (`soft`: that node first, any other when it cannot).
struct NodeAffinitySchedulingStrategy {
  std::string node_id;  // hex, as `rayx list nodes` shows it (full id)
  bool soft = false;
};
using SchedulingStrategy =
    std::variant<DefaultSchedulingStrategy, SpreadSchedulingStrategy, NodeAffinitySchedulingStrategy>;

}  // namespace rayx
