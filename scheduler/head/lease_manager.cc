// Jobs, leases and named actors on the head.
#include "head/lease_manager.h"

#include <algorithm>
#include <iterator>
#include <set>

#include "common/clock.h"
#include "common/logging.h"

namespace rayx::scheduler {

LeaseManager::LeaseManager(Options options, NodeTable& nodes, PlacementGroupManager& groups,
                           HeadOutbox& outbox)
    : options_(std::move(options)),
      nodes_(nodes),
      outbox_(outbox),
      actors_(outbox),
      groups_(groups) {}

void LeaseManager::ReplyError(const Owner& owner, const Status& status) {
  switch (owner.kind) {
    case OwnerKind::kHeadActor:
      OnActorRestartFailed(owner.requester.request_id, status);
      return;
    case OwnerKind::kHeadJob:
      RAYX_CHECK(head_owner_ != nullptr) << "a head-owned lease without SetHeadOwner";
      head_owner_->OnLeaseFailed(owner.requester.request_id, status);
      return;
    case OwnerKind::kCaller:
      outbox_.Fail(owner.requester, status);
      return;
  }
}

void LeaseManager::RequestLease(const std::string& peer, uint64_t request_id,
                                const protocol::RequestLeaseRequest& req) {
  Request(Owner{Requester{peer, request_id}, OwnerKind::kCaller}, req);
}

void LeaseManager::RequestLeaseForHead(uint64_t request_id,
                                       const protocol::RequestLeaseRequest& req) {
  RAYX_CHECK(head_owner_ != nullptr) << "RequestLeaseForHead without SetHeadOwner";
  Request(Owner{Requester{"", request_id}, OwnerKind::kHeadJob}, req);
}

void LeaseManager::Request(const Owner& owner, const protocol::RequestLeaseRequest& req) {
  if (Status bad = LeaseScheduler::Check(req); !bad.ok()) {
    ReplyError(owner, bad);
    return;
  }
  Pending pending{owner, req};
  if (!owner.head()) pending.req.init = {};  // only the head restarts actors this way
  std::optional<policy::Scheduled> decided;
  if (req.placement_group_id.IsNil()) {
    // One policy decision, logarithmic in the node count, says both whether
    // the request could ever fit and where it goes now.
    auto decision = scheduler_.Decide(req);
    // While nodes of a restarted head's previous life may still rejoin, what
    // does not fit the nodes back so far waits for them (AfterRejoins).
    if (std::holds_alternative<policy::Infeasible>(decision) && nodes_.rejoining_count() > 0) {
      scheduler_.Enqueue(std::move(pending));
      return;
    }
    if (const auto* infeasible = std::get_if<policy::Infeasible>(&decision)) {
      ReplyError(owner,
                 Status::Infeasible("infeasible: " + FormatResourceShape(req.resources) + " " +
                                         infeasible->reason));
      return;
    }
    if (auto* scheduled = std::get_if<policy::Scheduled>(&decision)) {
      decided = std::move(*scheduled);
    }
  }
  // A request that fits now is granted now, even when others of other shapes wait.
  if (TryGrant(pending, decided)) return;
  scheduler_.Enqueue(std::move(pending));
}

bool LeaseManager::JobAllows(const Pending& pending) const {
  // A detached actor outlives its job: the head restarts it, and it may
  // start tasks of its own (owned by its worker, ended with it).
  bool restart = pending.owner.head() && !pending.req.init.function.empty();
  return jobs_.Live(pending.req.job_id) || restart ||
         (!pending.owner.head() && HostedByDetachedActor(pending.owner.requester.peer));
}

bool LeaseManager::TryGrant(Pending& pending, std::optional<policy::Scheduled> decided) {
  if (!JobAllows(pending)) return false;
  std::optional<NodeId> node;
  std::vector<int> gpu_ids;
  int32_t bundle_index = -1;
  if (!pending.req.placement_group_id.IsNil()) {
    auto grant = groups_.TryAcquire(pending.req.placement_group_id, pending.req.bundle_index,
                                    pending.req.resources);
    if (!grant.ok()) {
      ReplyError(pending.owner, grant.status());
      return true;
    }
    if (!*grant) return false;
    node = (*grant)->node;
    gpu_ids = (*grant)->gpu_ids;
    bundle_index = (*grant)->bundle_index;
    if (!agent_peers_.count(*node)) {
      groups_.Release(pending.req.placement_group_id, bundle_index, pending.req.resources, gpu_ids);
      return false;
    }
  } else {
    // The policy's decision names the node and its devices; the node table
    // takes exactly those (it picks nothing itself).
    if (!decided) {
      auto decision = scheduler_.Decide(pending.req);
      if (auto* scheduled = std::get_if<policy::Scheduled>(&decision)) {
        decided = std::move(*scheduled);
      }
    }
    if (!decided) return false;
    node = decided->node;
    gpu_ids = std::move(decided->gpu_ids);
    if (!agent_peers_.count(*node)) return false;
    if (!nodes_.AcquireExact(*node, pending.req.resources, gpu_ids)) {
      // The policy decided on the node table's own book: it never refuses.
      ++invariant_violations_;
      RAYX_LOG(Error) << "invariant violated: the policy placed a lease on node "
                      << node->Short() << " (" << gpu_ids.size()
                      << " GPU device(s)) that the node table does not have free";
      return false;
    }
  }
  auto agent = agent_peers_.find(*node);
  Lease lease;
  lease.lease_id = LeaseId::FromSecureRandom();  // a credential: not guessable
  lease.job_id = pending.req.job_id;
  lease.node = *node;
  lease.resources = pending.req.resources;
  lease.owner = pending.owner;
  lease.detached = pending.req.detached;
  lease.gpu_ids = gpu_ids;
  lease.for_actor = pending.req.for_actor;
  lease.actor_id = pending.req.actor_id;
  lease.process = !pending.req.processes.empty();
  lease.group_id = pending.req.placement_group_id;
  lease.bundle_index = bundle_index;

  protocol::StartWorkerRequest start;
  start.lease_id = lease.lease_id;
  start.job_id = lease.job_id;
  start.executable = pending.req.executable;
  start.worker_args = pending.req.worker_args;
  start.worker_env = pending.req.worker_env;
  start.init = pending.req.init;
  start.for_actor = pending.req.for_actor;
  // A detached actor its owner constructs: the head may have to take it over.
  start.report_construction =
      pending.req.for_actor && pending.req.detached && pending.req.init.function.empty();
  start.working_dir = pending.req.working_dir;
  start.resources = lease.resources;
  start.head_address = options_.head_address;
  start.gpu_ids = gpu_ids;
  start.processes = pending.req.processes;
  start.package_hash = pending.req.package_hash;
  if (pending.req.group_visible_devices && !lease.group_id.IsNil() && !gpu_ids.empty()) {
    start.visible_gpu_ids = groups_.DevicesOn(lease.group_id, *node);
    auto own = std::find(start.visible_gpu_ids.begin(), start.visible_gpu_ids.end(), gpu_ids[0]);
    start.local_rank = static_cast<int32_t>(own - start.visible_gpu_ids.begin());
  }
  start.package_dir = pending.req.package_dir;
  start.epoch = nodes_.EpochOf(*node);
  uint64_t id = next_request_id_++;
  start_requests_[id] = StartRequest{lease.lease_id, *node};
  // Stored before the agent hears of it: a live worker the head does not know
  // after a restart can only be one it never granted.
  SaveLease(lease);
  lease.request = std::move(pending.req);  // the caller drops `pending` once granted
  leases_[lease.lease_id] = std::move(lease);
  outbox_.StartWorker(agent->second, id, start);
  return true;
}

void LeaseManager::SchedulePending() {
  groups_.SchedulePending();
  // Requests that do not fit stay queued (every lease's end runs a pass).
  scheduler_.Pass([this](const Pending& p) { return JobAllows(p); },
                  [this](Pending& p) { return TryGrant(p); });
}

void LeaseManager::OnStartWorkerReply(uint64_t request_id, const protocol::StartWorkerReply& reply) {
  auto req = start_requests_.find(request_id);
  if (req == start_requests_.end()) return;
  StartRequest start = req->second;
  start_requests_.erase(req);
  auto it = leases_.find(start.lease_id);
  if (it == leases_.end()) {
    // It ended while its worker started (its job ended, it was cancelled):
    // the agent may have started it before it heard of the end.
    auto agent = agent_peers_.find(start.node);
    if (agent != agent_peers_.end()) {
      protocol::KillWorkersRequest kill;
      kill.lease_ids = {start.lease_id};
      outbox_.KillWorkers(agent->second, next_request_id_++, kill);
    }
    return;
  }
  Lease& lease = it->second;
  lease.running = true;
  lease.request.reset();
  lease.pid = reply.worker_pid;
  if (lease.for_actor) lease.worker_address = reply.worker_address;
  SaveLease(lease);
  protocol::RequestLeaseReply grant;
  grant.lease_id = lease.lease_id;
  grant.worker_address = reply.worker_address;
  grant.node_id = lease.node.Hex();
  const NodeInfo* node = nodes_.FindAlive(lease.node);
  grant.node_address = node ? node->address : "";
  grant.worker_pid = reply.worker_pid;
  grant.gpu_ids = lease.gpu_ids;
  grant.object_address = node ? node->object_address : "";
  grant.process_pids = reply.process_pids;
  switch (lease.owner.kind) {
    case OwnerKind::kHeadActor:
      OnActorRestartGranted(lease.owner.requester.request_id, grant);
      break;
    case OwnerKind::kHeadJob:
      head_owner_->OnLeaseGranted(lease.owner.requester.request_id, grant);
      break;
    case OwnerKind::kCaller:
      outbox_.GrantLease(lease.owner.requester, grant);
      break;
  }
}

void LeaseManager::OnStartWorkerError(uint64_t request_id, const Status& error) {
  auto req = start_requests_.find(request_id);
  if (req == start_requests_.end()) return;
  LeaseId lease_id = req->second.lease_id;
  start_requests_.erase(req);
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  ReplyError(it->second.owner,
             Status(error.code(), "the worker did not start: " + error.message()));
  it->second.request.reset();  // answered
  EndLease(lease_id, /*kill_worker=*/false, "its worker did not start");
}

bool LeaseManager::CancelHeadRequest(uint64_t request_id) {
  auto mine = [&](const Owner& owner) {
    return owner.kind == OwnerKind::kHeadJob && owner.requester.request_id == request_id;
  };
  if (scheduler_.DropFirst([&](const Pending& p) { return mine(p.owner); })) return true;
  // O(leases), once per cancelled request (a stopped job), never per task.
  for (const auto& [id, lease] : leases_) {
    if (mine(lease.owner) && !lease.running) {
      EndLease(LeaseId(id), /*kill_worker=*/true, "its request was withdrawn");
      return true;
    }
  }
  return false;
}

Status LeaseManager::ReturnLease(const LeaseId& lease_id) {
  if (!leases_.count(lease_id)) {
    if (auto restarting = restarting_from_.find(lease_id); restarting != restarting_from_.end()) {
      // A handle killed a detached actor the head is restarting: it stays dead.
      RAYX_LOG(Info) << "detached actor '" << restarting->second
                     << "' was killed while the head restarted it";
      if (const protocol::ActorInfo* actor = actors_.Find(restarting->second);
          actor != nullptr && !actor->starting) {
        actors_.Erase(restarting->second);
      }
      restarting_from_.erase(restarting);
      return Status::OK();
    }
    return Status::NotFound("no lease " + lease_id.Hex());
  }
  EndLease(lease_id, /*kill_worker=*/true,
           "its owner returned the lease (the worker exited or was killed, or the actor was "
           "killed)");
  return Status::OK();
}

void LeaseManager::EndLease(const LeaseId& lease_id, bool kill_worker, const std::string& cause) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  Lease lease = std::move(it->second);
  leases_.erase(it);
  // A lease whose worker is still starting has not answered its owner's
  // request yet (callers that answered it, or queued it again, cleared
  // `request`): say why it will not be granted, or the caller waits for ever.
  if (!lease.running && lease.request && !lease.owner.head()) {
    outbox_.Fail(lease.owner.requester,
                 Status::Unavailable("the lease ended before its worker started: " + cause));
  }
  // What it holds now: a blocked lease's lent CPU is not its to give back.
  ResourceMap held = Held(lease);
  ForgetBlocked(lease);
  if (lease.group_id.IsNil()) {
    nodes_.Release(lease.node, held, lease.gpu_ids);
  } else {
    groups_.Release(lease.group_id, lease.bundle_index, held, lease.gpu_ids);
  }
  if (kill_worker) {
    auto agent = agent_peers_.find(lease.node);
    if (agent != agent_peers_.end()) {
      protocol::KillWorkersRequest kill;
      kill.lease_ids = {lease_id};
      outbox_.KillWorkers(agent->second, next_request_id_++, kill);
    }
  }
  if (store_) store_->DeleteLease(lease_id);
  actors_.ForgetLease(lease_id);
  AdoptionLost(lease_id, cause);
  EndHostedLeases(lease_id);
  if (lease_end_observer_) lease_end_observer_(lease_id, cause, job_ending_ == lease.job_id);
  SchedulePending();
}

