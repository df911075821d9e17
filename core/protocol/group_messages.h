// Collective groups' members on the wire (worker <-> head).
//
// Design: a rank of a collective group that runs in a leased worker tells the
// head which group it belongs to (WatchGroupRequest, once its group is
// connected). When the lease of another rank of that group ends (its worker
// died or was stopped, its node was declared dead, its job ended), the head
// sends every other watching rank one GroupMemberDiedNotice (when a whole job
// ends, only to ranks that outlive it: detached actors), and they abort the
// group at once instead of waiting for the operation's deadline: NCCL cannot
// see a dead peer by itself, and a rank on a stopped or cut-off node keeps its
// TCP connections open. A group is keyed by (group, attempt_id), so a notice
// about an earlier attempt of the same name never aborts a newer one.
// Requests come from peers that registered with the cluster token, like the
// other worker messages.
#pragma once

#include <cstdint>
#include <string>

#include <msgpack.hpp>

#include "protocol/messages.h"

namespace rayx::protocol {

// Rank `rank` of the group, held by the worker of lease `lease_id`, wants to
// hear when another rank's lease ends. Refused (NotFound) when the lease is
// not live, InvalidArgument when rank or world_size is out of range or the
// group was watched with another world size, Unavailable when the head's
// bounds are reached.
struct WatchGroupRequest {
  static constexpr MessageType kType = MessageType::kWatchGroupRequest;
  std::string group;       // the group's name
  std::string attempt_id;  // which creation of that name
  int32_t world_size = 0;
  int32_t rank = -1;
  LeaseId lease_id;
  MSGPACK_DEFINE_MAP(group, attempt_id, world_size, rank, lease_id)
};

struct WatchGroupReply {
  static constexpr MessageType kType = MessageType::kWatchGroupReply;
  bool ok = true;
  MSGPACK_DEFINE_MAP(ok)
};

// The rank left the group (it destroyed it): no notice for or about it.
struct UnwatchGroupRequest {
  static constexpr MessageType kType = MessageType::kUnwatchGroupRequest;
  std::string group;
  std::string attempt_id;
  int32_t rank = -1;
  MSGPACK_DEFINE_MAP(group, attempt_id, rank)
};

struct UnwatchGroupReply {
  static constexpr MessageType kType = MessageType::kUnwatchGroupReply;
  bool removed = false;  // false: it was not watched
  MSGPACK_DEFINE_MAP(removed)
};

// head -> each other watching rank: rank `failed_rank`'s lease ended. Sent
// once per group attempt: the head forgets the group when it sends it.
struct GroupMemberDiedNotice {
  static constexpr MessageType kType = MessageType::kGroupMemberDiedNotice;
  std::string group;
  std::string attempt_id;
  int32_t failed_rank = -1;
  LeaseId lease_id;      // the failed rank's lease
  std::string cause;     // e.g. "node 127.0.0.2 (1a2b3c4d) was declared dead: ..."
  MSGPACK_DEFINE_MAP(group, attempt_id, failed_rank, lease_id, cause)
};

}  // namespace rayx::protocol
