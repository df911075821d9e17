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
                     live_leases, recent_exits, gpu_devices)
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
  NodeId node_id;
  uint64_t seq = 0;
  ResourceMap available;
  uint64_t store_bytes = 0;  // bytes in the node's object store
  uint64_t epoch = 0;        // RegisterNodeReply::epoch
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
  MSGPACK_DEFINE_MAP(node_id, seq, available, store_bytes, epoch, want_reply, gpus, counted, tasks,
                     collectives)
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

// ---- Worker leases -----------------------------------------------------------

// One command a process lease runs (see RequestLeaseRequest::processes).
struct ProcessSpec {
  std::vector<std::string> argv;            // argv[0] is looked up on PATH
  std::map<std::string, std::string> env;   // added to the agent's environment
  std::string cwd;                          // "" = the agent's working directory
  std::string log_name;                     // the log file's name on the node, [A-Za-z0-9_.-]
  // A working directory uploaded to the head (rayx job submit): the node
  // fetches it once, caches it by this hash, and runs in it when cwd is "".
  std::string package_hash;
  MSGPACK_DEFINE_MAP(argv, env, cwd, log_name, package_hash)
};

// Asks for a worker process holding `resources` on some node. The reply comes
// when a worker runs (maybe much later, when resources free up), or as an
// ErrorReply when no node could ever fit the request.
// An actor a worker constructs before it says it is ready: how the head
// restarts a detached actor whose owner is gone. `args` are the constructor
// call's arguments, encoded as the owner sent them.
struct ActorInit {
  std::string function;  // the factory's registered name; "": none
  ActorId actor_id;
  std::vector<std::string> args;
  MSGPACK_DEFINE_MAP(function, actor_id, args)
};

struct RequestLeaseRequest {
  static constexpr MessageType kType = MessageType::kRequestLeaseRequest;
  JobId job_id;
  ResourceMap resources;
  std::string executable;   // the program the worker runs (the driver's own binary)
  std::string working_dir;
  bool for_actor = false;
  bool detached = false;    // an actor that outlives its job
  // Placement: a placement group's bundle (bundle_index -1: any of its bundles),
  // or else a strategy.
  PlacementGroupId placement_group_id;
  int32_t bundle_index = -1;
  LeaseStrategy strategy = LeaseStrategy::kDefault;
  std::string affinity_node_id;  // for NODE_AFFINITY: the node's hex id
  bool affinity_soft = false;    // fall back to any node when that one cannot
  LabelMap label_selector;       // the node's labels must equal these
  // A process lease: instead of a rayx worker, the agent runs these commands
  // (all holding the lease's resources, as one torchrun node), reports each
  // exit to the owner (ProcessExitedNotice) and frees the lease when all exit.
  std::vector<ProcessSpec> processes;
  // The job's working directory package: `executable` and `working_dir` under
  // `package_dir` (the caller's copy) map to the node's own copy.
  std::string package_hash;
  std::string package_dir;
  // In a placement group: the worker sees every device the group holds on its
  // node (CUDA_VISIBLE_DEVICES), and RAYX_LOCAL_RANK says which is its own, so
  // CUDA peer-to-peer and NVLink work between the group's workers.
  bool group_visible_devices = false;
  // The worker's command line after `executable` (e.g. a Python worker's
  // "-m rayx._worker") and variables added to its environment (never the
  // RAYX_* ones the agent sets, nor CUDA_VISIBLE_DEVICES).
  std::vector<std::string> worker_args;
  std::map<std::string, std::string> worker_env;
  ActorInit init;  // set by the head only (a detached actor's restart)
  ActorId actor_id;  // the actor a for_actor lease is for (its name's reservation)
  MSGPACK_DEFINE_MAP(job_id, resources, executable, working_dir, for_actor, detached,
                     package_hash, package_dir, group_visible_devices,
                     placement_group_id, bundle_index, strategy, affinity_node_id, affinity_soft,
                     label_selector, processes, worker_args, worker_env, init, actor_id)
};

struct RequestLeaseReply {
  static constexpr MessageType kType = MessageType::kRequestLeaseReply;
  LeaseId lease_id;
  std::string worker_address;  // "tcp://ip:port" of the worker's socket
  std::string node_id;
  std::string node_address;
  int32_t worker_pid = 0;
  std::vector<int> gpu_ids;         // the node's GPU devices the lease holds
  std::string object_address;       // the node agent's object server (logs, ports)
  std::vector<int32_t> process_pids;  // a process lease's processes, in order
  MSGPACK_DEFINE_MAP(lease_id, worker_address, node_id, node_address, worker_pid, gpu_ids,
                     object_address, process_pids)
};