bool LeaseManager::WatchDriver(const NodeId& node, const JobId& job_id, int32_t pid) {
  auto agent = agent_peers_.find(node);
  if (agent == agent_peers_.end() || pid <= 0) return false;
  protocol::WatchDriverRequest watch;
  watch.job_id = job_id;
  watch.pid = pid;
  outbox_.WatchDriver(agent->second, next_request_id_++, watch);
  return true;
}

void LeaseManager::EndHostedLeases(const LeaseId& lease_id) {
  auto hosted = hosted_peers_.find(lease_id);
  if (hosted == hosted_peers_.end()) return;
  std::vector<std::string> peers = std::move(hosted->second);
  hosted_peers_.erase(hosted);
  for (const auto& peer : peers) {
    if (auto back = host_lease_of_peer_.find(peer);
        back != host_lease_of_peer_.end() && back->second == lease_id) {
      host_lease_of_peer_.erase(back);
    }
    if (hosted_peer_end_observer_) hosted_peer_end_observer_(peer);
    scheduler_.Drop([&](const Pending& p) {
      return !p.owner.head() && p.owner.requester.peer == peer;
    });
    DropReservationsOf(peer);
    // Detached actors outlive whoever created them.
    std::vector<LeaseId> owned;
    for (const auto& [id, lease] : leases_) {
      if (!lease.owner.head() && lease.owner.requester.peer == peer && !lease.detached) {
        owned.push_back(id);
      }
    }
    for (const auto& id : owned) EndLease(id, /*kill_worker=*/true, "the worker that owned it ended");
  }
}

