// The public API's enums and the wire's: numbered alike, so each converts by
// value, and named once, in the wire's table (protocol/enum_names.h). The
// checks below keep the numbering in step.
#pragma once

#include <initializer_list>
#include <utility>

#include "protocol/enum_names.h"
#include "rayx/detail/runtime_api.h"
#include "rayx/errors.h"
#include "rayx/placement_group.h"

namespace rayx::detail {

template <typename Public, typename Wire>
constexpr bool SameNumbers(std::initializer_list<std::pair<Public, Wire>> pairs) {
  for (const auto& [p, w] : pairs) {
    if (static_cast<int>(p) != static_cast<int>(w)) return false;
  }
  return protocol::EnumNames<Wire>::kNames.size() == pairs.size();
}

static_assert(SameNumbers<PlacementStrategy, protocol::PlacementStrategy>(
    {{PlacementStrategy::PACK, protocol::PlacementStrategy::kPack},
     {PlacementStrategy::SPREAD, protocol::PlacementStrategy::kSpread},
     {PlacementStrategy::STRICT_PACK, protocol::PlacementStrategy::kStrictPack},
     {PlacementStrategy::STRICT_SPREAD, protocol::PlacementStrategy::kStrictSpread}}));
static_assert(SameNumbers<PlacementGroupState, protocol::PlacementGroupState>(
    {{PlacementGroupState::PENDING, protocol::PlacementGroupState::kPending},
     {PlacementGroupState::CREATED, protocol::PlacementGroupState::kCreated},
     {PlacementGroupState::INFEASIBLE, protocol::PlacementGroupState::kInfeasible},
     {PlacementGroupState::REMOVED, protocol::PlacementGroupState::kRemoved}}));
static_assert(SameNumbers<TaskErrorKind, protocol::TaskErrorKind>(
    {{TaskErrorKind::kException, protocol::TaskErrorKind::kException},
     {TaskErrorKind::kWorkerCrashed, protocol::TaskErrorKind::kWorkerCrashed},
     {TaskErrorKind::kWorkerUnreachable, protocol::TaskErrorKind::kWorkerUnreachable},
     {TaskErrorKind::kWorkerStartFailed, protocol::TaskErrorKind::kWorkerStartFailed},
     {TaskErrorKind::kActorDied, protocol::TaskErrorKind::kActorDied},
     {TaskErrorKind::kInfeasible, protocol::TaskErrorKind::kInfeasible},
     {TaskErrorKind::kPlacementGroupRemoved, protocol::TaskErrorKind::kPlacementGroupRemoved},
     {TaskErrorKind::kObjectLost, protocol::TaskErrorKind::kObjectLost},
     {TaskErrorKind::kOutOfMemory, protocol::TaskErrorKind::kOutOfMemory},
     {TaskErrorKind::kObjectStoreFull, protocol::TaskErrorKind::kObjectStoreFull},
     {TaskErrorKind::kRuntimeStopped, protocol::TaskErrorKind::kRuntimeStopped},
     {TaskErrorKind::kFunctionNotFound, protocol::TaskErrorKind::kFunctionNotFound},
     {TaskErrorKind::kArgumentTypeError, protocol::TaskErrorKind::kArgumentTypeError},
     {TaskErrorKind::kInvalidArgument, protocol::TaskErrorKind::kInvalidArgument},
     {TaskErrorKind::kWrongJob, protocol::TaskErrorKind::kWrongJob},
     {TaskErrorKind::kGeneratorTooLong, protocol::TaskErrorKind::kGeneratorTooLong},
     {TaskErrorKind::kGeneratorEnded, protocol::TaskErrorKind::kGeneratorEnded},
     {TaskErrorKind::kProtocolError, protocol::TaskErrorKind::kProtocolError},
     {TaskErrorKind::kRequeued, protocol::TaskErrorKind::kRequeued},
     {TaskErrorKind::kInternal, protocol::TaskErrorKind::kInternal},
     {TaskErrorKind::kPlacementGroupUnavailable,
      protocol::TaskErrorKind::kPlacementGroupUnavailable}}));
static_assert(SameNumbers<StrategyKind, protocol::LeaseStrategy>(
    {{StrategyKind::kDefault, protocol::LeaseStrategy::kDefault},
     {StrategyKind::kSpread, protocol::LeaseStrategy::kSpread},
     {StrategyKind::kNodeAffinity, protocol::LeaseStrategy::kNodeAffinity}}));

inline protocol::PlacementStrategy ToWire(PlacementStrategy s) {
  return static_cast<protocol::PlacementStrategy>(s);
}
inline PlacementStrategy FromWire(protocol::PlacementStrategy s) {
  return static_cast<PlacementStrategy>(s);
}
inline protocol::PlacementGroupState ToWire(PlacementGroupState s) {
  return static_cast<protocol::PlacementGroupState>(s);
}
inline PlacementGroupState FromWire(protocol::PlacementGroupState s) {
  return static_cast<PlacementGroupState>(s);
}
inline protocol::LeaseStrategy ToWire(StrategyKind s) {
  return static_cast<protocol::LeaseStrategy>(s);
}
inline StrategyKind FromWire(protocol::LeaseStrategy s) { return static_cast<StrategyKind>(s); }
inline TaskErrorKind FromWire(protocol::TaskErrorKind k) { return static_cast<TaskErrorKind>(k); }

}  // namespace rayx::detail
