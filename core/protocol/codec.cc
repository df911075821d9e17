// Decoding with limits, message names and protocol checks.
#include "protocol/codec.h"

#include "rayx/detail/bounded_unpack.h"

namespace rayx::protocol {

std::string MessageTypeName(uint16_t type) {
  switch (static_cast<MessageType>(type)) {
    case MessageType::kErrorReply: return "ErrorReply";
    case MessageType::kRegisterNodeRequest: return "RegisterNodeRequest";
    case MessageType::kRegisterNodeReply: return "RegisterNodeReply";
    case MessageType::kHeartbeatRequest: return "HeartbeatRequest";
    case MessageType::kHeartbeatReply: return "HeartbeatReply";
    case MessageType::kUnregisterNodeRequest: return "UnregisterNodeRequest";
    case MessageType::kUnregisterNodeReply: return "UnregisterNodeReply";
    case MessageType::kGetClusterStatusRequest: return "GetClusterStatusRequest";
    case MessageType::kGetClusterStatusReply: return "GetClusterStatusReply";
    case MessageType::kStopClusterRequest: return "StopClusterRequest";
    case MessageType::kStopClusterReply: return "StopClusterReply";
    case MessageType::kRegisterDriverRequest: return "RegisterDriverRequest";
    case MessageType::kRegisterDriverReply: return "RegisterDriverReply";
    case MessageType::kDriverHeartbeatRequest: return "DriverHeartbeatRequest";
    case MessageType::kDriverHeartbeatReply: return "DriverHeartbeatReply";
    case MessageType::kFinishJobRequest: return "FinishJobRequest";
    case MessageType::kFinishJobReply: return "FinishJobReply";
    case MessageType::kRequestLeaseRequest: return "RequestLeaseRequest";
    case MessageType::kRequestLeaseReply: return "RequestLeaseReply";
    case MessageType::kReturnLeaseRequest: return "ReturnLeaseRequest";
    case MessageType::kReturnLeaseReply: return "ReturnLeaseReply";
    case MessageType::kLeaseBlockedNotice: return "LeaseBlockedNotice";
    case MessageType::kStartWorkerRequest: return "StartWorkerRequest";
    case MessageType::kStartWorkerReply: return "StartWorkerReply";
    case MessageType::kKillWorkersRequest: return "KillWorkersRequest";
    case MessageType::kRegisterActorRequest: return "RegisterActorRequest";
    case MessageType::kRegisterActorReply: return "RegisterActorReply";
    case MessageType::kGetActorRequest: return "GetActorRequest";
    case MessageType::kGetActorReply: return "GetActorReply";
    case MessageType::kDropActorNameRequest: return "DropActorNameRequest";
    case MessageType::kDropActorNameReply: return "DropActorNameReply";
    case MessageType::kPushTasksRequest: return "PushTasksRequest";
    case MessageType::kPushTasksReply: return "PushTasksReply";
    case MessageType::kReplicateShardRequest: return "ReplicateShardRequest";
    case MessageType::kReplicateShardReply: return "ReplicateShardReply";
    case MessageType::kDeleteShardsRequest: return "DeleteShardsRequest";
    case MessageType::kKeepCheckpointRecordRequest: return "KeepCheckpointRecordRequest";
    case MessageType::kMakeRoomRequest: return "MakeRoomRequest";
    case MessageType::kMakeRoomReply: return "MakeRoomReply";
    case MessageType::kPullObjectRequest: return "PullObjectRequest";
    case MessageType::kPullObjectReply: return "PullObjectReply";
    case MessageType::kDeleteObjectsRequest: return "DeleteObjectsRequest";
    case MessageType::kHoldObjectsRequest: return "HoldObjectsRequest";
    case MessageType::kHoldObjectsReply: return "HoldObjectsReply";
    case MessageType::kWorkerOutputNotice: return "WorkerOutputNotice";
    case MessageType::kFlushOutputRequest: return "FlushOutputRequest";
    case MessageType::kFlushOutputReply: return "FlushOutputReply";
    case MessageType::kJobFinishedNotice: return "JobFinishedNotice";
    case MessageType::kJobCredentialNotice: return "JobCredentialNotice";
    case MessageType::kCreatePlacementGroupRequest: return "CreatePlacementGroupRequest";
    case MessageType::kCreatePlacementGroupReply: return "CreatePlacementGroupReply";
    case MessageType::kWaitPlacementGroupRequest: return "WaitPlacementGroupRequest";
    case MessageType::kWaitPlacementGroupReply: return "WaitPlacementGroupReply";
    case MessageType::kRemovePlacementGroupRequest: return "RemovePlacementGroupRequest";
    case MessageType::kRemovePlacementGroupReply: return "RemovePlacementGroupReply";
    case MessageType::kListStateRequest: return "ListStateRequest";
    case MessageType::kListStateReply: return "ListStateReply";
    case MessageType::kProcessExitedNotice: return "ProcessExitedNotice";
    case MessageType::kLeasesLostNotice: return "LeasesLostNotice";
    case MessageType::kWatchDriverRequest: return "WatchDriverRequest";
    case MessageType::kDriverExitedNotice: return "DriverExitedNotice";
    case MessageType::kActorConstructionNotice: return "ActorConstructionNotice";
    case MessageType::kReadLogRequest: return "ReadLogRequest";
    case MessageType::kReadLogReply: return "ReadLogReply";
    case MessageType::kListLogsRequest: return "ListLogsRequest";
    case MessageType::kListLogsReply: return "ListLogsReply";
    case MessageType::kReservePortRequest: return "ReservePortRequest";
    case MessageType::kReservePortReply: return "ReservePortReply";
    case MessageType::kSubmitJobRequest: return "SubmitJobRequest";
    case MessageType::kSubmitJobReply: return "SubmitJobReply";
    case MessageType::kGetJobRequest: return "GetJobRequest";
    case MessageType::kGetJobReply: return "GetJobReply";
    case MessageType::kListJobsRequest: return "ListJobsRequest";
    case MessageType::kListJobsReply: return "ListJobsReply";
    case MessageType::kStopJobRequest: return "StopJobRequest";
    case MessageType::kStopJobReply: return "StopJobReply";
    case MessageType::kHasPackageRequest: return "HasPackageRequest";
    case MessageType::kHasPackageReply: return "HasPackageReply";
    case MessageType::kPutPackageRequest: return "PutPackageRequest";
    case MessageType::kPutPackageReply: return "PutPackageReply";
    case MessageType::kGetPackageRequest: return "GetPackageRequest";
    case MessageType::kGetPackageReply: return "GetPackageReply";
    case MessageType::kKeepPackageRequest: return "KeepPackageRequest";
    case MessageType::kKeepPackageReply: return "KeepPackageReply";
    case MessageType::kKvPutRequest: return "KvPutRequest";
    case MessageType::kKvPutReply: return "KvPutReply";
    case MessageType::kKvGetRequest: return "KvGetRequest";
    case MessageType::kKvGetReply: return "KvGetReply";
    case MessageType::kKvWaitRequest: return "KvWaitRequest";
    case MessageType::kKvWaitReply: return "KvWaitReply";
    case MessageType::kKvDeleteRequest: return "KvDeleteRequest";
    case MessageType::kKvDeleteReply: return "KvDeleteReply";
    case MessageType::kKvListRequest: return "KvListRequest";
    case MessageType::kKvListReply: return "KvListReply";
    case MessageType::kWatchGroupRequest: return "WatchGroupRequest";
    case MessageType::kWatchGroupReply: return "WatchGroupReply";
    case MessageType::kUnwatchGroupRequest: return "UnwatchGroupRequest";
    case MessageType::kUnwatchGroupReply: return "UnwatchGroupReply";
    case MessageType::kGroupMemberDiedNotice: return "GroupMemberDiedNotice";
    case MessageType::kCheckpointRecordsRequest: return "CheckpointRecordsRequest";
    case MessageType::kCheckpointRecordsReply: return "CheckpointRecordsReply";
    case MessageType::kAdoptCheckpointsRequest: return "AdoptCheckpointsRequest";
    case MessageType::kAdoptCheckpointsReply: return "AdoptCheckpointsReply";
  }
  return "unknown(" + std::to_string(type) + ")";
}

Status ErrorReply::ToStatus() const {
  auto status_code = static_cast<StatusCode>(code);
  if (status_code == StatusCode::kOk || code > static_cast<uint8_t>(StatusCode::kLastCode)) {
    status_code = StatusCode::kInternal;
  }
  return Status(status_code, where.empty() ? message : message + " [" + where + "]");
}

namespace detail {

Status ParseOne(const char* data, size_t size, const DecodeLimits& limits,
                msgpack::object_handle* out) {
  if (size == 0) return Status::InvalidArgument("empty frame where a msgpack value was expected");
  if (size > kMaxControlFrameBytes) {
    return Status::InvalidArgument("frame of " + std::to_string(size) +
                                   " bytes exceeds the limit of " +
                                   std::to_string(kMaxControlFrameBytes));
  }
  rayx::detail::UnpackLimits bounds;
  bounds.max_array = limits.max_array;
  bounds.max_map = limits.max_map;
  bounds.max_str = limits.max_str;
  bounds.max_bin = limits.max_bin;
  bounds.max_ext = 0;  // no message uses ext values
  bounds.max_depth = limits.max_depth;
  try {
    *out = rayx::detail::UnpackBounded(std::string_view(data, size), bounds);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(e.what());
  }
  return Status::OK();
}

}  // namespace detail

namespace {

// Reads an unsigned msgpack integer at `p`; false when it is something else.
bool ReadUint(const unsigned char*& p, const unsigned char* end, uint64_t* out) {
  if (p >= end) return false;
  unsigned char tag = *p++;
  if (tag <= 0x7f) {
    *out = tag;
    return true;
  }
  size_t n = tag == 0xcc ? 1 : tag == 0xcd ? 2 : tag == 0xce ? 4 : tag == 0xcf ? 8 : 0;
  if (n == 0 || static_cast<size_t>(end - p) < n) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | p[i];  // big-endian
  p += n;
  *out = v;
  return true;
}

// The fast path; false (nothing decided) when the bytes are not in the usual form.
bool DecodeEnvelopeFast(std::string_view bytes, Envelope* env) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto* end = p + bytes.size();
  if (p >= end || (*p & 0xf0) != 0x80) return false;  // fixmap
  size_t entries = *p++ & 0x0f;
  bool seen_v = false, seen_t = false, seen_id = false;  // a repeated key goes the generic way
  for (size_t i = 0; i < entries; ++i) {
    if (p >= end || (*p & 0xe0) != 0xa0) return false;  // fixstr key
    size_t len = *p++ & 0x1f;
    if (static_cast<size_t>(end - p) < len) return false;
    std::string_view key(reinterpret_cast<const char*>(p), len);
    p += len;
    uint64_t value = 0;
    if (!ReadUint(p, end, &value)) return false;
    if (key == "v") {
      if (value > UINT32_MAX || seen_v) return false;
      seen_v = true;
      env->v = static_cast<uint32_t>(value);
    } else if (key == "t") {
      if (value > UINT16_MAX || seen_t) return false;
      seen_t = true;
      env->t = static_cast<uint16_t>(value);
    } else if (key == "id") {
      if (seen_id) return false;
      seen_id = true;
      env->id = value;
    } else {
      return false;  // other keys: the generic decoder knows what to make of them
    }
  }
  return p == end;
}

}  // namespace

template <>
Result<Envelope> Decode<Envelope>(std::string_view bytes, const DecodeLimits& limits) {
  Envelope env;
  if (DecodeEnvelopeFast(bytes, &env)) return env;
  msgpack::object_handle handle;
  RAYX_RETURN_IF_ERROR(detail::ParseOne(bytes.data(), bytes.size(), limits, &handle));
  try {
    Envelope out{};
    handle.get().convert(out);
    return out;
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("message does not have the expected fields: ") +
                                   e.what());
  }
}

Status CheckProtocolVersion(const Envelope& env, std::string_view self) {
  if (env.v == kProtocolVersion) return Status::OK();
  return Status::InvalidArgument(
      "protocol version mismatch: the peer speaks rayx protocol " + std::to_string(env.v) +
      ", " + std::string(self) + " speaks protocol " + std::to_string(kProtocolVersion) +
      " (rayx " + kRayxVersion + "): install the same rayx version on every node");
}

}  // namespace rayx::protocol
