// The node agent: joins the cluster, heartbeats, and starts and supervises this
// node's lease processes.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/adopted_checkpoints.h"
#include "agent/head_connection.h"
#include "agent/lease_processes.h"
#include "agent/memory_monitor.h"
#include "agent/output_forwarder.h"
#include "agent/object_server.h"
#include "agent/package_cache.h"
#include "common/address.h"
#include "common/clock.h"
#include "common/process_control.h"
#include "protocol/messages.h"
#include "transport/security.h"

namespace rayx::worker {

struct NodeAgentOptions {
  HostPort head;        // where the head listens
  std::string token;    // the cluster token
  // How the cluster's data sockets are protected (the head says which; agents
  // learn it before they start: agent_main asks the head). Default: authenticated.
  transport::WireSecurity wire_security = transport::WireSecurity::kAuthenticated;
  std::string node_ip;  // the address this node is reached at
  std::string hostname;
  bool is_head_node = false;
  ResourceMap resources;
  // The device of each GPU the head hands out (NodeResources::gpu_devices);
  // empty: GPU i is device i.
  std::vector<int> gpu_devices;
  LabelMap labels;
  // Give up joining when the head has not answered within this. Default 15 s.
  int64_t connect_timeout_ms = 15000;
  // Exit when the head has not answered any heartbeat for this long (the head is
  // gone for good; a restarted head would not know this node). Default 60 s.
  int64_t head_lost_timeout_ms = 60000;
  // A worker that has not reported ready (nor begun an actor's constructor)
  // within this is stopped and its start fails. Default 30 s.
  int64_t worker_start_timeout_ms = 30000;
  // Sent instead of kRayxVersion; only tests of the version check change it.
  std::string announced_version = kRayxVersion;
  uint32_t announced_protocol = kProtocolVersion;
  // Where worker log files go. Default: the current directory.
  std::string log_dir = ".";
  // Where lease process groups are recorded for `rayx stop` (RecordGroup in
  // common/process_control.h); "" records none.
  std::string group_dir;
  // The node's shared-memory object store directory (created; removed at exit).
  std::string store_dir;
  // The store's capacity in bytes (0: unbounded), and where objects that do
  // not fit are spilled (created; removed at exit; empty: nowhere), up to
  // `spill_limit` bytes (0: until the spill disk is 95% full).
  uint64_t object_store_memory = 0;
  std::string spill_dir;
  uint64_t spill_limit = 0;
  // Where Train's checkpoint shards are kept on this node (created; removed
  // at exit; empty: none are kept here), up to `checkpoint_limit` bytes (0:
  // the disk).
  std::string checkpoint_dir;
  uint64_t checkpoint_limit = 0;
  // Where job working directories fetched from the head are unpacked.
  std::string package_dir = "node-packages";
  // What one working directory may unpack to (TarLimits' defaults: 1 GiB of
  // file data, 100,000 entries).
  TarLimits package_limits;
  // The memory monitor (memory_monitor.h); threshold >= 1 or period 0: off.
  MemoryMonitor::Options memory_monitor;
  // Reads the node's GPUs' use (GpuMonitor), sent with the heartbeats that
  // want a reply (about one a second). Empty: none are sent.
  std::function<std::vector<GpuUsage>()> sample_gpus;
};

// Single-threaded: everything runs on `io`. Calls `on_joined` once after the
// first successful registration, `on_fatal` when the agent must exit (refused,
// head unreachable; the caller stops `io` then), and `on_cluster_stopped` once
// when the head says the whole cluster is being stopped (the caller then
// calls Leave and exits with status 0).
//
// Fencing: when the head says it no longer knows this node (a heartbeat
// answered `known = false`: it was declared dead, e.g. after a stall longer
// than the node timeout), the agent kills every process it started, waits until
// they are all gone (reaped, process groups empty), and only then registers
// again, naming the node it was. Each registration gets an epoch from the head;
// the agent stamps its replies and exit notices with it, and refuses start
// requests addressed to another epoch. Devices of a killed worker are given to
// a new worker only once the killed one's process group is empty.
//
// Head restart: a heartbeat answered `known = false, rejoin = true` comes from
// a restarted head that knew this node. The agent then does not fence: it
// registers again naming its node id and epoch (`rejoin`), with the leases it
// still runs and the process exits it reported recently, and keeps everything
// running; start requests wait for the answer as in a first registration. If
// the head refuses the rejoin, the agent fences itself as after a death. A
// rejoin unanswered for 2 s (the head died again) is sent again.
//
// Time comes only from `clock`: the join deadline, the heartbeat period, the
// head-lost timeout and the leave deadline are instants on it, and one asio
// timer merely wakes the agent for the earliest (RunDueTimers). So a test can
// drive the agent step by step: fake head (Deps::head), no processes
// (Deps::processes), ManualClock::Advance then RunDueTimers.
class NodeAgent {
 public:
  struct Callbacks {
    std::function<void(const protocol::RegisterNodeReply&)> on_joined;
    std::function<void(const Status&)> on_fatal;
    std::function<void(const std::string& reason)> on_cluster_stopped;
  };
  // Collaborators; each left empty gets the real one.
  struct Deps {
    std::unique_ptr<HeadConnection> head;       // default: ZeroMQ to options.head
    std::unique_ptr<LeaseProcesses> processes;  // default: real worker processes
  };

