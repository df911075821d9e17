// The control-plane wire messages between the head, node agents and clients.
//
// Design: a message is a ZeroMQ multipart message of at least two frames,
// [Envelope][body], each one msgpack map; later frames carry raw payload bytes
// that are never copied into msgpack. The Envelope and ErrorReply layouts are
// frozen across protocol versions, so a peer of any version can always learn
// why it was refused. Every struct has one field list that drives encoding,
// decoding and debug printing (MSGPACK_DEFINE_MAP: keys are the field names, so
// fields can be added compatibly; unknown keys are ignored on decode). The two
// hot caller <-> worker messages are the exception: protocol/push_tasks.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <map>
#include <vector>

#include <msgpack.hpp>

#include "protocol/enums.h"
#include "rayx/cluster_status.h"
#include "rayx/ids.h"
#include "rayx/resources.h"
#include "rayx/status.h"
#include "rayx/version.h"

namespace rayx::protocol {

enum class MessageType : uint16_t {
  kErrorReply = 1,
  kRegisterNodeRequest = 2,
  kRegisterNodeReply = 3,
  kHeartbeatRequest = 4,
  kHeartbeatReply = 5,
  kUnregisterNodeRequest = 6,
  kUnregisterNodeReply = 7,
  kGetClusterStatusRequest = 8,
  kGetClusterStatusReply = 9,
  kStopClusterRequest = 10,  // CLI -> head: every node agent leaves and exits
  kStopClusterReply = 11,
  // Drivers and jobs (driver <-> head).
  kRegisterDriverRequest = 20,
  kRegisterDriverReply = 21,
  kDriverHeartbeatRequest = 22,
  kDriverHeartbeatReply = 23,
  kFinishJobRequest = 24,
  kFinishJobReply = 25,
  // Worker leases (driver <-> head <-> agent).
  kRequestLeaseRequest = 30,
  kRequestLeaseReply = 31,
  kReturnLeaseRequest = 32,
  kReturnLeaseReply = 33,
  kStartWorkerRequest = 34,   // head -> agent
  kStartWorkerReply = 35,     // agent -> head
  kKillWorkersRequest = 36,   // head -> agent, no reply
  kLeaseBlockedNotice = 37,   // a worker's runtime -> head, no reply
  // Named actors (driver <-> head).
  kRegisterActorRequest = 40,
  kRegisterActorReply = 41,
  kGetActorRequest = 42,
  kGetActorReply = 43,
  kDropActorNameRequest = 44,
  kDropActorNameReply = 45,
  // Direct data path (caller <-> worker): batches of calls and results, in the
  // flat binary layout of protocol/push_tasks.h (50 and 51, one msgpack call
  // each, were protocol 1).
  kPushTasksRequest = 52,
  kPushTasksReply = 53,
  // Train's checkpoint shards (a rank -> another node's object server).
  kReplicateShardRequest = 54,
  kReplicateShardReply = 55,
  kDeleteShardsRequest = 56,  // no reply
  kKeepCheckpointRecordRequest = 57,  // no reply
  // A node's store is full (a writer -> its agent's object server).
  kMakeRoomRequest = 58,
  kMakeRoomReply = 59,
  // Objects (anyone <-> a node agent's object server).
  kPullObjectRequest = 60,
  kPullObjectReply = 61,
  kDeleteObjectsRequest = 62,  // no reply
  kJobFinishedNotice = 63,     // head -> agents, no reply
  kJobCredentialNotice = 64,   // head -> agents, no reply
  kHoldObjectsRequest = 65,    // anyone -> agent's object server (refs inside values)
  kHoldObjectsReply = 66,
  kWorkerOutputNotice = 67,    // agent -> head -> the job's drivers, no reply
  kFlushOutputRequest = 68,    // driver -> head -> every agent
  kFlushOutputReply = 69,
  // Placement groups and listings (driver/CLI <-> head): placement_messages.h.
  kCreatePlacementGroupRequest = 70,
  kCreatePlacementGroupReply = 71,
  kWaitPlacementGroupRequest = 72,
  kWaitPlacementGroupReply = 73,
  kRemovePlacementGroupRequest = 74,
  kRemovePlacementGroupReply = 75,
  kListStateRequest = 76,
  kListStateReply = 77,
  kListLogsRequest = 78,       // the CLI -> an agent's object server (rayx logs)
  kListLogsReply = 79,
  // Supervised processes (rayx launch, rayx job): process_messages.h.
  kProcessExitedNotice = 80,   // agent -> head -> lease owner, no reply
  kReadLogRequest = 81,        // anyone -> agent's object server
  kReadLogReply = 82,
  kReservePortRequest = 83,    // anyone -> agent's object server
  kReservePortReply = 84,
  kLeasesLostNotice = 85,      // head -> lease owner, no reply (messages.h)
  kWatchDriverRequest = 86,    // head -> the agent on a driver's machine, no reply
  kDriverExitedNotice = 87,    // that agent -> head, no reply
  kActorConstructionNotice = 88,  // agent -> head: a detached actor's constructor, no reply
  // Submitted jobs and their working directories (CLI/agent <-> head): job_messages.h.
  kSubmitJobRequest = 90,
  kSubmitJobReply = 91,
  kGetJobRequest = 92,
  kGetJobReply = 93,
  kListJobsRequest = 94,
  kListJobsReply = 95,
  kStopJobRequest = 96,
  kStopJobReply = 97,
  kHasPackageRequest = 98,
  kHasPackageReply = 99,
  kPutPackageRequest = 100,
  kPutPackageReply = 101,
  kGetPackageRequest = 102,
  kGetPackageReply = 103,
  kKeepPackageRequest = 104,
  kKeepPackageReply = 105,
  // Key-value store in the head (driver/worker <-> head): kv_messages.h.
  kKvPutRequest = 110,
  kKvPutReply = 111,
  kKvGetRequest = 112,
  kKvGetReply = 113,
  kKvWaitRequest = 114,
  kKvWaitReply = 115,
  kKvDeleteRequest = 116,
  kKvDeleteReply = 117,
  kKvListRequest = 118,
  kKvListReply = 119,
  // Collective groups' members (worker <-> head): group_messages.h.
  kWatchGroupRequest = 120,
  kWatchGroupReply = 121,
  kUnwatchGroupRequest = 122,
  kUnwatchGroupReply = 123,
  kGroupMemberDiedNotice = 124,  // head -> the other members, no reply
  // Train's node-kept checkpoints (the CLI <-> head): kv_messages.h.
  kCheckpointRecordsRequest = 126,
  kCheckpointRecordsReply = 127,
  // An agent that adopted a checkpoint directory -> head: its records.
  kAdoptCheckpointsRequest = 128,
  kAdoptCheckpointsReply = 129,
};

// The name of a message type for logs; "unknown(N)" for values we do not know.
std::string MessageTypeName(uint16_t type);

// First frame of every message. FROZEN: never change these three fields.
struct Envelope {
  uint32_t v = kProtocolVersion;  // sender's protocol version
  uint16_t t = 0;                 // MessageType
  uint64_t id = 0;                // request id, echoed in the reply
  MSGPACK_DEFINE_MAP(v, t, id)
};

// The reply to any request that failed. FROZEN, like Envelope.
struct ErrorReply {
  uint8_t code = 0;      // StatusCode
  std::string message;   // what happened and what to do
  std::string where;     // which process said so, e.g. "head 10.0.0.1:6380"
  MSGPACK_DEFINE_MAP(code, message, where)

