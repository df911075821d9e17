// LeaseManager's durable half: writing leases through to the HeadStore, and
// the head-restart path (restoring jobs, leases and named actors from the
// store, nodes rejoining with the leases they still run, and what happens to
// those that do not come back). Part of LeaseManager (lease_manager.h).
#include <algorithm>
#include <optional>
#include <set>
#include <unordered_set>

#include "common/logging.h"
#include "head/lease_manager.h"

namespace rayx::scheduler {

void LeaseManager::SetStore(HeadStore* store) {
  store_ = store;
  actors_.SetStore(store);
  groups_.SetStore(store);
}

void LeaseManager::SaveLease(const Lease& lease) {
  if (!store_) return;
  StoredLease stored;
  stored.lease_id = lease.lease_id;
  stored.job_id = lease.job_id;
  stored.node_id = lease.node.Hex();
  stored.resources = lease.resources;
  stored.gpu_ids = lease.gpu_ids;
  stored.owner_peer = lease.owner.requester.peer;
  stored.owner_head = lease.owner.head();
  stored.running = lease.running;
  stored.detached = lease.detached;
  stored.for_actor = lease.for_actor;
  stored.process = lease.process;
  stored.group_id = lease.group_id;
  stored.bundle_index = lease.bundle_index;
  stored.pid = lease.pid;
  stored.actor_id = lease.actor_id;
  store_->PutLease(stored);
}

void LeaseManager::Restore(const HeadState& state, int64_t now_ms) {
  for (const auto& job : state.jobs) {
    // Its driver has the job timeout to come back.
    jobs_.Add(job.job_id, now_ms, job.supervised);
  }
  actors_.Restore(state.actors);
  std::vector<protocol::ActorInfo> restarting;
  for (const auto& actor : state.actors) {
    // A restart the previous head had begun (no worker yet): begun again.
    if (actor.lease_id.IsNil() && !actor.restart_request.empty()) restarting.push_back(actor);
  }
  groups_.Restore(state.placement_groups);
  rejoin_window_open_ = nodes_.rejoining_count() > 0;
  for (const auto& lease : state.leases) {
    auto node = NodeId::FromHex(lease.node_id);
    if (!node.ok()) continue;
    unconfirmed_[*node].push_back(lease);
  }
  for (auto& actor : restarting) {
    actors_.Take(actor.name);
    RestartActor(std::move(actor), "its restart was under way when the head restarted",
                 /*count=*/false);
  }
  if (state.jobs.empty() && state.actors.empty() && state.placement_groups.empty() &&
      state.leases.empty()) {
    return;
  }
  RAYX_LOG(Info) << "restored " << state.jobs.size() << " jobs, " << state.actors.size()
                 << " named actors, " << state.placement_groups.size() << " placement groups and "
                 << state.leases.size() << " leases (unconfirmed until their nodes rejoin)";
}

bool LeaseManager::IsDetachedLeaseOf(const LeaseId& lease_id, const JobId& job_id) const {
  if (auto it = leases_.find(lease_id); it != leases_.end()) {
    return it->second.detached && it->second.job_id == job_id;
  }
  for (const auto& [node, stored] : unconfirmed_) {
    for (const auto& lease : stored) {
      if (lease.lease_id == lease_id) return lease.detached && lease.job_id == job_id;
    }
  }
  return false;
}

bool LeaseManager::IsUnconfirmed(const LeaseId& lease_id) const {
  for (const auto& [node, leases] : unconfirmed_) {
    for (const auto& lease : leases) {
      if (lease.lease_id == lease_id) return true;
    }
  }
  return false;
}

void LeaseManager::DropUnconfirmed(const StoredLease& lease, const std::string& why,
                                   const std::vector<protocol::ExitedProcess>& exits) {
  if (store_) store_->DeleteLease(lease.lease_id);
  blocked_unconfirmed_.erase(lease.lease_id);
  bool owner_gone = lease.owner_head || !jobs_.Live(lease.job_id);
  auto restart = lease.running ? TakeRestartable(lease.lease_id, owner_gone)
                               : std::vector<protocol::ActorInfo>{};
  actors_.ForgetLease(lease.lease_id);
  EndHostedLeases(lease.lease_id);
  if (lease_end_observer_) lease_end_observer_(lease.lease_id, why, /*job_ended=*/false);
  for (auto& actor : restart) RestartActor(std::move(actor), why);
  if (!lease.owner_head || !lease.process || head_owner_ == nullptr) return;
  // The head owns it (a submitted job's entrypoint): its owner must hear how
  // it ended, from the agent's report when it has one.
  bool told = false;
  for (const auto& e : exits) {
    if (e.lease_id != lease.lease_id || !e.all_exited) continue;
    protocol::ProcessExitedNotice notice;
    notice.lease_id = e.lease_id;
    notice.index = e.index;
    notice.pid = e.pid;
    notice.exit_code = e.exit_code;
    notice.signal = e.signal;
    notice.log_tail = e.log_tail;
    notice.all_exited = true;
    head_owner_->OnProcessExited(notice);
    told = true;
  }
  if (!told) {
    head_owner_->OnLeaseLost(lease.lease_id, why);
  }
}

void LeaseManager::OnNodeRejoined(const NodeId& node, const std::string& agent_peer,
                                  const std::vector<protocol::LiveLease>& live,
                                  const std::vector<protocol::ExitedProcess>& exits) {
  agent_peers_[node] = agent_peer;
  groups_.OnNodeRejoined(node);
  std::vector<StoredLease> stored;
  if (auto it = unconfirmed_.find(node); it != unconfirmed_.end()) {
    stored = std::move(it->second);
    unconfirmed_.erase(it);
  }
  std::unordered_map<LeaseId, const StoredLease*> by_id;
  for (const auto& lease : stored) by_id[lease.lease_id] = &lease;
  std::vector<LeaseId> kill;
  size_t restored = 0;
  std::optional<std::unordered_set<LeaseId>> named_leases;  // made when first needed
  for (const auto& report : live) {
    auto found = by_id.find(report.lease_id);
    if (found == by_id.end() || !found->second->running) {
      // Never granted to an owner (the head died while it started) or not
      // known at all: nobody would use or return it.
      if (found != by_id.end()) {
        if (store_) store_->DeleteLease(report.lease_id);
        by_id.erase(found);
      }
      EndHostedLeases(report.lease_id);
      kill.push_back(report.lease_id);
      continue;
    }
    const StoredLease& s = *found->second;
    by_id.erase(found);
    bool job_alive = jobs_.Live(s.job_id);
    if (s.owner_head && s.for_actor && !named_leases) {
      named_leases.emplace();
      actors_.ForEach([&](const std::string&, const protocol::ActorInfo& actor) {
        named_leases->insert(actor.lease_id);
      });
    }
    // Why its live worker is stopped, if it is: for the log, and for the lease
    // end observer. Decided before its resources are booked again.
    const char* stop = nullptr;
    const char* cause = nullptr;
    if (s.owner_head && s.for_actor && !named_leases->count(s.lease_id)) {
      // An actor the head itself owned (taken over from a creator that was
      // gone, or restarted) that the previous head died before naming:
      // nobody could reach it or return its lease.
      stop = "the previous head had not named its actor yet";
      cause = "the head restarted before it named the actor";
    } else if (!job_alive && !s.detached) {
      stop = "its job ended";
      cause = "its job ended while the head was down";
    } else if (!(s.group_id.IsNil()
                     ? nodes_.AcquireExact(node, report.resources, report.gpu_ids,
                                           /*overdraw_cpu=*/true)
                     : groups_.AcquireExact(s.group_id, s.bundle_index, report.resources,
                                            report.gpu_ids, /*overdraw_cpu=*/true))) {
      // CPU may be overdrawn: before the restart a blocked lease may have
      // lent its CPU to one of the others, and taken it back since.
      // What the live worker holds, as its agent says, is not free.
      stop = "its resources are not free in the head's books";
      cause = "its node rejoined the restarted head, which stopped it";
    }
    if (stop != nullptr) {
      RAYX_LOG(Warning) << "lease " << s.lease_id.Short() << " on rejoined node " << node.Short()
                        << ": " << stop << "; stopping its worker";
      if (store_) store_->DeleteLease(s.lease_id);
      actors_.ForgetLease(s.lease_id);
      EndHostedLeases(s.lease_id);
      if (lease_end_observer_) {
        lease_end_observer_(s.lease_id, cause, /*job_ended=*/!job_alive && !s.detached);
      }
      kill.push_back(s.lease_id);
      continue;
    }
    Lease lease;
    lease.lease_id = s.lease_id;
    lease.job_id = s.job_id;
    lease.node = node;
    lease.resources = report.resources;
    lease.gpu_ids = report.gpu_ids;
    lease.owner = Owner{Requester{s.owner_peer, 0},
                        !s.owner_head ? OwnerKind::kCaller
                        : s.for_actor ? OwnerKind::kHeadActor
                                      : OwnerKind::kHeadJob};
    lease.running = true;
    lease.detached = s.detached;
    lease.for_actor = s.for_actor;
    lease.actor_id = s.actor_id;
    lease.process = s.process;
    lease.group_id = s.group_id;
    lease.bundle_index = s.bundle_index;
    lease.pid = report.worker_pid ? report.worker_pid : s.pid;
    SaveLease(lease);
    LeaseId id = lease.lease_id;
    Lease& kept = leases_[id] = std::move(lease);
    // Its runtime told this head it is blocked before the node came back.
    if (blocked_unconfirmed_.erase(id) > 0) Lend(kept);
    ++restored;
  }
  for (const auto& lease : stored) blocked_unconfirmed_.erase(lease.lease_id);
  // Stored leases the agent no longer runs: their workers exited meanwhile.
  size_t gone = 0;
  for (const auto& lease : stored) {
    if (!by_id.count(lease.lease_id)) continue;
    DropUnconfirmed(lease,
                    lease.process ? "its process ended while the head was down"
                                  : "its worker ended while the head was down",
                    exits);
    ++gone;
  }
  if (!kill.empty()) {
    protocol::KillWorkersRequest request;
    request.lease_ids = kill;
    outbox_.KillWorkers(agent_peer, next_request_id_++, request);
  }
  RAYX_LOG(Info) << "node " << node.Short() << " rejoined: " << restored << " leases kept, "
                 << gone << " ended while the head was down, " << kill.size() << " stopped";
  SchedulePending();
  AfterRejoins();
}

void LeaseManager::EndWhatLostNodesHeld() {
  std::set<NodeId> lost = groups_.NodesOfRestoredBundles();
  for (const auto& [node, leases] : unconfirmed_) lost.insert(node);
  std::erase_if(lost, [&](const NodeId& node) {
    return nodes_.RejoiningEpochOf(node) != 0 || nodes_.FindAny(node) != nullptr;
  });
  for (const auto& node : lost) {
    RAYX_LOG(Warning) << "node " << node.Short() << " held stored leases or bundles but was "
                      << "not stored itself (the previous head stopped while it died): "
                      << "ending them now";
    OnNodeDead(node, "it died before the head restarted");
  }
}

void LeaseManager::AfterRejoins() {
  if (!rejoin_window_open_ || nodes_.rejoining_count() > 0) return;
  rejoin_window_open_ = false;
  // Requests that waited for rejoining nodes: those no node can ever hold now
  // get the answer they would have had at once.
  scheduler_.Drop([&](Pending& p) {
    if (!p.req.placement_group_id.IsNil()) return false;
    auto decision = scheduler_.Decide(p.req);
    const auto* infeasible = std::get_if<policy::Infeasible>(&decision);
    if (infeasible == nullptr) return false;
    ReplyError(p.owner, Status::Infeasible("infeasible: " + FormatResourceShape(p.req.resources) +
                                           " " + infeasible->reason));
    return true;
  });
  groups_.AfterRejoins();
}

}  // namespace rayx::scheduler
