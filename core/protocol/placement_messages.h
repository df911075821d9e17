// Wire messages for placement groups and for listing the head's state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "protocol/messages.h"

namespace rayx::protocol {

// Where one bundle of a placement group was reserved.
struct BundleLocation {
  std::string node_id;          // hex
  std::string node_address;     // the node's IP
  std::string object_address;   // its agent's object server (logs, ports)
  std::vector<int> gpu_ids;     // the node's GPU devices this bundle holds
  MSGPACK_DEFINE_MAP(node_id, node_address, object_address, gpu_ids)
};

// A placement group as the head records it (the states: PlacementGroupState).
struct PlacementGroupInfo {
  PlacementGroupId placement_group_id;
  std::string name;
  JobId job_id;
  PlacementStrategy strategy = PlacementStrategy::kPack;
  std::vector<ResourceMap> bundles;
  PlacementGroupState state = PlacementGroupState::kPending;
  std::string reason;     // why it is PENDING or INFEASIBLE
  std::vector<BundleLocation> locations;  // per bundle, once CREATED
  bool detached = false;  // outlives its job
  MSGPACK_DEFINE_MAP(placement_group_id, name, job_id, strategy, bundles, state, reason,
                     locations, detached)
};

struct CreatePlacementGroupRequest {
  static constexpr MessageType kType = MessageType::kCreatePlacementGroupRequest;
  JobId job_id;
  std::string name;
  PlacementStrategy strategy = PlacementStrategy::kPack;
  std::vector<ResourceMap> bundles;
  LabelMap label_selector;
  bool detached = false;
  PlacementGroupId placement_group_id;  // "" = the head picks one
  MSGPACK_DEFINE_MAP(job_id, name, strategy, bundles, label_selector, detached,
                     placement_group_id)
};

struct CreatePlacementGroupReply {
  static constexpr MessageType kType = MessageType::kCreatePlacementGroupReply;
  PlacementGroupInfo group;
  MSGPACK_DEFINE_MAP(group)
};

// Answered when the group leaves PENDING (CREATED, INFEASIBLE, REMOVED) or when
// `timeout_ms` passes (then with state PENDING and the reason it waits).
struct WaitPlacementGroupRequest {
  static constexpr MessageType kType = MessageType::kWaitPlacementGroupRequest;
  PlacementGroupId placement_group_id;
  int64_t timeout_ms = 0;
  MSGPACK_DEFINE_MAP(placement_group_id, timeout_ms)
};

struct WaitPlacementGroupReply {
  static constexpr MessageType kType = MessageType::kWaitPlacementGroupReply;
  PlacementGroupInfo group;
  MSGPACK_DEFINE_MAP(group)
};

// Frees every bundle; the workers leased in the group are stopped.
struct RemovePlacementGroupRequest {
  static constexpr MessageType kType = MessageType::kRemovePlacementGroupRequest;
  PlacementGroupId placement_group_id;
  MSGPACK_DEFINE_MAP(placement_group_id)
};

struct RemovePlacementGroupReply {
  static constexpr MessageType kType = MessageType::kRemovePlacementGroupReply;
  bool removed = false;
  MSGPACK_DEFINE_MAP(removed)
};

// One lease: a worker (task or actor) or a process lease, for `rayx list`.
struct LeaseListEntry {
  LeaseId lease_id;
  JobId job_id;
  LeaseKind kind = LeaseKind::kWorker;
  LeaseState state = LeaseState::kStarting;  // kBlocked: in get/wait, lending its CPU
  std::string node_id;
  std::string node_address;
  int32_t pid = 0;
  ResourceMap resources;
  std::vector<int> gpu_ids;
  PlacementGroupId placement_group_id;
  int32_t bundle_index = -1;
  std::string actor_name;    // named actors
  std::string class_name;
  bool detached = false;
  MSGPACK_DEFINE_MAP(lease_id, job_id, kind, state, node_id, node_address, pid, resources,
                     gpu_ids, placement_group_id, bundle_index, actor_name, class_name, detached)
};

// `rayx list`: carries the token like GetClusterStatusRequest (no registration).
struct ListStateRequest {
  static constexpr MessageType kType = MessageType::kListStateRequest;
  std::string token;
  MSGPACK_DEFINE_MAP(token)
};

// One rank of a collective group the head watches (WatchGroupRequest).
struct CollectiveGroupMember {
  int32_t rank = -1;
  LeaseId lease_id;
  MSGPACK_DEFINE_MAP(rank, lease_id)
};

// A collective group whose ranks run in leased workers, as the head knows it
// from the ranks that joined (WatchGroupRequest); or one that lost a member.
struct CollectiveGroupInfo {
  std::string group;
  std::string attempt_id;
  int32_t world_size = 0;
  JobId job_id;  // the job of its first rank's lease (nil when not known)
  std::vector<CollectiveGroupMember> members;  // the ranks that joined, by rank
  // Empty while it lives; once a member's lease ended (a rank died, or the
  // group's actors were let go without destroying it first): which rank and
  // why. The head then stops watching it and its live members abort.
  std::string ended;
  MSGPACK_DEFINE_MAP(group, attempt_id, world_size, job_id, members, ended)
};

struct ListStateReply {
  static constexpr MessageType kType = MessageType::kListStateReply;
  std::vector<NodeInfo> nodes;
  std::vector<LeaseListEntry> leases;
  std::vector<PlacementGroupInfo> placement_groups;
  // At most 1,000: the live ones, then the newest 50 that ended.
  std::vector<CollectiveGroupInfo> collective_groups;
  MSGPACK_DEFINE_MAP(nodes, leases, placement_groups, collective_groups)
};

}  // namespace rayx::protocol
