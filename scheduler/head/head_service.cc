// Request handling for the head: one handler per message type.
#include "head/head_service.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "common/text.h"
#include "transport/security.h"

namespace rayx::scheduler {


using protocol::MessageType;
using transport::Frames;

namespace {

constexpr const char* kRegisterFirst = protocol::kRegisterFirstMessage;

}  // namespace

HeadService::HeadService(HeadServiceOptions options, const Clock& clock)
    : options_(std::move(options)),
      clock_(clock),
      nodes_(options_.nodes),
      outbox_(options_.where),
      groups_(nodes_, outbox_),
      leases_(options_.leases, nodes_, groups_, outbox_),
      jobs_(options_.jobs, leases_, nodes_, clock),
      kv_(options_.kv,
          options_.store ? std::unique_ptr<KvStorage>(std::make_unique<PersistentKvStorage>(
                               *options_.store, options_.restored.kv))
                         : std::make_unique<InMemoryKvStorage>()),
      router_({options_.where},
              [this](const std::string& peer_id, const transport::Principal& principal) {
                auto it = sessions_.find(peer_id);
                return it != sessions_.end() && it->second.principal == principal;
              }),
      started_ms_(clock.NowMs()) {
  RegisterRoutes();
  leases_.SetJobStartObserver([this](const JobId& job) { AdmitJob(job); });
  outbox_.SetAnswerObserver([this](const Requester& to, const transport::Frames& frames) {
    dedup_.AnsweredLater(to.peer, to.request_id, frames);
  });
  outbox_.SetOwnerNoticeHold([this](const std::string& peer, transport::Frames& frames) {
    return HoldOwnerNotice(peer, frames);
  });
  if (!options_.token.empty()) {
    // Whoever may look an actor up (any admitted job, over the encrypted head
    // socket) may call it, as in Ray: the reply carries that actor's key.
    outbox_.SetActorKeys([cluster = transport::Credential::Cluster(options_.token)](
                             protocol::ActorInfo& actor) {
      auto key = cluster.KeyFor(actor.job_id, actor.actor_id);
      if (!key.ok()) return;
      actor.call_secret = std::move(key->secret);
      actor.worker_key = std::move(key->worker_key);
    });
  }
  leases_.SetHostedPeerEndObserver([this](const std::string& peer) { dedup_.RemovePeer(peer); });
  leases_.SetJobEndObserver([this](const JobId& job_id) {
    if (auto peers = peers_of_job_.find(job_id); peers != peers_of_job_.end()) {
      for (const auto& peer : peers->second) {
        sessions_.erase(peer);
        work_counted_.erase(peer);
        // A detached actor's runtime outlives the job, with its queued lease
        // requests (FinishJob keeps them): its record goes with its worker
        // (SetHostedPeerEndObserver), so a repeat after it registers again is
        // still known.
        if (!leases_.HostedByDetachedActor(peer)) dedup_.RemovePeer(peer);
      }
      peers_of_job_.erase(peers);
    }
    output_peers_of_job_.erase(job_id);
    if (size_t removed = kv_.OnJobFinished(job_id); removed > 0) {
      RAYX_LOG(Info) << "removed " << removed << " KV keys of job " << job_id;
    }
  });
  // The other ranks of a group hear at once when a rank's lease ends. When
  // its whole job ends, only ranks that outlive the job (detached actors) are
  // told: the others are being stopped too.
  leases_.SetLeaseEndObserver(
      [this](const LeaseId& lease_id, const std::string& cause, bool job_ended) {
        for (const auto& n : group_watch_.OnLeaseEnded(lease_id, cause)) {
          if (job_ended && !leases_.IsDetached(n.member_lease_id)) continue;
          outbox_.GroupMemberDied(n.peer, n.notice);
        }
      });
  if (HeadStore* store = options_.store) {
    // A restarted head is the same cluster: same id, same nodes, jobs, ...
    const HeadState& state = options_.restored;
    auto id = state.meta.find("cluster_id");
    if (id != state.meta.end() && !id->second.empty()) {
      options_.cluster_id = id->second;
    } else {
      store->PutMeta("cluster_id", options_.cluster_id);
    }
    uint64_t next_epoch = 1;
    if (auto e = state.meta.find("next_epoch"); e != state.meta.end()) {
      next_epoch = std::strtoull(e->second.c_str(), nullptr, 10);
    }
    int64_t now = clock.NowMs();
    nodes_.SetStore(store);
    nodes_.Restore(state.nodes, next_epoch, now);
    leases_.SetStore(store);
    leases_.Restore(state, now);
    group_watch_.SetStore(store);
    // A watch whose lease is not stored any more ended with a crash between
    // the two writes: it is dropped.
    std::unordered_set<LeaseId> stored_leases;
    for (const auto& lease : state.leases) stored_leases.insert(lease.lease_id);
    std::vector<StoredGroupWatch> watches;
    for (const auto& w : state.group_watches) {
      if (stored_leases.count(w.lease_id)) {
        watches.push_back(w);
      } else {
        store->DeleteGroupWatch(w.group, w.attempt_id, w.rank);
      }
    }
    group_watch_.Restore(watches);
    jobs_.SetStore(store);
    jobs_.Restore(state.submitted_jobs);
    jobs_.RestoreKeepers(state.package_keepers);
    leases_.EndWhatLostNodesHeld();
    restored_from_state_ = !state.leases.empty();
    if (!state.empty()) {
      RAYX_LOG(Info) << "restored cluster " << options_.cluster_id << " from " << store->path()
                     << ": " << state.nodes.size() << " nodes to rejoin, " << state.kv.size()
                     << " KV keys, " << state.submitted_jobs.size() << " submitted jobs";
    }
    options_.restored = HeadState();  // loaded; not needed again
  }
  // A restarted head admits what its previous life admitted and still lives.
  leases_.ForEachLiveJob([this](const JobId& job) { admitted_jobs_.insert(job); });
}

void HeadService::AdmitJob(const JobId& job) {
  if (!admitted_jobs_.insert(job).second) return;
  if (credential_observer_) credential_observer_(job, true);
  protocol::JobCredentialNotice notice;
  notice.job_id = job;
  notice.admitted = true;
  // O(nodes) once per job, as JobFinishedNotice: agents' object servers admit
  // the job's workers from any node.
  leases_.ForEachAgentPeer([&](const std::string& peer) { outbox_.JobCredential(peer, notice); });
}

void HeadService::RetireEndedJobs(int64_t now_ms) {
  if (now_ms - last_retire_ms_ < 10000) return;
  last_retire_ms_ = now_ms;
  std::unordered_set<JobId> live;
  leases_.ForEachLiveJob([&live](const JobId& job) { live.insert(job); });
  std::vector<JobId> retired;
  for (const JobId& job : admitted_jobs_) {
    if (!live.count(job)) retired.push_back(job);
  }
  for (const JobId& job : retired) {
    admitted_jobs_.erase(job);
    if (credential_observer_) credential_observer_(job, false);
    protocol::JobCredentialNotice notice;
    notice.job_id = job;
    leases_.ForEachAgentPeer([&](const std::string& peer) { outbox_.JobCredential(peer, notice); });
  }
}

void HeadService::RegisterRoutes() {
  // Who may send what (Auth): the sender's connection proved the cluster's or
  // a job's credential before any message reached the router (ZAP).
  constexpr char kClusterOnly[] =
      "only holders of the cluster token (node agents, the CLI, drivers) may send this; a job's "
      "workers may not";
  constexpr char kNodesOnly[] = "only node agents send this: register the node first";
  // Nodes.
  On(Auth::kCluster, kClusterOnly, &HeadService::OnRegisterNode);
  On(Auth::kCluster, kClusterOnly, &HeadService::OnHeartbeat);
  On(Auth::kCluster, kClusterOnly, &HeadService::OnUnregister);
  On(Auth::kMember, kClusterOnly, &HeadService::OnGetClusterStatus);
  On(Auth::kCluster, kClusterOnly, &HeadService::OnStopCluster);
  On(Auth::kMember, kClusterOnly, &HeadService::OnListState);
  On(Auth::kSession, kNodesOnly, &HeadService::OnProcessExited);
  On(Auth::kSession, kNodesOnly, &HeadService::OnDriverExited);
  On(Auth::kSession, kNodesOnly, &HeadService::OnActorConstruction);
  On(Auth::kSession, kNodesOnly, &HeadService::OnWorkerOutput);
  On(Auth::kSession, kNodesOnly, &HeadService::OnOutputFlushed);
  On(MessageType::kErrorReply, Auth::kSession, "", &HeadService::OnAgentError);
  router_.SetSilent(MessageType::kErrorReply);
  On(Auth::kSession, kRegisterFirst, &HeadService::OnStartWorkerReply);
  // Submitted jobs and packages. A job's ranks write and read checkpoints
  // (packages) with their job's credential.
  On(Auth::kCluster, kClusterOnly, &HeadService::OnSubmitJob);
  On(Auth::kCluster, kClusterOnly, &HeadService::OnGetJob);
  On(Auth::kCluster, kClusterOnly, &HeadService::OnListJobs);
  On(Auth::kCluster, kClusterOnly, &HeadService::OnStopJob);
  On(Auth::kMember, kClusterOnly, &HeadService::OnHasPackage);
  On(Auth::kMember, kClusterOnly, &HeadService::OnPutPackage);
  On(Auth::kMember, kClusterOnly, &HeadService::OnKeepPackage);
  On(Auth::kMember, kClusterOnly, &HeadService::OnGetPackage);
  // Drivers, leases, actors and placement groups.
  On(Auth::kMember, kClusterOnly, &HeadService::OnRegisterDriver);
  On(Auth::kSession, kRegisterFirst, &HeadService::OnDriverHeartbeat);
  On(Auth::kSession, kRegisterFirst, &HeadService::OnFinishJob);
  On(Auth::kSession, kRegisterFirst, &HeadService::OnFlushOutput);
  On(Auth::kSession, kRegisterFirst, &HeadService::OnRequestLease);
  On(Auth::kSession, kRegisterFirst, &HeadService::OnReturnLease);
  On(Auth::kSession, kRegisterFirst, &HeadService::OnLeaseBlocked);
  On(Auth::kSession, kRegisterFirst, &HeadService::OnRegisterActor);
  On(Auth::kSession, kRegisterFirst, &HeadService::OnGetActor);
  On(Auth::kSession, kRegisterFirst, &HeadService::OnDropActorName);
  On(Auth::kSession, kRegisterFirst, &HeadService::OnCreatePlacementGroup);
  On(Auth::kSession, kRegisterFirst, &HeadService::OnWaitPlacementGroup);
  On(Auth::kSession, kRegisterFirst, &HeadService::OnRemovePlacementGroup);
  // The key-value store.
  On(Auth::kSession, kRegisterFirst, &HeadService::OnKvPut);
  On(Auth::kSession, kRegisterFirst, &HeadService::OnKvGet);
  On(Auth::kSession, kRegisterFirst, &HeadService::OnKvWait);
  On(Auth::kSession, kRegisterFirst, &HeadService::OnKvDelete);
  On(Auth::kSession, kRegisterFirst, &HeadService::OnKvList);
  On(Auth::kCluster, kClusterOnly, &HeadService::OnCheckpointRecords);
  On(Auth::kCluster, kClusterOnly, &HeadService::OnAdoptCheckpoints);
  // Collective groups' members.
  On(Auth::kSession, kRegisterFirst, &HeadService::OnWatchGroup);
  On(Auth::kSession, kRegisterFirst, &HeadService::OnUnwatchGroup);
  // An oversized key or value gets the store's error naming the limit, not a
  // decoding error: the frame size limit bounds it.
  protocol::DecodeLimits kv_limits;
  kv_limits.max_str = protocol::kMaxControlFrameBytes;
  router_.SetDecodeLimits(MessageType::kKvPutRequest, kv_limits);
  for (MessageType type : {MessageType::kKvGetRequest, MessageType::kKvWaitRequest,
                           MessageType::kKvDeleteRequest, MessageType::kKvListRequest,
                           MessageType::kAdoptCheckpointsRequest}) {
    router_.SetDecodeLimits(type, kv_limits);
  }
}

std::optional<transport::Frames> HeadService::Handle(transport::Frames& frames,
                                                     const std::string& peer,
                                                     const transport::Principal& principal) {
  if (!dedup_.Tracks(peer)) return router_.Dispatch(frames, peer, principal);
  // A registered runtime's message: its envelope is decoded once, here.
  auto env = RequestRouter::DecodeEnvelope(frames, peer);
  if (!env.ok()) return router_.Dispatch(frames, peer, principal);  // dropped and logged there
  uint64_t id = 0;  // set when this request is remembered (RequestDedup)
  if (env->id != 0 && RequestDedup::Remembers(env->t)) {
    transport::Frames again;
    switch (dedup_.Check(peer, env->id, &again)) {
      case RequestDedup::Seen::kAnswered:
        ++repeated_requests_;
        return again;
      case RequestDedup::Seen::kParked:
        ++repeated_requests_;
        return std::nullopt;  // answered when its first copy is
      case RequestDedup::Seen::kNew:
        id = env->id;
        break;
    }
  }
  auto reply = router_.Dispatch(*env, frames, peer, principal);
  if (id != 0) dedup_.Handled(peer, id, reply ? &*reply : nullptr);
  return reply;
}

namespace {
// How long a restored head keeps notices for owners that have not registered
// again, and how many.
constexpr int64_t kHoldOwnerNoticesMs = 120000;
constexpr size_t kMaxHeldOwners = 1024;
constexpr size_t kMaxHeldPerOwner = 4096;
}  // namespace

bool HeadService::HoldOwnerNotice(const std::string& peer, transport::Frames& frames) {
  if (!restored_from_state_ || sessions_.count(peer)) return false;
  if (clock_.NowMs() - started_ms_ > kHoldOwnerNoticesMs) return false;
  auto it = held_notices_.find(peer);
  if (it == held_notices_.end()) {
    if (held_notices_.size() >= kMaxHeldOwners) return false;
    it = held_notices_.emplace(peer, std::vector<transport::Frames>()).first;
  }
  if (it->second.size() >= kMaxHeldPerOwner) return false;
  it->second.push_back(std::move(frames));
  return true;
}

void HeadService::ReleaseOwnerNotices(const std::string& peer) {
  auto it = held_notices_.find(peer);
  if (it == held_notices_.end()) return;
  std::vector<transport::Frames> held = std::move(it->second);
  held_notices_.erase(it);
  RAYX_LOG(Info) << "sending " << held.size() << " notices kept for " << RequestRouter::PeerName(peer)
                 << " while it registered again";
  for (auto& frames : held) {
    if (send_) send_(peer, std::move(frames));
  }
}

void HeadService::ExpireSilentNodes() {
  int64_t now = clock_.NowMs();
  if (!held_notices_.empty() && now - started_ms_ > kHoldOwnerNoticesMs) held_notices_.clear();
  if (now - last_flush_ms_ >= 10000) {
    last_flush_ms_ = now;
    router_.FlushRejectionLog();
    jobs_.ExpireUploads();  // abandoned parts go even when no other upload comes
  }
  leases_.ExpireSilentJobs(now);
  leases_.Tick(now);
  groups_.ExpireWaits(now);
  RetireEndedJobs(now);
  AnswerKvWaits(kv_.ExpireWaits(now));
  ExpireOutputFlushes(now);
  for (const NodeId& id : nodes_.ExpireSilentNodes(now)) {
    NodeDied(id, "no heartbeat within " + std::to_string(options_.nodes.node_timeout_ms) + " ms");
    RAYX_LOG(Warning) << "node " << id.Short() << " declared dead: no heartbeat within "
                      << options_.nodes.node_timeout_ms << " ms; " << nodes_.alive_count()
                      << " alive";
  }
}

void HeadService::NodeDied(const NodeId& node, const std::string& why) {
  leases_.OnNodeDead(node, why);
  work_counted_.erase(WorkSource(node));
}

void HeadService::CountWork(const std::string& source, const WorkCounts& now) {
  // Counts only grow: what grew since the last report goes into the totals (a
  // smaller one is a new process under an old name: all of it).
  WorkCounts& last = work_counted_[source];
  work_totals_.AddGrowth(now, last);
  last = now;
}

Status HeadService::CheckIncarnation(const std::string& peer, const NodeId& node, uint64_t epoch,
                                     const std::string& what) {
  uint64_t current = nodes_.EpochOf(node);
  const std::string* agent = leases_.AgentPeerOf(node);
  std::string why;
  if (current == 0) {
    why = "node " + node.Short() + " is dead";
  } else if (agent == nullptr || *agent != peer) {
    why = "it came from another agent than node " + node.Short() + "'s";
  } else if (epoch != current) {
    why = "it is from epoch " + std::to_string(epoch) + " of node " + node.Short() +
          ", which is at epoch " + std::to_string(current);
  } else {
    return Status::OK();
  }
  ++stale_incarnation_count_;
  RAYX_LOG(Warning) << "refused " << what << " from " << RequestRouter::PeerName(peer) << ": "
                    << why << " (a fenced-off node incarnation)";
  return Status::Unavailable("refused " + what + ": " + why);
}

// ---- Submitted jobs and packages.

Result<protocol::SubmitJobReply> HeadService::OnSubmitJob(const protocol::SubmitJobRequest& req,
                                                          Call&) {
  auto job = jobs_.Submit(req);
  if (!job.ok()) return job.status();
  protocol::SubmitJobReply reply;
  reply.job = std::move(*job);
  return reply;
}

Result<protocol::GetJobReply> HeadService::OnGetJob(const protocol::GetJobRequest& req, Call&) {
  auto job = jobs_.Get(req.submission_id);
  if (!job.ok()) return job.status();
  protocol::GetJobReply reply;
  reply.job = std::move(*job);
  return reply;
}

Result<protocol::ListJobsReply> HeadService::OnListJobs(const protocol::ListJobsRequest&, Call&) {
  protocol::ListJobsReply reply;
  reply.jobs = jobs_.List();
  return reply;
}

Result<protocol::StopJobReply> HeadService::OnStopJob(const protocol::StopJobRequest& req, Call&) {
  auto job = jobs_.Stop(req.submission_id);
  if (!job.ok()) return job.status();
  protocol::StopJobReply reply;
  reply.job = std::move(*job);
  return reply;
}

Result<protocol::HasPackageReply> HeadService::OnHasPackage(const protocol::HasPackageRequest& req,
                                                            Call&) {
  protocol::HasPackageReply reply;
  reply.present = jobs_.HasPackage(req.hash);
  reply.max_bytes = jobs_.max_package_bytes();
  return reply;
}

Result<protocol::PutPackageReply> HeadService::OnPutPackage(const protocol::PutPackageRequest& req,
                                                            Call& call) {
  auto done = jobs_.PutPackage(req, call.Payload());
  if (!done.ok()) return done.status();
  protocol::PutPackageReply reply;
  reply.complete = *done;
  return reply;
}

Result<protocol::KeepPackageReply> HeadService::OnKeepPackage(
    const protocol::KeepPackageRequest& req, Call&) {
  auto deleted = jobs_.KeepPackage(req.hash, req.owner, req.keep);
  if (!deleted.ok()) return deleted.status();
  protocol::KeepPackageReply reply;
  reply.deleted = *deleted;
  return reply;
}

Result<ReplyWithPayload<protocol::GetPackageReply>> HeadService::OnGetPackage(
    const protocol::GetPackageRequest& req, Call&) {
  auto chunk = jobs_.ReadPackage(req.hash, req.offset, req.length);
  if (!chunk.ok()) return chunk.status();
  ReplyWithPayload<protocol::GetPackageReply> out;
  out.reply.hash = req.hash;
  out.reply.offset = req.offset;
  out.reply.total_size = chunk->first;
  out.payload = std::move(chunk->second);
  return out;
}

// ---- Drivers, leases, actors and placement groups.

Result<protocol::RegisterDriverReply> HeadService::OnRegisterDriver(
    const protocol::RegisterDriverRequest& req, Call& call) {
  if (req.rayx_version != kRayxVersion) {
    return call.Reject(
        Status::InvalidArgument("version mismatch: this program uses rayx " + req.rayx_version +
                                ", the head runs rayx " + kRayxVersion +
                                ": rebuild it against rayx " + kRayxVersion),
        "driver registration");
  }
  // A job's workers join their own running job; only the cluster starts a new one.
  if (call.principal.is_job() && req.job_id != call.principal.job) {
    return call.Reject(Status::Unauthenticated(
                           "a job's credential registers only with its own job (" +
                           call.principal.job.Hex() + "), not " +
                           (req.job_id.IsNil() ? std::string("a new job") : "job " + req.job_id.Hex())),
                       "driver registration");
  }
  if (!req.job_id.IsNil() && !leases_.DriverHeartbeat(req.job_id, clock_.NowMs())) {
    // A detached actor's worker outlives its job and may still use the head
    // (a Python actor the head restarted loads its class from the KV); the
    // job is not revived.
    if (req.host_lease_id.IsNil() || !leases_.IsDetachedLeaseOf(req.host_lease_id, req.job_id)) {
      return Status::NotFound("job " + req.job_id.Hex() + " is not running (it ended)");
    }
    sessions_[call.peer_id] = Session{call.principal, false};
    dedup_.AddPeer(call.peer_id);
    auto reply = leases_.RegisterDetachedWorker(req, options_.cluster_id, call.peer_id);
    reply.wire_security = static_cast<uint8_t>(options_.wire_security);
    return reply;
  }
  bool fresh = sessions_.emplace(call.peer_id, Session{call.principal, false}).second;
  dedup_.AddPeer(call.peer_id);
  if (call.principal.is_cluster()) ReleaseOwnerNotices(call.peer_id);
  auto reply = leases_.RegisterDriver(req, clock_.NowMs(), options_.cluster_id, call.peer_id);
  reply.wire_security = static_cast<uint8_t>(options_.wire_security);
  if (fresh) peers_of_job_[reply.job_id].push_back(call.peer_id);
  if (fresh && req.log_to_driver && req.host_lease_id.IsNil()) {
    output_peers_of_job_[reply.job_id].push_back(call.peer_id);
  }
  // A new driver on a machine of the cluster: its agent reports the driver's
  // exit, so the job ends within a heartbeat of it (not after the silence timeout).
  if (req.job_id.IsNil() && req.host_lease_id.IsNil()) {
    if (const NodeInfo* node = nodes_.FindAliveByAddress(req.node_ip)) {
      leases_.WatchDriver(node->node_id, reply.job_id, req.pid);
    }
  }
  return reply;
}

Result<NoReply> HeadService::OnDriverExited(const protocol::DriverExitedNotice& req, Call& call) {
  if (!IsNodeSession(call.peer_id)) {
    return call.Reject(Status::Unauthenticated("only node agents report driver exits"));
  }
  uint32_t killed = leases_.FinishJob(
      req.job_id, "its driver (pid " + std::to_string(req.pid) + ") exited");
  RAYX_LOG(Info) << "job " << req.job_id << ": its driver (pid " << req.pid << ") exited; "
                 << killed << " workers stopped";
  return NoReply{};
}

Status HeadService::CheckJob(const JobId& job, const Call& call, const char* what) {
  if (call.principal.MayActFor(job)) return Status::OK();
  return Status::Unauthenticated(call.principal.ToString() + " may not " + what + " of job " +
                                 job.Hex() + ": a job's credential acts for its own job only");
}

Result<protocol::DriverHeartbeatReply> HeadService::OnDriverHeartbeat(
    const protocol::DriverHeartbeatRequest& req, Call& call) {
  RAYX_RETURN_IF_ERROR(CheckJob(req.job_id, call, "keep up"));
  CountWork(call.peer_id, WorkCounts::FromWire(req.tasks, req.collectives));
  protocol::DriverHeartbeatReply reply;
  reply.known = leases_.DriverHeartbeat(req.job_id, clock_.NowMs());
  return reply;
}

Result<protocol::FinishJobReply> HeadService::OnFinishJob(const protocol::FinishJobRequest& req,
                                                          Call& call) {
  RAYX_RETURN_IF_ERROR(CheckJob(req.job_id, call, "finish"));
  protocol::FinishJobReply reply;
  reply.workers_killed = leases_.FinishJob(req.job_id, "its driver finished", req.hand_over);
  return reply;
}

Result<NoReply> HeadService::OnRequestLease(const protocol::RequestLeaseRequest& req, Call& call) {
  RAYX_RETURN_IF_ERROR(CheckJob(req.job_id, call, "request leases"));
  if (!leases_.DriverHeartbeat(req.job_id, clock_.NowMs()) &&
      !leases_.HostedByDetachedActor(call.peer_id)) {
    return Status::NotFound("job " + req.job_id.Hex() +
                            " is not running (only a detached actor outlives its job)");
  }
  leases_.RequestLease(call.peer_id, call.id, req);
  return NoReply{};  // answered when the worker runs
}

Result<protocol::ReturnLeaseReply> HeadService::OnReturnLease(
    const protocol::ReturnLeaseRequest& req, Call& call) {
  if (auto job = leases_.JobOfLease(req.lease_id)) {
    RAYX_RETURN_IF_ERROR(CheckJob(*job, call, "return leases"));
  }
  protocol::ReturnLeaseReply reply;
  reply.ok = leases_.ReturnLease(req.lease_id).ok();
  return reply;
}

Result<NoReply> HeadService::OnLeaseBlocked(const protocol::LeaseBlockedNotice& req,
                                            Call& call) {
  auto job = leases_.JobOfLease(req.lease_id, /*with_unconfirmed=*/true);
  if (!job) return NoReply{};  // it ended meanwhile: nothing to lend
  if (Status allowed = CheckJob(*job, call, "lend the CPU of leases"); !allowed.ok()) {
    return call.Reject(allowed, "lease blocked notice");
  }
  Status status = leases_.SetLeaseBlocked(call.peer_id, req.lease_id, req.blocked);
  if (status.code() == StatusCode::kUnauthenticated) {
    return call.Reject(status, "lease blocked notice");
  }
  return NoReply{};
}

Result<protocol::RegisterActorReply> HeadService::OnRegisterActor(
    const protocol::RegisterActorRequest& req, Call& call) {
  RAYX_RETURN_IF_ERROR(CheckJob(req.actor.job_id, call, "register actors"));
  RAYX_RETURN_IF_ERROR(leases_.RegisterActor(req.actor, call.peer_id));
  return protocol::RegisterActorReply{};
}

Result<NoReply> HeadService::OnGetActor(const protocol::GetActorRequest& req, Call& call) {
  leases_.LookupActor(Requester{call.peer_id, call.id}, req, clock_.NowMs());
  return NoReply{};  // answered now or when the name changes (ActorFound or Fail)
}

Result<protocol::DropActorNameReply> HeadService::OnDropActorName(
    const protocol::DropActorNameRequest& req, Call& call) {
  if (auto actor = leases_.GetActor(req.name); actor.ok()) {
    RAYX_RETURN_IF_ERROR(CheckJob(actor->job_id, call, "drop actor names"));
  }
  protocol::DropActorNameReply reply;
  reply.dropped = leases_.DropActorName(req.name, req.actor_id);
  return reply;
}

Result<protocol::CreatePlacementGroupReply> HeadService::OnCreatePlacementGroup(
    const protocol::CreatePlacementGroupRequest& req, Call& call) {
  RAYX_RETURN_IF_ERROR(CheckJob(req.job_id, call, "create placement groups"));
  if (!leases_.JobLive(req.job_id)) {
    return Status::NotFound("job " + req.job_id.Hex() + " is not running");
  }
  auto group = groups_.Create(req);
  if (!group.ok()) return group.status();
  protocol::CreatePlacementGroupReply reply;
  reply.group = std::move(*group);
  return reply;
}

Result<NoReply> HeadService::OnWaitPlacementGroup(const protocol::WaitPlacementGroupRequest& req,
                                                  Call& call) {
  groups_.Wait(call.peer_id, call.id, req.placement_group_id, req.timeout_ms, clock_.NowMs());
  return NoReply{};  // answered now or later through the outbox
}

Result<protocol::RemovePlacementGroupReply> HeadService::OnRemovePlacementGroup(
    const protocol::RemovePlacementGroupRequest& req, Call& call) {
  if (const auto* group = groups_.Find(req.placement_group_id)) {
    RAYX_RETURN_IF_ERROR(CheckJob(group->job_id, call, "remove placement groups"));
  }
  protocol::RemovePlacementGroupReply reply;
  reply.removed = leases_.RemovePlacementGroup(req.placement_group_id);
  return reply;
}

}  // namespace rayx::scheduler
