// LeaseManager's side of named actors (their names are ActorDirectory's):
// registering one against its lease, and the restarts of detached actors
// whose owner is gone. Part of LeaseManager (lease_manager.h).
//
// Design: an owner restarts its actors (the runtime's ActorSubmitter). A
// detached actor outlives its owner, so once the owner's job has ended the
// head does it: the owner registered, with the actor's name, its lease request
// and constructor call (ActorInfo::restart_request, inline arguments only).
// When such an actor's worker or node dies, the head requests a lease as its
// own owner (a kHeadActor request) with `init` set: the agent
// hands the constructor call to the new worker, which runs it before it says
// it is ready. The name then points at the new worker; handles of other jobs
// find it by name (they look it up after losing the old one).
//
// Names are reserved when an actor is created (ActorInfo::starting); a
// detached actor whose creator ends before its constructor finished is taken
// over (Adopt) or created again by the head (CreatorGone).

#include "common/logging.h"
#include "head/lease_manager.h"
#include "protocol/codec.h"

namespace rayx::scheduler {

Status LeaseManager::RegisterActor(const protocol::ActorInfo& actor, const std::string& peer) {
  RAYX_RETURN_IF_ERROR(actors_.CheckName(actor));
  if (actor.starting) {
    actors_.Reserve(actor, peer);
    return Status::OK();
  }
  auto lease = leases_.find(actor.lease_id);
  if (lease == leases_.end()) return Status::NotFound("the actor's worker is gone");
  if (actor.detached && !lease->second.detached) {
    lease->second.detached = true;
    SaveLease(lease->second);
  }
  actors_.Name(actor);
  return Status::OK();
}

void LeaseManager::DropReservationsOf(const std::string& peer) {
  for (const std::string& name : actors_.NamesReservedBy(peer)) {
    const protocol::ActorInfo* actor = actors_.Find(name);
    if (actor != nullptr && actor->starting) {
      CreatorGone(name, "the worker that created it ended before its constructor finished");
    } else {
      actors_.Unreserve(name);
    }
  }
}

void LeaseManager::EndActorLeases(const ActorId& actor_id, const std::string& cause) {
  scheduler_.Drop([&](const Pending& p) { return p.req.for_actor && p.req.actor_id == actor_id; });
  std::vector<LeaseId> ending;
  for (const auto& [id, lease] : leases_) {
    if (lease.for_actor && lease.actor_id == actor_id) ending.push_back(id);
  }
  for (const auto& id : ending) EndLease(id, /*kill_worker=*/true, cause);
  // Leases the previous head stored whose node has not rejoined yet: forgotten
  // now, so the rejoin stops their workers (OnNodeRejoined stops a live lease
  // it does not know), and nothing of theirs is booked meanwhile.
  std::vector<LeaseId> forgotten;
  for (auto& [node, stored] : unconfirmed_) {
    std::erase_if(stored, [&](const StoredLease& lease) {
      if (!lease.for_actor || lease.actor_id != actor_id) return false;
      forgotten.push_back(lease.lease_id);
      return true;
    });
  }
  for (const auto& id : forgotten) {
    if (store_) store_->DeleteLease(id);
    actors_.ForgetLease(id);
    EndHostedLeases(id);
    if (lease_end_observer_) lease_end_observer_(id, cause, /*job_ended=*/false);
  }
}

void LeaseManager::CreatorGone(const std::string& name, const std::string& cause) {
  const protocol::ActorInfo* reserved = actors_.Find(name);
  if (reserved == nullptr || !reserved->starting) return;
  protocol::ActorInfo info = *reserved;
  if (info.detached) {
    // Its worker said its constructor runs (or ran): the head takes the actor
    // over as it is rather than constructing it a second time.
    for (auto& [id, lease] : leases_) {
      if (lease.for_actor && lease.detached && lease.running && lease.actor_id == info.actor_id &&
          lease.construction != Lease::Construction::kUnknown) {
        Adopt(name, lease, cause);
        return;
      }
    }
  }
  // Its worker, if any, is still running the constructor for a creator that
  // is gone: a detached actor is created again by a worker of the head's own.
  EndActorLeases(info.actor_id, cause);
  const protocol::ActorInfo* still = actors_.Find(name);
  if (still == nullptr || still->actor_id != info.actor_id) return;
  if (!info.detached || info.restart_request.empty()) {
    if (info.detached) {
      RAYX_LOG(Warning) << "detached actor '" << name << "' (" << info.class_name
                        << ") stopped: " << cause
                        << ", and its constructor's arguments cannot outlive the job (objects "
                           "from the object store, or over 64 KiB): wait for a call to it to "
                           "return before the driver exits";
    } else {
      RAYX_LOG(Info) << "actor name '" << name << "' freed: " << cause;
    }
    actors_.Erase(name);
    return;
  }
  info.starting = false;
  // RestartActor names it again at once, with no worker until it runs; the
  // name is never seen missing meanwhile (a handle waiting for an actor being
  // created takes a missing name for its end).
  actors_.Unreserve(name);
  actors_.Take(name);
  RestartActor(std::move(info), cause, /*count=*/false);
}

void LeaseManager::Adopt(const std::string& name, Lease& lease, const std::string& cause) {
  if (adopting_.count(lease.lease_id)) return;  // already
  actors_.Unreserve(name);  // its creator is gone; the head finishes it
  adopting_[lease.lease_id] = Adoption{name, lease.actor_id, lease.owner};
  lease.owner = Owner{Requester{}, OwnerKind::kHeadActor};
  SaveLease(lease);
  // Should the head restart meanwhile, the next one creates the actor again
  // (its worker, which no stored name points at, is stopped at rejoin).
  actors_.StoreRestartable(name);
  RAYX_LOG(Info) << "detached actor '" << name << "': " << cause
                 << "; the head takes over its worker pid " << lease.pid << ", whose constructor "
                 << (lease.construction == Lease::Construction::kBegan ? "still runs"
                                                                       : "has ended");
  if (lease.construction != Lease::Construction::kBegan) FinishAdoption(lease.lease_id);
}

const protocol::ActorInfo* LeaseManager::ReservationOf(const Adoption& adoption) const {
  const protocol::ActorInfo* actor = actors_.Find(adoption.name);
  if (actor == nullptr || !actor->starting || actor->actor_id != adoption.actor_id) return nullptr;
  return actor;
}

void LeaseManager::FinishAdoption(LeaseId lease_id) {
  auto adopted = adopting_.find(lease_id);
  auto lease = leases_.find(lease_id);
  if (adopted == adopting_.end() || lease == leases_.end()) return;
  Adoption adoption = std::move(adopted->second);
  adopting_.erase(adopted);
  const protocol::ActorInfo* reserved = ReservationOf(adoption);
  if (reserved == nullptr) {
    const protocol::ActorInfo* named = actors_.Find(adoption.name);
    if (named != nullptr && named->lease_id == lease_id) {
      // Its creator was not gone after all and named it itself: its lease again.
      lease->second.owner = adoption.creator;
      SaveLease(lease->second);
      return;
    }
    EndLease(lease_id, /*kill_worker=*/true, "its actor's name was removed while it was created");
    return;
  }
  if (lease->second.construction == Lease::Construction::kFailed) {
    RAYX_LOG(Warning) << "detached actor '" << adoption.name << "' (" << reserved->class_name
                      << "): its constructor failed after its creator was gone ("
                      << lease->second.construction_error << "); its name is freed";
    actors_.Erase(adoption.name);
    EndLease(lease_id, /*kill_worker=*/true, "its actor's constructor failed");
    return;
  }
  protocol::ActorInfo& entry = *actors_.Mutable(adoption.name);
  entry.starting = false;
  entry.worker_address = lease->second.worker_address;
  entry.lease_id = lease_id;
  // Kept for restarts only, as its owner would have named it.
  if (entry.max_restarts == 0) entry.restart_request.clear();
  actors_.Changed(adoption.name);
  RAYX_LOG(Info) << "detached actor '" << adoption.name << "' (" << entry.class_name
                 << ") is ready on worker pid " << lease->second.pid
                 << ", its constructor ran once (the head took it over from its creator)";
}

void LeaseManager::AdoptionLost(const LeaseId& lease_id, const std::string& cause) {
  if (adopting_.empty()) return;
  auto adopted = adopting_.find(lease_id);
  if (adopted == adopting_.end()) return;
  Adoption adoption = std::move(adopted->second);
  adopting_.erase(adopted);
  const protocol::ActorInfo* reserved = ReservationOf(adoption);
  if (reserved == nullptr) return;
  protocol::ActorInfo info = *reserved;
  // A worker the head stopped itself (unfollowed) is no failure of the actor:
  // created again as for any creator gone before its constructor ended, not
  // as a restart.
  bool counted = !adoption.unfollowed;
  std::string why =
      counted ? "its worker ended while its constructor ran (" + cause + ")" : cause;
  if (info.restart_request.empty() || (counted && info.max_restarts == 0)) {
    RAYX_LOG(Warning) << "detached actor '" << adoption.name << "' (" << info.class_name
                      << "): " << why << ", and it is not created again ("
                      << (info.restart_request.empty()
                              ? "its constructor's arguments cannot outlive its job"
                              : "it has no restarts")
                      << "); its name is freed";
    actors_.Erase(adoption.name);
    return;
  }
  info.starting = false;
  actors_.Take(adoption.name);  // RestartActor names it again at once
  RestartActor(std::move(info), why, counted);
}

void LeaseManager::OnActorConstruction(const protocol::ActorConstructionNotice& notice) {
  auto it = leases_.find(notice.lease_id);
  if (it == leases_.end() || !it->second.for_actor || !it->second.detached) return;
  Lease& lease = it->second;
  switch (notice.stage) {
    case protocol::ActorConstructionNotice::kBegan:
      if (lease.construction == Lease::Construction::kUnknown) {
        lease.construction = Lease::Construction::kBegan;
      }
      return;
    case protocol::ActorConstructionNotice::kSucceeded:
      lease.construction = Lease::Construction::kSucceeded;
      break;
    case protocol::ActorConstructionNotice::kFailed:
      lease.construction = Lease::Construction::kFailed;
      lease.construction_error =
          notice.error.substr(0, protocol::ActorConstructionNotice::kMaxErrorBytes);
      break;
    case protocol::ActorConstructionNotice::kUnfollowed:
      lease.construction = Lease::Construction::kUnknown;
      if (auto adopted = adopting_.find(notice.lease_id); adopted != adopting_.end()) {
        // Its end would never be heard: created again (or its name freed),
        // as when a creator goes before its worker reported anything.
        adopted->second.unfollowed = true;
        EndLease(LeaseId(notice.lease_id), /*kill_worker=*/true,
                 "its constructor could no longer be followed");
      }
      return;
    default:
      return;  // a stage this head does not know
  }
  FinishAdoption(notice.lease_id);
}

void LeaseManager::Tick(int64_t now_ms) { actors_.ExpireLookups(now_ms); }

bool LeaseManager::OwnerGone(const Lease& lease) const {
  if (lease.owner.head()) return true;
  return !jobs_.Live(lease.job_id);
}

std::vector<protocol::ActorInfo> LeaseManager::TakeRestartable(const LeaseId& lease_id,
                                                               bool owner_gone) {
  if (!owner_gone) return {};  // its owner restarts it
  return actors_.TakeRestartable(lease_id);
}

void LeaseManager::HoldNamesForOwner(const Lease& lease) {
  if (!lease.for_actor || lease.owner.head() || OwnerGone(lease)) return;
  actors_.HoldForOwner(lease.lease_id, lease.owner.requester.peer);
}

void LeaseManager::RestartActor(protocol::ActorInfo info, const std::string& cause, bool count) {
  protocol::DecodeLimits limits;
  limits.max_str = protocol::kMaxControlFrameBytes;
  auto req = protocol::Decode<protocol::RequestLeaseRequest>(info.restart_request, limits);
  if (!req.ok() || req->init.function.empty()) {
    RAYX_LOG(Error) << "detached actor '" << info.name << "' cannot be restarted: its restart "
                    << "request is unusable (" << (req.ok() ? "no constructor" : req.status().message())
                    << ")";
    actors_.Gone(info.name);  // its waiting lookups hear so
    return;
  }
  if (count) {
    if (info.max_restarts > 0) --info.max_restarts;
    ++info.restarts_done;
  }
  // Until the new worker runs, the name has no worker: handles wait for one.
  if (!info.lease_id.IsNil()) restarting_from_[info.lease_id] = info.name;
  info.worker_address.clear();
  info.lease_id = LeaseId();
  actors_.Put(info);
  uint64_t id = next_actor_restart_++;
  actor_restarts_[id] = info.name;
  RAYX_LOG(Warning) << "detached actor '" << info.name << "' (" << info.class_name
                    << ", its owner's job has ended): " << cause << "; the head restarts it (restart "
                    << info.restarts_done << ", "
                    << (info.max_restarts < 0 ? std::string("no limit")
                                              : std::to_string(info.max_restarts) + " left")
                    << ")";
  Request(Owner{Requester{"", id}, OwnerKind::kHeadActor}, *req);
}

void LeaseManager::OnActorRestartGranted(uint64_t request_id,
                                         const protocol::RequestLeaseReply& grant) {
  auto it = actor_restarts_.find(request_id);
  if (it == actor_restarts_.end()) return;
  std::string name = std::move(it->second);
  actor_restarts_.erase(it);
  std::erase_if(restarting_from_, [&](const auto& entry) { return entry.second == name; });
  protocol::ActorInfo* actor = actors_.Mutable(name);
  if (actor == nullptr || !actor->lease_id.IsNil() || actor->starting) {
    // Killed (its name removed) while it restarted: its new worker goes too.
    EndLease(grant.lease_id, /*kill_worker=*/true, "the restarted actor was removed meanwhile");
    return;
  }
  actor->worker_address = grant.worker_address;
  actor->lease_id = grant.lease_id;
  actors_.Changed(name);
  RAYX_LOG(Info) << "detached actor '" << name << "' restarted on node " << grant.node_address
                 << ", worker pid " << grant.worker_pid;
}

void LeaseManager::OnActorRestartFailed(uint64_t request_id, const Status& status) {
  auto it = actor_restarts_.find(request_id);
  if (it == actor_restarts_.end()) return;
  std::string name = std::move(it->second);
  actor_restarts_.erase(it);
  std::erase_if(restarting_from_, [&](const auto& entry) { return entry.second == name; });
  RAYX_LOG(Error) << "detached actor '" << name << "' could not be restarted: " << status.message()
                  << "; its name is removed";
  const protocol::ActorInfo* actor = actors_.Find(name);
  if (actor != nullptr && actor->lease_id.IsNil() && !actor->starting) actors_.Erase(name);
}

}  // namespace rayx::scheduler
