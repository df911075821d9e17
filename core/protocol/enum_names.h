// The enums that travel in wire messages and their names: one table per enum,
// which the C++ API, the Python binding, the CLI and the scheduling policy all
// use. No msgpack here (the pure policy library includes it); their wire form
// is in enums.h.
#pragma once

#include <array>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "rayx/status.h"

namespace rayx::protocol {

// Design: on the wire an enum is its unsigned number (frozen: values are never
// renumbered, new ones are appended). Users see and type the names; they are
// converted only at the edges (the C++ API, the Python binding, the CLI). A
// number out of range is refused while decoding, so a handler only ever sees
// a named value. The decoder also takes the names themselves, which head state
// files written before protocol 4 hold.

// Where a lease's worker goes outside a placement group.
enum class LeaseStrategy : uint8_t {
  kDefault = 0,       // the hybrid policy: pack, then spread
  kSpread = 1,        // the least loaded node, round robin among equals
  kNodeAffinity = 2,  // RequestLeaseRequest::affinity_node_id
};

// How a placement group's bundles are laid over nodes.
enum class PlacementStrategy : uint8_t {
  kPack = 0,
  kSpread = 1,
  kStrictPack = 2,
  kStrictSpread = 3,
};

// PENDING: waiting for resources. CREATED: every bundle reserved. INFEASIBLE:
// no set of alive nodes could ever hold it (re-examined when nodes join).
// REMOVED: gone.
enum class PlacementGroupState : uint8_t {
  kPending = 0,
  kCreated = 1,
  kInfeasible = 2,
  kRemoved = 3,
};

// A job submitted with `rayx job submit`: waiting for its entrypoint to
// start, running, or ended (exit 0; a non-zero exit, a lost or unstartable
// entrypoint; `rayx job stop`).
enum class JobState : uint8_t {
  kPending = 0,
  kRunning = 1,
  kSucceeded = 2,
  kFailed = 3,
  kStopped = 4,
};

// What runs in a lease: a worker for tasks, an actor's worker, or the
// processes of `rayx launch` / a submitted job's entrypoint.
enum class LeaseKind : uint8_t {
  kWorker = 0,
  kActor = 1,
  kProcess = 2,
};

// A lease's worker: starting, running, or running with its calls waiting in
// get/wait (its CPU lent to other work).
enum class LeaseState : uint8_t {
  kStarting = 0,
  kRunning = 1,
  kBlocked = 2,
};

// Why a call failed. kException: its own code threw (the error's type names
// the exception, e.g. "std::invalid_argument", "ValueError"); every other
// kind is rayx's: the call could not run, or its worker, actor or result was
// lost. Requeued is the worker's answer for calls it hands back unrun (the
// caller runs them elsewhere; users never see it).
enum class TaskErrorKind : uint8_t {
  kException = 0,
  kWorkerCrashed = 1,
  kWorkerUnreachable = 2,
  kWorkerStartFailed = 3,
  kActorDied = 4,
  kInfeasible = 5,
  kPlacementGroupRemoved = 6,
  kObjectLost = 7,
  kOutOfMemory = 8,
  kObjectStoreFull = 9,
  kRuntimeStopped = 10,
  kFunctionNotFound = 11,
  kArgumentTypeError = 12,
  kInvalidArgument = 13,
  kWrongJob = 14,
  kGeneratorTooLong = 15,
  kGeneratorEnded = 16,
  kProtocolError = 17,
  kRequeued = 18,
  kInternal = 19,
  kPlacementGroupUnavailable = 20,
};

// Each wire enum's names, indexed by value, and what it is called in errors.
template <typename E>
struct EnumNames;

template <>
struct EnumNames<LeaseStrategy> {
  static constexpr std::string_view kWhat = "scheduling strategy";
  static constexpr std::array<std::string_view, 3> kNames = {"DEFAULT", "SPREAD", "NODE_AFFINITY"};
  static constexpr bool kEmptyIsFirst = true;  // "" names DEFAULT, as before protocol 4
};

template <>
struct EnumNames<PlacementStrategy> {
  static constexpr std::string_view kWhat = "placement strategy";
  static constexpr std::array<std::string_view, 4> kNames = {"PACK", "SPREAD", "STRICT_PACK",
                                                             "STRICT_SPREAD"};
};

template <>
struct EnumNames<PlacementGroupState> {
  static constexpr std::string_view kWhat = "placement group state";
  static constexpr std::array<std::string_view, 4> kNames = {"PENDING", "CREATED", "INFEASIBLE",
                                                             "REMOVED"};
};

template <>
struct EnumNames<JobState> {
  static constexpr std::string_view kWhat = "job state";
  static constexpr std::array<std::string_view, 5> kNames = {"PENDING", "RUNNING", "SUCCEEDED",
                                                             "FAILED", "STOPPED"};
};

template <>
struct EnumNames<LeaseKind> {
  static constexpr std::string_view kWhat = "lease kind";
  static constexpr std::array<std::string_view, 3> kNames = {"worker", "actor", "process"};
};

template <>
struct EnumNames<LeaseState> {
  static constexpr std::string_view kWhat = "lease state";
  static constexpr std::array<std::string_view, 3> kNames = {"STARTING", "RUNNING", "BLOCKED"};
};

// The names C++'s TaskError::type() and Python's exception mapping
// (rayx.exceptions) use; "ObjectStoreFullError" as it always was.
template <>
struct EnumNames<TaskErrorKind> {
  static constexpr std::string_view kWhat = "task error kind";
  static constexpr std::array<std::string_view, 21> kNames = {
      "Exception",         "WorkerCrashed",         "WorkerUnreachable",
      "WorkerStartFailed", "ActorDied",             "Infeasible",
      "PlacementGroupRemoved", "ObjectLost",        "OutOfMemory",
      "ObjectStoreFullError",  "RuntimeStopped",    "FunctionNotFound",
      "ArgumentTypeError", "InvalidArgument",       "WrongJob",
      "GeneratorTooLong",  "GeneratorEnded",        "ProtocolError",
      "Requeued",          "Internal",              "PlacementGroupUnavailable"};
};

template <typename E>
concept WireEnum = requires { EnumNames<E>::kNames; };

// True when `value` is one of E's named values.
template <WireEnum E>
constexpr bool IsKnown(E value) {
  return static_cast<size_t>(value) < EnumNames<E>::kNames.size();
}

// "SPREAD"; "?" for a value that IsKnown refuses.
template <WireEnum E>
std::string_view Name(E value) {
  return IsKnown(value) ? EnumNames<E>::kNames[static_cast<size_t>(value)] : "?";
}

// "PACK, SPREAD, STRICT_PACK or STRICT_SPREAD".
template <WireEnum E>
std::string NameList() {
  const auto& names = EnumNames<E>::kNames;
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
  }
  return out;
}

// The value named `name` (exactly as Name writes it). Returns InvalidArgument
// naming the valid names otherwise: "unknown placement strategy 'SCATTER':
// use PACK, SPREAD, STRICT_PACK or STRICT_SPREAD". For LeaseStrategy, ""
// also names DEFAULT.
template <WireEnum E>
Result<E> Parse(std::string_view name) {
  if constexpr (requires { EnumNames<E>::kEmptyIsFirst; }) {
    if (name.empty()) return static_cast<E>(0);
  }
  const auto& names = EnumNames<E>::kNames;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<E>(i);
  }
  return Status::InvalidArgument("unknown " + std::string(EnumNames<E>::kWhat) + " '" +
                                 std::string(name.substr(0, 64)) + "': use " + NameList<E>());
}

// For test failures and logs.
template <WireEnum E>
std::ostream& operator<<(std::ostream& os, E value) {
  if (IsKnown(value)) return os << Name(value);
  return os << EnumNames<E>::kWhat << " " << static_cast<unsigned>(value);
}

}  // namespace rayx::protocol

