// Actor calls: creation, per-actor ordered queues with an in-flight cap, kill.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include <boost/asio/io_context.hpp>

#include "common/clock.h"
#include "rayx/detail/runtime_api.h"
#include "runtime/argument_resolver.h"
#include "runtime/lease_client.h"
#include "runtime/submitter_deps.h"
#include "runtime/worker_connection.h"
#include "runtime/worker_send_queue.h"

namespace rayx::detail {

// Sends calls to actors. An actor is one leased worker and one connection;
// its calls leave strictly in submission order (the constructor first), each
// once its arguments are resolved, with at most kMaxInFlight on their way;
// replies let more go. An actor this process created owns its lease; a handle
// passed in (Attach) only calls it. Once the actor is dead (its constructor
// failed, it was killed, its worker was lost) every call fails with the
// reason (ActorDied).
//
// Restarts (Ray's max_restarts): when the worker of an actor this process
// owns is lost and restarts are left, the lease goes back, a new worker is
// leased with the same request, and the constructor (a resolved copy kept
// from the first creation) is sent first again; calls in flight with task
// retries left (max_task_retries) go again right behind it, in their order,
// the others fail with ActorDied; calls queued meanwhile wait. A handle that
// does not own a named restartable actor looks it up by name until its new
// worker answers (at most kRestartLookupMs).
//
// Names: Runtime::CreateActor reserves a named actor's name at the head
// before the actor exists; the owner registers the worker under it once the
// constructor ran, or drops the reservation when the actor dies first. A
// handle got by name before the constructor finished (Attach without a worker
// address) queues its calls and waits for the worker the same way.
//
// Thread safety: the I/O thread only. Ownership: owns the actors' states and
// connections; every dependency outlives it.
class ActorSubmitter {
 public:
  using Deps = SubmitterDeps;
  using Options = SubmitterOptions;

  // How long a handle that does not own a restartable actor waits for it to
  // answer again after its worker was lost.
  static constexpr int64_t kRestartLookupMs = 60000;
  // A detached actor's constructor arguments up to this size travel to the
  // head, which restarts it after its owner is gone.
  static constexpr size_t kMaxRestartArgBytes = 64 * 1024;
  // The constructor calls one driver hands over at its end, in all.
  static constexpr size_t kMaxHandOverBytes = 8 << 20;

  ActorSubmitter(Deps deps, Options options);
  ~ActorSubmitter();
  ActorSubmitter(const ActorSubmitter&) = delete;
  ActorSubmitter& operator=(const ActorSubmitter&) = delete;

  // Creates actor `creation_task.actor_id`: leases a worker with `options`'
  // resources and sends `creation_task` (the constructor) first. A named
  // actor is registered with the head once `creation` (the constructor's
  // result, kept alive until then) is ready.
  void Create(Task creation_task, const ActorOptions& options, ObjectHandle creation);
  // Queues a call (task.actor_id names the actor); an unknown or dead actor
  // fails it at once.
  void Submit(Task task);
  // Kills the actor: its lease goes back (the worker is stopped by the head)
  // and later calls fail.
  void Kill(const ActorId& actor_id);
  // The owner's last handle went away (Python's handle garbage collection):
  // an unnamed, non-detached actor this process created is stopped once the
  // calls submitted to it have answered, like Ray's out-of-scope actors. A
  // no-op for any other actor (named, detached, or created elsewhere).
  void Release(const ActorId& actor_id);
  // What a handle to the actor carries to another process (worker_address
  // empty: not running yet, or dead).
  protocol::ActorInfo Describe(const ActorId& actor_id);
  // Whether the actor waits for a worker: not dead, no worker, no lease granted
  // (its creation or restart waits for resources). False for an actor this
  // process does not know.
  bool WaitingForWorker(const ActorId& actor_id) const;
  // Makes an actor created elsewhere callable here (no-op when known).
  void Attach(const protocol::ActorInfo& info);
  // The head declared lease `lease_id`'s node dead: the actor's worker counts
  // as lost (`why`), as if it had died (a restart may follow).
  void LoseLease(const LeaseId& lease_id, const std::string& why);
  // The driver is about to end its job: its detached named actors whose
  // constructor has not finished, for the head to take over
  // (FinishJobRequest::hand_over); each with the lease request and
  // constructor call to create it again (restart_request), when its
  // arguments can outlive the job. They are no longer this process's to name.
  std::vector<protocol::ActorInfo> TakeHandOvers();
  // The head restarted (it keeps no reservations): the names of this owner's
  // actors still being constructed are reserved again, detached ones with
  // their constructor call, so handles waiting for them keep waiting and the
  // head can still take them over.
  void ReReserveNames();
  // Drops every connection (shutdown).
  void Clear();

 private:
  struct ActorState;

  void Pump(ActorState& actor);
  // Sends a resolved call (keeping a copy of the constructor for restarts).
  void Send(ActorState& actor, Task task);
  std::shared_ptr<WorkerConnection> Connect(ActorState& actor, WorkerConnection::Info info);
  // Leases a worker for the actor with its saved request and connects.
  void Lease(ActorState& actor);
  void OnWorkerLost(ActorState& actor, WorkerConnection& conn);
  // Restarts an owned actor whose worker was lost (`what` says how); the calls
  // it had in flight are `lost`.
  void Restart(ActorState& actor, const std::string& what, const std::string& node,
               std::vector<Task> lost);
  // A handle's actor has no worker (yet, or any more: `old_address` was it):
  // waits for one through parked lookups of its name (ActorNameLookup),
  // until kRestartLookupMs pass (pushed back while the head says its
  // constructor still runs). `reservation_seen`: the name was seen reserved.
  void StartLookup(ActorState& actor, std::string old_address, bool reservation_seen);
  // One lookup of the wait `actor.lookups` names.
  void AwaitWorker(ActorState& actor);
  // Asks the head again after a lookup that ended without a worker.
  void AskAgain(ActorState& actor, int64_t asked_ms);
  // A detached named actor's reservation is sent again with its constructor
  // call (ActorInfo::restart_request) once that is known and inline, so the
  // head creates the actor itself should this process end before the
  // constructor ran (a SIGKILLed driver, a task that returned). Once.
  void ShareConstructor(ActorState& actor);
  // The owner's name: registered once the constructor ran, or dropped when
  // the actor died before it did.
  void RegisterOrDropName(ActorState& actor);
  void DropName(ActorState& actor);
  void FailQueued(ActorState& actor, const std::string& node);
  // Stops a released actor once nothing is queued, resolving or in flight.
  void EndIfReleasedAndIdle(ActorState& actor);
  // The reservation of `actor`'s name (starting, no worker), a detached
  // actor's with its constructor call when that can outlive this process.
  protocol::ActorInfo ReservationOf(const ActorState& actor) const;
  // What a handle to `actor` carries, and what the head's name registry holds.
  protocol::ActorInfo InfoOf(const ActorState& actor) const;
  // What the head needs to restart `actor` once its owner (this process) is
  // gone (ActorInfo::restart_request), or "" when it cannot.
  std::string RestartRequestOf(const ActorState& actor) const;
  // The actor's lease request with its constructor call (`init`), or "" when
  // an argument is a stored object or they total over kMaxRestartArgBytes.
  std::string ConstructorRequestOf(const ActorState& actor) const;

  Deps deps_;
  Options options_;
  std::unordered_map<ActorId, std::unique_ptr<ActorState>> actors_;
};

}  // namespace rayx::detail
