// Node agent membership: registration, heartbeats, fencing, leaving (starting
// leases: node_agent_starts.cc; what the head sends: node_agent_handlers.cc).
#include "agent/node_agent.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <unordered_set>

#include "common/address.h"
#include "object_store/object_server_directory.h"
#include "common/logging.h"
#include "transport/message.h"

namespace rayx::worker {

using protocol::MessageType;

NodeAgent::NodeAgent(boost::asio::io_context& io, NodeAgentOptions options, const Clock& clock,
                     Callbacks callbacks, Deps deps)
    : io_(io),
      options_(std::move(options)),
      clock_(clock),
      callbacks_(std::move(callbacks)),
      head_(std::move(deps.head)),
      wake_timer_(io),
      verifier_(std::make_shared<transport::ClusterVerifier>(options_.token)),
      objects_(io, SharedMemoryStore(options_.store_dir, options_.spill_dir)),
      processes_(std::move(deps.processes)),
      packages_(io, options_.package_dir, [this](const protocol::GetPackageRequest& req) {
        Send(req);
        return next_id_;
      }, clock, options_.package_limits) {
  RegisterHandlers();
  if (!head_) {
    head_ = std::make_unique<ZmqHeadConnection>(
        io, options_.head, transport::ClientSecurity::ClusterToHead(options_.token));
  }
  if (!processes_) {
    processes_ = std::make_unique<LocalLeaseProcesses>(
        io,
        LocalLeaseProcesses::Options{.node_ip = options_.node_ip,
                                     .log_dir = options_.log_dir,
                                     .group_dir = options_.group_dir,
                                     .token = options_.token,
                                     .wire_security = std::string(transport::WireSecurityName(
                                         options_.wire_security)),
                                     .store_dir = options_.store_dir,
                                     .checkpoint_dir = options_.checkpoint_dir,
                                     .worker_start_timeout_ms = options_.worker_start_timeout_ms,
                                     .gpu_devices = options_.gpu_devices,
                                     .memory_usage_threshold =
                                         options_.memory_monitor.period_ms > 0
                                             ? options_.memory_monitor.threshold
                                             : 0,
                                     .socket_interface = InterfaceWithAddress(options_.node_ip)},
        [this](const protocol::ProcessExitedNotice& notice) { SendExit(notice); },
        [this](const protocol::ActorConstructionNotice& notice) { SendConstruction(notice); });
  }
  objects_.SetLogDirectory(options_.log_dir);
  objects_.SetLogLookup([this](const LeaseId& lease_id, uint32_t index) {
    return processes_->FindLog(lease_id, index);
  });
}

NodeAgent::~NodeAgent() {
  processes_->KillAll();
  head_.reset();
  objects_.store().Destroy();
  if (!options_.spill_dir.empty()) SharedMemoryStore(options_.spill_dir).Destroy();
  // The checkpoint directory stays: its checkpoints outlive this agent (the
  // next agent on this machine adopts them; agent_main removes it when empty).
}

Status NodeAgent::Start() {
  auto store = SharedMemoryStore::Create(options_.store_dir);
  if (!store.ok()) return store.status();
  if (!options_.spill_dir.empty()) {
    auto spill = SharedMemoryStore::Create(options_.spill_dir);
    if (!spill.ok()) return spill.status();
  }
  // Every writer of the node reserves its objects' bytes in the ledger, and
  // asks the object server for room when they do not fit.
  auto ledger = StoreLedger::Create(options_.store_dir, options_.object_store_memory,
                                    options_.spill_dir);
  if (!ledger.ok()) return ledger.status();
  StoreSpiller::Options spill;
  spill.spill_limit = options_.spill_limit;
  objects_.EnableSpilling(*ledger, spill);
  if (!options_.checkpoint_dir.empty()) {
    auto made = SharedMemoryStore::Create(options_.checkpoint_dir);  // a 0700 directory
    if (!made.ok()) return made.status();
    CheckpointFiles checkpoints(options_.checkpoint_dir);
    RAYX_RETURN_IF_ERROR(checkpoints.SetLimit(options_.checkpoint_limit));
    adopted_checkpoints_.emplace(checkpoints);
    // Shards are copied from other nodes' object servers, with the cluster's
    // credential, through the cluster's list of them.
    auto head_security = transport::ClientSecurity::ClusterToHead(options_.token);
    auto servers = std::make_shared<ObjectServerDirectory>(
        FetchObjectServersFromHead(options_.head.ToString(), head_security, 5000), clock_,
        ObjectServerDirectory::Options{}, std::vector<std::string>{});
    objects_.EnableCheckpoints(
        CheckpointFiles(options_.checkpoint_dir),
        transport::ClientSecurity::ObjectServer(
            options_.wire_security, transport::Credential::Cluster(options_.token),
            transport::Credential::Cluster(options_.token).CurvePublicKey()),
        std::move(servers),
        [verifier = verifier_](const JobId& job) { return verifier->Allows(job); });
  }
  auto address = objects_.Start(options_.node_ip, options_.wire_security,
                                transport::Credential::Cluster(options_.token), verifier_);
  if (!address.ok()) return address.status();
  object_address_ = *address;
  processes_->SetObjectAddress(object_address_);
  last_reply_ms_ = clock_.NowMs();
  head_->Start([this](transport::Frames& frames) { OnMessage(frames); });
  connected_ = true;
  SendRegister();
  StartDeadline();
  StartMemoryMonitor();
  output_due_ms_ = clock_.NowMs() + kOutputPeriodMs;
  ArmWakeup();
  return Status::OK();
}

void NodeAgent::StartMemoryMonitor() {
  MemoryMonitor::Deps deps;
  deps.read_usage = [] { return MemoryMonitor::ReadMeminfo(); };
  deps.candidates = [this] {
    std::vector<MemoryMonitor::Candidate> out;
    for (const auto& w : processes_->RunningWorkers()) {
      out.push_back({w.pid, w.lease_id, w.for_actor, w.started});
    }
    return out;
  };
  deps.alive = [](pid_t pid) { return ::kill(pid, 0) == 0; };
  deps.ask = [](pid_t pid) { ::kill(pid, SIGUSR1); };
  // The worker's process group (its pid, recorded when the pool started
  // it): its exit is then reported to the head as the worker's own, which
  // ends the lease.
  deps.kill = [this](const LeaseId& lease, const std::string& why) {
    for (const auto& w : processes_->RunningWorkers()) {
      if (w.lease_id == lease) ::kill(-w.pid, SIGKILL);
    }
    // Said with the worker's exit (SendExit): its callers raise
    // OutOfMemoryError, not WorkerCrashedError.
    if (memory_kills_.size() >= kMaxMemoryKills) memory_kills_.erase(memory_kills_.begin());
    memory_kills_[lease] = why;
  };
  deps.log = [](const std::string& line) { RAYX_LOG(Warning) << line; };
  memory_monitor_ = std::make_unique<MemoryMonitor>(options_.memory_monitor, std::move(deps));
  if (memory_monitor_->enabled()) memory_due_ms_ = clock_.NowMs() + memory_monitor_->period_ms();
}

void NodeAgent::SendExit(const protocol::ProcessExitedNotice& exited) {
  // A worker's last lines (a traceback, say) go before its exit.
  ForwardOutput();
  protocol::ProcessExitedNotice notice = exited;
  if (auto killed = memory_kills_.find(notice.lease_id); killed != memory_kills_.end()) {
    notice.cause = protocol::TaskErrorKind::kOutOfMemory;
    notice.reason = killed->second;
    if (notice.all_exited) memory_kills_.erase(killed);
  }
  if (notice.all_exited) live_leases_.erase(notice.lease_id);
  if (leaving_ || !connected_ || fencing()) return;
  int64_t now = clock_.NowMs();
  protocol::ExitedProcess exit{notice.lease_id, notice.index,    notice.pid,       notice.exit_code,
                               notice.signal,   notice.log_tail, notice.all_exited};
  recent_exits_.emplace_back(now, std::move(exit));
  while (!recent_exits_.empty() &&
         (now - recent_exits_.front().first > kRecentExitsMs || recent_exits_.size() > 1000)) {
    recent_exits_.pop_front();
  }
  if (registering()) {
    // After the registration reply, under the epoch it gives (a rejoin keeps it).
    if (rejoining() && exits_while_rejoining_.size() < 10000) {
      exits_while_rejoining_.push_back(notice);
    }
    return;
  }
  protocol::ProcessExitedNotice stamped = notice;
  stamped.epoch = epoch_;
  Send(stamped);
}

void NodeAgent::SendConstruction(const protocol::ActorConstructionNotice& notice) {
  // Lost while the head is away: a head that restarted no longer waits for it.
  if (leaving_ || !connected_ || fencing() || registering()) return;
  protocol::ActorConstructionNotice stamped = notice;
  stamped.epoch = epoch_;
  Send(stamped);
}

void NodeAgent::Rejoin() {
  membership_ = Membership::kRejoining;
  rejoin_sent_ms_ = clock_.NowMs();
  previous_node_id_ = node_id_;
  SendRegister();
}

void NodeAgent::StartDeadline() {
  join_deadline_ms_ = clock_.NowMs() + options_.connect_timeout_ms;
}

void NodeAgent::RunDueTimers() {
  int64_t now = clock_.NowMs();
  if (join_deadline_ms_ && *join_deadline_ms_ <= now) {
    join_deadline_ms_.reset();
    if (registering()) {
      Fatal(Status::Unavailable(
          "no answer from the head at " + options_.head.ToString() + " within " +
          std::to_string(options_.connect_timeout_ms / 1000) +
          " s: check the address, that `rayx start --head` runs there, and that port " +
          std::to_string(options_.head.port) + " is reachable from this machine (firewall?)"));
    }
  }
  if (leave_deadline_ms_ && *leave_deadline_ms_ <= now) {
    leave_deadline_ms_.reset();
    if (leave_done_) {
      RAYX_LOG(Warning) << "the head did not acknowledge the leave in time";
      auto finish = std::move(leave_done_);
      leave_done_ = nullptr;
      finish();
    }
  }
  if (heartbeat_due_ms_ && *heartbeat_due_ms_ <= now) {
    heartbeat_due_ms_.reset();
    SendHeartbeat();
  }
  if (poll_due_ms_ && *poll_due_ms_ <= now) {
    poll_due_ms_.reset();
    if (fencing()) CheckFence();
    StartDeferred();
  }
  if (output_due_ms_ && *output_due_ms_ <= now) {
    output_due_ms_ = now + kOutputPeriodMs;
    ForwardOutput();
  }
  if (memory_due_ms_ && *memory_due_ms_ <= now) {
    memory_due_ms_ = now + memory_monitor_->period_ms();
    if (!leaving_ && !fencing()) memory_monitor_->Tick(now);
  }
  ArmWakeup();
}

void NodeAgent::ForwardOutput() {
  // Workers, and the processes of process leases (a submitted job's
  // entrypoint, `rayx launch` commands: for the dashboard only).
  auto convert = [](std::vector<WorkerPool::Running> workers,
                    std::vector<ProcessRunner::Output> processes) {
    std::vector<OutputForwarder::Worker> out;
    for (auto& w : workers) out.push_back({w.lease_id, w.job_id, w.pid, std::move(w.log_path)});
    for (auto& p : processes) {
      out.push_back({p.lease_id, p.job_id, p.pid, std::move(p.log_path), true, std::move(p.name)});
    }
    return out;
  };
  auto notices =
      output_.Poll(convert(processes_->RunningWorkers(), processes_->RunningProcesses()),
                   convert(processes_->TakeExitedWorkers(), processes_->TakeExitedProcesses()));
  // Lines read while the head is away are dropped: they stay in the files.
  if (leaving_ || !connected_ || fencing() || registering()) return;
  for (const auto& notice : notices) Send(notice);
}

void NodeAgent::ArmWakeup() {
  std::optional<int64_t> next;
  for (const auto& deadline :
       {join_deadline_ms_, heartbeat_due_ms_, leave_deadline_ms_, poll_due_ms_, memory_due_ms_,
        output_due_ms_}) {
    if (deadline && (!next || *deadline < *next)) next = deadline;
  }
  if (!next) {
    wake_timer_.cancel();
    return;
  }
  int64_t wait_ms = std::max<int64_t>(0, *next - clock_.NowMs());
  wake_timer_.expires_after(std::chrono::milliseconds(wait_ms));
  wake_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) RunDueTimers();
  });
}

