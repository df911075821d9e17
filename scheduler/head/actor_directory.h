// The head's named actors: who holds each name, reservations of actors being
// created, the lookups parked on a name, and their rows in the head's store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "head/actor_name_waits.h"
#include "head/head_outbox.h"
#include "head/head_store.h"
#include "protocol/messages.h"
#include "rayx/ids.h"
#include "rayx/status.h"

namespace rayx::scheduler {

// Design: one entry per name (protocol::ActorInfo). A name is reserved when
// an actor is created (ActorInfo::starting), as in Ray: a second actor cannot
// take it while the first one's constructor runs, and GetActor finds it at
// once; the runtime that created it (`peer`) is recorded, so that its end
// frees or hands over its reservations. The name then points at the actor's
// running worker (Name), or, while the head restarts a detached actor, at no
// worker (lease_id nil) until the new one runs.
//
// Handles wait for a worker with a lookup parked on the name (ActorNameWaits),
// answered whenever the entry changes (every method below that changes an
// entry answers them) or at its deadline (ExpireLookups).
//
// Store: named entries are written through; reservations made by a runtime are
// not (a restarted head's runtimes register them again), except a detached
// one the head took over (StoreRestartable), which the next head creates again.
//
// What a name's lease and worker do (restarts, adoption of a detached actor
// whose creator is gone) is LeaseManager's: this class keeps the names only.
// Owned by the head's event loop; not thread-safe.
class ActorDirectory {
 public:
  // An actor's metadata (ActorInfo::metadata) is a few names; 64 KiB bounds it.
  static constexpr size_t kMaxMetadataBytes = 64 << 10;
  // A reservation's constructor call (ActorInfo::restart_request): the owner
  // sends at most 64 KiB of arguments (ActorSubmitter::kMaxRestartArgBytes)
  // and the lease request; a larger one is not kept (the actor cannot be
  // taken over).
  static constexpr size_t kMaxReservedConstructorBytes = 256 << 10;

  // `outbox` (the lookups' answers) must outlive this directory.
  explicit ActorDirectory(HeadOutbox& outbox) : outbox_(outbox) {}
  // Writes entries through to `store` (nullptr: none), which must outlive this.
  void SetStore(HeadStore* store) { store_ = store; }
  // The entries a previous head life stored, as they were.
  void Restore(const std::vector<protocol::ActorInfo>& actors);

  // Whether `actor` may take its name: InvalidArgument for an empty name or
  // metadata over kMaxMetadataBytes; AlreadyExists when another actor holds
  // it (or reserved it). OK for a free name and for the actor's own
  // reservation.
  Status CheckName(const protocol::ActorInfo& actor) const;
  // REQUIRES: CheckName(actor) is OK and actor.starting. Reserves the name
  // for `actor`, being created by the runtime at `peer`; when it is already
  // the actor's reservation, keeps the constructor call sent now instead
  // (KeptConstructor).
  void Reserve(const protocol::ActorInfo& actor, const std::string& peer);
  // REQUIRES: CheckName(actor) is OK. The name now names `actor`'s running
  // worker, taking over its reservation (whose metadata it keeps when
  // `actor` has none).
  void Name(const protocol::ActorInfo& actor);
  // Frees `name` when it is still reserved for `actor_id`; false otherwise.
  bool DropReservation(const std::string& name, const ActorId& actor_id);

  // The entry, or nullptr. Mutable: for changes that concern nobody parked
  // on it and no stored row (a reservation's constructor call); otherwise
  // follow the change with Changed.
  const protocol::ActorInfo* Find(const std::string& name) const;
  protocol::ActorInfo* Mutable(const std::string& name);
  // `name`'s entry was changed in place: it is stored (unless a reservation)
  // and its parked lookups are answered.
  void Changed(const std::string& name);
  // The entry, or NotFound saying why a name may be missing.
  Result<protocol::ActorInfo> Get(const std::string& name) const;
  // Calls `fn` with each name and entry. O(names).
  void ForEach(const std::function<void(const std::string& name,
                                        const protocol::ActorInfo& actor)>& fn) const;

  // Removes the entry (its row too, and its reservation); answers its lookups.
  void Erase(const std::string& name);
  // Removes every entry naming lease `lease_id`'s worker.
  void ForgetLease(const LeaseId& lease_id);
  // Takes `name`'s entry out, leaving its row and its lookups: the caller
  // names it again at once (Put) or says it is gone (Gone).
  std::optional<protocol::ActorInfo> Take(const std::string& name);
  // `info` under its name (a restart: no worker yet); stored; lookups answered.
  void Put(const protocol::ActorInfo& info);
  // A name taken out (Take) is gone: its row is deleted, its lookups answered.
  void Gone(const std::string& name);

  // The runtime that reserved `name`, or nullptr (not a reservation, or the
  // head's own).
  const std::string* ReservedBy(const std::string& name) const;
  // The names the runtime at `peer` reserved. O(reservations).
  std::vector<std::string> NamesReservedBy(const std::string& peer) const;
  // `name` is no longer the reservation of a runtime (its creator is gone;
  // the head finishes it, or it goes).
  void Unreserve(const std::string& name) { reserved_by_.erase(name); }
  // Stores a copy of the reservation `name` as a named entry (not starting),
  // so that a restarted head creates the actor again. A no-op without a
  // store, a reservation or a constructor call.
  void StoreRestartable(const std::string& name);

  // Takes out the entries of lease `lease_id`'s worker that the head can
  // restart (detached, with a constructor call, restarts left); their rows
  // stay (Put writes them again).
  std::vector<protocol::ActorInfo> TakeRestartable(const LeaseId& lease_id);
  // Lease `lease_id`'s worker died under its live owner (`owner_peer`): its
  // restartable names become that owner's reservations (it restarts them
  // and names the new worker, or drops the name).
  void HoldForOwner(const LeaseId& lease_id, const std::string& owner_peer);

  // Answers `to` with the named actor (or NotFound) now, or, with
  // `req.wait_ms`, once the name has a worker other than `req.stale_worker`,
  // its entry changes, or the wait's deadline passes (GetActorRequest).
  void Lookup(const Requester& to, const protocol::GetActorRequest& req, int64_t now_ms);
  // Answers the lookups whose deadline passed.
  void ExpireLookups(int64_t now_ms);
  size_t parked_lookups() const { return waits_.size(); }
  size_t size() const { return names_.size(); }

 private:
  // The constructor call kept with a reservation: only a detached actor's
  // (nobody else outlives its creator), and a bounded one.
  static std::string KeptConstructor(const protocol::ActorInfo& actor);
  // Answers the lookups parked on `name`: its entry changed.
  void NameChanged(const std::string& name);
  void AnswerLookup(const std::string& name, const Requester& to);

  HeadOutbox& outbox_;
  HeadStore* store_ = nullptr;
  std::map<std::string, protocol::ActorInfo> names_;
  // Names reserved at creation (ActorInfo::starting) -> the peer that did.
  std::unordered_map<std::string, std::string> reserved_by_;
  ActorNameWaits waits_;
};

}  // namespace rayx::scheduler
