// The head's named actors.
#include "head/actor_directory.h"

#include <algorithm>
#include <iterator>

namespace rayx::scheduler {

std::string ActorDirectory::KeptConstructor(const protocol::ActorInfo& actor) {
  if (!actor.detached || actor.restart_request.size() > kMaxReservedConstructorBytes) return "";
  return actor.restart_request;
}

void ActorDirectory::Restore(const std::vector<protocol::ActorInfo>& actors) {
  for (const auto& actor : actors) names_[actor.name] = actor;
}

Status ActorDirectory::CheckName(const protocol::ActorInfo& actor) const {
  if (actor.name.empty()) return Status::InvalidArgument("an actor name may not be empty");
  if (actor.metadata.size() > kMaxMetadataBytes) {
    return Status::InvalidArgument("the actor's metadata is " +
                                   std::to_string(actor.metadata.size()) + " bytes; at most " +
                                   std::to_string(kMaxMetadataBytes) + " are kept");
  }
  auto existing = names_.find(actor.name);
  if (existing == names_.end()) return Status::OK();
  if (existing->second.starting && existing->second.actor_id == actor.actor_id) {
    return Status::OK();  // its own reservation
  }
  return Status::AlreadyExists("an actor named '" + actor.name + "' already exists" +
                               (existing->second.starting ? " (its constructor is still running)"
                                                          : "") +
                               ": choose another name, or kill it first");
}

void ActorDirectory::Reserve(const protocol::ActorInfo& actor, const std::string& peer) {
  auto existing = names_.find(actor.name);
  if (existing != names_.end()) {
    // Sent again, now (or again) with its constructor call: should its
    // creator end before the constructor ran, the head creates it itself.
    if (std::string kept = KeptConstructor(actor); !kept.empty()) {
      existing->second.restart_request = std::move(kept);
      existing->second.max_restarts = actor.max_restarts;
    }
    return;
  }
  protocol::ActorInfo entry = actor;
  entry.worker_address.clear();
  entry.lease_id = LeaseId();
  entry.restart_request = KeptConstructor(actor);
  names_[actor.name] = std::move(entry);
  reserved_by_[actor.name] = peer;
  NameChanged(actor.name);
}

void ActorDirectory::Name(const protocol::ActorInfo& actor) {
  auto existing = names_.find(actor.name);
  const bool own_reservation = existing != names_.end() && existing->second.starting &&
                               existing->second.actor_id == actor.actor_id;
  protocol::ActorInfo& entry = names_[actor.name];
  std::string metadata = own_reservation ? std::move(entry.metadata) : std::string();
  entry = actor;
  if (entry.metadata.empty()) entry.metadata = std::move(metadata);
  reserved_by_.erase(actor.name);
  if (store_) store_->PutActor(entry);
  NameChanged(actor.name);
}

bool ActorDirectory::DropReservation(const std::string& name, const ActorId& actor_id) {
  auto it = names_.find(name);
  if (it == names_.end() || !it->second.starting || it->second.actor_id != actor_id) return false;
  Erase(name);
  return true;
}

const protocol::ActorInfo* ActorDirectory::Find(const std::string& name) const {
  auto it = names_.find(name);
  return it == names_.end() ? nullptr : &it->second;
}

protocol::ActorInfo* ActorDirectory::Mutable(const std::string& name) {
  auto it = names_.find(name);
  return it == names_.end() ? nullptr : &it->second;
}

void ActorDirectory::Changed(const std::string& name) {
  auto it = names_.find(name);
  if (it == names_.end()) return;
  if (store_ && !it->second.starting) store_->PutActor(it->second);
  NameChanged(name);
}

Result<protocol::ActorInfo> ActorDirectory::Get(const std::string& name) const {
  auto it = names_.find(name);
  if (it == names_.end()) {
    return Status::NotFound("no actor named '" + name +
                            "': it was never created, was killed, or ended with its job (create "
                            "it with SetLifetime(Detached) to outlive the job)");
  }
  return it->second;
}

void ActorDirectory::ForEach(
    const std::function<void(const std::string& name, const protocol::ActorInfo& actor)>& fn)
    const {
  for (const auto& [name, actor] : names_) fn(name, actor);
}

void ActorDirectory::Erase(const std::string& name) {
  auto it = names_.find(name);
  if (it == names_.end()) return;
  if (it->second.starting) {
    // Only a reservation the head took over has no creator, and only such a
    // one is stored (StoreRestartable).
    if (reserved_by_.erase(name) == 0 && store_) store_->DeleteActor(name);
  } else if (store_) {
    store_->DeleteActor(name);
  }
  names_.erase(it);
  NameChanged(name);
}

void ActorDirectory::ForgetLease(const LeaseId& lease_id) {
  if (lease_id.IsNil()) return;
  std::vector<std::string> names;
  for (const auto& [name, actor] : names_) {
    if (actor.lease_id == lease_id) names.push_back(name);
  }
  for (const auto& name : names) Erase(name);
}

std::optional<protocol::ActorInfo> ActorDirectory::Take(const std::string& name) {
  auto it = names_.find(name);
  if (it == names_.end()) return std::nullopt;
  protocol::ActorInfo info = std::move(it->second);
  names_.erase(it);
  return info;
}

void ActorDirectory::Put(const protocol::ActorInfo& info) {
  names_[info.name] = info;
  if (store_) store_->PutActor(info);
  NameChanged(info.name);
}

void ActorDirectory::Gone(const std::string& name) {
  if (store_) store_->DeleteActor(name);
  NameChanged(name);
}

const std::string* ActorDirectory::ReservedBy(const std::string& name) const {
  auto it = reserved_by_.find(name);
  return it == reserved_by_.end() ? nullptr : &it->second;
}

std::vector<std::string> ActorDirectory::NamesReservedBy(const std::string& peer) const {
  std::vector<std::string> names;
  for (const auto& [name, by] : reserved_by_) {
    if (by == peer) names.push_back(name);
  }
  return names;
}

void ActorDirectory::StoreRestartable(const std::string& name) {
  auto it = names_.find(name);
  if (!store_ || it == names_.end() || it->second.restart_request.empty()) return;
  protocol::ActorInfo restartable = it->second;
  restartable.starting = false;
  store_->PutActor(restartable);
}

std::vector<protocol::ActorInfo> ActorDirectory::TakeRestartable(const LeaseId& lease_id) {
  std::vector<protocol::ActorInfo> out;
  for (auto a = names_.begin(); a != names_.end();) {
    const protocol::ActorInfo& info = a->second;
    if (info.lease_id == lease_id && info.detached && !info.restart_request.empty() &&
        info.max_restarts != 0) {
      out.push_back(info);
      a = names_.erase(a);
    } else {
      ++a;
    }
  }
  return out;
}

void ActorDirectory::HoldForOwner(const LeaseId& lease_id, const std::string& owner_peer) {
  for (auto& [name, info] : names_) {
    if (info.lease_id != lease_id || info.max_restarts == 0) continue;
    if (store_) store_->DeleteActor(name);  // reservations are not stored
    info.starting = true;
    info.lease_id = LeaseId();
    info.worker_address.clear();
    // A detached one keeps its constructor call: should the owner die before
    // it restarts the actor, the head takes it over.
    info.restart_request = KeptConstructor(info);
    reserved_by_[name] = owner_peer;
    NameChanged(name);
  }
}

void ActorDirectory::Lookup(const Requester& to, const protocol::GetActorRequest& req,
                            int64_t now_ms) {
  if (req.name.empty()) {
    outbox_.Fail(to, Status::InvalidArgument("an actor name may not be empty"));
    return;
  }
  auto it = names_.find(req.name);
  bool ready = it != names_.end() && !it->second.worker_address.empty() &&
               it->second.worker_address != req.stale_worker;
  if (req.wait_ms <= 0 || ready) {
    AnswerLookup(req.name, to);
    return;
  }
  int64_t wait = std::min(req.wait_ms, protocol::GetActorRequest::kMaxActorWaitMs);
  Status parked = waits_.Park(req.name, ActorWaiter{to, req.stale_worker}, now_ms + wait);
  if (!parked.ok()) outbox_.Fail(to, parked);
}

void ActorDirectory::ExpireLookups(int64_t now_ms) {
  for (const auto& [name, waiter] : waits_.Expire(now_ms)) AnswerLookup(name, waiter.to);
}

void ActorDirectory::AnswerLookup(const std::string& name, const Requester& to) {
  auto actor = Get(name);
  if (!actor.ok()) {
    outbox_.Fail(to, actor.status());
    return;
  }
  protocol::GetActorReply reply;
  reply.actor = std::move(*actor);
  reply.actor.restart_request.clear();  // the head's own: its owner's constructor arguments
  outbox_.ActorFound(to, reply);
}

void ActorDirectory::NameChanged(const std::string& name) {
  if (waits_.size() == 0) return;
  for (const ActorWaiter& waiter : waits_.Take(name)) AnswerLookup(name, waiter.to);
}

}  // namespace rayx::scheduler