  // `clock` must outlive the agent.
  NodeAgent(boost::asio::io_context& io, NodeAgentOptions options, const Clock& clock,
            Callbacks callbacks, Deps deps = {});
  ~NodeAgent();

  // Starts the object server and joins. Returns Unavailable when the object
  // server cannot listen.
  Status Start();
  // Tells the head this node is leaving, waiting at most `timeout_ms` for its
  // acknowledgement (closing a socket does not guarantee delivery), then calls
  // `done`.
  void Leave(const std::string& reason, int64_t timeout_ms, std::function<void()> done);

  const NodeId& node_id() const { return node_id_; }
  // Reaps exited worker processes (call on SIGCHLD).
  void ReapWorkers();
  // Does whatever is due at clock.NowMs(): a heartbeat (or giving up on a
  // silent head), the join deadline, the leave deadline. The agent's own
  // timer calls it; a test calls it after advancing a ManualClock.
  void RunDueTimers();

 private:
  void SendRegister();
  // Registers again as the same node with a restarted head (see the class
  // comment).
  void Rejoin();
  // Sends an exit notice now, or after the registration under way.
  void SendExit(const protocol::ProcessExitedNotice& notice);
  // What a detached actor's worker said of its constructor, to the head.
  void SendConstruction(const protocol::ActorConstructionNotice& notice);
  void SendHeartbeat();
  void OnMessage(transport::Frames& frames);
  // Decodes the envelope, checks its protocol version and calls the handler
  // registered for its type (RegisterHandlers); anything else is logged and
  // dropped.
  void HandleMessage(transport::Frames& frames);
  // A message from the head for its handler: the envelope (its id answers a
  // request) and its frames (a GetPackageReply carries its bytes in a third).
  struct FromHead {
    const protocol::Envelope& env;
    const transport::Frames& frames;
  };
  // Registers `handler` for the head's messages of type Msg::kType: the body
  // is decoded as Msg first; a malformed one is logged and dropped.
  template <typename Msg>
  void On(void (NodeAgent::*handler)(const Msg&, const FromHead&));
  // The same for a message without its own type (the error reply).
  template <typename Msg>
  void On(protocol::MessageType type, void (NodeAgent::*handler)(const Msg&, const FromHead&));
  void RegisterHandlers();
  void HandleErrorReply(const protocol::ErrorReply& error, const FromHead& from);
  void HandleRegisterReply(const protocol::RegisterNodeReply& reply, const FromHead& from);
  void HandleHeartbeatReply(const protocol::HeartbeatReply& reply, const FromHead& from);
  void HandleStartWorker(const protocol::StartWorkerRequest& req, const FromHead& from);
  void HandlePackageReply(const protocol::GetPackageReply& reply, const FromHead& from);
  void HandleJobCredential(const protocol::JobCredentialNotice& req, const FromHead& from);
  void HandleJobFinished(const protocol::JobFinishedNotice& req, const FromHead& from);
  void HandleFlushOutput(const protocol::FlushOutputRequest& req, const FromHead& from);
  void HandleWatchDriver(const protocol::WatchDriverRequest& req, const FromHead& from);
  void HandleKillWorkers(const protocol::KillWorkersRequest& req, const FromHead& from);
  void HandleUnregisterReply(const protocol::UnregisterNodeReply& reply, const FromHead& from);
  void HandleAdoptCheckpointsReply(const protocol::AdoptCheckpointsReply& reply,
                                   const FromHead& from);
  // Hands the head the records of the checkpoints in this node's checkpoint
  // directory (once, after the first join: adopted_checkpoints.h).
  void AdoptCheckpoints();
  // Points the wake-up timer at the earliest deadline.
  void ArmWakeup();
  template <typename T>
  void Send(const T& body);
  void Fatal(const Status& status);
  // Kills everything this incarnation started, then joins again (CheckFence).
  void Fence(const std::string& why);
  // Registers again once every process is gone; otherwise polls again.
  void CheckFence();
  // Starts the deferred leases whose devices were released.
  void StartDeferred();
  void StartDeadline();
  // Checks the machine's memory every period (memory_monitor.h).
  void StartMemoryMonitor();
  void OnStartWorker(const protocol::StartWorkerRequest& req, uint64_t id);
  // Starts the lease's worker or processes once its packages are on this node.
  void StartWithPackages(protocol::StartWorkerRequest req, uint64_t id);
  // Sends a reply to request `id` of the head, unless this node is leaving.
  void Reply(const Result<protocol::StartWorkerReply>& result, uint64_t id);

