// Collective groups over actors, made from a driver: the built-in actor
// methods that join and leave a group, and the driver's side of
// CreateCollectiveGroup / DestroyCollectiveGroup.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "rayx/collective.h"
#include "rayx/detail/runtime_api.h"

namespace rayx::collective::detail {

// Built-in actor methods (callable on an actor of any class).
inline constexpr const char* kJoinGroupMethod = "rayx.collective.join";
inline constexpr const char* kLeaveGroupMethod = "rayx.collective.leave";

// What the driver sends each member.
struct JoinRequest {
  std::string name;
  int32_t backend = 0;  // Backend
  int64_t timeout_ms = 30000;
  int32_t world_size = 0;
  int32_t rank = 0;
  std::string attempt_id;
  std::vector<std::string> member_actors;  // per rank, for error messages
  int64_t connect_timeout_ms = 0;          // 0: timeout_ms
  MSGPACK_DEFINE_MAP(name, backend, timeout_ms, world_size, rank, attempt_id, member_actors,
                     connect_timeout_ms)
};

// A group the driver made, as kept in the KV (namespace "collective", key
// "<name>/meta"): how to find and end it.
struct GroupRecord {
  std::string attempt_id;
  std::vector<std::string> actors;  // SerializeActor, in rank order
  MSGPACK_DEFINE_MAP(attempt_id, actors)
};

// Makes actor i rank i of a new group attempt and returns once every rank is
// connected. Throws CollectiveError: world size 0, an actor listed twice, a
// name in use, or a rank that did not join (naming it and why); the ranks that
// joined are made to leave. `detached`: the record outlives the job.
void CreateGroupOverActors(const std::vector<rayx::detail::ActorPtr>& actors,
                           const GroupOptions& options, bool detached = false);
// The same with connecting bounded by `connect_timeout_ms` (> 0) instead of
// options.timeout_ms, which stays every operation's deadline.
void CreateGroupOverActors(const std::vector<rayx::detail::ActorPtr>& actors,
                           const GroupOptions& options, bool detached, int64_t connect_timeout_ms);

// Ends group `name` made by CreateGroupOverActors: its members leave (best
// effort: dead members are skipped) and its keys are removed. False when no
// such group is recorded.
bool DestroyGroupOverActors(const std::string& name);

// Removes a group's record and rendezvous keys without calling its members
// (they are being killed).
void ForgetGroup(const std::string& name);

// Sets the collective environment of this process: the head's KV as the
// rendezvous store, `node_ip` for Gloo's device, and DestroyCollectiveGroup's
// way to end groups made by this driver. Called before a driver's runtime
// starts and before a worker serves.
void InstallRuntimeEnvironment(const std::string& node_ip);

}  // namespace rayx::collective::detail
