// Every msgpack type of the wire protocol (the messages' bodies and the
// records inside them), as X-macros: X(Type) once per type. codec.h declares
// their Encode/Decode as instantiated elsewhere (codec_instances_*.cc), so the
// msgpack code of a message is compiled once, not in every file that sends it.
// A type missing here still works (its codec is instantiated where it is
// used); add new message types here.
#pragma once

// protocol/messages.h (codec_instances_core.cc)
#define RAYX_PROTOCOL_CORE_TYPES(X) \
  X(ErrorReply) X(LiveLease) X(ExitedProcess) X(RegisterNodeRequest) X(RegisterNodeReply) \
  X(GpuUsage) X(TaskCounters) X(CollectiveCounters) X(HeartbeatRequest) X(HeartbeatReply) \
  X(UnregisterNodeRequest) X(UnregisterNodeReply) \
  X(GetClusterStatusRequest) X(GetClusterStatusReply) X(StopClusterRequest) \
  X(StopClusterReply) X(RegisterDriverRequest) X(RegisterDriverReply) \
  X(DriverHeartbeatRequest) X(DriverHeartbeatReply) X(ActorInfo) X(FinishJobRequest) \
  X(FinishJobReply) X(ProcessSpec) X(ActorInit) X(RequestLeaseRequest) X(RequestLeaseReply) \
  X(ReturnLeaseRequest) X(ReturnLeaseReply) X(StartWorkerRequest) X(StartWorkerReply) \
  X(KillWorkersRequest) X(RegisterActorRequest) X(RegisterActorReply) X(LeasesLostNotice) \
  X(WatchDriverRequest) X(DriverExitedNotice) X(ActorConstructionNotice) X(GetActorRequest) \
  X(GetActorReply) X(DropActorNameRequest) X(DropActorNameReply) X(ObjectLocation) \
  X(PullObjectRequest) X(PullObjectReply) X(DeleteObjectsRequest) X(JobFinishedNotice) \
  X(JobCredentialNotice) X(HoldObjectsRequest) X(HoldObjectsReply) X(OutputLines) \
  X(WorkerOutputNotice) X(FlushOutputRequest) X(FlushOutputReply)

// placement_, process_, job_, kv_ and group_messages.h (codec_instances_more.cc)
#define RAYX_PROTOCOL_MORE_TYPES(X) \
  X(BundleLocation) X(PlacementGroupInfo) X(CreatePlacementGroupRequest) \
  X(CreatePlacementGroupReply) X(WaitPlacementGroupRequest) X(WaitPlacementGroupReply) \
  X(RemovePlacementGroupRequest) X(RemovePlacementGroupReply) X(LeaseListEntry) \
  X(CollectiveGroupMember) X(CollectiveGroupInfo) X(ListStateRequest) X(ListStateReply) X(ProcessExitedNotice) X(ReadLogRequest) \
  X(ReadLogReply) X(ReservePortRequest) X(ReservePortReply) X(JobInfo) X(SubmitJobRequest) \
  X(SubmitJobReply) X(GetJobRequest) X(GetJobReply) X(ListJobsRequest) X(ListJobsReply) \
  X(StopJobRequest) X(StopJobReply) X(HasPackageRequest) X(HasPackageReply) \
  X(PutPackageRequest) X(PutPackageReply) X(GetPackageRequest) X(GetPackageReply) \
  X(KeepPackageRequest) X(KeepPackageReply) X(KvPutRequest) X(KvPutReply) X(KvGetRequest) \
  X(KvGetReply) X(KvWaitRequest) X(KvWaitReply) X(KvDeleteRequest) X(KvDeleteReply) \
  X(KvListRequest) X(KvListReply) X(WatchGroupRequest) X(WatchGroupReply) \
  X(UnwatchGroupRequest) X(UnwatchGroupReply) X(GroupMemberDiedNotice) X(ListLogsRequest) \
  X(LogFileInfo) X(ListLogsReply)