void NodeAgent::AdoptCheckpoints() {
  if (!adopted_checkpoints_) return;
  auto requests = adopted_checkpoints_->Requests();
  size_t records = 0;
  for (const auto& req : requests) {
    records += req.keys.size();
    Send(req);
  }
  if (records > 0) {
    RAYX_LOG(Info) << "handing the head the records of " << records << " checkpoint(s) kept in "
                   << options_.checkpoint_dir;
  }
}

template <typename T>
void NodeAgent::Send(const T& body) {
  transport::Frames frames = transport::MakeMessage(body, ++next_id_);
  if (!head_->Send(frames)) {
    RAYX_LOG(Warning) << "could not queue "
                      << protocol::MessageTypeName(static_cast<uint16_t>(T::kType))
                      << " to the head (queue full)";
  }
}

void NodeAgent::SendRegister() {
  if (!rejoining()) membership_ = Membership::kRegistering;
  protocol::RegisterNodeRequest req;
  req.token = options_.token;
  req.rayx_version = options_.announced_version;
  req.address = options_.node_ip;
  req.hostname = options_.hostname;
  req.agent_pid = static_cast<int32_t>(getpid());
  req.is_head_node = options_.is_head_node;
  req.resources = options_.resources;
  req.labels = options_.labels;
  req.store_dir = options_.store_dir;
  req.gpu_devices = options_.gpu_devices;
  req.object_address = object_address_;
  req.checkpoint_dir = options_.checkpoint_dir;
  req.previous_node_id = previous_node_id_;
  if (rejoining()) {
    req.rejoin = true;
    req.previous_epoch = epoch_;
    for (auto it = live_leases_.begin(); it != live_leases_.end();) {
      if (!processes_->IsLive(it->first)) {
        it = live_leases_.erase(it);
        continue;
      }
      req.live_leases.push_back(it->second);
      ++it;
    }
    for (const auto& [when, exit] : recent_exits_) req.recent_exits.push_back(exit);
  }
  transport::Frames frames = transport::MakeMessage(req, ++next_id_);
  register_id_ = next_id_;
  if (options_.announced_protocol != kProtocolVersion) {
    protocol::Envelope env;
    env.v = options_.announced_protocol;
    env.t = static_cast<uint16_t>(req.kType);
    env.id = register_id_;
    frames[0] = transport::MakeFrame(protocol::Encode(env));
  }
  (void)head_->Send(frames);
}