// Gives a lease back: the head frees its resources and the worker is stopped.
struct ReturnLeaseRequest {
  static constexpr MessageType kType = MessageType::kReturnLeaseRequest;
  LeaseId lease_id;
  MSGPACK_DEFINE_MAP(lease_id)
};

struct ReturnLeaseReply {
  static constexpr MessageType kType = MessageType::kReturnLeaseReply;
  bool ok = true;
  MSGPACK_DEFINE_MAP(ok)
};

// A worker's runtime -> head: the calls running in lease `lease_id`'s worker
// started waiting in get/wait for objects that are not ready (`blocked`), or
// none waits any more. While blocked, the lease lends its CPU back to its node
// (or its placement group bundle) for other work; GPUs and every other
// resource stay held. A state, not an event: sending it twice changes nothing,
// so the runtime sends its current state again whenever the head may have
// missed it (a dropped connection, a restarted head).
struct LeaseBlockedNotice {
  static constexpr MessageType kType = MessageType::kLeaseBlockedNotice;
  LeaseId lease_id;
  bool blocked = false;
  MSGPACK_DEFINE_MAP(lease_id, blocked)
};

// head -> agent: start a worker for a lease.
struct StartWorkerRequest {
  static constexpr MessageType kType = MessageType::kStartWorkerRequest;
  LeaseId lease_id;
  JobId job_id;
  std::string executable;
  std::string working_dir;
  ResourceMap resources;
  std::string head_address;  // "host:port", for workers that submit work
  std::vector<int> gpu_ids;  // the node's GPU devices this worker holds
  std::vector<ProcessSpec> processes;  // a process lease (see RequestLeaseRequest)
  std::string package_hash;            // see RequestLeaseRequest
  std::string package_dir;
  // Set with group_visible_devices: what CUDA_VISIBLE_DEVICES lists (the group's
  // devices on the node) and this worker's index among them.
  std::vector<int> visible_gpu_ids;
  int32_t local_rank = -1;
  std::vector<std::string> worker_args;  // see RequestLeaseRequest
  std::map<std::string, std::string> worker_env;
  // The node incarnation the head addressed: an agent that is another
  // incarnation now (it was declared dead and joined again) refuses it.
  uint64_t epoch = 0;
  ActorInit init;  // the actor the worker constructs before it is ready, if any
  // A detached actor whose owner sends its constructor call: the agent tells
  // the head when that constructor begins and how it ends
  // (ActorConstructionNotice), so that the head can take over an actor whose
  // creator is gone without running its constructor again.
  bool report_construction = false;
  bool for_actor = false;  // an actor's worker (the memory monitor stops tasks first)
  MSGPACK_DEFINE_MAP(lease_id, job_id, executable, working_dir, resources, head_address, gpu_ids,
                     processes, package_hash, package_dir, visible_gpu_ids, local_rank,
                     worker_args, worker_env, epoch, init, report_construction, for_actor)
};

struct StartWorkerReply {
  static constexpr MessageType kType = MessageType::kStartWorkerReply;
  LeaseId lease_id;
  std::string worker_address;
  int32_t worker_pid = 0;
  std::vector<int32_t> process_pids;
  uint64_t epoch = 0;  // the incarnation that started it (RegisterNodeReply::epoch)
  MSGPACK_DEFINE_MAP(lease_id, worker_address, worker_pid, process_pids, epoch)
};

// head -> agent: stop these leases' workers (their process groups).
struct KillWorkersRequest {
  static constexpr MessageType kType = MessageType::kKillWorkersRequest;
  std::vector<LeaseId> lease_ids;
  MSGPACK_DEFINE_MAP(lease_ids)
};

// ---- Named actors (ActorInfo is defined above) -------------------------------

// Names an actor. With `actor.starting`, reserves the name when the actor is
// created, before it has a worker (AlreadyExists when another actor holds it);
// without, registers the actor's running worker under it (its constructor has
// run), taking over its own reservation.
struct RegisterActorRequest {
  static constexpr MessageType kType = MessageType::kRegisterActorRequest;
  ActorInfo actor;
  MSGPACK_DEFINE_MAP(actor)
};

struct RegisterActorReply {
  static constexpr MessageType kType = MessageType::kRegisterActorReply;
  bool ok = true;
  MSGPACK_DEFINE_MAP(ok)
};