  Status ToStatus() const;
};

// hello from a node agent: who it is, what it offers, and the cluster token.
// A lease whose worker or processes still run on a node, as its agent reports
// it when it rejoins a restarted head.
struct LiveLease {
  LeaseId lease_id;
  JobId job_id;
  ResourceMap resources;
  std::vector<int> gpu_ids;
  int32_t worker_pid = 0;
  bool process = false;  // a process lease
  MSGPACK_DEFINE_MAP(lease_id, job_id, resources, gpu_ids, worker_pid, process)
};

// A process of a process lease that exited (ProcessExitedNotice's fields).
struct ExitedProcess {
  LeaseId lease_id;
  uint32_t index = 0;
  int32_t pid = 0;
  int32_t exit_code = 0;
  int32_t signal = 0;
  std::string log_tail;
  bool all_exited = false;
  MSGPACK_DEFINE_MAP(lease_id, index, pid, exit_code, signal, log_tail, all_exited)
};

struct RegisterNodeRequest {
  static constexpr MessageType kType = MessageType::kRegisterNodeRequest;
  std::string token;
  std::string rayx_version;
  std::string address;   // the IP other nodes reach this node at
  std::string hostname;
  int32_t agent_pid = 0;
  bool is_head_node = false;
  ResourceMap resources;
  LabelMap labels;
  std::string store_dir;        // the node's shared-memory object store
  std::string object_address;   // "tcp://ip:port" of the agent's object server
  std::string checkpoint_dir;   // where it keeps Train's checkpoint shards (empty: none)
  // The node this agent was before the head declared it dead (nil on its first
  // registration). The agent has killed everything it started as that node; the
  // head ends that node if it still counts it alive.
  NodeId previous_node_id;
  // Rejoining a restarted head (HeartbeatReply::rejoin): the agent kept its
  // workers and asks for `previous_node_id` and `previous_epoch` back. The head
  // grants that only for a node it knew before it restarted; otherwise it
  // answers with an error and the agent fences itself as for a death.
  bool rejoin = false;
  uint64_t previous_epoch = 0;
  // With `rejoin`: what the agent still runs, so the head accounts for it and
  // never grants a device a live worker holds, and the process-lease exits it
  // reported recently (the head may have missed them while it was down).
  std::vector<LiveLease> live_leases;
  std::vector<ExitedProcess> recent_exits;
  // The device of each GPU it offers (NodeInfo::gpu_devices); empty: GPU i is
  // device i.
  std::vector<int> gpu_devices;
  MSGPACK_DEFINE_MAP(token, rayx_version, address, hostname, agent_pid, is_head_node, resources,
                     labels, store_dir, object_address, previous_node_id, rejoin, previous_epoch,
                     live_leases, recent_exits, gpu_devices, checkpoint_dir)
};

struct RegisterNodeReply {
  static constexpr MessageType kType = MessageType::kRegisterNodeReply;
  NodeId node_id;
  std::string cluster_id;
  int64_t heartbeat_period_ms = 0;  // the agent heartbeats this often
  int64_t node_timeout_ms = 0;      // the head declares it dead after this silence
  // This incarnation of the node: unique and increasing per head. Every message
  // the agent sends about its processes carries it; the head refuses other epochs.
  uint64_t epoch = 0;
  // How the cluster's data sockets (workers, object servers) are protected: a
  // transport::WireSecurity (0 authenticated, 1 encrypted).
  uint8_t wire_security = 0;
  // The jobs whose credentials the object server admits (JobCredentialNotice
  // tells of later changes).
  std::vector<JobId> admitted_jobs;
  MSGPACK_DEFINE_MAP(node_id, cluster_id, heartbeat_period_ms, node_timeout_ms, epoch,
                     wire_security, admitted_jobs)
};

// What a process (a driver) or a node's workers submitted since it started
// (counts, not increments): tasks and actor calls, those that ended with a
// value, with an error, and retries.
struct TaskCounters {
  uint64_t submitted = 0;
  uint64_t finished = 0;
  uint64_t failed = 0;
  uint64_t retried = 0;
  MSGPACK_DEFINE_MAP(submitted, finished, failed, retried)
};

// The upper bounds (seconds) of the collective-operation latency histogram's
// buckets; a last, unbounded bucket follows.
inline constexpr double kCollectiveLatencyBounds[] = {0.0001, 0.001, 0.01, 0.1, 1, 10, 60};
inline constexpr size_t kCollectiveLatencyBuckets = std::size(kCollectiveLatencyBounds) + 1;
// The operations counted, by the names the metrics carry (index = op).
inline constexpr const char* kCollectiveOpNames[] = {
    "allreduce", "allgather", "reducescatter", "broadcast", "reduce", "send", "recv", "barrier"};

// One kind of collective operation a process (or a node's workers) ran since
// it started (counts, not increments).
struct CollectiveCounters {
  std::string op;         // one of kCollectiveOpNames; others are ignored
  uint64_t count = 0;     // operations that ended, failed ones included
  uint64_t failed = 0;    // those that threw (a timeout, an abort, a dead peer)
  uint64_t micros = 0;    // their time in all, microseconds
  // Operations by duration: buckets[i] counts those within
  // kCollectiveLatencyBounds[i] (and above the bound before); the last, those
  // above every bound. Not cumulative. Ignored unless of
  // kCollectiveLatencyBuckets entries.
  std::vector<uint64_t> buckets;
  MSGPACK_DEFINE_MAP(op, count, failed, micros, buckets)
};

struct HeartbeatRequest {
  static constexpr MessageType kType = MessageType::kHeartbeatRequest;
  // The head keeps the one account of what a node's leases use (NodeTable);
  // a heartbeat says nothing of it. (Its `available` went: a field with a
  // map's key, ignored by a head that no longer knows it.)
  NodeId node_id;
  uint64_t seq = 0;
  uint64_t store_bytes = 0;  // bytes in the node's object store
  uint64_t epoch = 0;        // RegisterNodeReply::epoch
  // The store's capacity (0: unbounded), its objects, and the objects spilled
  // to the node's disk (bytes and count).
  uint64_t store_capacity = 0;
  uint64_t store_objects = 0;
  uint64_t spilled_bytes = 0;
  uint64_t spilled_objects = 0;
  // False: the head answers only when it has something to say (the node is
  // unknown, must rejoin, or the cluster stops). An agent asks for a reply
  // about once a second, to know the head lives: at 1,000 nodes a reply to
  // every heartbeat was half the head's messages.
  bool want_reply = true;
  // The node's GPUs' use (NVML), with the heartbeats that want a reply (about
  // one a second); empty in the others and where there is no NVML. The head
  // keeps at most 256.
  std::vector<GpuUsage> gpus;
  // With the heartbeats that want a reply: `counted` is true and `tasks` and
  // `collectives` hold what this node's workers did since the agent started
  // (counts, not increments: tasks they submitted, e.g. nested ones, and the
  // collective operations they ran; read from their counter pages,
  // WorkCounters). False: the fields are empty and mean nothing.
  bool counted = false;
  TaskCounters tasks;
  std::vector<CollectiveCounters> collectives;
  MSGPACK_DEFINE_MAP(node_id, seq, store_bytes, epoch, want_reply, gpus, counted, tasks,
                     collectives, store_capacity, store_objects, spilled_bytes, spilled_objects)
};

struct HeartbeatReply {
  static constexpr MessageType kType = MessageType::kHeartbeatReply;
  // False when the head no longer counts the node alive (it was declared dead):
  // the agent must register again as a new node.
  bool known = true;
  // With known = false: the head restarted and knew this node (id and epoch)
  // before. The agent rejoins (RegisterNodeRequest::rejoin) keeping its
  // workers instead of fencing itself. An agent that predates this field
  // fences, which is safe.
  bool rejoin = false;
  // Not empty once the cluster is being stopped (StopClusterRequest): why. The
  // agent stops its workers, leaves and exits with status 0.
  std::string stop;
  MSGPACK_DEFINE_MAP(known, rejoin, stop)
};

// An agent leaving on purpose (rayx stop): marked dead at once, not after the
// heartbeat timeout.
struct UnregisterNodeRequest {
  static constexpr MessageType kType = MessageType::kUnregisterNodeRequest;
  NodeId node_id;
  std::string reason;
  MSGPACK_DEFINE_MAP(node_id, reason)
};

struct UnregisterNodeReply {
  static constexpr MessageType kType = MessageType::kUnregisterNodeReply;
  bool ok = true;
  MSGPACK_DEFINE_MAP(ok)
};

struct GetClusterStatusRequest {
  static constexpr MessageType kType = MessageType::kGetClusterStatusRequest;
  std::string token;
  MSGPACK_DEFINE_MAP(token)
};

struct GetClusterStatusReply {
  static constexpr MessageType kType = MessageType::kGetClusterStatusReply;
  ClusterStatus status;
  MSGPACK_DEFINE_MAP(status)
};

// Stops the whole cluster (`rayx start --from-env` once its command ended):
// every node agent hears it in its next heartbeat reply, stops its workers,
// leaves and exits; the head refuses new nodes from then on. The head itself
// keeps running until it is stopped like any process.
struct StopClusterRequest {
  static constexpr MessageType kType = MessageType::kStopClusterRequest;
  std::string token;
  std::string reason;  // shown in the agents' logs and in `rayx status`
  MSGPACK_DEFINE_MAP(token, reason)
};

struct StopClusterReply {
  static constexpr MessageType kType = MessageType::kStopClusterReply;
  uint32_t alive_nodes = 0;  // nodes told to leave
  MSGPACK_DEFINE_MAP(alive_nodes)
};

// ---- Drivers and jobs ----------------------------------------------------

// A driver (or a worker that submits work) joining the cluster. A driver with
// an empty job_id starts a new job; a worker passes its job's id.
struct RegisterDriverRequest {
  static constexpr MessageType kType = MessageType::kRegisterDriverRequest;
  std::string token;
  std::string rayx_version;
  JobId job_id;
  std::string node_ip;
  int32_t pid = 0;
  // Set by a worker's runtime (a task that submits work): the lease its worker
  // runs in. When that lease ends, the leases this runtime holds end with it.
  LeaseId host_lease_id;
  // Whether the job's workers' output comes to this process
  // (WorkerOutputNotice; Ray's log_to_driver).
  bool log_to_driver = true;
  MSGPACK_DEFINE_MAP(token, rayx_version, job_id, node_ip, pid, host_lease_id, log_to_driver)
};

// The head's refusal (Unauthenticated) of a call from a connection that has
// not registered: what a restarted head answers everyone connected to its
// previous life. The driver then registers again (same job) and resends.
inline constexpr char kRegisterFirstMessage[] =
    "register first (RegisterDriverRequest with the cluster token)";
inline bool IsRegisterFirst(const Status& status) {
  return status.code() == StatusCode::kUnauthenticated &&
         status.message().rfind(kRegisterFirstMessage, 0) == 0;
}

struct RegisterDriverReply {
  static constexpr MessageType kType = MessageType::kRegisterDriverReply;
  JobId job_id;
  std::string cluster_id;
  int64_t heartbeat_period_ms = 0;
  uint8_t wire_security = 0;  // as RegisterNodeReply's
  MSGPACK_DEFINE_MAP(job_id, cluster_id, heartbeat_period_ms, wire_security)
};

struct DriverHeartbeatRequest {
  static constexpr MessageType kType = MessageType::kDriverHeartbeatRequest;
  JobId job_id;
  TaskCounters tasks;  // for the head's metrics (rayx_tasks_total)
  std::vector<CollectiveCounters> collectives;  // the ops this driver ran, by op
  MSGPACK_DEFINE_MAP(job_id, tasks, collectives)
};

struct DriverHeartbeatReply {
  static constexpr MessageType kType = MessageType::kDriverHeartbeatReply;
  bool known = true;  // false once the head no longer runs the job (it ended)
  MSGPACK_DEFINE_MAP(known)
};

// What the head knows of a named actor (defined here: FinishJobRequest hands
// actors over).
struct ActorInfo {
  ActorId actor_id;
  std::string name;
  JobId job_id;
  std::string class_name;  // the factory's registered name
  std::string worker_address;
  LeaseId lease_id;
  bool detached = false;
  // Restarts left when the handle was made (-1: no limit): a handle that loses
  // a named restartable actor's worker looks its new one up by name.
  int32_t max_restarts = 0;
  // A detached restartable actor whose constructor's arguments are all inline:
  // its lease request with `init` set (an encoded RequestLeaseRequest), so the
  // head can restart it once its owner is gone. Empty: only its owner can.
  std::string restart_request;
  int32_t restarts_done = 0;  // restarts the head made
  // The name is reserved for this actor, whose constructor has not finished
  // yet: no worker to call. Its owner registers it again once it has.
  bool starting = false;
  // Opaque bytes its creator attached (the Python package: the class's name
  // and its methods' return counts), given to whoever looks the name up.
  std::string metadata;
  // The key to call this actor from another job (transport::ActorKey): set by
  // the head in GetActorReply, and carried by handles passed on, so a job's
  // tasks reach a shared actor of another job, its methods only.
  std::string call_secret;
  std::string worker_key;  // the CURVE public key its worker presents
  MSGPACK_DEFINE_MAP(actor_id, name, job_id, class_name, worker_address, lease_id, detached,
                     max_restarts, restart_request, restarts_done, starting, metadata,
                     call_secret, worker_key)
};

// The job's driver is done: the head kills every worker of the job except
// detached actors and frees their resources.
struct FinishJobRequest {
  static constexpr MessageType kType = MessageType::kFinishJobRequest;
  JobId job_id;
  // The driver's detached named actors whose constructor had not finished:
  // the head takes them over (ActorInfo::restart_request set: it creates them
  // again itself; empty: it stops them), since nobody is left to name them.
  std::vector<ActorInfo> hand_over;
  MSGPACK_DEFINE_MAP(job_id, hand_over)
};

struct FinishJobReply {
  static constexpr MessageType kType = MessageType::kFinishJobReply;
  uint32_t workers_killed = 0;
  MSGPACK_DEFINE_MAP(workers_killed)
};

}  // namespace rayx::protocol

// Worker leases and named actors, and the data path's messages (objects
// between nodes, jobs' credentials and workers' output): headers of their own,
// seen by every includer of this one.
#include "protocol/lease_messages.h"
#include "protocol/data_messages.h"
