// LeaseManager's named actors, and the restarts of detached actors whose
// owner is gone. Part of LeaseManager (lease_manager.h).
//
// Design: an owner restarts its actors (the runtime's ActorSubmitter). A
// detached actor outlives its owner, so once the owner's job has ended the
// head does it: the owner registered, with the actor's name, its lease request
// and constructor call (ActorInfo::restart_request, inline arguments only).
// When such an actor's worker or node dies, the head requests a lease as its
// own owner (a request id with kActorRestartBit) with `init` set: the agent
// hands the constructor call to the new worker, which runs it before it says
// it is ready. The name then points at the new worker; handles of other jobs
// find it by name (they look it up after losing the old one).
#include "common/logging.h"
#include "head/lease_manager.h"
#include "protocol/codec.h"

namespace rayx::scheduler {

void LeaseManager::ForgetActorsOf(const LeaseId& lease_id) {
  for (auto a = named_actors_.begin(); a != named_actors_.end();) {
    if (a->second.lease_id != lease_id) {
      ++a;
      continue;
    }
    if (store_) store_->DeleteActor(a->first);
    a = named_actors_.erase(a);
  }
}

Status LeaseManager::RegisterActor(const protocol::ActorInfo& actor) {
  if (actor.name.empty()) return Status::InvalidArgument("an actor name may not be empty");
  if (named_actors_.count(actor.name)) {
    return Status::AlreadyExists("an actor named '" + actor.name +
                                 "' already exists: choose another name, or kill it first");
  }
  if (!leases_.count(actor.lease_id)) {
    return Status::NotFound("the actor's worker is gone");
  }
  if (actor.detached && !leases_[actor.lease_id].detached) {
    leases_[actor.lease_id].detached = true;
    SaveLease(leases_[actor.lease_id]);
  }
  named_actors_[actor.name] = actor;
  if (store_) store_->PutActor(actor);
  return Status::OK();
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

bool LeaseManager::OwnerGone(const Lease& lease) const {
  if (lease.owner.head) return true;
  auto job = jobs_.find(lease.job_id);
  return job == jobs_.end() || job->second.finished;
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

void LeaseManager::RestartActor(protocol::ActorInfo info, const std::string& cause, bool count) {
  protocol::DecodeLimits limits;
  limits.max_str = protocol::kMaxControlFrameBytes;
  auto req = protocol::Decode<protocol::RequestLeaseRequest>(info.restart_request, limits);
  if (!req.ok() || req->init.function.empty()) {
    RAYX_LOG(Error) << "detached actor '" << info.name << "' cannot be restarted: its restart "
                    << "request is unusable (" << (req.ok() ? "no constructor" : req.status().message())
                    << ")";
    if (store_) store_->DeleteActor(info.name);
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
  uint64_t id = kActorRestartBit | next_actor_restart_++;
  actor_restarts_[id] = info.name;
  RAYX_LOG(Warning) << "detached actor '" << info.name << "' (" << info.class_name
                    << ", its owner's job has ended): " << cause << "; the head restarts it (restart "
                    << info.restarts_done << ", "
                    << (info.max_restarts < 0 ? std::string("no limit")
                                              : std::to_string(info.max_restarts) + " left")
                    << ")";
  Request(Owner{Requester{"", id}, /*head=*/true}, *req);
}

void LeaseManager::OnActorRestartGranted(uint64_t request_id,
                                         const protocol::RequestLeaseReply& grant) {
  auto it = actor_restarts_.find(request_id);
  if (it == actor_restarts_.end()) return;
  std::string name = std::move(it->second);
  actor_restarts_.erase(it);
  std::erase_if(restarting_from_, [&](const auto& entry) { return entry.second == name; });
  auto actor = named_actors_.find(name);
  if (actor == named_actors_.end() || !actor->second.lease_id.IsNil()) {
    // Killed (its name removed) while it restarted: its new worker goes too.
    EndLease(grant.lease_id, /*kill_worker=*/true, "the restarted actor was removed meanwhile");
    return;
  }
  actor->second.worker_address = grant.worker_address;
  actor->second.lease_id = grant.lease_id;
  if (store_) store_->PutActor(actor->second);
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
  if (actor != named_actors_.end() && actor->second.lease_id.IsNil()) {
    named_actors_.erase(actor);
    if (store_) store_->DeleteActor(name);
  }
}

}  // namespace rayx::scheduler
