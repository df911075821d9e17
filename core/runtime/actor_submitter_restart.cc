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
    conn.FailInFlight(protocol::TaskErrorKind::kActorDied, lost + " while running this call");
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
      conn.FailInFlight(protocol::TaskErrorKind::kActorDied, lost + " while running this call; the actor is "
                                           "restarting: calls made from now on reach its new "
                                           "instance");
      actor.restarting = true;
      StartLookup(actor, info.address, /*reservation_seen=*/false);
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
    conn.FailInFlight(protocol::TaskErrorKind::kActorDied,
                      actor.restarts_done > 0
                          ? actor.dead_reason
                          : lost + " while running this call" +
                                (conn.loss_reason().empty()
                                     ? " (it crashed or was killed; its log is in that node's "
                                       "session logs)"
                                     : ""));
  } else {
    conn.FailInFlight(protocol::TaskErrorKind::kActorDied, actor.dead_reason);
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
    FailTask(deps_.objects, task, protocol::TaskErrorKind::kActorDied,
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

void ActorSubmitter::StartLookup(ActorState& actor, std::string old_address,
                                 bool reservation_seen) {
  // A new wait: only what it sees counts.
  actor.lookup = std::make_unique<ActorNameLookup>(
      actor.name, actor.actor_id, std::move(old_address), deps_.clock.NowMs() + kRestartLookupMs,
      kRestartLookupMs, reservation_seen);
  ++actor.lookups;
  AwaitWorker(actor);
}

void ActorSubmitter::AwaitWorker(ActorState& actor) {
  ActorState* a = &actor;
  const int64_t asked_ms = deps_.clock.NowMs();
  protocol::GetActorRequest req;
  req.name = a->name;
  req.stale_worker = a->lookup->old_address();
  req.wait_ms = a->lookup->WaitMs(asked_ms, kLookupWaitMs);
  deps_.head.LookupActor(req, [this, a, wait = a->lookups,
                               asked_ms](Result<protocol::ActorInfo> r) {
    if (!a->restarting || a->lookups != wait || !a->lookup) return;  // over meanwhile
    const bool killed = !a->dead_reason.empty();
    if (killed && !a->kill_when_found) return;
    ActorNameLookup::Verdict verdict = a->lookup->Step(r, deps_.clock.NowMs());
    switch (verdict.kind) {
      case ActorNameLookup::Verdict::Kind::kAskAgain:
        AskAgain(*a, asked_ms);
        return;
      case ActorNameLookup::Verdict::Kind::kGone:
        a->restarting = false;
        a->lookup.reset();
        if (killed) return;  // it is gone already
        a->dead_reason = std::move(verdict.why);
        FailQueued(*a, "");
        return;
      case ActorNameLookup::Verdict::Kind::kFound:
        a->restarting = false;
        a->lookup.reset();
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
  });
}

void ActorSubmitter::AskAgain(ActorState& actor, int64_t asked_ms) {
  // A lookup the head parked ends on a change or at its deadline: ask again
  // at once. One answered at once (the head cannot park it, or the name is
  // gone) is asked again a little later, so that nothing spins.
  int64_t next = asked_ms + kLookupPeriodMs;
  if (deps_.clock.NowMs() >= next) {
    AwaitWorker(actor);
    return;
  }
  ActorState* a = &actor;
  if (!a->lookup_timer) a->lookup_timer = std::make_unique<boost::asio::steady_timer>(deps_.io);
  a->lookup_timer->expires_after(std::chrono::milliseconds(next - deps_.clock.NowMs()));
  a->lookup_timer->async_wait([this, a, wait = a->lookups](boost::system::error_code ec) {
    if (!ec && a->restarting && a->lookups == wait && a->lookup) AwaitWorker(*a);
  });
}

}  // namespace rayx::detail
