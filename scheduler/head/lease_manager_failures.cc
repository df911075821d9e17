// LeaseManager's failure half: a node declared dead (its leases end, their
// owners are told, not-yet-started requests are queued again), and a worker or
// a process-lease process that exits by itself. Part of LeaseManager
// (lease_manager.h).
#include <map>

#include "common/logging.h"
#include "head/lease_manager.h"

namespace rayx::scheduler {

void LeaseManager::OnNodeDead(const NodeId& node, const std::string& why) {
  if (auto it = unconfirmed_.find(node); it != unconfirmed_.end()) {
    std::vector<StoredLease> stored = std::move(it->second);
    unconfirmed_.erase(it);
    for (const auto& lease : stored) {
      DropUnconfirmed(lease, "node " + node.Short() + " did not come back after the head restarted", {});
    }
  }
  agent_peers_.erase(node);
  const NodeInfo* info = nodes_.FindAny(node);
  std::string reason = "node " + (info ? info->address + " (" + node.Short() + ")" : node.Short()) +
                       " was declared dead" + (why.empty() ? "" : ": " + why);
  std::erase_if(start_requests_, [&](const auto& entry) { return entry.second.node == node; });
  std::vector<LeaseId> gone;
  for (const auto& [id, lease] : leases_) {
    if (lease.node == node) gone.push_back(id);
  }
  std::vector<Pending> again;
  // Owners hear at once, one notice each: a stopped or cut-off node's workers
  // may still hold their connections open.
  std::map<std::string, protocol::LeasesLostNotice> notices;
  std::vector<LeaseId> head_owned;
  std::vector<protocol::ActorInfo> restart;  // detached actors whose owner is gone
  for (const auto& id : gone) {
    // An earlier lease's end may have ended this one (a worker's own leases).
    auto found = leases_.find(id);
    if (found == leases_.end()) continue;
    Lease& lease = found->second;
    if (lease.running) {
      for (auto& actor : TakeRestartable(id, OwnerGone(lease))) restart.push_back(std::move(actor));
      HoldNamesForOwner(lease);
    }
    if (lease.running && lease.owner.head() && lease.for_actor) {
      // A detached actor the head restarted: in `restart` if it may go on.
    } else if (lease.running && lease.owner.head()) {
      head_owned.push_back(id);
    } else if (lease.running && !lease.owner.requester.peer.empty()) {
      notices[lease.owner.requester.peer].lease_ids.push_back(id);
    }
    if (!lease.running) {
      // Not started yet: the request goes back to the queue for another
      // node, unless it can only run there (a process lease, hard affinity)
      // or in a placement group's bundle there: the group's user (a Train
      // run, an actor group) decides what to do with a group that lost a node.
      const auto& req = lease.request;
      bool pinned =
          lease.process || !req || !lease.group_id.IsNil() ||
          (req->strategy == protocol::LeaseStrategy::kNodeAffinity && !req->affinity_soft);
      if (pinned) {
        ReplyError(lease.owner,
                   Status::Unavailable("the node chosen for this worker died before it started"));
      } else {
        again.push_back(Pending{lease.owner, *req});
      }
      lease.request.reset();  // answered, or queued again
    }
    EndLease(id, /*kill_worker=*/false, reason);
  }
  groups_.OnNodeDead(node);
  // Queued requests that may run only there can never run now: answered,
  // like Ray's hard node affinity to a dead node. O(queue), once per death.
  std::vector<Owner> stranded;
  scheduler_.Drop([&](const Pending& p) {
    bool only_there = p.req.strategy == protocol::LeaseStrategy::kNodeAffinity &&
                      !p.req.affinity_soft && p.req.affinity_node_id == node.Hex();
    if (only_there) stranded.push_back(p.owner);
    return only_there;
  });
  for (const auto& owner : stranded) {
    ReplyError(owner, Status::Unavailable(
                          reason + ": this request's hard node affinity can never be met (use "
                                   "soft affinity to let it run elsewhere)"));
  }
  for (auto& [peer, notice] : notices) {
    notice.node_id = node.Hex();
    notice.reason = reason;
    outbox_.LeasesLost(peer, notice);
  }
  for (const auto& id : head_owned) {
    if (head_owner_) head_owner_->OnLeaseLost(id, reason);
  }
  for (auto& actor : restart) RestartActor(std::move(actor), reason);
  if (!again.empty()) {
    RAYX_LOG(Info) << again.size() << " lease request(s) whose node died before their worker "
                   << "started are queued again";
    for (auto& p : again) scheduler_.Enqueue(std::move(p));
    SchedulePending();
  }
  AfterRejoins();
}

void LeaseManager::OnProcessExited(const protocol::ProcessExitedNotice& notice) {
  auto it = leases_.find(notice.lease_id);
  if (it == leases_.end()) return;
  if (!it->second.process) {
    OnWorkerExited(it->second, notice);
    return;
  }
  Owner owner = it->second.owner;
  // The lease ends first: the owner may end the whole job on this notice.
  if (notice.all_exited) EndLease(notice.lease_id, /*kill_worker=*/false, "its processes exited");
  if (owner.head()) {
    head_owner_->OnProcessExited(notice);
  } else {
    outbox_.ProcessExited(owner.requester.peer, notice);
  }
}

void LeaseManager::OnWorkerExited(const Lease& lease, const protocol::ProcessExitedNotice& notice) {
  const NodeInfo* info = nodes_.FindAny(lease.node);
  std::string how = notice.signal != 0 ? "was killed by signal " + std::to_string(notice.signal)
                                       : "exited with status " + std::to_string(notice.exit_code);
  std::string reason = "worker pid " + std::to_string(notice.pid) + " on node " +
                       (info ? info->address + " (" + lease.node.Short() + ")" : lease.node.Short()) +
                       " " + how + (notice.reason.empty() ? "" : ": " + notice.reason.substr(0, 512));
  // Copies: EndLease erases `lease`.
  LeaseId lease_id = lease.lease_id;
  NodeId node = lease.node;
  Owner owner = lease.owner;
  bool head_actor = owner.head() && lease.for_actor;
  auto restart = TakeRestartable(lease_id, OwnerGone(lease));
  HoldNamesForOwner(lease);
  // Its resources are free now, whoever owns it: a detached actor's owner may
  // be long gone, and nobody else would return the lease.
  EndLease(lease_id, /*kill_worker=*/false, reason);
  for (auto& actor : restart) RestartActor(std::move(actor), reason);
  if (head_actor) {
    // A detached actor the head restarted: handled above.
  } else if (owner.head()) {
    if (head_owner_) head_owner_->OnLeaseLost(lease_id, reason);
  } else if (!owner.requester.peer.empty()) {
    // The owner hears at once, before its connection to the worker says so.
    protocol::LeasesLostNotice lost;
    lost.lease_ids = {lease_id};
    lost.node_id = node.Hex();
    lost.reason = reason;
    // The one cause owners hear of.
    if (notice.cause == protocol::TaskErrorKind::kOutOfMemory) lost.cause = notice.cause;
    outbox_.LeasesLost(owner.requester.peer, lost);
  }
}

}  // namespace rayx::scheduler
