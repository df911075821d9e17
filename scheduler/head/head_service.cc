// Request handling for the head.
#include "head/head_service.h"

#include <cstdio>

#include "protocol/codec.h"
#include "transport/message.h"

namespace rayx::scheduler {

using protocol::MessageType;
using transport::FrameView;
using transport::Frames;

HeadService::HeadService(HeadServiceOptions options, const Clock& clock)
    : options_(std::move(options)),
      clock_(clock),
      nodes_(options_.nodes),
      leases_(options_.leases, nodes_,
              [this](const std::string& peer, Frames frames) {
                // The head's own leases (submitted jobs' entrypoints).
                if (peer == JobManager::kPeer) {
                  jobs_.OnInternalMessage(frames);
                  return;
                }
                send_(peer, std::move(frames));
              }),
      jobs_(options_.jobs, leases_, nodes_, clock),
      started_ms_(clock.NowMs()) {
  RAYX_CHECK(!options_.token.empty()) << "the head needs a cluster token";
}

void HeadService::LogRejection(const std::string& line) {
  ++rejected_;
  uint64_t suppressed = 0;
  if (reject_log_limiter_.Allow(std::chrono::steady_clock::now(), &suppressed)) {
    if (suppressed > 0) {
      RAYX_LOG(Warning) << suppressed << " more rejected messages were not logged";
    }
    RAYX_LOG(Warning) << line;
    return;
  }
  if (++suppressed_since_flush_ == 1) {
    RAYX_LOG(Warning) << "too many rejected messages: logging at most 20 per 10 s; the rest "
                         "are counted and summarized";
  }
  last_suppressed_ = line;
}

void HeadService::FlushRejectionLog() {
  if (suppressed_since_flush_ == 0) return;
  RAYX_LOG(Warning) << "suppressed " << suppressed_since_flush_
                    << " rejected-message log lines; the latest: " << last_suppressed_;
  suppressed_since_flush_ = 0;
}

Frames HeadService::Refuse(const Status& status, uint64_t id, const std::string& peer,
                           const std::string& what) {
  LogRejection("refused " + what + " from " + peer + ": " + status.ToString());
  return transport::MakeErrorMessage(status, options_.where, id);
}

std::string HeadService::PeerName(const std::string& peer) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "peer#%06zx", std::hash<std::string>()(peer) & 0xffffff);
  return buf;
}

bool HeadService::TokenMatches(const std::string& presented) const {
  // Constant time in the token's content, so timing does not leak a prefix.
  const std::string& want = options_.token;
  unsigned diff = presented.size() == want.size() ? 0 : 1;
  for (size_t i = 0; i < want.size(); ++i) {
    diff |= static_cast<unsigned char>(want[i]) ^
            static_cast<unsigned char>(i < presented.size() ? presented[i] : 0);
  }
  return diff == 0;
}