  boost::asio::io_context& io_;
  // By message type (RegisterHandlers).
  std::unordered_map<uint16_t, std::function<void(const FromHead&)>> handlers_;
  NodeAgentOptions options_;
  const Clock& clock_;
  Callbacks callbacks_;
  std::unique_ptr<HeadConnection> head_;
  bool connected_ = false;  // head_->Start ran
  // Instants on clock_; empty when not pending.
  std::optional<int64_t> join_deadline_ms_;
  std::optional<int64_t> heartbeat_due_ms_;
  int64_t last_reply_asked_ms_ = INT64_MIN / 2;  // HeartbeatRequest::want_reply
  // The workers' counts as last read, and what they grew by since this
  // agent joined as node_id_ (sent with the heartbeats that want a reply).
  WorkCounts work_read_;
  WorkCounts work_since_join_;
  std::optional<int64_t> leave_deadline_ms_;
  boost::asio::steady_timer wake_timer_;

  NodeId node_id_;
  bool joined_once_ = false;
  // Where this agent stands with the head: one state at a time (leaving,
  // leaving_, may begin in any of them).
  enum class Membership : uint8_t {
    kRegistering,  // asking to join as a new node (at start, after a fence)
    kRejoining,    // asking to join again as the same node (its head restarted)
    kJoined,       // counted alive by the head
    kFencing,      // declared dead: killing what it started, then kRegistering
  };
  Membership membership_ = Membership::kRegistering;
  bool registering() const {
    return membership_ == Membership::kRegistering || membership_ == Membership::kRejoining;
  }
  bool rejoining() const { return membership_ == Membership::kRejoining; }
  bool fencing() const { return membership_ == Membership::kFencing; }
  int64_t rejoin_sent_ms_ = 0;
  // The leases this agent started and reported to the head, for a rejoin.
  std::map<LeaseId, protocol::LiveLease> live_leases_;
  // Process exits reported in the last kRecentExitsMs (the head may have been
  // down), and exits that happened while a rejoin was under way.
  static constexpr int64_t kRecentExitsMs = 120000;
  std::deque<std::pair<int64_t, protocol::ExitedProcess>> recent_exits_;
  std::vector<protocol::ProcessExitedNotice> exits_while_rejoining_;
  bool leaving_ = false;
  bool stop_heard_ = false;  // the head said the cluster is being stopped
  // Drivers on this machine the head asked us to watch (WatchDriverRequest),
  // by job id; checked every heartbeat, their exits reported.
  static constexpr size_t kMaxWatchedDrivers = 4096;
  std::map<JobId, detail::ProcessRecord> watched_drivers_;
  void CheckDrivers();
  void ReportDriverExit(const JobId& job_id, int32_t pid);
  // Waiting for killed processes to go (fencing, deferred starts) is polled.
  static constexpr int64_t kPollMs = 10;
  std::optional<int64_t> poll_due_ms_;
  std::unique_ptr<MemoryMonitor> memory_monitor_;
  std::optional<AdoptedCheckpoints> adopted_checkpoints_;  // with a checkpoint directory
  // Leases whose worker the memory monitor killed, and why (until their
  // exit is reported); at most kMaxMemoryKills.
  static constexpr size_t kMaxMemoryKills = 1024;
  std::map<LeaseId, std::string> memory_kills_;
  std::optional<int64_t> memory_due_ms_;  // the monitor's next check
  // Workers' output to their jobs' drivers, read every kOutputPeriodMs.
  static constexpr int64_t kOutputPeriodMs = 100;
  OutputForwarder output_{OutputForwarder::Options{.node_ip = options_.node_ip}};
  std::optional<int64_t> output_due_ms_;
  void ForwardOutput();
  int64_t fence_started_ms_ = 0;
  int64_t fence_warned_ms_ = 0;
  uint64_t epoch_ = 0;          // this incarnation's (RegisterNodeReply::epoch)
  NodeId previous_node_id_;     // the node this agent was before the last fence
  uint64_t first_heartbeat_id_ = 0;  // replies to older heartbeats are stale
  // Starts waiting until a killed worker's devices are released, in order.
  // One that waits kDeviceWaitLimitMs (its killed holder is stuck: a hung CUDA
  // context, uninterruptible sleep) is answered with an error instead of
  // waiting forever; meanwhile a warning every kDeviceWaitWarnMs.
  static constexpr int64_t kDeviceWaitLimitMs = 60000;
  static constexpr int64_t kDeviceWaitWarnMs = 5000;
  struct Deferred {
    protocol::StartWorkerRequest req;
    uint64_t id = 0;
    int64_t since_ms = 0;   // when it began to wait for its devices
    int64_t warned_ms = 0;  // when it last warned
  };
  std::vector<Deferred> deferred_;
  // Start requests that came before the registration reply (the head grants
  // pending leases to a node as it registers, before its reply leaves).
  std::vector<Deferred> before_joined_;
  // Starts waiting for their package, by lease: a KillWorkers for one of them
  // cancels it (the fetch goes on for the next lease that needs it).
  std::map<LeaseId, uint64_t> fetching_;
  // Answers a start request that a KillWorkers cancelled before it started, so
  // the head forgets the request.
  void ReplyCancelled(const LeaseId& lease_id, uint64_t id);
  int64_t heartbeat_period_ms_ = 250;
  int64_t last_reply_ms_ = 0;
  uint64_t next_id_ = 0;
  uint64_t register_id_ = 0;
  uint64_t unregister_id_ = 0;
  uint64_t heartbeat_seq_ = 0;
  std::function<void()> leave_done_;
  // Who may connect to the object server: the cluster, and jobs the head
  // admits (RegisterNodeReply::admitted_jobs, JobCredentialNotice).
  std::shared_ptr<transport::ClusterVerifier> verifier_;
  ObjectServer objects_;
  std::string object_address_;
  std::unique_ptr<LeaseProcesses> processes_;
  PackageCache packages_;
};

}  // namespace rayx::worker
