// The head's request handlers for nodes: registration, rejoining after a head
// restart, heartbeats, leaving, the cluster's status and lists, and what
// agents report (process exits, worker output, errors, worker starts). Part
// of HeadService (head_service.h).
#include <algorithm>
#include <cmath>
#include <string>

#include "common/text.h"
#include "head/head_service.h"
#include "transport/security.h"

namespace rayx::scheduler {

namespace {
// What a registering (or rejoining) agent says about its node.
NodeInfo NodeInfoFrom(const protocol::RegisterNodeRequest& req) {
  NodeInfo info;
  info.address = req.address;
  info.hostname = req.hostname;
  info.agent_pid = req.agent_pid;
  info.is_head_node = req.is_head_node;
  info.total = req.resources;
  info.labels = req.labels;
  info.rayx_version = req.rayx_version;
  info.store_dir = req.store_dir;
  info.object_address = req.object_address;
  info.checkpoint_dir = req.checkpoint_dir;
  info.gpu_devices = req.gpu_devices;
  return info;
}
}  // namespace

// ---- Nodes.

Result<protocol::RegisterNodeReply> HeadService::OnRegisterNode(
    const protocol::RegisterNodeRequest& req, Call& call) {
  if (req.rayx_version != kRayxVersion) {
    return call.Reject(Status::InvalidArgument(
                           "version mismatch: node " + req.address + " runs rayx " +
                           req.rayx_version + ", head runs rayx " + kRayxVersion +
                           ": install the same rayx version on every node"),
                       "node registration");
  }
  for (const auto& [name, amount] : req.resources) {
    if (name.empty() || !(amount >= 0) || amount > 1e18) {
      return call.Reject(Status::InvalidArgument("invalid resource \"" + name + "\" amount " +
                                                 std::to_string(amount)),
                         "node registration");
    }
    // Each GPU is a device the head tracks one by one.
    if (name == kGpu && amount > kMaxNodeGpus) {
      return call.Reject(Status::InvalidArgument("GPU amount " + std::to_string(amount) +
                                                 ": a node offers at most " +
                                                 std::to_string(kMaxNodeGpus) + " GPUs"),
                         "node registration");
    }
  }
  if (req.gpu_devices.size() > static_cast<size_t>(kMaxNodeGpus) ||
      std::any_of(req.gpu_devices.begin(), req.gpu_devices.end(),
                  [](int d) { return d < 0 || d >= kMaxNodeGpus; })) {
    return call.Reject(Status::InvalidArgument("invalid GPU device list (at most 65536 devices, "
                                               "each 0-65535)"),
                       "node registration");
  }
  if (!stop_reason_.empty()) {
    return call.Reject(Status::Unavailable("the cluster is being stopped (" + stop_reason_ +
                                           "): start a new one with `rayx start --head`"),
                       "node registration");
  }
  if (req.rejoin) return Rejoin(req, call);
  // An agent that joins again has killed what it ran as its previous node;
  // that node ends now if the head still counts it alive.
  if (!req.previous_node_id.IsNil() && nodes_.FindAlive(req.previous_node_id) != nullptr) {
    const std::string* agent = leases_.AgentPeerOf(req.previous_node_id);
    if (agent != nullptr && *agent == call.peer_id &&
        nodes_.MarkDead(req.previous_node_id,
                        "its agent (pid " + std::to_string(req.agent_pid) +
                            ") joined again as a new node after killing its processes")) {
      NodeDied(req.previous_node_id, "its agent joined again as a new node");
    }
  }
  NodeId node = nodes_.Register(NodeInfoFrom(req), clock_.NowMs(), clock_.WallMs());
  RAYX_LOG(Info) << "node " << node.Short() << " joined from " << req.address << " ("
                 << req.hostname << ", agent pid " << req.agent_pid << "); "
                 << nodes_.alive_count() << " alive";
  sessions_[call.peer_id] = Session{call.principal, true};
  leases_.OnNodeRegistered(node, call.peer_id);
  return NodeReply(node);
}

protocol::RegisterNodeReply HeadService::NodeReply(const NodeId& node) const {
  protocol::RegisterNodeReply reply;
  reply.node_id = node;
  reply.cluster_id = options_.cluster_id;
  reply.heartbeat_period_ms = options_.heartbeat_period_ms;
  reply.node_timeout_ms = options_.nodes.node_timeout_ms;
  reply.epoch = nodes_.EpochOf(node);
  reply.wire_security = static_cast<uint8_t>(options_.wire_security);
  reply.admitted_jobs.assign(admitted_jobs_.begin(), admitted_jobs_.end());
  return reply;
}

// Design: a head restart is not a node death. A node the head knew before it
// restarted (same id, same epoch, from the state file) comes back as itself:
// its workers kept running and its leases are accounted again from the agent's
// report. Anything else asking to rejoin (a node that died before the restart,
// a state file that was lost, another epoch) is refused: the agent then fences
// itself and joins as a new node, as after a death.
Result<protocol::RegisterNodeReply> HeadService::Rejoin(const protocol::RegisterNodeRequest& req,
                                                        Call& call) {
  const NodeId& node = req.previous_node_id;
  uint64_t epoch = nodes_.RejoiningEpochOf(node);
  if (epoch == 0 || epoch != req.previous_epoch) {
    return Status::NotFound("node " + node.Short() + " (epoch " +
                            std::to_string(req.previous_epoch) +
                            ") cannot rejoin: this head does not know it " +
                            (epoch ? "at that epoch" : "(it was declared dead, or the head's state was lost)") +
                            "; join as a new node");
  }
  if (req.live_leases.size() > 100000 || req.recent_exits.size() > 100000) {
    return Status::InvalidArgument("a rejoin may report at most 100000 leases and exits");
  }
  for (const auto& lease : req.live_leases) {
    for (const auto& [name, amount] : lease.resources) {
      if (!std::isfinite(amount) || amount < 0 || amount > 1e18) {
        return Status::InvalidArgument("a rejoin reported lease " +
                                       lease.lease_id.Hex().substr(0, 64) +
                                       " with an invalid amount of \"" + name.substr(0, 64) + "\"");
      }
    }
    for (int gpu : lease.gpu_ids) {
      if (gpu < 0 || gpu > 65535) {
        return Status::InvalidArgument("a rejoin reported lease " +
                                       lease.lease_id.Hex().substr(0, 64) + " with GPU device " +
                                       std::to_string(gpu));
      }
    }
  }
  nodes_.Rejoin(node, NodeInfoFrom(req), clock_.NowMs(), clock_.WallMs());
  sessions_[call.peer_id] = Session{call.principal, true};
  RAYX_LOG(Info) << "node " << node.Short() << " rejoined from " << req.address << " (agent pid "
                 << req.agent_pid << ", epoch " << epoch << ", " << req.live_leases.size()
                 << " live leases); " << nodes_.alive_count() << " alive, "
                 << nodes_.rejoining_count() << " still to rejoin";
  leases_.OnNodeRejoined(node, call.peer_id, req.live_leases, req.recent_exits);
  return NodeReply(node);
}

Result<std::optional<protocol::HeartbeatReply>> HeadService::OnHeartbeat(
    const protocol::HeartbeatRequest& req, Call&) {
  protocol::HeartbeatReply reply;
  // A heartbeat of another incarnation (epoch) keeps nothing alive: the agent
  // must fence itself and join again.
  reply.known = req.epoch == nodes_.EpochOf(req.node_id) &&
                nodes_.Heartbeat(req.node_id, clock_.NowMs(),
                                 {req.store_bytes, req.store_capacity, req.store_objects,
                                  req.spilled_bytes, req.spilled_objects},
                                 req.gpus);
  // A node of this head's previous life: it comes back as itself.
  reply.rejoin = !reply.known && req.epoch != 0 && req.epoch == nodes_.RejoiningEpochOf(req.node_id);
  if (reply.known && req.counted) {
    CountWork(WorkSource(req.node_id), WorkCounts::FromWire(req.tasks, req.collectives));
  }
  reply.stop = stop_reason_;
  if (!req.want_reply && reply.known && reply.stop.empty()) {
    return std::optional<protocol::HeartbeatReply>();
  }
  return std::optional<protocol::HeartbeatReply>(std::move(reply));
}

Result<protocol::UnregisterNodeReply> HeadService::OnUnregister(
    const protocol::UnregisterNodeRequest& req, Call&) {
  protocol::UnregisterNodeReply reply;
  std::string reason = req.reason.empty() ? "stopped" : Utf8Prefix(req.reason, 200);
  reply.ok = nodes_.MarkDead(req.node_id, reason);
  if (reply.ok) {
    NodeDied(req.node_id, reason);
    RAYX_LOG(Info) << "node " << req.node_id.Short() << " left: " << reason << "; "
                   << nodes_.alive_count() << " alive";
  }
  return reply;
}

Result<protocol::StopClusterReply> HeadService::OnStopCluster(
    const protocol::StopClusterRequest& req, Call&) {
  protocol::StopClusterReply reply;
  if (stop_reason_.empty()) {
    stop_reason_ = req.reason.empty() ? "stopped" : Utf8Prefix(req.reason, 200);
    RAYX_LOG(Info) << "stopping the cluster (" << stop_reason_ << "): " << nodes_.alive_count()
                   << " node agents are told to leave";
  }
  reply.alive_nodes = static_cast<uint32_t>(nodes_.alive_count());
  return reply;
}

ClusterStatus HeadService::StatusSnapshot() const {
  ClusterStatus status;
  int64_t now = clock_.NowMs();
  status.rayx_version = kRayxVersion;
  status.cluster_id = options_.cluster_id;
  status.head_uptime_ms = now - started_ms_;
  status.heartbeat_period_ms = options_.heartbeat_period_ms;
  status.node_timeout_ms = options_.nodes.node_timeout_ms;
  status.nodes = nodes_.Snapshot(now);
  status.pending_demands = leases_.PendingShapes();
  status.infeasible_demands = leases_.InfeasibleShapes();
  status.blocked_workers = static_cast<uint32_t>(leases_.blocked_count());
  status.lent_cpu = leases_.lent_cpu();
  status.head_messages = router_.handled_count();
  status.wire_security = std::string(transport::WireSecurityName(options_.wire_security));
  status.dashboard_url = dashboard_url_;
  return status;
}

protocol::ListStateReply HeadService::ListSnapshot() const {
  protocol::ListStateReply reply;
  reply.nodes = nodes_.Snapshot(clock_.NowMs());
  reply.leases = leases_.ListLeases();
  reply.placement_groups = groups_.List();
  reply.collective_groups = ListCollectiveGroups();
  return reply;
}

std::vector<protocol::CollectiveGroupInfo> HeadService::ListCollectiveGroups() const {
  std::vector<protocol::CollectiveGroupInfo> groups =
      group_watch_.List(kMaxListedCollectiveGroups, kMaxListedEndedGroups);
  for (auto& group : groups) {
    if (group.members.empty()) continue;
    if (auto job = leases_.JobOfLease(group.members.front().lease_id)) group.job_id = *job;
  }
  return groups;
}

Result<protocol::GetClusterStatusReply> HeadService::OnGetClusterStatus(
    const protocol::GetClusterStatusRequest&, Call&) {
  protocol::GetClusterStatusReply reply;
  reply.status = StatusSnapshot();
  return reply;
}

Result<protocol::ListStateReply> HeadService::OnListState(const protocol::ListStateRequest&,
                                                          Call& call) {
  protocol::ListStateReply reply = ListSnapshot();
  // A job (its workers) sees its own leases and groups only.
  if (call.principal.is_job()) {
    std::erase_if(reply.leases, [&](const auto& l) { return l.job_id != call.principal.job; });
    std::erase_if(reply.placement_groups,
                  [&](const auto& g) { return g.job_id != call.principal.job; });
    std::erase_if(reply.collective_groups,
                  [&](const auto& g) { return g.job_id != call.principal.job; });
  }
  return reply;
}

Result<NoReply> HeadService::OnProcessExited(const protocol::ProcessExitedNotice& req,
                                             Call& call) {
  auto node = leases_.NodeOfLease(req.lease_id);
  if (!node) return NoReply{};  // the lease ended before
  if (!CheckIncarnation(call.peer_id, *node, req.epoch, "a process exit notice").ok()) {
    return NoReply{};
  }
  leases_.OnProcessExited(req);
  return NoReply{};
}

Result<NoReply> HeadService::OnActorConstruction(const protocol::ActorConstructionNotice& req,
                                                 Call& call) {
  auto node = leases_.NodeOfLease(req.lease_id);
  if (!node) return NoReply{};  // the lease ended before
  if (!CheckIncarnation(call.peer_id, *node, req.epoch, "an actor construction notice").ok()) {
    return NoReply{};
  }
  leases_.OnActorConstruction(req);
  return NoReply{};
}

Result<NoReply> HeadService::OnWorkerOutput(const protocol::WorkerOutputNotice& req,
                                            Call& call) {
  if (!IsNodeSession(call.peer_id)) return NoReply{};
  output_tail_.Add(req);
  if (req.processes) return NoReply{};  // for the dashboard only
  auto it = output_peers_of_job_.find(req.job_id);
  if (it == output_peers_of_job_.end()) return NoReply{};
  for (const auto& peer : it->second) outbox_.WorkerOutput(peer, req);
  return NoReply{};
}

Result<NoReply> HeadService::OnFlushOutput(const protocol::FlushOutputRequest& req,
                                           Call& call) {
  RAYX_RETURN_IF_ERROR(CheckJob(req.job_id, call, "flush its workers' output"));
  const Requester to{call.peer_id, call.id};
  // Nobody prints this job's output, or too many flushes wait: nothing to wait for.
  if (!output_peers_of_job_.count(req.job_id) || output_flushes_.size() >= kMaxOutputFlushes) {
    outbox_.OutputFlushed(to, protocol::FlushOutputReply{});
    return NoReply{};
  }
  const uint64_t id = ++next_output_flush_;
  OutputFlush flush{to, {}, clock_.NowMs() + kOutputFlushMs};
  leases_.ForEachAgentPeer([&](const std::string& peer) {
    flush.waiting.insert(peer);
    outbox_.FlushOutput(peer, id, req);
  });
  if (flush.waiting.empty()) {
    outbox_.OutputFlushed(to, protocol::FlushOutputReply{});
  } else {
    output_flushes_.emplace(id, std::move(flush));
  }
  return NoReply{};
}

Result<NoReply> HeadService::OnOutputFlushed(const protocol::FlushOutputReply& req, Call& call) {
  (void)req;
  auto it = output_flushes_.find(call.id);
  if (it == output_flushes_.end()) return NoReply{};  // answered at its deadline
  it->second.waiting.erase(call.peer_id);
  if (it->second.waiting.empty()) {
    outbox_.OutputFlushed(it->second.to, protocol::FlushOutputReply{});
    output_flushes_.erase(it);
  }
  return NoReply{};
}

void HeadService::ExpireOutputFlushes(int64_t now) {
  for (auto it = output_flushes_.begin(); it != output_flushes_.end();) {
    if (it->second.deadline_ms > now) {
      ++it;
      continue;
    }
    protocol::FlushOutputReply reply;
    reply.unanswered = static_cast<uint32_t>(it->second.waiting.size());
    outbox_.OutputFlushed(it->second.to, reply);
    it = output_flushes_.erase(it);
  }
}

Result<NoReply> HeadService::OnAgentError(const protocol::ErrorReply& req, Call& call) {
  // An agent could not start a worker. An error carries no epoch; the start
  // request ids of a node's old incarnation were forgotten when it died.
  auto node = leases_.NodeOfStart(call.id);
  if (!node) return NoReply{};
  const std::string* agent = leases_.AgentPeerOf(*node);
  if (agent == nullptr || *agent != call.peer_id) {
    ++stale_incarnation_count_;
    RAYX_LOG(Warning) << "refused a start error from " << call.peer << ": not node "
                      << node->Short() << "'s agent";
    return NoReply{};
  }
  leases_.OnStartWorkerError(call.id, req.ToStatus());
  return NoReply{};
}

Result<NoReply> HeadService::OnStartWorkerReply(const protocol::StartWorkerReply& req,
                                                Call& call) {
  auto node = leases_.NodeOfStart(call.id);
  if (!node) return NoReply{};  // the lease ended while its worker started
  if (!CheckIncarnation(call.peer_id, *node, req.epoch, "a worker start reply").ok()) {
    return NoReply{};
  }
  leases_.OnStartWorkerReply(call.id, req);
  return NoReply{};
}

}  // namespace rayx::scheduler
