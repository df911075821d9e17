// Wire messages for worker leases (requested by drivers and workers, started by
// agents, returned, blocked, lost) and named actors (registered, looked up,
// dropped). Included by protocol/messages.h.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "protocol/messages.h"

namespace rayx::protocol {

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

// ---- Named actors (ActorInfo is in messages.h) -------------------------------

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
  // The error kind its calls fail with: WorkerCrashed (ActorDied for an
  // actor's), or OutOfMemory when the node's memory monitor killed it.
  TaskErrorKind cause = TaskErrorKind::kWorkerCrashed;
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

}  // namespace rayx::protocol
