// Every msgpack message body rayx decodes from the network, as one type list
// for the message fuzz target and its seed generator. A message is picked by
// its MessageType value (the first input byte), so seeds stay valid when the
// list changes; records that travel inside messages or files but have no
// MessageType get values from kFirstRecord on.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "protocol/codec.h"
#include "protocol/group_messages.h"
#include "protocol/job_messages.h"
#include "protocol/kv_messages.h"
#include "protocol/messages.h"
#include "protocol/placement_messages.h"
#include "protocol/process_messages.h"

namespace rayx::fuzz {

template <typename... T>
struct TypeList {};

using namespace rayx::protocol;  // NOLINT: a list of its types

using MessageTypes = TypeList<
    // messages.h
    ErrorReply, RegisterNodeRequest, RegisterNodeReply, HeartbeatRequest, HeartbeatReply,
    UnregisterNodeRequest, UnregisterNodeReply, GetClusterStatusRequest, GetClusterStatusReply,
    StopClusterRequest, StopClusterReply, RegisterDriverRequest, RegisterDriverReply,
    DriverHeartbeatRequest, DriverHeartbeatReply, FinishJobRequest, FinishJobReply,
    RequestLeaseRequest, RequestLeaseReply, ReturnLeaseRequest, ReturnLeaseReply,
    LeaseBlockedNotice, StartWorkerRequest, StartWorkerReply, KillWorkersRequest,
    RegisterActorRequest,
    RegisterActorReply, LeasesLostNotice, WatchDriverRequest, DriverExitedNotice,
    ActorConstructionNotice, GetActorRequest, GetActorReply, DropActorNameRequest,
    DropActorNameReply, PullObjectRequest, PullObjectReply, DeleteObjectsRequest,
    HoldObjectsRequest, HoldObjectsReply, MakeRoomRequest, MakeRoomReply, ReplicateShardRequest,
    ReplicateShardReply, DeleteShardsRequest, WorkerOutputNotice, FlushOutputRequest,
    FlushOutputReply, JobFinishedNotice, JobCredentialNotice, CheckpointRecordsRequest,
    CheckpointRecordsReply, KeepCheckpointRecordRequest, AdoptCheckpointsRequest,
    AdoptCheckpointsReply,
    // placement_messages.h
    CreatePlacementGroupRequest, CreatePlacementGroupReply, WaitPlacementGroupRequest,
    WaitPlacementGroupReply, RemovePlacementGroupRequest, RemovePlacementGroupReply,
    ListStateRequest, ListStateReply,
    // process_messages.h
    ProcessExitedNotice, ReadLogRequest, ReadLogReply, ListLogsRequest, ListLogsReply,
    ReservePortRequest, ReservePortReply,
    // job_messages.h
    SubmitJobRequest, SubmitJobReply, GetJobRequest, GetJobReply, ListJobsRequest, ListJobsReply,
    StopJobRequest, StopJobReply, HasPackageRequest, HasPackageReply, PutPackageRequest,
    PutPackageReply, GetPackageRequest, GetPackageReply, KeepPackageRequest, KeepPackageReply,
    // kv_messages.h
    KvPutRequest, KvPutReply, KvGetRequest, KvGetReply, KvWaitRequest, KvWaitReply,
    KvDeleteRequest, KvDeleteReply, KvListRequest, KvListReply,
    // group_messages.h
    WatchGroupRequest, WatchGroupReply, UnwatchGroupRequest, UnwatchGroupReply,
    GroupMemberDiedNotice>;

// Records without a MessageType, numbered from kFirstRecord in this order:
// an actor handle passed as an argument (ActorInfo) and a restarted actor's
// constructor call (ActorInit).
inline constexpr uint8_t kFirstRecord = 200;
using RecordTypes = TypeList<ActorInfo, ActorInit>;

// The selector byte of a message type: its MessageType (ErrorReply, FROZEN,
// has no kType member).
template <typename T>
constexpr uint8_t SelectorOf() {
  if constexpr (std::is_same_v<T, ErrorReply>) {
    return static_cast<uint8_t>(MessageType::kErrorReply);
  } else {
    return static_cast<uint8_t>(T::kType);
  }
}

// Calls fn.template operator()<T>() for the type whose selector is `selector`;
// false when none has it.
template <typename Fn, typename... M, typename... R>
bool VisitType(uint8_t selector, Fn&& fn, TypeList<M...>, TypeList<R...>) {
  bool found = false;
  ((selector == SelectorOf<M>() ? (fn.template operator()<M>(), found = true) : false), ...);
  uint8_t next = kFirstRecord;
  ((selector == next++ ? (fn.template operator()<R>(), found = true) : false), ...);
  return found;
}

template <typename Fn>
bool VisitType(uint8_t selector, Fn&& fn) {
  return VisitType(selector, fn, MessageTypes{}, RecordTypes{});
}

// Calls fn.template operator()<T>(selector) for every type.
template <typename Fn, typename... M, typename... R>
void ForEachType(Fn&& fn, TypeList<M...>, TypeList<R...>) {
  (fn.template operator()<M>(SelectorOf<M>()), ...);
  uint8_t next = kFirstRecord;
  (fn.template operator()<R>(next++), ...);
}

template <typename Fn>
void ForEachType(Fn&& fn) {
  ForEachType(fn, MessageTypes{}, RecordTypes{});
}

}  // namespace rayx::fuzz