// head -> a lease's owner: the leases' node was declared dead, so their
// workers are lost to the owner even if their connections still stand (a
// stopped or cut-off node); sent once per owner per node death. Also sent for
// one lease whose worker exited by itself (its agent saw it).
struct LeasesLostNotice {
  static constexpr MessageType kType = MessageType::kLeasesLostNotice;
  std::vector<LeaseId> lease_ids;
  std::string node_id;
  std::string reason;  // e.g. "node 127.0.0.2 (1a2b3c4d) was declared dead: ..."
  // The error kind its calls fail with when not the default (WorkerCrashed,
  // ActorDied): "OutOfMemory" when the node's memory monitor killed it.
  std::string cause;
  MSGPACK_DEFINE_MAP(lease_ids, node_id, reason, cause)
};

// head -> the agent on a driver's machine (the node whose address is the
// driver's node_ip): report when process `pid` exits, so the driver's job ends
// at once instead of after the heartbeat silence timeout.
struct WatchDriverRequest {
  static constexpr MessageType kType = MessageType::kWatchDriverRequest;
  JobId job_id;
  int32_t pid = 0;
  MSGPACK_DEFINE_MAP(job_id, pid)
};

// agent -> head: the watched driver process exited (or was killed).
struct DriverExitedNotice {
  static constexpr MessageType kType = MessageType::kDriverExitedNotice;
  JobId job_id;
  int32_t pid = 0;
  MSGPACK_DEFINE_MAP(job_id, pid)
};

// agent -> head: the worker of lease `lease_id` (one started with
// StartWorkerRequest::report_construction) began running its actor's
// constructor, or it ended (`stage`). `error` says why a constructor failed.
// kUnfollowed: the worker lives on but its reports stopped (its program
// closed or wrote on the pipe): the head no longer waits for them.
struct ActorConstructionNotice {
  static constexpr MessageType kType = MessageType::kActorConstructionNotice;
  enum Stage : uint8_t { kBegan = 0, kSucceeded = 1, kFailed = 2, kUnfollowed = 3 };
  LeaseId lease_id;
  uint8_t stage = kBegan;
  std::string error;  // kFailed: the constructor's error, at most kMaxErrorBytes
  uint64_t epoch = 0;  // the node incarnation that runs it (RegisterNodeReply::epoch)
  static constexpr size_t kMaxErrorBytes = 2048;  // a line of the worker's start-up pipe
  MSGPACK_DEFINE_MAP(lease_id, stage, error, epoch)
};

// The actor named `name`. `wait_ms` 0: answered at once (NotFound when no
// actor has the name). Otherwise the head parks it until the name names a
// running worker other than `stale_worker` (a handle that lost that worker
// waits for its successor) or the name's entry changes, and answers with what
// it then has, at the latest after `wait_ms` (at most kMaxActorWaitMs).
struct GetActorRequest {
  static constexpr MessageType kType = MessageType::kGetActorRequest;
  static constexpr int64_t kMaxActorWaitMs = 60000;
  std::string name;
  int64_t wait_ms = 0;
  std::string stale_worker;
  MSGPACK_DEFINE_MAP(name, wait_ms, stale_worker)
};

struct GetActorReply {
  static constexpr MessageType kType = MessageType::kGetActorReply;
  ActorInfo actor;
  MSGPACK_DEFINE_MAP(actor)
};

// owner -> head: the actor's creation failed (or it was killed) before its
// constructor finished: its reserved name is free again. Only a reservation of
// that actor is dropped; a registered actor's name goes with its lease.
struct DropActorNameRequest {
  static constexpr MessageType kType = MessageType::kDropActorNameRequest;
  std::string name;
  ActorId actor_id;
  MSGPACK_DEFINE_MAP(name, actor_id)
};

struct DropActorNameReply {
  static constexpr MessageType kType = MessageType::kDropActorNameReply;
  bool dropped = false;
  MSGPACK_DEFINE_MAP(dropped)
};

// ---- Direct data path ----------------------------------------------------------

// Where a large object lives: a file in one node's shared-memory store, served
// to other nodes by that node's agent.
struct ObjectLocation {
  std::string node_address;    // the node's IP
  std::string object_address;  // its agent's object server
  std::string path;            // the file in that node's store
  uint64_t size = 0;
  // Set only on an argument sent to another job's actor: the owner job's
  // permission to read this one object (transport::Credential::ReadGrant).
  std::string grant;
  MSGPACK_DEFINE_MAP(node_address, object_address, path, size, grant)
};