std::optional<Frames> HeadService::Handle(Frames& frames, const std::string& peer_id) {
  ++handled_;
  const std::string peer = PeerName(peer_id);
  if (frames.size() < 2) {
    LogRejection("dropped a " + std::to_string(frames.size()) + "-frame message from " + peer +
                 ": expected [envelope][body]");
    return std::nullopt;
  }
  auto env = protocol::Decode<protocol::Envelope>(FrameView(frames[0]));
  if (!env.ok()) {
    LogRejection("dropped a message from " + peer + " with an undecodable envelope: " +
                 env.status().message());
    return std::nullopt;
  }
  uint64_t id = env->id;
  std::string type_name = protocol::MessageTypeName(env->t);
  if (Status version = protocol::CheckProtocolVersion(*env, "this head"); !version.ok()) {
    return Refuse(version, id, peer, type_name);
  }
  std::string_view body = FrameView(frames[1]);
  auto bad_body = [&](const Status& status) {
    return Refuse(Status::InvalidArgument("malformed " + type_name + ": " + status.message()), id,
                  peer, type_name);
  };
  switch (static_cast<MessageType>(env->t)) {
    case MessageType::kRegisterNodeRequest: {
      auto req = protocol::Decode<protocol::RegisterNodeRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      Frames reply = OnRegister(*req, id, peer);
      auto node = reply.size() == 2 ? protocol::Decode<protocol::RegisterNodeReply>(FrameView(reply[1]))
                                    : Result<protocol::RegisterNodeReply>(Status::NotFound(""));
      if (node.ok() && !node->node_id.IsNil()) {
        authenticated_peers_.insert(peer_id);
        leases_.OnNodeRegistered(node->node_id, peer_id);
      }
      return reply;
    }
    case MessageType::kHeartbeatRequest: {
      auto req = protocol::Decode<protocol::HeartbeatRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      return OnHeartbeat(*req, id);
    }
    case MessageType::kUnregisterNodeRequest: {
      auto req = protocol::Decode<protocol::UnregisterNodeRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      return OnUnregister(*req, id);
    }
    case MessageType::kGetClusterStatusRequest: {
      auto req = protocol::Decode<protocol::GetClusterStatusRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      return OnGetClusterStatus(*req, id, peer);
    }
    case MessageType::kListStateRequest: {
      auto req = protocol::Decode<protocol::ListStateRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      if (!TokenMatches(req->token)) {
        return Refuse(Status::Unauthenticated(
                          "wrong cluster token: run `rayx list` on a machine of the cluster, or "
                          "pass --token (printed by `rayx start --head`)"),
                      id, peer, "list request");
      }
      protocol::ListStateReply reply;
      reply.nodes = nodes_.Snapshot(clock_.NowMs());
      reply.leases = leases_.ListLeases();
      reply.placement_groups = leases_.ListPlacementGroups();
      return transport::MakeMessage(reply, id);
    }
    case MessageType::kProcessExitedNotice: {
      if (!authenticated_peers_.count(peer_id)) {
        return Refuse(Status::Unauthenticated("only node agents report process exits"), id, peer,
                      type_name);
      }
      auto req = protocol::Decode<protocol::ProcessExitedNotice>(body);
      if (!req.ok()) return bad_body(req.status());
      leases_.OnProcessExited(*req);
      return std::nullopt;
    }
    case MessageType::kSubmitJobRequest:
    case MessageType::kGetJobRequest:
    case MessageType::kListJobsRequest:
    case MessageType::kStopJobRequest:
    case MessageType::kHasPackageRequest:
    case MessageType::kPutPackageRequest:
    case MessageType::kGetPackageRequest:
      return HandleSubmittedJobMessage(env->t, body, id, peer_id, frames);
    case MessageType::kErrorReply: {
      // An agent could not start a worker.
      if (!authenticated_peers_.count(peer_id)) return std::nullopt;
      auto error = protocol::Decode<protocol::ErrorReply>(body);
      if (error.ok()) leases_.OnStartWorkerError(id, error->ToStatus());
      return std::nullopt;
    }
    default:
      if ((env->t >= static_cast<uint16_t>(MessageType::kRegisterDriverRequest) &&
           env->t <= static_cast<uint16_t>(MessageType::kGetActorReply)) ||
          (env->t >= static_cast<uint16_t>(MessageType::kCreatePlacementGroupRequest) &&
           env->t <= static_cast<uint16_t>(MessageType::kRemovePlacementGroupReply))) {
        if (env->t != static_cast<uint16_t>(MessageType::kRegisterDriverRequest) &&
            !authenticated_peers_.count(peer_id)) {
          return Refuse(Status::Unauthenticated("register first (RegisterDriverRequest with the "
                                                "cluster token)"),
                        id, peer, type_name);
        }
        return HandleJobMessage(env->t, body, id, peer_id);
      }
      return Refuse(Status::InvalidArgument("unknown message type " + type_name +
                                            " for the head"),
                    id, peer, type_name);
  }
}

