// Actor calls: creation, ordered per-actor queues, loss, restarts and kill.
#include "runtime/actor_submitter.h"

#include <algorithm>
#include <climits>
#include <optional>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/logging.h"
#include "protocol/codec.h"
#include "runtime/task_submitter.h"

namespace rayx::detail {

namespace {
// A handle waiting for its actor's worker asks the head to answer within this
// long (the head answers sooner when the name changes), and asks again at
// most this often when the head answers at once without one.
constexpr int64_t kLookupWaitMs = 5000;
constexpr int64_t kLookupPeriodMs = 200;

// A count of retries or restarts from the user's number (-1: no limit).
int32_t Allowance(int n) { return n < 0 ? INT32_MAX : n; }
}  // namespace

struct ActorSubmitter::ActorState final : WorkerConnection::Owner {
  ActorSubmitter* submitter = nullptr;
  ActorId actor_id;
  JobId job;  // the actor's job when it is another job's (a detached actor); nil: ours
  // The key to call it when it is another job's (ActorInfo::call_secret):
  // what opens its worker to a process that holds only its own job's credential.
  std::optional<transport::ActorKey> key;
  std::string name;
  std::string class_name;
  LeaseId lease_id;
  bool owner = false;
  bool detached = false;
  std::deque<Task> queue;    // calls not yet sent, in order
  size_t resolved_front = 0; // the first entries of `queue` are resolved (sent again after a loss)
  bool resolving = false;    // the first call after them waits for its arguments
  bool pumping = false;      // Pump is running
  std::shared_ptr<WorkerConnection> conn;
  std::string dead_reason;   // set once the actor is gone for good
  // The owner's name at the head: reserved at creation (Runtime::CreateActor),
  // registered once the constructor ran; dropped again if it never does.
  enum class Name { kNone, kReserved, kRegistered } name_state = Name::kNone;
  std::string metadata;      // ActorOptions::metadata, registered with the name
  bool kill_when_found = false;  // a handle killed it before it had a worker
  bool head_restart_seen = false;  // its name was seen with no worker, not starting
  bool reservation_seen = false;   // its name was seen reserved (its constructor running)
  int64_t missing_since_ms = -1;   // when a lookup last found its name missing, after that
  bool released = false;     // its owner's last handle went away (Release)

  // Restarts. The owner keeps what it needs to create the actor again.
  int32_t restarts_left = 0;  // INT32_MAX: no limit
  int32_t max_restarts = 0;   // as the user set it (-1: no limit), for messages
  int32_t restarts_done = 0;
  int32_t max_task_retries = 0;
  bool restarting = false;    // a new worker is being leased (owner) or looked up (handle)
  bool constructor_shared = false;  // its reservation carries its constructor (ShareConstructor)
  protocol::RequestLeaseRequest lease_request;
  std::optional<Task> creation;  // the constructor call, resolved, once sent
  ObjectHandle creation_object;  // the first constructor's result, until a name is registered
  std::unique_ptr<boost::asio::steady_timer> lookup_timer;

  void OnReplies(WorkerConnection& c) override {
    if (conn.get() != &c) return;
    submitter->Pump(*this);
    submitter->EndIfReleasedAndIdle(*this);
  }
  void OnCreationFailed(WorkerConnection& c, const std::string& message) override {
    // Calls already sent fail on the worker with this reason too; the lease
    // goes back. A constructor that fails is never run again.
    dead_reason = "the actor's constructor failed: " + message;
    creation.reset();
    submitter->deps_.head.ReturnLease(c.info().lease_id);
  }
  void OnLost(WorkerConnection& c) override { submitter->OnWorkerLost(*this, c); }
  void OnRetry(WorkerConnection&, Task task) override {
    // Actor calls never retry exceptions (Submit does not set it).
    FailTask(submitter->deps_.objects, task, "Internal", "an actor call asked for a retry", "");
  }

