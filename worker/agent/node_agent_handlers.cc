// Node agent: what the head sends, decoded once through a typed table (each
// message type to its handler, the protocol version checked first), and the
// handlers. Part of NodeAgent (node_agent.h).
#include <string>

#include "agent/node_agent.h"
#include "common/logging.h"
#include "transport/message.h"

namespace rayx::worker {

using protocol::MessageType;

void NodeAgent::OnMessage(transport::Frames& frames) {
  HandleMessage(frames);
  ArmWakeup();
}

template <typename Msg>
void NodeAgent::On(void (NodeAgent::*handler)(const Msg&, const FromHead&)) {
  On(Msg::kType, handler);
}

template <typename Msg>
void NodeAgent::On(MessageType type, void (NodeAgent::*handler)(const Msg&, const FromHead&)) {
  handlers_[static_cast<uint16_t>(type)] = [this, handler](const FromHead& from) {
    auto msg = protocol::Decode<Msg>(transport::FrameView(from.frames[1]));
    if (!msg.ok()) {
      RAYX_LOG(Warning) << "dropped a malformed " << protocol::MessageTypeName(from.env.t)
                        << " from the head: " << msg.status();
      return;
    }
    (this->*handler)(*msg, from);
  };
}

void NodeAgent::RegisterHandlers() {
  On(MessageType::kErrorReply, &NodeAgent::HandleErrorReply);
  On(&NodeAgent::HandleRegisterReply);
  On(&NodeAgent::HandleHeartbeatReply);
  On(&NodeAgent::HandleStartWorker);
  On(&NodeAgent::HandlePackageReply);
  On(&NodeAgent::HandleJobCredential);
  On(&NodeAgent::HandleJobFinished);
  On(&NodeAgent::HandleFlushOutput);
  On(&NodeAgent::HandleWatchDriver);
  On(&NodeAgent::HandleKillWorkers);
  On(&NodeAgent::HandleUnregisterReply);
  On(&NodeAgent::HandleAdoptCheckpointsReply);
}

void NodeAgent::HandleMessage(transport::Frames& frames) {
  if (frames.size() < 2) return;
  auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(frames[0]));
  if (!env.ok()) {
    RAYX_LOG(Warning) << "dropped an undecodable message from the head: " << env.status();
    return;
  }
  // The error reply's form is frozen across versions: a head of another
  // version refusing this node says why in one.
  if (Status version = protocol::CheckProtocolVersion(*env, "this node agent");
      !version.ok() && env->t != static_cast<uint16_t>(MessageType::kErrorReply)) {
    RAYX_LOG(Warning) << "dropped a " << protocol::MessageTypeName(env->t)
                      << " from the head: " << version.message();
    return;
  }
  last_reply_ms_ = clock_.NowMs();
  auto handler = handlers_.find(env->t);
  if (handler == handlers_.end()) {
    RAYX_LOG(Warning) << "ignored unexpected " << protocol::MessageTypeName(env->t)
                      << " from the head";
    return;
  }
  handler->second(FromHead{*env, frames});
}

void NodeAgent::HandleErrorReply(const protocol::ErrorReply& error, const FromHead& from) {
  Status status = error.ToStatus();
  if (from.env.id == register_id_ && rejoining()) {
    // The restarted head does not know this node as it was: fence.
    exits_while_rejoining_.clear();
    Fence("the restarted head refused the rejoin of node " + node_id_.Short() + " (" +
          status.message() + ")");
  } else if (from.env.id == register_id_) {
    Fatal(Status(status.code(), "the head refused this node: " + status.message()));
  } else if (packages_.OnError(from.env.id, status)) {
    // a package fetch failed; its leases were answered
  } else {
    RAYX_LOG(Warning) << "the head answered an error: " << status;
  }
}

void NodeAgent::HandleRegisterReply(const protocol::RegisterNodeReply& reply,
                                    const FromHead& from) {
  if (from.env.id != register_id_) return;
  if (reply.wire_security != static_cast<uint8_t>(options_.wire_security)) {
    Fatal(Status::InvalidArgument(
        std::string("the head protects data connections as '") +
        std::string(transport::WireSecurityName(reply.wire_security
                                                    ? transport::WireSecurity::kEncrypted
                                                    : transport::WireSecurity::kAuthenticated)) +
        "', this agent's object server as '" +
        std::string(transport::WireSecurityName(options_.wire_security)) +
        "': restart this node with `rayx start --address ...` so it asks the head again"));
    return;
  }
  // Exactly the jobs the head admits (a restarted head may have forgotten some).
  {
    std::unordered_set<JobId> admitted(reply.admitted_jobs.begin(),
                                       reply.admitted_jobs.end());
    for (const JobId& job : verifier_->AllowedJobs()) {
      if (!admitted.count(job)) verifier_->ForgetJob(job);
    }
    for (const JobId& job : admitted) verifier_->AllowJob(job);
  }
  bool rejoined = rejoining();
  membership_ = Membership::kJoined;
  // A node new to the head (not a rejoin) counts its workers' work
  // afresh: what it counted as the node before was counted then.
  if (reply.node_id != node_id_) work_since_join_ = {};
  node_id_ = reply.node_id;
  epoch_ = reply.epoch;
  first_heartbeat_id_ = next_id_ + 1;
  heartbeat_period_ms_ = std::max<int64_t>(reply.heartbeat_period_ms, 10);
  RAYX_LOG(Info) << "joined cluster " << reply.cluster_id << " at " << options_.head.ToString()
                 << " as node " << node_id_.Short() << ", epoch " << epoch_
                 << " (heartbeat every " << heartbeat_period_ms_ << " ms)";
  if (!joined_once_) {
    joined_once_ = true;
    join_deadline_ms_.reset();
    if (callbacks_.on_joined) callbacks_.on_joined(reply);
    SendHeartbeat();
    AdoptCheckpoints();
  }
  if (rejoined) {
    RAYX_LOG(Info) << "rejoined the restarted head as node " << node_id_.Short()
                   << " without stopping its " << live_leases_.size() << " leases";
    std::vector<protocol::ProcessExitedNotice> exits;
    exits.swap(exits_while_rejoining_);
    for (const auto& notice : exits) SendExit(notice);
  }
  std::vector<Deferred> early;
  early.swap(before_joined_);
  for (auto& d : early) OnStartWorker(d.req, d.id);
}