void NodeAgent::ReportDriverExit(const JobId& job_id, int32_t pid) {
  protocol::DriverExitedNotice notice;
  notice.job_id = job_id;
  notice.pid = pid;
  Send(notice);
}

void NodeAgent::CheckDrivers() {
  for (auto it = watched_drivers_.begin(); it != watched_drivers_.end();) {
    if (detail::IsRunning(it->second)) {
      ++it;
      continue;
    }
    ReportDriverExit(it->first, it->second.pid);
    it = watched_drivers_.erase(it);
  }
}

void NodeAgent::SendHeartbeat() {
  if (leaving_) return;
  CheckDrivers();  // a driver's exit is seen within a heartbeat period
  packages_.Expire();
  int64_t silent = clock_.NowMs() - last_reply_ms_;
  if (silent > options_.head_lost_timeout_ms) {
    Fatal(Status::Unavailable("the head at " + options_.head.ToString() + " has not answered for " +
                              std::to_string(silent / 1000) +
                              " s: leaving (restart the agent once the head is back)"));
    return;
  }
  if (rejoining() && clock_.NowMs() - rejoin_sent_ms_ >= 2000) {
    // No answer: the head may have died again before it read the rejoin.
    rejoin_sent_ms_ = clock_.NowMs();
    RAYX_LOG(Warning) << "no answer to the rejoin yet: sending it again";
    SendRegister();
  }
  if (!registering() && !fencing()) {
    protocol::HeartbeatRequest req;
    req.node_id = node_id_;
    req.epoch = epoch_;
    req.seq = ++heartbeat_seq_;
    // The head accounts for leased resources itself; `available` stays empty.
    const StoreSpiller::Usage usage = objects_.StoreUsage();
    req.store_bytes = usage.stored_bytes;
    req.store_objects = usage.stored_objects;
    req.store_capacity = options_.object_store_memory;
    req.spilled_bytes = usage.spilled_bytes;
    req.spilled_objects = usage.spilled_objects;
    // A reply about once a second (more often when the head-lost timeout is
    // short) tells this agent the head lives; the head answers the others
    // only when it has something to say.
    int64_t now = clock_.NowMs();
    req.want_reply = now - last_reply_asked_ms_ >=
                     std::min<int64_t>(1000, options_.head_lost_timeout_ms / 4);
    if (req.want_reply) {
      last_reply_asked_ms_ = now;
      if (options_.sample_gpus) req.gpus = options_.sample_gpus();
      WorkCounts now_read = processes_->ReadWorkCounters();
      work_since_join_.AddGrowth(now_read, work_read_);
      work_read_ = now_read;
      req.counted = true;
      req.tasks = work_since_join_.tasks;
      req.collectives = work_since_join_.Collectives();
    }
    Send(req);
  }
  heartbeat_due_ms_ = clock_.NowMs() + heartbeat_period_ms_;
}

