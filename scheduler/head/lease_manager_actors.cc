// LeaseManager's named actors, and the restarts of detached actors whose
// owner is gone. Part of LeaseManager (lease_manager.h).
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
// Names are reserved when an actor is created (ActorInfo::starting), as in
// Ray: a second actor cannot take the name while the first one's constructor
// runs, and GetActor finds it at once. Its handles wait for its worker with a
// parked lookup (ActorNameWaits), answered whenever the name's entry changes.
#include <iterator>

#include "common/logging.h"
#include "head/lease_manager.h"
#include "protocol/codec.h"

namespace rayx::scheduler {

namespace {
// An actor's metadata (ActorInfo::metadata) is a few names; 64 KiB bounds it.
constexpr size_t kMaxActorMetadataBytes = 64 << 10;
// A reservation's constructor call (ActorInfo::restart_request): the owner
// sends at most 64 KiB of arguments (ActorSubmitter::kMaxRestartArgBytes) and
// the lease request; a larger one is not kept (the actor cannot be taken over).
constexpr size_t kMaxReservedConstructorBytes = 256 << 10;

// The constructor call the head keeps with a reservation: only a detached
// actor's (nobody else outlives its creator), and a bounded one.
std::string KeptConstructor(const protocol::ActorInfo& actor) {
  if (!actor.detached || actor.restart_request.size() > kMaxReservedConstructorBytes) return "";
  return actor.restart_request;
}
}  // namespace

void LeaseManager::ForgetActorsOf(const LeaseId& lease_id) {
  if (lease_id.IsNil()) return;
  for (auto a = named_actors_.begin(); a != named_actors_.end();) {
    auto next = std::next(a);
    if (a->second.lease_id == lease_id) EraseName(a);
    a = next;
  }
}

void LeaseManager::EraseName(std::map<std::string, protocol::ActorInfo>::iterator it) {
  std::string name = it->first;
  if (it->second.starting) {
    // Only a reservation the head took over (Adopt) has no creator, and only
    // such a one is stored.
    if (reserved_by_.erase(name) == 0 && store_) store_->DeleteActor(name);
  } else if (store_) {
    store_->DeleteActor(name);
  }
  named_actors_.erase(it);
  NameChanged(name);
}

Status LeaseManager::RegisterActor(const protocol::ActorInfo& actor, const std::string& peer) {
  if (actor.name.empty()) return Status::InvalidArgument("an actor name may not be empty");
  if (actor.metadata.size() > kMaxActorMetadataBytes) {
    return Status::InvalidArgument("the actor's metadata is " +
                                   std::to_string(actor.metadata.size()) + " bytes; at most " +
                                   std::to_string(kMaxActorMetadataBytes) + " are kept");
  }
  auto existing = named_actors_.find(actor.name);
  bool own_reservation = existing != named_actors_.end() && existing->second.starting &&
                         existing->second.actor_id == actor.actor_id;
  if (existing != named_actors_.end() && !own_reservation) {
    return Status::AlreadyExists(
        "an actor named '" + actor.name + "' already exists" +
        (existing->second.starting ? " (its constructor is still running)" : "") +
        ": choose another name, or kill it first");
  }
  if (actor.starting) {
    if (own_reservation) {
      // Sent again, now (or again) with its constructor call: should its
      // creator end before the constructor ran, the head creates it itself.
      if (std::string kept = KeptConstructor(actor); !kept.empty()) {
        existing->second.restart_request = std::move(kept);
        existing->second.max_restarts = actor.max_restarts;
      }
      return Status::OK();
    }
    protocol::ActorInfo entry = actor;
    entry.worker_address.clear();
    entry.lease_id = LeaseId();
    entry.restart_request = KeptConstructor(actor);
    named_actors_[actor.name] = std::move(entry);
    reserved_by_[actor.name] = peer;
    NameChanged(actor.name);
    return Status::OK();
  }
  if (!leases_.count(actor.lease_id)) {
    return Status::NotFound("the actor's worker is gone");
  }
  if (actor.detached && !leases_[actor.lease_id].detached) {
    leases_[actor.lease_id].detached = true;
    SaveLease(leases_[actor.lease_id]);
  }
  protocol::ActorInfo& entry = named_actors_[actor.name];
  std::string metadata = own_reservation ? std::move(entry.metadata) : std::string();
  entry = actor;
  if (entry.metadata.empty()) entry.metadata = std::move(metadata);
  reserved_by_.erase(actor.name);
  if (store_) store_->PutActor(entry);
  NameChanged(actor.name);
  return Status::OK();
}

bool LeaseManager::DropActorName(const std::string& name, const ActorId& actor_id) {
  auto it = named_actors_.find(name);
  if (it == named_actors_.end() || !it->second.starting || it->second.actor_id != actor_id) {
    return false;
  }
  EraseName(it);
  return true;
}

void LeaseManager::DropReservationsOf(const std::string& peer) {
  if (reserved_by_.empty()) return;  // only actors being created have one
  std::vector<std::string> names;
  for (const auto& [name, by] : reserved_by_) {
    if (by == peer) names.push_back(name);
  }
  for (const auto& name : names) {
    auto it = named_actors_.find(name);
    if (it != named_actors_.end() && it->second.starting) {
      CreatorGone(name, "the worker that created it ended before its constructor finished");
    } else {
      reserved_by_.erase(name);
    }
  }
}

void LeaseManager::EndActorLeases(const ActorId& actor_id, const std::string& cause) {
  std::erase_if(pending_, [&](const Pending& p) {
    return p.req.for_actor && p.req.actor_id == actor_id;
  });
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
    ForgetActorsOf(id);
    EndHostedLeases(id);
    if (lease_end_observer_) lease_end_observer_(id, cause, /*job_ended=*/false);
  }
}