// Reads [offset, offset+length) of a stored object; the bytes follow in frame 2.
struct PullObjectRequest {
  static constexpr MessageType kType = MessageType::kPullObjectRequest;
  std::string path;
  uint64_t offset = 0;
  uint64_t length = 0;
  std::string grant;  // to read another job's object (ObjectLocation::grant)
  MSGPACK_DEFINE_MAP(path, offset, length, grant)
};

struct PullObjectReply {
  static constexpr MessageType kType = MessageType::kPullObjectReply;
  uint64_t size = 0;  // the whole object's size
  MSGPACK_DEFINE_MAP(size)
};

struct DeleteObjectsRequest {
  static constexpr MessageType kType = MessageType::kDeleteObjectsRequest;
  std::vector<std::string> paths;
  MSGPACK_DEFINE_MAP(paths)
};

// Holding stored objects that ObjectRefs inside values point at (the agent's
// ObjectPins). Without `container`: one more holder of each of `paths` (the
// reply says when every hold took; an object that is gone fails it). With
// `container`: that object, just written by the sender, holds `paths`, whose
// holds the sender took and hands over (no reply: sent like deletes). A
// holder lets go with a DeleteObjectsRequest of the path.
struct HoldObjectsRequest {
  static constexpr MessageType kType = MessageType::kHoldObjectsRequest;
  std::vector<std::string> paths;
  // The sender wrote `paths` itself and is their only holder: the first hold
  // of each counts only it (otherwise the file's writer holds it too).
  bool fresh = false;
  std::string container;
  MSGPACK_DEFINE_MAP(paths, fresh, container)
};

struct HoldObjectsReply {
  static constexpr MessageType kType = MessageType::kHoldObjectsReply;
  uint32_t held = 0;
  MSGPACK_DEFINE_MAP(held)
};

// head -> every agent: the job ended; its stored objects go.
struct JobFinishedNotice {
  static constexpr MessageType kType = MessageType::kJobFinishedNotice;
  JobId job_id;
  MSGPACK_DEFINE_MAP(job_id)
};

// head -> every agent: admit the job's credential at the object server (a job
// started), or no longer (it ended and none of its leases is left).
struct JobCredentialNotice {
  static constexpr MessageType kType = MessageType::kJobCredentialNotice;
  JobId job_id;
  bool admitted = false;
  MSGPACK_DEFINE_MAP(job_id, admitted)
};

// A line a worker writes to its output before the output of a call of
// another function or actor: the marker, then the name its next lines go
// under (the agent takes it out; Ray's ":task_name:" lines).
inline constexpr char kOutputNameMarker[] = "\x01rayx-name:";

// Lines one worker wrote to its stdout or stderr, in order.
struct OutputLines {
  std::string source;  // Ray's prefix without its parentheses: "Counter pid=4242, ip=10.0.0.2"
  std::vector<std::string> lines;  // without their newlines
  MSGPACK_DEFINE_MAP(source, lines)
};

// A node agent -> the head -> every driver of the job that asked for its
// workers' output (RegisterDriverRequest::log_to_driver). Sent every
// NodeAgent output period while there is output; no reply.
struct WorkerOutputNotice {
  static constexpr MessageType kType = MessageType::kWorkerOutputNotice;
  JobId job_id;
  std::vector<OutputLines> batches;
  // The lines of the job's own processes (a process lease's: a submitted
  // job's entrypoint, `rayx launch` commands), not its workers': the head
  // keeps them for the dashboard and never passes them to drivers (the
  // entrypoint is the driver; its lines would come back to it).
  bool processes = false;
  MSGPACK_DEFINE_MAP(job_id, batches, processes)
};

// A driver about to end its job -> the head -> every node agent: read the
// workers' output now. Each agent sends what it read (WorkerOutputNotice)
// and then answers the head; the head answers the driver once every agent
// did (or a second passed), so the driver has every line its workers wrote
// before the request when the reply comes (one connection, in order).
struct FlushOutputRequest {
  static constexpr MessageType kType = MessageType::kFlushOutputRequest;
  JobId job_id;
  MSGPACK_DEFINE_MAP(job_id)
};

struct FlushOutputReply {
  static constexpr MessageType kType = MessageType::kFlushOutputReply;
  uint32_t unanswered = 0;  // to the driver: agents that did not answer in time
  MSGPACK_DEFINE_MAP(unanswered)
};

}  // namespace rayx::protocol