void NodeAgent::HandleAdoptCheckpointsReply(const protocol::AdoptCheckpointsReply& reply,
                                            const FromHead&) {
  if (!adopted_checkpoints_) return;
  const size_t removed = adopted_checkpoints_->OnReply(reply);
  RAYX_LOG(Info) << "the head took back " << reply.adopted.size()
                 << " checkpoint record(s) from this node's directory; " << removed
                 << " checkpoint(s) dropped while no agent held it were removed";
}

void NodeAgent::HandleHeartbeatReply(const protocol::HeartbeatReply& reply,
                                     const FromHead& from) {
  if (!reply.stop.empty() && !leaving_ && !stop_heard_) {
    stop_heard_ = true;
    RAYX_LOG(Info) << "the head stops the cluster (" << reply.stop << "): leaving";
    if (callbacks_.on_cluster_stopped) callbacks_.on_cluster_stopped(reply.stop);
    return;
  }
  // A reply to a heartbeat of an earlier incarnation says nothing about this one.
  if (!reply.known && reply.rejoin && !registering() && !fencing() &&
      from.env.id >= first_heartbeat_id_) {
    RAYX_LOG(Warning) << "the head restarted: rejoining as node " << node_id_.Short()
                      << " (epoch " << epoch_ << ") with " << live_leases_.size()
                      << " leases still running";
    Rejoin();
  } else if (!reply.known && !registering() && !fencing() &&
             from.env.id >= first_heartbeat_id_) {
    Fence("the head declared node " + node_id_.Short() + " (epoch " +
          std::to_string(epoch_) + ") dead (missed heartbeats)");
  }
}

void NodeAgent::HandleStartWorker(const protocol::StartWorkerRequest& req, const FromHead& from) {
  OnStartWorker(req, from.env.id);
}

void NodeAgent::HandlePackageReply(const protocol::GetPackageReply& reply, const FromHead& from) {
  std::string_view bytes = from.frames.size() > 2 ? transport::FrameView(from.frames[2]) : "";
  packages_.OnReply(from.env.id, reply, bytes);
}

void NodeAgent::HandleJobCredential(const protocol::JobCredentialNotice& req, const FromHead&) {
  if (req.job_id.IsNil()) return;
  if (req.admitted) {
    verifier_->AllowJob(req.job_id);
  } else {
    verifier_->ForgetJob(req.job_id);
  }
}

void NodeAgent::HandleJobFinished(const protocol::JobFinishedNotice& req, const FromHead&) {
  if (req.job_id.IsNil()) return;
  size_t removed = objects_.RemoveJob(req.job_id.Hex());
  if (removed) RAYX_LOG(Info) << "job " << req.job_id << " ended: freed " << removed << " objects";
}

void NodeAgent::HandleFlushOutput(const protocol::FlushOutputRequest&, const FromHead& from) {
  // A driver is ending its job: what every worker wrote until now goes to the
  // head before this answer does.
  ForwardOutput();
  if (leaving_ || !connected_ || fencing() || registering()) return;
  transport::Frames done = transport::MakeMessage(protocol::FlushOutputReply{}, from.env.id);
  (void)head_->Send(done);
}

void NodeAgent::HandleWatchDriver(const protocol::WatchDriverRequest& req, const FromHead&) {
  if (req.job_id.IsNil() || req.pid <= 0) return;
  auto start = detail::ProcessStartTime(req.pid);
  if (!start.ok()) {
    ReportDriverExit(req.job_id, req.pid);  // gone already
    return;
  }
  if (watched_drivers_.size() >= kMaxWatchedDrivers) {
    RAYX_LOG(Warning) << "not watching driver pid " << req.pid << " of job " << req.job_id
                      << ": " << kMaxWatchedDrivers << " drivers are watched already";
    return;
  }
  watched_drivers_[req.job_id] = detail::ProcessRecord{req.pid, *start};
}

void NodeAgent::HandleKillWorkers(const protocol::KillWorkersRequest& req, const FromHead&) {
  for (const auto& lease : req.lease_ids) {
    live_leases_.erase(lease);
    // Not started yet (waiting for devices, its package, or the join): it
    // never will be.
    for (auto* queue : {&deferred_, &before_joined_}) {
      std::erase_if(*queue, [&](const Deferred& d) {
        if (d.req.lease_id != lease) return false;
        ReplyCancelled(lease, d.id);
        return true;
      });
    }
    if (auto fetching = fetching_.find(lease); fetching != fetching_.end()) {
      ReplyCancelled(lease, fetching->second);
      fetching_.erase(fetching);
    }
    processes_->Kill(lease);
  }
}

void NodeAgent::HandleUnregisterReply(const protocol::UnregisterNodeReply&, const FromHead& from) {
  if (from.env.id == unregister_id_ && leave_done_) {
    auto done = std::move(leave_done_);
    leave_done_ = nullptr;
    done();
  }
}

}  // namespace rayx::worker