void LeaseManager::CreatorGone(const std::string& name, const std::string& cause) {
  auto it = named_actors_.find(name);
  if (it == named_actors_.end() || !it->second.starting) return;
  protocol::ActorInfo info = it->second;
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
  it = named_actors_.find(name);
  if (it == named_actors_.end() || it->second.actor_id != info.actor_id) return;
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
    EraseName(it);
    return;
  }
  info.starting = false;
  // RestartActor names it again at once, with no worker until it runs; the
  // name is never seen missing meanwhile (a handle waiting for an actor being
  // created takes a missing name for its end).
  reserved_by_.erase(name);
  named_actors_.erase(it);
  RestartActor(std::move(info), cause, /*count=*/false);
}

void LeaseManager::Adopt(const std::string& name, Lease& lease, const std::string& cause) {
  if (adopting_.count(lease.lease_id)) return;  // already
  reserved_by_.erase(name);  // its creator is gone; the head finishes it
  adopting_[lease.lease_id] = Adoption{name, lease.actor_id, lease.owner};
  lease.owner = Owner{Requester{}, OwnerKind::kHeadActor};
  SaveLease(lease);
  // Should the head restart meanwhile, the next one creates the actor again
  // (its worker, which no stored name points at, is stopped at rejoin).
  auto entry = named_actors_.find(name);
  if (store_ && entry != named_actors_.end() && !entry->second.restart_request.empty()) {
    protocol::ActorInfo restartable = entry->second;
    restartable.starting = false;
    store_->PutActor(restartable);
  }
  RAYX_LOG(Info) << "detached actor '" << name << "': " << cause
                 << "; the head takes over its worker pid " << lease.pid << ", whose constructor "
                 << (lease.construction == Lease::Construction::kBegan ? "still runs"
                                                                       : "has ended");
  if (lease.construction != Lease::Construction::kBegan) FinishAdoption(lease.lease_id);
}

std::map<std::string, protocol::ActorInfo>::iterator LeaseManager::ReservationOf(
    const Adoption& adoption) {
  auto it = named_actors_.find(adoption.name);
  if (it == named_actors_.end() || !it->second.starting ||
      it->second.actor_id != adoption.actor_id) {
    return named_actors_.end();
  }
  return it;
}

void LeaseManager::FinishAdoption(LeaseId lease_id) {
  auto adopted = adopting_.find(lease_id);
  auto lease = leases_.find(lease_id);
  if (adopted == adopting_.end() || lease == leases_.end()) return;
  Adoption adoption = std::move(adopted->second);
  adopting_.erase(adopted);
  auto it = ReservationOf(adoption);
  if (it == named_actors_.end()) {
    auto named = named_actors_.find(adoption.name);
    if (named != named_actors_.end() && named->second.lease_id == lease_id) {
      // Its creator was not gone after all and named it itself: its lease again.
      lease->second.owner = adoption.creator;
      SaveLease(lease->second);
      return;
    }
    EndLease(lease_id, /*kill_worker=*/true, "its actor's name was removed while it was created");
    return;
  }
  if (lease->second.construction == Lease::Construction::kFailed) {
    RAYX_LOG(Warning) << "detached actor '" << adoption.name << "' (" << it->second.class_name
                      << "): its constructor failed after its creator was gone ("
                      << lease->second.construction_error << "); its name is freed";
    EraseName(it);
    EndLease(lease_id, /*kill_worker=*/true, "its actor's constructor failed");
    return;
  }
  protocol::ActorInfo& entry = it->second;
  entry.starting = false;
  entry.worker_address = lease->second.worker_address;
  entry.lease_id = lease_id;
  // Kept for restarts only, as its owner would have named it.
  if (entry.max_restarts == 0) entry.restart_request.clear();
  if (store_) store_->PutActor(entry);
  NameChanged(adoption.name);
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
  auto it = ReservationOf(adoption);
  if (it == named_actors_.end()) return;
  protocol::ActorInfo info = it->second;
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
    EraseName(it);
    return;
  }
  info.starting = false;
  named_actors_.erase(it);  // RestartActor names it again at once
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

Result<protocol::ActorInfo> LeaseManager::GetActor(const std::string& name) const {
  auto it = named_actors_.find(name);
  if (it == named_actors_.end()) {
    return Status::NotFound("no actor named '" + name +
                            "': it was never created, was killed, or ended with its job (create "
                            "it with SetLifetime(Detached) to outlive the job)");
  }
  return it->second;
}