Frames HeadService::OnRegister(const protocol::RegisterNodeRequest& req, uint64_t id,
                               const std::string& peer) {
  if (!TokenMatches(req.token)) {
    return Refuse(Status::Unauthenticated(
                      "wrong cluster token: pass the token printed by `rayx start --head` "
                      "(rayx start --address HOST:PORT --token TOKEN)"),
                  id, peer, "node registration");
  }
  if (req.rayx_version != kRayxVersion) {
    return Refuse(Status::InvalidArgument("version mismatch: node " + req.address + " runs rayx " +
                                          req.rayx_version + ", head runs rayx " + kRayxVersion +
                                          ": install the same rayx version on every node"),
                  id, peer, "node registration");
  }
  for (const auto& [name, amount] : req.resources) {
    if (name.empty() || !(amount >= 0) || amount > 1e18) {
      return Refuse(Status::InvalidArgument("invalid resource \"" + name + "\" amount " +
                                            std::to_string(amount)),
                    id, peer, "node registration");
    }
  }
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
  NodeId node = nodes_.Register(std::move(info), clock_.NowMs(), clock_.WallMs());
  RAYX_LOG(Info) << "node " << node.Short() << " joined from " << req.address << " ("
                 << req.hostname << ", agent pid " << req.agent_pid << "); "
                 << nodes_.alive_count() << " alive";
  protocol::RegisterNodeReply reply;
  reply.node_id = node;
  reply.cluster_id = options_.cluster_id;
  reply.heartbeat_period_ms = options_.heartbeat_period_ms;
  reply.node_timeout_ms = options_.nodes.node_timeout_ms;
  return transport::MakeMessage(reply, id);
}

Frames HeadService::OnHeartbeat(const protocol::HeartbeatRequest& req, uint64_t id) {
  protocol::HeartbeatReply reply;
  reply.known = nodes_.Heartbeat(req.node_id, req.available, clock_.NowMs(), req.store_bytes);
  return transport::MakeMessage(reply, id);
}

Frames HeadService::OnUnregister(const protocol::UnregisterNodeRequest& req, uint64_t id) {
  protocol::UnregisterNodeReply reply;
  std::string reason = req.reason.empty() ? "stopped" : req.reason.substr(0, 200);
  reply.ok = nodes_.MarkDead(req.node_id, reason);
  if (reply.ok) leases_.OnNodeDead(req.node_id);
  if (reply.ok) {
    RAYX_LOG(Info) << "node " << req.node_id.Short() << " left: " << reason << "; "
                   << nodes_.alive_count() << " alive";
  }
  return transport::MakeMessage(reply, id);
}

Frames HeadService::OnGetClusterStatus(const protocol::GetClusterStatusRequest& req, uint64_t id,
                                       const std::string& peer) {
  if (!TokenMatches(req.token)) {
    return Refuse(Status::Unauthenticated(
                      "wrong cluster token: run `rayx status` on a machine of the cluster, or "
                      "pass --token (printed by `rayx start --head`)"),
                  id, peer, "status request");
  }
  protocol::GetClusterStatusReply reply;
  int64_t now = clock_.NowMs();
  reply.status.rayx_version = kRayxVersion;
  reply.status.cluster_id = options_.cluster_id;
  reply.status.head_uptime_ms = now - started_ms_;
  reply.status.heartbeat_period_ms = options_.heartbeat_period_ms;
  reply.status.node_timeout_ms = options_.nodes.node_timeout_ms;
  reply.status.nodes = nodes_.Snapshot(now);
  reply.status.pending_demands = leases_.PendingShapes();
  reply.status.infeasible_demands = leases_.InfeasibleShapes();
  reply.status.head_messages = handled_;
  return transport::MakeMessage(reply, id);
}

void HeadService::ExpireSilentNodes() {
  int64_t now = clock_.NowMs();
  if (now - last_flush_ms_ >= 10000) {
    last_flush_ms_ = now;
    FlushRejectionLog();
  }
  leases_.ExpireSilentJobs(now);
  leases_.Tick(now);
  for (const NodeId& id : nodes_.ExpireSilentNodes(now)) {
    leases_.OnNodeDead(id);
    RAYX_LOG(Warning) << "node " << id.Short() << " declared dead: no heartbeat within "
                      << options_.nodes.node_timeout_ms << " ms; " << nodes_.alive_count()
                      << " alive";
  }
}

