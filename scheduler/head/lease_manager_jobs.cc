// Jobs on the head: drivers registering (a job each), detached workers, the
// peers a lease hosts, driver heartbeats, a job's end (its leases, actors and
// groups go) and silent drivers. Part of LeaseManager (lease_manager.h).
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "common/logging.h"
#include "head/lease_manager.h"

namespace rayx::scheduler {

void LeaseManager::OnNodeRegistered(const NodeId& node, const std::string& agent_peer) {
  agent_peers_[node] = agent_peer;
  SchedulePending();
}

protocol::RegisterDriverReply LeaseManager::RegisterDriver(
    const protocol::RegisterDriverRequest& req, int64_t now_ms, const std::string& cluster_id,
    const std::string& peer) {
  protocol::RegisterDriverReply reply;
  // After a head restart a worker's runtime registers again, possibly before
  // its lease is confirmed by its node's rejoin.
  if (!req.host_lease_id.IsNil() && !peer.empty() &&
      (leases_.count(req.host_lease_id) || IsUnconfirmed(req.host_lease_id))) {
    AddHostedPeer(req.host_lease_id, peer);
  }
  reply.job_id = req.job_id.IsNil() ? JobId::FromSecureRandom() : req.job_id;  // a credential
  bool added = jobs_.Add(reply.job_id, now_ms);
  if (added && store_) store_->PutJob({reply.job_id, /*supervised=*/false});
  if (added && job_start_observer_) job_start_observer_(reply.job_id);
  reply.cluster_id = cluster_id;
  reply.heartbeat_period_ms = std::max<int64_t>(options_.job_timeout_ms / 5, 10);
  return reply;
}

protocol::RegisterDriverReply LeaseManager::RegisterDetachedWorker(
    const protocol::RegisterDriverRequest& req, const std::string& cluster_id,
    const std::string& peer) {
  AddHostedPeer(req.host_lease_id, peer);
  protocol::RegisterDriverReply reply;
  reply.job_id = req.job_id;
  reply.cluster_id = cluster_id;
  reply.heartbeat_period_ms = std::max<int64_t>(options_.job_timeout_ms / 5, 10);
  return reply;
}

void LeaseManager::AddHostedPeer(const LeaseId& lease_id, const std::string& peer) {
  auto& peers = hosted_peers_[lease_id];
  if (std::find(peers.begin(), peers.end(), peer) == peers.end()) peers.push_back(peer);
  host_lease_of_peer_[peer] = lease_id;
}

bool LeaseManager::HostedByDetachedActor(const std::string& peer) const {
  auto host = host_lease_of_peer_.find(peer);
  if (host == host_lease_of_peer_.end()) return false;
  auto lease = leases_.find(host->second);
  return lease != leases_.end() && lease->second.detached;
}

bool LeaseManager::DriverHeartbeat(const JobId& job_id, int64_t now_ms) {
  return jobs_.Heartbeat(job_id, now_ms);
}

uint32_t LeaseManager::FinishJob(const JobId& job_id, const std::string& why,
                                 const std::vector<protocol::ActorInfo>& hand_over) {
  if (!jobs_.BeginFinish(job_id)) return 0;
  // What a detached actor's own runtime asked for outlives the job with it.
  auto outlives = [&](const Owner& owner) {
    return !owner.head() && HostedByDetachedActor(owner.requester.peer);
  };
  // Its queued requests go first: ending its leases frees resources, which
  // must not be granted to the same job again.
  scheduler_.Drop(
      [&](const Pending& p) { return p.req.job_id == job_id && !outlives(p.owner); });
  std::vector<LeaseId> ending;
  for (const auto& [id, lease] : leases_) {
    if (lease.job_id == job_id && !lease.detached && !outlives(lease.owner)) ending.push_back(id);
  }
  job_ending_ = job_id;
  for (const auto& id : ending) EndLease(id, /*kill_worker=*/true, "its job ended (" + why + ")");
  job_ending_ = JobId();
  for (const auto& group : groups_.GroupsOfJob(job_id)) RemovePlacementGroup(group);
  // Detached actors still being constructed that the driver handed over:
  // their constructor calls as the driver had them last (CreatorGone, below).
  for (const auto& actor : hand_over) {
    protocol::ActorInfo* reserved = actors_.Mutable(actor.name);
    if (reserved != nullptr && reserved->starting && reserved->detached &&
        reserved->actor_id == actor.actor_id && reserved->job_id == job_id &&
        !actor.restart_request.empty()) {
      reserved->restart_request = actor.restart_request;  // not stored, nobody waits on it
      reserved->max_restarts = actor.max_restarts;
    }
  }
  // Its actors' names, and the names its actors being created reserved: a
  // detached one with a constructor call is created by the head, any other
  // stops (nobody is left to finish its registration).
  std::vector<std::pair<std::string, ActorId>> names;
  actors_.ForEach([&](const std::string& name, const protocol::ActorInfo& actor) {
    if (actor.job_id != job_id || (actor.detached && !actor.starting)) return;
    if (actor.starting) {
      // Made by a detached actor's own runtime: its creator lives on and
      // names it (or its worker's end frees it, DropReservationsOf).
      const std::string* by = actors_.ReservedBy(name);
      if (by != nullptr && HostedByDetachedActor(*by)) return;
    }
    names.emplace_back(name, actor.actor_id);
  });
  for (const auto& [name, actor_id] : names) {
    const protocol::ActorInfo* actor = actors_.Find(name);
    if (actor == nullptr || actor->actor_id != actor_id) continue;
    if (actor->starting) {
      CreatorGone(name, "its job ended before its constructor finished (" + why + ")");
    } else {
      actors_.Erase(name);
    }
  }
  // Stored leases of the job on nodes that have not rejoined: stopped when
  // they do (OnNodeRejoined checks the job).
  // Every node drops the job's stored objects: O(nodes), once per job.
  protocol::JobFinishedNotice notice;
  notice.job_id = job_id;
  for (const auto& [node, peer] : agent_peers_) {
    outbox_.JobFinished(peer, next_request_id_++, notice);
  }
  RAYX_LOG(Info) << "job " << job_id << " finished (" << why << "): stopped " << ending.size()
                 << " workers";
  jobs_.Erase(job_id);
  if (store_) store_->DeleteJob(job_id);
  SchedulePending();
  if (job_end_observer_) job_end_observer_(job_id);
  return static_cast<uint32_t>(ending.size());
}

void LeaseManager::AddSupervisedJob(const JobId& job_id, int64_t now_ms) {
  bool added = jobs_.Add(job_id, now_ms, /*supervised=*/true);
  if (added && job_start_observer_) job_start_observer_(job_id);
  if (store_) store_->PutJob({job_id, true});
}

void LeaseManager::ForEachLiveJob(const std::function<void(const JobId& job_id)>& fn) const {
  jobs_.ForEach(fn);
  for (const auto& [id, lease] : leases_) fn(lease.job_id);
  for (const auto& [node, stored] : unconfirmed_) {
    for (const auto& lease : stored) fn(lease.job_id);
  }
}

void LeaseManager::ExpireSilentJobs(int64_t now_ms) {
  for (const auto& id : jobs_.Silent(now_ms, options_.job_timeout_ms)) {
    FinishJob(id, "its driver stopped heartbeating");
  }
}

}  // namespace rayx::scheduler
