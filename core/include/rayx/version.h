// The rayx release and wire protocol versions every process announces.
#pragma once

#include <cstdint>

namespace rayx {

// The release, as printed by `rayx --version` and compared at registration.
inline constexpr const char* kRayxVersion = "0.1.0";

// Bumped on any incompatible change to the wire messages. A peer announcing a
// different value is refused with a message naming both sides' versions.
// 2: batched task calls and results (PushTasksRequest/Reply) replace PushTask.
// 3: agents report workers' own exits and construct a detached actor the head
//    restarts (StartWorkerRequest::init); collective group watches (120-124).
// 4: scheduling strategies and placement group states travel as numbers
//    (protocol/enums.h) instead of names.
// 5: every connection proves a credential (ZAP: PLAIN or CURVE); the head is
//    CURVE-encrypted; workers hold a job credential, not the token.
// 6: blocked workers lend their CPU (LeaseBlockedNotice); generator calls
//    send their items before their result (PushTasksReply's kItem).
// 7: ObjectRefs inside values: agents hold stored objects for them
//    (HoldObjectsRequest; a delete of a held object lets go of one hold).
// 8: a stored argument sent to another job's actor carries a read grant
//    (ObjectLocation::grant, PullObjectRequest::grant): a job pulls another
//    job's object only with one. Workers' output goes to their job's drivers
//    (WorkerOutputNotice, RegisterDriverRequest::log_to_driver), read to the
//    end before a driver ends its job (FlushOutputRequest).
// 9: `rayx logs`: agents list their log directory (ListLogsRequest) and read
//    a file of it (ReadLogRequest::file). Drivers' heartbeats carry what they
//    submitted (DriverHeartbeatRequest::tasks) for the head's metrics.
// 10: a submitted job's state and a listed lease's kind and state travel as
//    enums (JobState, LeaseKind, LeaseState), like placement groups' (a
//    blocked lease's state is BLOCKED, no longer "RUNNING (blocked in get)").
// 11: Train's node-kept checkpoints outlive the cluster: a node says its
//    checkpoint directory (RegisterNodeRequest::checkpoint_dir, NodeInfo), a
//    committing rank leaves the record with every node holding a shard
//    (KeepCheckpointRecordRequest), and an agent that adopted a directory
//    hands its records to the head (AdoptCheckpointsRequest). Task error
//    kinds are an enum (TaskErrorKind): a byte before the type in
//    PushTasksReply's error results, and LeasesLostNotice/ProcessExitedNotice's
//    `cause`.
inline constexpr uint32_t kProtocolVersion = 11;

// The head's default port, as in `rayx start --head`.
inline constexpr uint16_t kDefaultHeadPort = 6380;

}  // namespace rayx