  std::string RestartCount() const {
    return std::to_string(restarts_done) +
           (max_restarts < 0 ? "" : " of " + std::to_string(max_restarts));
  }
};

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
    FailTask(deps_.objects, actor.queue.front(), "ActorDied", actor.dead_reason, node);
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
    FailTask(deps_.objects, task, "ActorDied", "unknown actor " + task.actor_id.Hex(), "");
    return;
  }
  ActorState& state = *it->second;
  if (!state.dead_reason.empty()) {
    FailTask(deps_.objects, task, "ActorDied", state.dead_reason, "");
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
  while (actor.conn && !actor.queue.empty() && actor.conn->in_flight() < kMaxInFlight) {
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
        FailTask(deps_.objects, ready, "ActorDied", a->dead_reason, "");
      } else if (a->conn && a->resolved_front == 0) {
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

void ActorSubmitter::OnWorkerLost(ActorState& actor, WorkerConnection& conn) {
  const WorkerConnection::Info info = conn.info();
  std::string lost = conn.DescribeLoss();  // "<worker> died" or "<worker> was lost: <why>"
  if (actor.conn.get() != &conn) {  // an earlier worker's connection, replaced already
    conn.FailInFlight("ActorDied", lost + " while running this call");
    return;
  }
  // Close the socket later: we are inside its monitor's handler.
  auto keep = actor.conn;
  boost::asio::post(deps_.io, [keep] {});
  actor.conn.reset();
  // Give the lease back so its resources are freed: only its holder may (a
  // caller with a passed or looked-up actor handle does not own the actor).
  if (actor.owner) deps_.head.ReturnLease(info.lease_id);

  if (actor.dead_reason.empty() && actor.restarts_left > 0) {
    if (actor.owner && actor.creation) {
      Restart(actor, lost, info.node, conn.TakeInFlight());
      return;
    }
    if (!actor.owner && !actor.name.empty()) {
      // Its owner restarts it; this handle finds the new worker by name.
      conn.FailInFlight("ActorDied", lost + " while running this call; the actor is "
                                           "restarting: calls made from now on reach its new "
                                           "instance");
      actor.restarting = true;
      actor.reservation_seen = false;  // a new wait: only what it sees counts
      actor.missing_since_ms = -1;
      AwaitWorker(actor, info.address, deps_.clock.NowMs() + kRestartLookupMs);
      return;
    }
  }
  if (actor.dead_reason.empty()) {
    actor.dead_reason = lost;
    if (actor.restarts_done > 0) {
      actor.dead_reason += "; the actor was restarted " + std::to_string(actor.restarts_done) +
                           " times already (max_restarts " + std::to_string(actor.max_restarts) +
                           "), none are left";
    }
    // An actor already known dead (its constructor failed, it was killed)
    // keeps that reason for the calls in flight when its worker goes.
    conn.FailInFlight("ActorDied",
                      actor.restarts_done > 0
                          ? actor.dead_reason
                          : lost + " while running this call" +
                                (conn.loss_reason().empty()
                                     ? " (it crashed or was killed; its log is in that node's "
                                       "session logs)"
                                     : ""));
  } else {
    conn.FailInFlight("ActorDied", actor.dead_reason);
  }
  actor.creation.reset();
  FailQueued(actor, info.node);
  if (actor.owner) DropName(actor);  // dead for good: a reservation it left goes too
}

void ActorSubmitter::Restart(ActorState& actor, const std::string& what, const std::string& node,
                             std::vector<Task> lost) {
  ++actor.restarts_done;
  if (actor.restarts_left != INT32_MAX) --actor.restarts_left;
  RAYX_LOG(Warning) << "actor " << actor.class_name << " (" << actor.actor_id.Short()
                    << "): " << what << "; restarting it (restart " << actor.RestartCount() << ")";
  if (actor.name_state == ActorState::Name::kRegistered) {
    // The head forgot the name with the lost worker's lease: it is reserved
    // again at once (right behind the lease's return), so that no other actor
    // takes it while this one restarts, and handles wait for the new worker.
    // A detached one's constructor goes with it: should this process end
    // during the restart, the head finishes it.
    deps_.head.RegisterActor(ReservationOf(actor));
    actor.name_state = ActorState::Name::kReserved;
  }
  // The calls the lost worker had: again behind the constructor while they
  // have retries left (max_task_retries), in their order; the rest fail.
  std::vector<Task> again;
  for (Task& task : lost) {
    if (task.actor_creation) continue;  // the kept copy runs instead
    if (task.retries_left > 0) {
      --task.retries_left;
      ++task.retries_done;
      deps_.objects.CountRetry();
      again.push_back(std::move(task));
      continue;
    }
    FailTask(deps_.objects, task, "ActorDied",
             what + " while running this call; the actor is restarting (restart " +
                 actor.RestartCount() +
                 "): calls made from now on reach its new instance (SetMaxTaskRetries sends "
                 "calls like this one again)",
             node);
  }
  // A constructor still waiting from an earlier restart is replaced by this one.
  if (actor.resolved_front > 0 && actor.queue.front().actor_creation) {
    actor.queue.pop_front();
    --actor.resolved_front;
  }
  actor.queue.insert(actor.queue.begin(), std::make_move_iterator(again.begin()),
                     std::make_move_iterator(again.end()));
  actor.queue.push_front(*actor.creation);
  actor.resolved_front += again.size() + 1;
  actor.restarting = true;
  Lease(actor);
}

void ActorSubmitter::AwaitWorker(ActorState& actor, std::string old_address,
                                 int64_t deadline_ms) {
  ActorState* a = &actor;
  int64_t asked_ms = deps_.clock.NowMs();
  protocol::GetActorRequest req;
  req.name = a->name;
  req.stale_worker = old_address;
  // Checking that a name found missing stays missing: answered at once.
  req.wait_ms = a->missing_since_ms >= 0
                    ? 0
                    : std::clamp<int64_t>(deadline_ms - asked_ms, 1, kLookupWaitMs);
  deps_.head.LookupActor(req, [this, a, old_address, deadline_ms,
                               asked_ms](Result<protocol::ActorInfo> r) mutable {
    if (!a->restarting) return;  // cleared meanwhile
    bool killed = !a->dead_reason.empty();
    if (killed && !a->kill_when_found) return;
    if (r.ok() && r->actor_id != a->actor_id) {
      a->restarting = false;
      if (killed) return;  // it is gone already
      a->dead_reason = "the actor's name '" + a->name + "' now belongs to another actor" +
                       (old_address.empty() ? "" : " (its worker died)");
      FailQueued(*a, "");
      return;
    }
    if (r.ok() && !r->worker_address.empty() && r->worker_address != old_address) {
      a->restarting = false;
      // What this wait saw is over: a later loss starts from nothing.
      a->reservation_seen = false;
      a->missing_since_ms = -1;
      if (killed) {
        // Killed through this handle before it had a worker: it stops now.
        deps_.head.ReturnLease(r->lease_id);
        return;
      }
      a->lease_id = r->lease_id;
      a->restarts_left = Allowance(r->max_restarts);
      a->conn = Connect(*a, WorkerConnection::Info{r->lease_id, r->worker_address, "", 0});
      Pump(*a);
      return;
    }
    // A name with no worker that is not a reservation is the head restarting
    // the actor; if the name then goes, that restart failed (or the actor was
    // killed): nothing will answer. An owner's restart reserves the name (a
    // reservation, handled below).
    if (r.ok() && !r->starting && r->worker_address.empty()) a->head_restart_seen = true;
    int64_t now = deps_.clock.NowMs();
    bool missing = !r.ok() && r.status().code() == StatusCode::kNotFound;
    if (!missing) a->missing_since_ms = -1;  // only looks missing one after another count
    if (r.ok() && r->starting) a->reservation_seen = true;
    // A reservation that goes ends the constructor it stood for: its creator
    // dropped it (the constructor failed, the actor was killed, it could not
    // be placed) or ended first without a constructor the head could run. An
    // owner restarting the actor reserves the name again right behind the
    // lost lease's end, so only a name still missing on a second look
    // (kLookupPeriodMs later) is taken for gone.
    if (missing && a->reservation_seen && !a->head_restart_seen) {
      if (a->missing_since_ms < 0) {
        a->missing_since_ms = now;
      } else if (now - a->missing_since_ms >= kLookupPeriodMs) {
        a->restarting = false;
        if (killed) return;
        a->dead_reason = "the actor named '" + a->name +
                         "' was being created, and its name is gone before its constructor "
                         "finished: its creator dropped it (the constructor failed, the actor "
                         "was killed or could not be placed) or ended first (a driver that "
                         "exited or died, a task whose worker ended)";
        FailQueued(*a, "");
        return;
      }
    }
    if (missing && a->head_restart_seen) {
      a->restarting = false;
      if (killed) return;
      a->dead_reason = "the head was restarting the actor named '" + a->name +
                       "', and its name is gone: the restart failed (the head's log says why) "
                       "or the actor was killed";
      FailQueued(*a, "");
      return;
    }
    // The head holds its name with no worker: its constructor runs (a
    // reservation, or the head creating it again), and that is proof enough
    // that it is alive: its owner drops the name if it dies, and the head
    // removes it if its own attempt fails. A constructor takes what it takes.
    if (r.ok() && r->worker_address.empty()) {
      deadline_ms = std::max(deadline_ms, now + kRestartLookupMs);
    }
    if (now >= deadline_ms) {
      a->restarting = false;
      if (killed) return;
      std::string last = r.ok() ? std::string(old_address.empty() ? "no worker yet"
                                                                  : "still its old worker")
                                : r.status().message();
      a->dead_reason = (old_address.empty()
                            ? "the actor named '" + a->name + "' did not start within "
                            : "the actor's worker died and the actor did not answer again "
                              "within ") +
                       std::to_string(kRestartLookupMs / 1000) + " s (last lookup of '" +
                       a->name + "': " + last + ")";
      FailQueued(*a, "");
      return;
    }
    AskAgain(*a, std::move(old_address), deadline_ms, asked_ms);
  });
}

void ActorSubmitter::AskAgain(ActorState& actor, std::string old_address, int64_t deadline_ms,
                              int64_t asked_ms) {
  // A lookup the head parked ends on a change or at its deadline: ask again
  // at once. One answered at once (the head cannot park it, or the name is
  // gone) is asked again a little later, so that nothing spins.
  int64_t next = asked_ms + kLookupPeriodMs;
  if (deps_.clock.NowMs() >= next) {
    AwaitWorker(actor, std::move(old_address), deadline_ms);
    return;
  }
  ActorState* a = &actor;
  if (!a->lookup_timer) a->lookup_timer = std::make_unique<boost::asio::steady_timer>(deps_.io);
  a->lookup_timer->expires_after(std::chrono::milliseconds(next - deps_.clock.NowMs()));
  a->lookup_timer->async_wait([this, a, old_address, deadline_ms](boost::system::error_code ec) {
    if (!ec && a->restarting) AwaitWorker(*a, old_address, deadline_ms);
  });
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
    known.reservation_seen = false;
    known.missing_since_ms = -1;
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
    a->reservation_seen = info.starting;
    AwaitWorker(*a, "", deps_.clock.NowMs() + kRestartLookupMs);
    return;
  }
  a->conn = Connect(*a, WorkerConnection::Info{info.lease_id, info.worker_address, "", 0});
}

void ActorSubmitter::LoseLease(const LeaseId& lease_id, const std::string& why) {
  for (auto& [id, actor] : actors_) {
    if (actor->owner && actor->conn && actor->conn->info().lease_id == lease_id) {
      std::shared_ptr<WorkerConnection> keep = actor->conn;
      keep->Lose(why);
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