void LeaseManager::LookupActor(const Requester& to, const protocol::GetActorRequest& req,
                               int64_t now_ms) {
  if (req.name.empty()) {
    outbox_.Fail(to, Status::InvalidArgument("an actor name may not be empty"));
    return;
  }
  auto it = named_actors_.find(req.name);
  bool ready = it != named_actors_.end() && !it->second.worker_address.empty() &&
               it->second.worker_address != req.stale_worker;
  if (req.wait_ms <= 0 || ready) {
    AnswerLookup(req.name, to);
    return;
  }
  int64_t wait = std::min(req.wait_ms, protocol::GetActorRequest::kMaxActorWaitMs);
  Status parked = actor_waits_.Park(req.name, ActorWaiter{to, req.stale_worker}, now_ms + wait);
  if (!parked.ok()) outbox_.Fail(to, parked);
}

void LeaseManager::AnswerLookup(const std::string& name, const Requester& to) {
  auto actor = GetActor(name);
  if (!actor.ok()) {
    outbox_.Fail(to, actor.status());
    return;
  }
  protocol::GetActorReply reply;
  reply.actor = std::move(*actor);
  reply.actor.restart_request.clear();  // the head's own: its owner's constructor arguments
  outbox_.ActorFound(to, reply);
}

void LeaseManager::NameChanged(const std::string& name) {
  if (actor_waits_.size() == 0) return;
  for (const ActorWaiter& waiter : actor_waits_.Take(name)) AnswerLookup(name, waiter.to);
}

void LeaseManager::Tick(int64_t now_ms) {
  groups_.ExpireWaits(now_ms);
  for (const auto& [name, waiter] : actor_waits_.Expire(now_ms)) AnswerLookup(name, waiter.to);
}

bool LeaseManager::OwnerGone(const Lease& lease) const {
  if (lease.owner.head()) return true;
  return !jobs_.Live(lease.job_id);
}

std::vector<protocol::ActorInfo> LeaseManager::TakeRestartable(const LeaseId& lease_id,
                                                               bool owner_gone) {
  std::vector<protocol::ActorInfo> out;
  if (!owner_gone) return out;  // its owner restarts it
  for (auto a = named_actors_.begin(); a != named_actors_.end();) {
    const protocol::ActorInfo& info = a->second;
    if (info.lease_id == lease_id && info.detached && !info.restart_request.empty() &&
        info.max_restarts != 0) {
      out.push_back(info);
      a = named_actors_.erase(a);  // the row stays: Restart writes it again
    } else {
      ++a;
    }
  }
  return out;
}

void LeaseManager::HoldNamesForOwner(const Lease& lease) {
  if (!lease.for_actor || lease.owner.head() || OwnerGone(lease)) return;
  for (auto& [name, info] : named_actors_) {
    if (info.lease_id != lease.lease_id || info.max_restarts == 0) continue;
    if (store_) store_->DeleteActor(name);  // reservations are not stored
    info.starting = true;
    info.lease_id = LeaseId();
    info.worker_address.clear();
    // A detached one keeps its constructor call: should the owner die before
    // it restarts the actor, the head takes it over (DropReservationsOf).
    info.restart_request = KeptConstructor(info);
    reserved_by_[name] = lease.owner.requester.peer;
    NameChanged(name);
  }
}

void LeaseManager::RestartActor(protocol::ActorInfo info, const std::string& cause, bool count) {
  protocol::DecodeLimits limits;
  limits.max_str = protocol::kMaxControlFrameBytes;
  auto req = protocol::Decode<protocol::RequestLeaseRequest>(info.restart_request, limits);
  if (!req.ok() || req->init.function.empty()) {
    RAYX_LOG(Error) << "detached actor '" << info.name << "' cannot be restarted: its restart "
                    << "request is unusable (" << (req.ok() ? "no constructor" : req.status().message())
                    << ")";
    if (store_) store_->DeleteActor(info.name);
    NameChanged(info.name);  // gone: its waiting lookups hear so
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
  named_actors_[info.name] = info;
  if (store_) store_->PutActor(info);
  NameChanged(info.name);
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
  auto actor = named_actors_.find(name);
  if (actor == named_actors_.end() || !actor->second.lease_id.IsNil() ||
      actor->second.starting) {
    // Killed (its name removed) while it restarted: its new worker goes too.
    EndLease(grant.lease_id, /*kill_worker=*/true, "the restarted actor was removed meanwhile");
    return;
  }
  actor->second.worker_address = grant.worker_address;
  actor->second.lease_id = grant.lease_id;
  if (store_) store_->PutActor(actor->second);
  NameChanged(name);
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
  auto actor = named_actors_.find(name);
  if (actor != named_actors_.end() && actor->second.lease_id.IsNil() &&
      !actor->second.starting) {
    EraseName(actor);
  }
}

}  // namespace rayx::scheduler
