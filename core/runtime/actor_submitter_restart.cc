// Actor calls when the actor's worker is lost: restarting it (the owner leases
// a new worker and runs the constructor again) or waiting for it (a handle
// asks the head until the owner has restarted it). Part of ActorSubmitter
// (actor_submitter.h).
#include <string>

#include <boost/asio/post.hpp>

#include "common/logging.h"
#include "protocol/codec.h"
#include "runtime/actor_state.h"
#include "runtime/actor_submitter.h"

namespace rayx::detail {

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

}  // namespace rayx::detail