std::optional<Frames> HeadService::HandleSubmittedJobMessage(uint16_t type, std::string_view body,
                                                             uint64_t id,
                                                             const std::string& peer_id,
                                                             const Frames& frames) {
  const std::string peer = PeerName(peer_id);
  std::string type_name = protocol::MessageTypeName(type);
  auto bad_body = [&](const Status& status) {
    return Refuse(Status::InvalidArgument("malformed " + type_name + ": " + status.message()), id,
                  peer, type_name);
  };
  auto error = [&](const Status& status) {
    return transport::MakeErrorMessage(status, options_.where, id);
  };
  auto refuse_token = [&] {
    return Refuse(Status::Unauthenticated("wrong cluster token: run rayx job on a machine of the "
                                          "cluster, or pass --token (printed by `rayx start "
                                          "--head`)"),
                  id, peer, type_name);
  };
  switch (static_cast<MessageType>(type)) {
    case MessageType::kSubmitJobRequest: {
      auto req = protocol::Decode<protocol::SubmitJobRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      if (!TokenMatches(req->token)) return refuse_token();
      auto job = jobs_.Submit(*req);
      if (!job.ok()) return error(job.status());
      protocol::SubmitJobReply reply;
      reply.job = std::move(*job);
      return transport::MakeMessage(reply, id);
    }
    case MessageType::kGetJobRequest: {
      auto req = protocol::Decode<protocol::GetJobRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      if (!TokenMatches(req->token)) return refuse_token();
      auto job = jobs_.Get(req->submission_id);
      if (!job.ok()) return error(job.status());
      protocol::GetJobReply reply;
      reply.job = std::move(*job);
      return transport::MakeMessage(reply, id);
    }
    case MessageType::kListJobsRequest: {
      auto req = protocol::Decode<protocol::ListJobsRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      if (!TokenMatches(req->token)) return refuse_token();
      protocol::ListJobsReply reply;
      reply.jobs = jobs_.List();
      return transport::MakeMessage(reply, id);
    }
    case MessageType::kStopJobRequest: {
      auto req = protocol::Decode<protocol::StopJobRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      if (!TokenMatches(req->token)) return refuse_token();
      auto job = jobs_.Stop(req->submission_id);
      if (!job.ok()) return error(job.status());
      protocol::StopJobReply reply;
      reply.job = std::move(*job);
      return transport::MakeMessage(reply, id);
    }
    case MessageType::kHasPackageRequest: {
      auto req = protocol::Decode<protocol::HasPackageRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      if (!TokenMatches(req->token)) return refuse_token();
      protocol::HasPackageReply reply;
      reply.present = jobs_.HasPackage(req->hash);
      reply.max_bytes = jobs_.max_package_bytes();
      return transport::MakeMessage(reply, id);
    }
    case MessageType::kPutPackageRequest: {
      auto req = protocol::Decode<protocol::PutPackageRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      if (!TokenMatches(req->token)) return refuse_token();
      std::string_view bytes = frames.size() > 2 ? FrameView(frames[2]) : std::string_view();
      auto done = jobs_.PutPackage(*req, bytes);
      if (!done.ok()) return error(done.status());
      protocol::PutPackageReply reply;
      reply.complete = *done;
      return transport::MakeMessage(reply, id);
    }
    case MessageType::kGetPackageRequest: {
      if (!authenticated_peers_.count(peer_id)) {
        return Refuse(Status::Unauthenticated("only node agents fetch packages"), id, peer,
                      type_name);
      }
      auto req = protocol::Decode<protocol::GetPackageRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      auto chunk = jobs_.ReadPackage(req->hash, req->offset, req->length);
      if (!chunk.ok()) return error(chunk.status());
      protocol::GetPackageReply reply;
      reply.hash = req->hash;
      reply.offset = req->offset;
      reply.total_size = chunk->first;
      Frames out = transport::MakeMessage(reply, id);
      out.push_back(zmq::message_t(chunk->second.data(), chunk->second.size()));
      return out;
    }
    default:
      return std::nullopt;
  }
}

