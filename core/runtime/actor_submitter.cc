// Actor calls: creation, ordered per-actor queues, loss, restarts and kill.
#include "runtime/actor_submitter.h"
#include "runtime/actor_state.h"

#include <algorithm>
#include <climits>
#include <optional>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/logging.h"
#include "protocol/codec.h"
#include "runtime/task_submitter.h"

namespace rayx::detail {



ActorSubmitter::ActorSubmitter(Deps deps, Options options)
    : deps_(deps), options_(std::move(options)) {}

ActorSubmitter::~ActorSubmitter() = default;

std::shared_ptr<WorkerConnection> ActorSubmitter::Connect(ActorState& actor,
                                                          WorkerConnection::Info info) {
  info.job = actor.job;
  info.actor_key = actor.key;
  if (!actor.job.IsNil()) info.grant_read = options_.grant_read;
  auto conn = std::make_shared<WorkerConnection>(std::move(info), &actor, deps_.objects,
                                                 deps_.send_queue, deps_.clock);
  conn->Open(deps_.connector);
  return conn;
}

void ActorSubmitter::FailQueued(ActorState& actor, const std::string& node) {
  while (!actor.queue.empty()) {
    FailTask(deps_.objects, actor.queue.front(), protocol::TaskErrorKind::kActorDied, actor.dead_reason, node);
    actor.queue.pop_front();
  }
  actor.resolved_front = 0;
}

void ActorSubmitter::Create(Task creation_task, const ActorOptions& options,
                            ObjectHandle creation) {
  auto state = std::make_unique<ActorState>();
  state->submitter = this;
  state->actor_id = creation_task.actor_id;
  state->name = options.name;
  if (!options.name.empty()) state->name_state = ActorState::Name::kReserved;
  state->metadata = options.metadata;
  state->class_name = creation_task.function;
  state->owner = true;
  state->detached = options.detached;
  state->max_restarts = options.max_restarts;
  state->restarts_left = Allowance(options.max_restarts);
  state->max_task_retries = options.max_task_retries;
  state->creation_object = std::move(creation);
  state->queue.push_back(std::move(creation_task));
  protocol::RequestLeaseRequest& req = state->lease_request;
  req.job_id = options_.job_id;
  req.resources = options.resources;
  ApplyPlacement(options.placement, &req);
  req.for_actor = true;
  req.actor_id = state->actor_id;
  req.detached = options.detached;
  if (options_.describe_program) options_.describe_program(&req);
  ActorState* actor = state.get();
  actors_[actor->actor_id] = std::move(state);
  ShareConstructor(*actor);
  Lease(*actor);
}

protocol::ActorInfo ActorSubmitter::ReservationOf(const ActorState& actor) const {
  protocol::ActorInfo reserve = InfoOf(actor);
  reserve.worker_address.clear();
  reserve.lease_id = LeaseId();
  reserve.starting = true;
  reserve.metadata = actor.metadata;
  if (actor.detached) reserve.restart_request = ConstructorRequestOf(actor);
  return reserve;
}

void ActorSubmitter::ReReserveNames() {
  for (auto& [id, state] : actors_) {
    ActorState& a = *state;
    if (a.owner && a.name_state == ActorState::Name::kReserved && a.dead_reason.empty()) {
      deps_.head.RegisterActor(ReservationOf(a));
    }
  }
}

void ActorSubmitter::ShareConstructor(ActorState& actor) {
  if (actor.constructor_shared || !actor.owner || !actor.detached ||
      actor.name_state != ActorState::Name::kReserved || !actor.dead_reason.empty()) {
    return;
  }
  protocol::ActorInfo reserve = ReservationOf(actor);
  // Arguments still to resolve, stored, or too large: nothing to share (yet).
  if (reserve.restart_request.empty()) return;
  deps_.head.RegisterActor(reserve);
  actor.constructor_shared = true;
}

void ActorSubmitter::Lease(ActorState& actor) {
  ActorState* a = &actor;
  deps_.head.RequestLease(a->lease_request, [this, a](Result<protocol::RequestLeaseReply> r) {
    bool restarted = a->restarting;
    a->restarting = false;
    if (!a->dead_reason.empty()) {
      // Killed while its worker was on the way.
      if (r.ok()) deps_.head.ReturnLease(r->lease_id);
      FailQueued(*a, "");
      DropName(*a);
      return;
    }
    if (!r.ok()) {
      a->dead_reason = (restarted ? "the actor could not be restarted (" + a->RestartCount() +
                                        "): "
                                  : "the actor could not be placed: ") +
                       r.status().message();
      a->creation.reset();
      FailQueued(*a, "");
      DropName(*a);
      return;
    }
    a->lease_id = r->lease_id;
    a->conn = Connect(*a, WorkerConnection::Info{r->lease_id, r->worker_address, r->node_address,
                                                 r->worker_pid});
    if (restarted) {
      RAYX_LOG(Info) << "actor " << a->class_name << " (" << a->actor_id.Short()
                     << ") restarted on node " << r->node_address << ", worker pid "
                     << r->worker_pid << " (restart " << a->RestartCount() << ")";
    }
    Pump(*a);
    if (a->name.empty()) return;
    if (restarted) {
      // The new worker runs the constructor before any call it is sent: the
      // name may point at it at once.
      RegisterOrDropName(*a);
      return;
    }
    // Registered once the constructor has run, so a name with a worker always
    // means a live actor (until then the head holds it reserved).
    ObjectHandle creation = std::move(a->creation_object);
    auto registered_later = [this, creation, a] {
      boost::asio::post(deps_.io, [this, a] {
        if (a->name_state == ActorState::Name::kReserved) RegisterOrDropName(*a);
      });
    };
    if (!deps_.objects.AddWaiter(creation->id, registered_later)) registered_later();
  });
}

void ActorSubmitter::RegisterOrDropName(ActorState& actor) {
  if (actor.restarting) return;  // the restart registers its new worker
  if (!actor.dead_reason.empty() || !actor.conn) {
    DropName(actor);  // the constructor failed, or the actor was killed or lost
    return;
  }
  // Only the registration carries what the head needs to restart it.
  protocol::ActorInfo info = InfoOf(actor);
  info.restart_request = RestartRequestOf(actor);
  info.metadata = actor.metadata;
  info.starting = false;  // it has run: this names its worker
  deps_.head.RegisterActor(info);
  actor.name_state = ActorState::Name::kRegistered;
  if (actor.restarts_left == 0) actor.creation.reset();  // kept only to hand it over
}

void ActorSubmitter::DropName(ActorState& actor) {
  // Also once registered: a registration the head refused (the worker was
  // gone by then) leaves the reservation there. The head drops only a
  // reservation of this actor, never a registered name (that goes with its
  // lease).
  if (actor.name_state == ActorState::Name::kNone) return;
  actor.name_state = ActorState::Name::kNone;
  deps_.head.DropActorName(actor.name, actor.actor_id);
}

void ActorSubmitter::Submit(Task task) {
  auto it = actors_.find(task.actor_id);
  if (it == actors_.end()) {
    FailTask(deps_.objects, task, protocol::TaskErrorKind::kActorDied, "unknown actor " + task.actor_id.Hex(), "");
    return;
  }
  ActorState& state = *it->second;
  if (!state.dead_reason.empty()) {
    FailTask(deps_.objects, task, protocol::TaskErrorKind::kActorDied, state.dead_reason, "");
    return;
  }
  task.retries_left = Allowance(state.max_task_retries);
  state.queue.push_back(std::move(task));
  Pump(state);
}

void ActorSubmitter::Send(ActorState& actor, Task task) {
  // The owner keeps the constructor call (resolved) to run it again on a
  // restart; the worker connection drops its arguments once sent.
  // So does a detached named one until it is named: if its driver exits
  // first, the head creates it again from that copy (TakeHandOvers).
  bool hand_over = actor.detached && actor.name_state == ActorState::Name::kReserved;
  if (task.actor_creation && actor.owner && (actor.restarts_left > 0 || hand_over) &&
      !actor.creation) {
    actor.creation = task;
    ShareConstructor(actor);  // its arguments are resolved now
  }
  actor.conn->Queue(std::move(task));
}

void ActorSubmitter::Pump(ActorState& actor) {
  // Re-entered from a continuation that ran inside the loop below: that loop goes on.
  if (actor.pumping) return;
  actor.pumping = true;
  // Strictly in order: calls sent again after a loss first (resolved already),
  // then each once its arguments are resolved. At most kMaxInFlight calls are
  // on their way; replies let more go.
  while (actor.conn && !actor.conn->lost() && !actor.queue.empty() &&
         actor.conn->in_flight() < kMaxInFlight) {
    if (actor.resolved_front > 0) {
      --actor.resolved_front;
      Task task = std::move(actor.queue.front());
      actor.queue.pop_front();
      Send(actor, std::move(task));
      continue;
    }
    if (actor.resolving) break;
    Task task = std::move(actor.queue.front());
    actor.queue.pop_front();
    bool has_refs = false;
    for (auto& a : task.args) has_refs = has_refs || a.ref;
    if (!has_refs) {
      task.resolved.resize(task.args.size());
      for (size_t i = 0; i < task.args.size(); ++i) task.resolved[i] = std::move(task.args[i].bytes);
      task.args.clear();
      Send(actor, std::move(task));
      continue;
    }
    actor.resolving = true;
    ActorState* a = &actor;
    deps_.resolver.ResolveThen(task, [this, a](Task ready) {
      a->resolving = false;
      if (!a->dead_reason.empty()) {
        FailTask(deps_.objects, ready, protocol::TaskErrorKind::kActorDied, a->dead_reason, "");
      } else if (a->conn && !a->conn->lost() && a->resolved_front == 0) {
        Send(*a, std::move(ready));
      } else {
        // The worker was lost meanwhile: the call goes after those sent
        // again, before those submitted after it.
        a->queue.insert(a->queue.begin() + static_cast<ptrdiff_t>(a->resolved_front),
                        std::move(ready));
        ++a->resolved_front;
      }
      Pump(*a);
    });
  }
  actor.pumping = false;
}

void ActorSubmitter::Kill(const ActorId& actor_id) {
  auto it = actors_.find(actor_id);
  if (it == actors_.end()) return;
  ActorState& state = *it->second;
  // Killed for good: never restarted. A lease still on its way goes back when it arrives.
  state.dead_reason = "the actor was killed (ActorHandle::Kill)";
  state.creation.reset();
  DropName(state);
  if (!state.owner && state.restarting && state.lease_id.IsNil()) {
    // A handle got by name while the constructor ran: the actor is stopped
    // once its worker is known (AwaitWorker goes on for that).
    state.kill_when_found = true;
    FailQueued(state, "");
    return;
  }
  if (state.lookup_timer) state.lookup_timer->cancel();
  if (!state.lease_id.IsNil() && !(state.restarting && state.owner)) {
    deps_.head.ReturnLease(state.lease_id);
  }
  if (!state.conn) {
    bool waiting_lease = state.restarting && state.owner;
    state.restarting = waiting_lease;  // Lease's callback fails the queue then
    if (!waiting_lease) FailQueued(state, "");
  }
}

void ActorSubmitter::Release(const ActorId& actor_id) {
  auto it = actors_.find(actor_id);
  if (it == actors_.end()) return;
  ActorState& state = *it->second;
  if (!state.owner || state.detached || !state.name.empty()) return;
  state.released = true;
  EndIfReleasedAndIdle(state);
}

void ActorSubmitter::EndIfReleasedAndIdle(ActorState& actor) {
  if (!actor.released || !actor.dead_reason.empty() || actor.restarting || actor.resolving ||
      !actor.queue.empty() || !actor.conn || actor.conn->in_flight() > 0) {
    return;
  }
  Kill(actor.actor_id);
  actor.dead_reason = "the actor was stopped: its last handle went out of scope";
  actor.lease_request = {};
}

protocol::ActorInfo ActorSubmitter::Describe(const ActorId& actor_id) {
  auto it = actors_.find(actor_id);
  if (it != actors_.end()) return InfoOf(*it->second);
  protocol::ActorInfo info;
  info.actor_id = actor_id;
  return info;
}

bool ActorSubmitter::WaitingForWorker(const ActorId& actor_id) const {
  auto it = actors_.find(actor_id);
  if (it == actors_.end()) return false;
  const ActorState& a = *it->second;
  return a.dead_reason.empty() && !a.conn && a.lease_id.IsNil();
}

protocol::ActorInfo ActorSubmitter::InfoOf(const ActorState& a) const {
  protocol::ActorInfo info;
  info.actor_id = a.actor_id;
  info.name = a.name;
  info.job_id = a.job.IsNil() ? options_.job_id : a.job;
  if (a.key) {  // passed on with the handle (Runtime::SerializeActor adds ours)
    info.call_secret = a.key->secret;
    info.worker_key = a.key->worker_key;
  }
  info.class_name = a.class_name;
  info.worker_address = a.conn ? a.conn->info().address : "";
  info.lease_id = a.lease_id;
  info.detached = a.detached;
  info.max_restarts = a.restarts_left == INT32_MAX ? -1 : a.restarts_left;
  // Its name is reserved and its constructor runs (or, for a handle, it waits
  // for the actor's worker by name): whoever gets this handle may wait by name.
  info.starting = a.dead_reason.empty() && !a.name.empty() &&
                  (a.owner ? a.name_state == ActorState::Name::kReserved
                           : a.restarting && !a.conn);
  return info;
}

std::string ActorSubmitter::RestartRequestOf(const ActorState& a) const {
  // Only a detached actor outlives its owner.
  if (!a.owner || !a.detached || a.restarts_left <= 0 || !a.creation) return "";
  return ConstructorRequestOf(a);
}

std::string ActorSubmitter::ConstructorRequestOf(const ActorState& a) const {
  // The constructor call: the resolved copy kept once it was sent, or the
  // call still queued. Only inline arguments outlive the owner's job (its
  // stored objects go with it).
  std::vector<std::string> args;
  std::string function;
  if (a.creation) {
    if (!a.creation->stored.empty()) return "";
    args = a.creation->resolved;
    function = a.creation->function;
  } else if (!a.queue.empty() && a.queue.front().actor_creation) {
    const Task& queued = a.queue.front();
    if (a.resolved_front > 0) {
      if (!queued.stored.empty()) return "";
      args = queued.resolved;
    } else {
      for (const auto& arg : queued.args) {
        if (arg.ref) return "";
        args.push_back(arg.bytes);
      }
    }
    function = queued.function;
  } else {
    return "";
  }
  size_t bytes = 0;
  for (const auto& arg : args) bytes += arg.size();
  if (bytes > kMaxRestartArgBytes) return "";
  protocol::RequestLeaseRequest req = a.lease_request;
  req.init.function = std::move(function);
  req.init.actor_id = a.actor_id;
  req.init.args = std::move(args);
  return protocol::Encode(req);
}

std::vector<protocol::ActorInfo> ActorSubmitter::TakeHandOvers() {
  std::vector<protocol::ActorInfo> out;
  size_t budget = kMaxHandOverBytes;
  for (auto& [id, state] : actors_) {
    ActorState& a = *state;
    if (!a.owner || !a.detached || a.name_state != ActorState::Name::kReserved ||
        !a.dead_reason.empty()) {
      continue;
    }
    protocol::ActorInfo info = InfoOf(a);
    info.restart_request = ConstructorRequestOf(a);
    // All of them travel in one FinishJobRequest (a control frame of at most
    // 16 MiB): past kMaxHandOverBytes the rest are stopped instead, with a
    // warning from the head.
    if (budget < info.restart_request.size()) info.restart_request.clear();
    budget -= info.restart_request.size();
    info.metadata = a.metadata;
    a.name_state = ActorState::Name::kNone;  // the head's from now on
    out.push_back(std::move(info));
  }
  return out;
}

void ActorSubmitter::Attach(const protocol::ActorInfo& info) {
  auto it = actors_.find(info.actor_id);
  if (it != actors_.end()) {
    ActorState& known = *it->second;
    // A handle that saw the actor die, given its restarted worker (e.g. by
    // GetActor): calls go there from now on.
    if (known.owner || known.conn || known.restarting || info.worker_address.empty()) return;
    known.dead_reason.clear();
    known.lease_id = info.lease_id;
    known.restarts_left = Allowance(info.max_restarts);
    known.conn = Connect(known, WorkerConnection::Info{info.lease_id, info.worker_address, "", 0});
    return;
  }
  auto state = std::make_unique<ActorState>();
  state->submitter = this;
  state->actor_id = info.actor_id;
  if (info.job_id != options_.job_id) state->job = info.job_id;
  if (!state->job.IsNil() && !info.call_secret.empty()) {
    state->key = transport::ActorKey{info.actor_id, info.call_secret, info.worker_key};
  }
  state->name = info.name;
  state->class_name = info.class_name;
  state->lease_id = info.lease_id;
  state->restarts_left = Allowance(info.max_restarts);
  state->max_restarts = info.max_restarts;
  ActorState* a = state.get();
  actors_[info.actor_id] = std::move(state);
  if (!a->job.IsNil() && !options_.reaches_other_jobs && !a->key) {
    a->dead_reason = "actor " + (info.name.empty() ? info.actor_id.Hex() : "'" + info.name + "'") +
                     " belongs to job " + info.job_id.Hex() +
                     " and its handle carries no key to call it (a handle made by hand?): "
                     "look it up by name (get_actor), or pass the handle its driver made";
    return;
  }
  if (info.worker_address.empty()) {
    if (info.name.empty()) {
      a->dead_reason = "the actor had no worker when its handle was made (not started yet, or "
                       "dead), and without a name it cannot be found";
      return;
    }
    // Found by name while its constructor runs (or while it restarts): calls
    // queue until its worker is registered.
    a->restarting = true;
    StartLookup(*a, "", info.starting);
    return;
  }
  a->conn = Connect(*a, WorkerConnection::Info{info.lease_id, info.worker_address, "", 0});
}

void ActorSubmitter::LoseLease(const LeaseId& lease_id, const std::string& why) {
  for (auto& [id, actor] : actors_) {
    if (actor->owner && actor->conn && actor->conn->info().lease_id == lease_id) {
      std::shared_ptr<WorkerConnection> keep = actor->conn;
      keep->LoseReported(why);
      return;
    }
  }
}

void ActorSubmitter::Clear() {
  for (auto& [id, actor] : actors_) {
    actor->conn.reset();
    if (actor->lookup_timer) actor->lookup_timer->cancel();
  }
}

}  // namespace rayx::detail
