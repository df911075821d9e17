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
// Thread safety: the I/O thread only. Ownership: owns the actors' states and
// connections; every dependency outlives it.
class ActorSubmitter {
 public:
  using Deps = SubmitterDeps;
  using Options = SubmitterOptions;

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
  void Kill(const std::string& actor_id);
  // What a handle to the actor carries to another process (worker_address
  // empty: not running yet, or dead).
  protocol::ActorInfo Describe(const std::string& actor_id);
  // Makes an actor created elsewhere callable here (no-op when known).
  void Attach(const protocol::ActorInfo& info);
  // Drops every connection (shutdown).
  void Clear();

 private:
  struct ActorState;

  void Pump(ActorState& actor);
  std::shared_ptr<WorkerConnection> Connect(ActorState& actor, WorkerConnection::Info info);
  void OnWorkerLost(ActorState& actor, WorkerConnection& conn);
  void FailQueued(ActorState& actor, const std::string& node);

  Deps deps_;
  Options options_;
  std::unordered_map<std::string, std::unique_ptr<ActorState>> actors_;
};

}  // namespace rayx::detail