std::optional<Frames> HeadService::HandleJobMessage(uint16_t type, std::string_view body,
                                                    uint64_t id, const std::string& peer_id) {
  const std::string peer = PeerName(peer_id);
  std::string type_name = protocol::MessageTypeName(type);
  auto bad_body = [&](const Status& status) {
    return Refuse(Status::InvalidArgument("malformed " + type_name + ": " + status.message()), id,
                  peer, type_name);
  };
  auto error = [&](const Status& status) {
    return transport::MakeErrorMessage(status, options_.where, id);
  };
  switch (static_cast<MessageType>(type)) {
    case MessageType::kRegisterDriverRequest: {
      auto req = protocol::Decode<protocol::RegisterDriverRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      if (!TokenMatches(req->token)) {
        return Refuse(Status::Unauthenticated(
                          "wrong cluster token: set RAYX_TOKEN (printed by `rayx start --head`) "
                          "or run on a machine of the cluster"),
                      id, peer, "driver registration");
      }
      if (req->rayx_version != kRayxVersion) {
        return Refuse(Status::InvalidArgument("version mismatch: this program uses rayx " +
                                              req->rayx_version + ", the head runs rayx " +
                                              kRayxVersion + ": rebuild it against rayx " +
                                              kRayxVersion),
                      id, peer, "driver registration");
      }
      // A worker joins its running job; only a driver starts a new one.
      if (!req->job_id.empty() && !leases_.DriverHeartbeat(req->job_id, clock_.NowMs())) {
        return error(Status::NotFound("job " + req->job_id + " is not running (it ended)"));
      }
      authenticated_peers_.insert(peer_id);
      return transport::MakeMessage(
          leases_.RegisterDriver(*req, clock_.NowMs(), options_.cluster_id), id);
    }
    case MessageType::kDriverHeartbeatRequest: {
      auto req = protocol::Decode<protocol::DriverHeartbeatRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      protocol::DriverHeartbeatReply reply;
      reply.known = leases_.DriverHeartbeat(req->job_id, clock_.NowMs());
      return transport::MakeMessage(reply, id);
    }
    case MessageType::kFinishJobRequest: {
      auto req = protocol::Decode<protocol::FinishJobRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      protocol::FinishJobReply reply;
      reply.workers_killed = leases_.FinishJob(req->job_id, "its driver finished");
      return transport::MakeMessage(reply, id);
    }
    case MessageType::kRequestLeaseRequest: {
      auto req = protocol::Decode<protocol::RequestLeaseRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      if (!leases_.DriverHeartbeat(req->job_id, clock_.NowMs())) {
        return error(Status::NotFound("job " + req->job_id + " is not running"));
      }
      leases_.RequestLease(peer_id, id, *req);
      return std::nullopt;  // answered when the worker runs
    }
    case MessageType::kReturnLeaseRequest: {
      auto req = protocol::Decode<protocol::ReturnLeaseRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      protocol::ReturnLeaseReply reply;
      reply.ok = leases_.ReturnLease(req->lease_id).ok();
      return transport::MakeMessage(reply, id);
    }
    case MessageType::kStartWorkerReply: {
      auto req = protocol::Decode<protocol::StartWorkerReply>(body);
      if (!req.ok()) return bad_body(req.status());
      leases_.OnStartWorkerReply(id, *req);
      return std::nullopt;
    }
    case MessageType::kRegisterActorRequest: {
      auto req = protocol::Decode<protocol::RegisterActorRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      Status s = leases_.RegisterActor(req->actor);
      if (!s.ok()) return error(s);
      return transport::MakeMessage(protocol::RegisterActorReply{}, id);
    }
    case MessageType::kGetActorRequest: {
      auto req = protocol::Decode<protocol::GetActorRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      auto actor = leases_.GetActor(req->name);
      if (!actor.ok()) return error(actor.status());
      protocol::GetActorReply reply;
      reply.actor = *actor;
      return transport::MakeMessage(reply, id);
    }
    case MessageType::kCreatePlacementGroupRequest: {
      auto req = protocol::Decode<protocol::CreatePlacementGroupRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      auto group = leases_.CreatePlacementGroup(*req);
      if (!group.ok()) return error(group.status());
      protocol::CreatePlacementGroupReply reply;
      reply.group = std::move(*group);
      return transport::MakeMessage(reply, id);
    }
    case MessageType::kWaitPlacementGroupRequest: {
      auto req = protocol::Decode<protocol::WaitPlacementGroupRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      leases_.WaitPlacementGroup(peer_id, id, *req, clock_.NowMs());
      return std::nullopt;  // answered now or later through the outbox
    }
    case MessageType::kRemovePlacementGroupRequest: {
      auto req = protocol::Decode<protocol::RemovePlacementGroupRequest>(body);
      if (!req.ok()) return bad_body(req.status());
      protocol::RemovePlacementGroupReply reply;
      reply.removed = leases_.RemovePlacementGroup(req->placement_group_id);
      return transport::MakeMessage(reply, id);
    }
    default:
      return Refuse(Status::InvalidArgument("unknown message type " + type_name + " for the head"),
                    id, peer, type_name);
  }
}

}  // namespace rayx::scheduler