std::map<std::string, int> LeaseManager::PendingShapes() const {
  std::map<std::string, int> out;
  scheduler_.CountShapes(&out);
  std::map<std::string, std::string> infeasible;
  groups_.AddDemands(&out, &infeasible);
  return out;
}

std::map<std::string, std::string> LeaseManager::InfeasibleShapes() const {
  std::map<std::string, int> pending;
  std::map<std::string, std::string> out;
  groups_.AddDemands(&pending, &out);
  return out;
}

bool LeaseManager::RemovePlacementGroup(const PlacementGroupId& group_id) {
  if (groups_.Find(group_id) == nullptr) return false;
  scheduler_.Drop([&](const Pending& p) {
    if (p.req.placement_group_id != group_id) return false;
    ReplyError(p.owner, Status::Cancelled("placement group " + group_id.Short() +
                                          " was removed before this lease was granted"));
    return true;
  });
  std::vector<LeaseId> ending;
  for (const auto& [id, lease] : leases_) {
    if (lease.group_id == group_id) ending.push_back(id);
  }
  for (const auto& id : ending) {
    EndLease(id, /*kill_worker=*/true, "its placement group was removed");
  }
  groups_.Remove(group_id);
  SchedulePending();
  return true;
}

std::vector<protocol::LeaseListEntry> LeaseManager::ListLeases() const {
  std::map<LeaseId, const protocol::ActorInfo*> names;
  // Names reserved for actors still being constructed: by actor id (their
  // leases say which actor they are for).
  std::map<ActorId, const protocol::ActorInfo*> reserved;
  actors_.ForEach([&](const std::string&, const protocol::ActorInfo& actor) {
    if (!actor.lease_id.IsNil()) names[actor.lease_id] = &actor;
    if (actor.starting) reserved[actor.actor_id] = &actor;
  });
  std::vector<protocol::LeaseListEntry> out;
  out.reserve(leases_.size());
  for (const auto& [id, lease] : leases_) {
    protocol::LeaseListEntry e;
    e.lease_id = id;
    e.job_id = lease.job_id;
    e.kind = lease.process     ? protocol::LeaseKind::kProcess
             : lease.for_actor ? protocol::LeaseKind::kActor
                               : protocol::LeaseKind::kWorker;
    e.state = !lease.running  ? protocol::LeaseState::kStarting
              : lease.blocked ? protocol::LeaseState::kBlocked
                              : protocol::LeaseState::kRunning;
    e.node_id = lease.node.Hex();
    if (const NodeInfo* node = nodes_.FindAlive(lease.node)) e.node_address = node->address;
    e.pid = lease.pid;
    e.resources = lease.resources;
    e.gpu_ids = lease.gpu_ids;
    e.placement_group_id = lease.group_id;
    e.bundle_index = lease.bundle_index;
    e.detached = lease.detached;
    const protocol::ActorInfo* actor = nullptr;
    if (auto named = names.find(id); named != names.end()) actor = named->second;
    if (actor == nullptr && lease.for_actor && !lease.actor_id.IsNil()) {
      if (auto r = reserved.find(lease.actor_id); r != reserved.end()) actor = r->second;
    }
    if (actor != nullptr) {
      e.actor_name = actor->name;
      e.class_name = actor->class_name;
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace rayx::scheduler

namespace rayx::scheduler {

std::optional<NodeId> LeaseManager::NodeOfStart(uint64_t request_id) const {
  auto req = start_requests_.find(request_id);
  if (req == start_requests_.end()) return std::nullopt;
  return req->second.node;
}

std::optional<NodeId> LeaseManager::NodeOfLease(const LeaseId& lease_id) const {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return std::nullopt;
  return it->second.node;
}

std::optional<JobId> LeaseManager::JobOfLease(const LeaseId& lease_id,
                                              bool with_unconfirmed) const {
  auto it = leases_.find(lease_id);
  if (it != leases_.end()) return it->second.job_id;
  if (!with_unconfirmed) return std::nullopt;
  for (const auto& [node, stored] : unconfirmed_) {
    for (const auto& lease : stored) {
      if (lease.lease_id == lease_id) return lease.job_id;
    }
  }
  return std::nullopt;
}

const std::string* LeaseManager::AgentPeerOf(const NodeId& node) const {
  auto it = agent_peers_.find(node);
  return it == agent_peers_.end() ? nullptr : &it->second;
}

}  // namespace rayx::scheduler