void NodeAgent::ReapWorkers() {
  processes_->Reap();
  if (fencing()) CheckFence();
  if (!deferred_.empty()) StartDeferred();
  ArmWakeup();
}

void NodeAgent::Fence(const std::string& why) {
  membership_ = Membership::kFencing;
  live_leases_.clear();
  recent_exits_.clear();
  previous_node_id_ = node_id_;
  fence_started_ms_ = clock_.NowMs();
  fence_warned_ms_ = fence_started_ms_;
  // Their requests belong to the dead incarnation: the head forgot them.
  deferred_.clear();
  before_joined_.clear();
  fetching_.clear();
  RAYX_LOG(Warning) << why << ": killing every process this node started before joining again";
  processes_->KillAll();
  CheckFence();
}

void NodeAgent::CheckFence() {
  if (!fencing() || leaving_) return;
  int64_t now = clock_.NowMs();
  if (!processes_->AllGone()) {
    if (now - fence_warned_ms_ >= 5000) {
      fence_warned_ms_ = now;
      RAYX_LOG(Warning) << "processes of node " << previous_node_id_.Short()
                        << " are still alive " << (now - fence_started_ms_)
                        << " ms after SIGKILL (uninterruptible?); not joining until they are gone";
    }
    poll_due_ms_ = now + kPollMs;
    return;
  }
  membership_ = Membership::kRegistering;  // SendRegister, below
  RAYX_LOG(Info) << "every process of node " << previous_node_id_.Short() << " is gone ("
                 << (now - fence_started_ms_) << " ms); joining again as a new node";
  SendRegister();
}

void NodeAgent::Leave(const std::string& reason, int64_t timeout_ms, std::function<void()> done) {
  leaving_ = true;
  heartbeat_due_ms_.reset();
  processes_->KillAll();
  deferred_.clear();
  poll_due_ms_.reset();
  if (node_id_.IsNil() || registering() || fencing()) {
    ArmWakeup();
    done();
    return;
  }
  protocol::UnregisterNodeRequest req;
  req.node_id = node_id_;
  req.reason = reason;
  Send(req);
  unregister_id_ = next_id_;
  leave_done_ = std::move(done);
  // The leave deadline replaces a pending join deadline, as they shared a timer.
  join_deadline_ms_.reset();
  leave_deadline_ms_ = clock_.NowMs() + timeout_ms;
  ArmWakeup();
}

void NodeAgent::Fatal(const Status& status) {
  RAYX_LOG(Error) << status.message();
  heartbeat_due_ms_.reset();
  join_deadline_ms_.reset();
  leave_deadline_ms_.reset();
  poll_due_ms_.reset();
  ArmWakeup();
  if (callbacks_.on_fatal) callbacks_.on_fatal(status);
}

}  // namespace rayx::worker
