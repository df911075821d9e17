// Actor calls: creation, ordered per-actor queues, loss and kill.
#include "runtime/actor_submitter.h"

#include <boost/asio/post.hpp>

#include "runtime/task_submitter.h"

namespace rayx::detail {

struct ActorSubmitter::ActorState final : WorkerConnection::Owner {
  ActorSubmitter* submitter = nullptr;
  std::string actor_id;
  std::string name;
  std::string class_name;
  std::string lease_id;
  bool owner = false;
  bool detached = false;
  std::deque<Task> queue;   // calls not yet sent, in order
  bool resolving = false;   // the front call waits for its arguments
  bool pumping = false;     // Pump is running
  std::shared_ptr<WorkerConnection> conn;
  std::string dead_reason;  // set once the actor is gone

  void OnReplies(WorkerConnection& c) override {
    if (conn.get() == &c) submitter->Pump(*this);
  }
  void OnCreationFailed(WorkerConnection& c, const std::string& message) override {
    // Calls already sent fail on the worker with this reason too; the lease goes back.
    dead_reason = "the actor's constructor failed: " + message;
    submitter->deps_.head.ReturnLease(c.info().lease_id);
  }
  void OnLost(WorkerConnection& c) override { submitter->OnWorkerLost(*this, c); }
};

ActorSubmitter::ActorSubmitter(Deps deps, Options options)
    : deps_(deps), options_(std::move(options)) {}

ActorSubmitter::~ActorSubmitter() = default;

std::shared_ptr<WorkerConnection> ActorSubmitter::Connect(ActorState& actor,
                                                          WorkerConnection::Info info) {
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
}

void ActorSubmitter::Create(Task creation_task, const ActorOptions& options,
                            ObjectHandle creation) {
  auto state = std::make_unique<ActorState>();
  state->submitter = this;
  state->actor_id = creation_task.actor_id;
  state->name = options.name;
  state->class_name = creation_task.function;
  state->owner = true;
  state->detached = options.detached;
  state->queue.push_back(std::move(creation_task));
  ActorState* actor = state.get();
  actors_[actor->actor_id] = std::move(state);
  protocol::RequestLeaseRequest req;
  req.job_id = options_.job_id;
  req.resources = options.resources;
  ApplyPlacement(options.placement, &req);
  req.for_actor = true;
  req.detached = options.detached;
  if (options_.describe_program) options_.describe_program(&req);
  deps_.head.RequestLease(req, [this, actor, creation](Result<protocol::RequestLeaseReply> r) {
    if (!r.ok()) {
      actor->dead_reason = "the actor could not be placed: " + r.status().message();
      FailQueued(*actor, "");
      return;
    }
    actor->lease_id = r->lease_id;
    actor->conn = Connect(*actor, WorkerConnection::Info{r->lease_id, r->worker_address,
                                                         r->node_address, r->worker_pid});
    Pump(*actor);
    if (actor->name.empty()) return;
    // Registered once the constructor has run, so a name always means a live actor.
    (void)deps_.objects.AddWaiter(creation->id, [this, actor, creation] {
      boost::asio::post(deps_.io, [this, actor, creation] {
        if (!actor->dead_reason.empty()) return;
        protocol::ActorInfo info;
        info.actor_id = actor->actor_id;
        info.name = actor->name;
        info.job_id = options_.job_id;
        info.class_name = actor->class_name;
        info.worker_address = actor->conn ? actor->conn->info().address : "";
        info.lease_id = actor->lease_id;
        info.detached = actor->detached;
        deps_.head.RegisterActor(info);
      });
    });
  });
}

void ActorSubmitter::Submit(Task task) {
  auto it = actors_.find(task.actor_id);
  if (it == actors_.end()) {
    FailTask(deps_.objects, task, "ActorDied", "unknown actor " + task.actor_id, "");
    return;
  }
  ActorState& state = *it->second;
  if (!state.dead_reason.empty()) {
    FailTask(deps_.objects, task, "ActorDied", state.dead_reason, "");
    return;
  }
  state.queue.push_back(std::move(task));
  Pump(state);
}

void ActorSubmitter::Pump(ActorState& actor) {
  // Re-entered from a continuation that ran inside the loop below: that loop goes on.
  if (actor.pumping) return;
  actor.pumping = true;
  // Strictly in order: the front call goes once its arguments are resolved. At
  // most kMaxInFlight calls are on their way; replies let more go.
  while (actor.conn && !actor.resolving && !actor.queue.empty() &&
         actor.conn->in_flight() < kMaxInFlight) {
    Task task = std::move(actor.queue.front());
    actor.queue.pop_front();
    bool has_refs = false;
    for (auto& a : task.args) has_refs = has_refs || a.ref;
    if (!has_refs) {
      task.resolved.resize(task.args.size());
      for (size_t i = 0; i < task.args.size(); ++i) task.resolved[i] = std::move(task.args[i].bytes);
      task.args.clear();
      actor.conn->Queue(std::move(task));
      continue;
    }
    actor.resolving = true;
    ActorState* a = &actor;
    deps_.resolver.ResolveThen(task, [this, a](Task ready) {
      a->resolving = false;
      if (a->conn) {
        a->conn->Queue(std::move(ready));
      } else {
        FailTask(deps_.objects, ready, "ActorDied", a->dead_reason, "");
      }
      Pump(*a);
    });
  }
  actor.pumping = false;
}

void ActorSubmitter::OnWorkerLost(ActorState& actor, WorkerConnection& conn) {
  const WorkerConnection::Info& info = conn.info();
  std::string who =
      "the worker process (pid " + std::to_string(info.pid) + ") on node " + info.node;
  // An actor already known dead (its constructor failed, it was killed) keeps
  // that reason for the calls in flight when its worker goes.
  conn.FailInFlight("ActorDied",
                    !actor.dead_reason.empty()
                        ? actor.dead_reason
                        : who + " died while running this call (it crashed or was killed; its "
                                "log is in that node's session logs)");
  // Give the lease back so its resources are freed: only its holder may (a
  // caller with a passed or looked-up actor handle does not own the actor).
  if (actor.owner) deps_.head.ReturnLease(info.lease_id);
  if (actor.dead_reason.empty()) actor.dead_reason = who + " died";
  FailQueued(actor, info.node);
  // Close the socket later: we are inside its monitor's handler.
  auto keep = actor.conn;
  boost::asio::post(deps_.io, [keep] {});
  actor.conn.reset();
}

void ActorSubmitter::Kill(const std::string& actor_id) {
  auto it = actors_.find(actor_id);
  if (it == actors_.end()) return;
  ActorState& state = *it->second;
  state.dead_reason = "the actor was killed (ActorHandle::Kill)";
  deps_.head.ReturnLease(state.lease_id);
}

protocol::ActorInfo ActorSubmitter::Describe(const std::string& actor_id) {
  protocol::ActorInfo info;
  info.actor_id = actor_id;
  auto it = actors_.find(actor_id);
  if (it != actors_.end()) {
    info.name = it->second->name;
    info.class_name = it->second->class_name;
    info.lease_id = it->second->lease_id;
    info.worker_address = it->second->conn ? it->second->conn->info().address : "";
  }
  return info;
}

void ActorSubmitter::Attach(const protocol::ActorInfo& info) {
  if (actors_.count(info.actor_id)) return;
  auto state = std::make_unique<ActorState>();
  state->submitter = this;
  state->actor_id = info.actor_id;
  state->name = info.name;
  state->class_name = info.class_name;
  state->lease_id = info.lease_id;
  state->conn = Connect(*state, WorkerConnection::Info{info.lease_id, info.worker_address, "", 0});
  actors_[info.actor_id] = std::move(state);
}

void ActorSubmitter::Clear() {
  for (auto& [id, actor] : actors_) actor->conn.reset();
}

}  // namespace rayx::detail
