// A handle's wait for a worker of its actor's name.
#include "runtime/actor_name_lookup.h"

#include <algorithm>
#include <utility>

namespace rayx::detail {

ActorNameLookup::ActorNameLookup(std::string name, ActorId actor_id, std::string old_address,
                                 int64_t deadline_ms, int64_t restart_timeout_ms,
                                 bool reservation_seen)
    : name_(std::move(name)),
      actor_id_(actor_id),
      old_address_(std::move(old_address)),
      deadline_ms_(deadline_ms),
      restart_timeout_ms_(restart_timeout_ms),
      seen_(reservation_seen ? Seen::kReservation : Seen::kNothingSeen) {}

int64_t ActorNameLookup::WaitMs(int64_t now_ms, int64_t max_wait_ms) const {
  if (missing_since_ms_ >= 0) return 0;  // checking that a missing name stays missing
  return std::clamp<int64_t>(deadline_ms_ - now_ms, 1, max_wait_ms);
}

ActorNameLookup::Verdict ActorNameLookup::Gone(std::string why) {
  return Verdict{Verdict::Kind::kGone, std::move(why)};
}

ActorNameLookup::Verdict ActorNameLookup::Step(const Result<protocol::ActorInfo>& found,
                                               int64_t now_ms) {
  if (found.ok() && found->actor_id != actor_id_) {
    return Gone("the actor's name '" + name_ + "' now belongs to another actor" +
                (old_address_.empty() ? "" : " (its worker died)"));
  }
  if (found.ok() && !found->worker_address.empty() && found->worker_address != old_address_) {
    return Verdict{Verdict::Kind::kFound, ""};
  }
  // A name with no worker that is not a reservation is the head restarting
  // the actor; an owner's restart (or a creation) reserves the name.
  if (found.ok() && !found->starting && found->worker_address.empty()) {
    seen_ = Seen::kHeadRestart;
  } else if (found.ok() && found->starting && seen_ == Seen::kNothingSeen) {
    seen_ = Seen::kReservation;
  }
  const bool missing = !found.ok() && found.status().code() == StatusCode::kNotFound;
  if (!missing) missing_since_ms_ = -1;  // only looks missing one after another counts
  if (missing && seen_ == Seen::kReservation) {
    // The reservation went: its creator dropped it (the constructor failed,
    // the actor was killed or could not be placed) or ended first without a
    // constructor the head could run; unless it is reserved again at once.
    if (missing_since_ms_ < 0) {
      missing_since_ms_ = now_ms;
    } else if (now_ms - missing_since_ms_ >= kLookupPeriodMs) {
      return Gone("the actor named '" + name_ +
                  "' was being created, and its name is gone before its constructor "
                  "finished: its creator dropped it (the constructor failed, the actor "
                  "was killed or could not be placed) or ended first (a driver that "
                  "exited or died, a task whose worker ended)");
    }
  }
  if (missing && seen_ == Seen::kHeadRestart) {
    return Gone("the head was restarting the actor named '" + name_ +
                "', and its name is gone: the restart failed (the head's log says why) "
                "or the actor was killed");
  }
  // The head holds its name with no worker: its constructor runs, which is
  // proof enough that it is alive (its owner drops the name if it dies, and
  // the head removes it if its own attempt fails).
  if (found.ok() && found->worker_address.empty()) {
    deadline_ms_ = std::max(deadline_ms_, now_ms + restart_timeout_ms_);
  }
  if (now_ms >= deadline_ms_) {
    std::string last = found.ok() ? std::string(old_address_.empty() ? "no worker yet"
                                                                     : "still its old worker")
                                  : found.status().message();
    return Gone((old_address_.empty() ? "the actor named '" + name_ + "' did not start within "
                                      : "the actor's worker died and the actor did not answer "
                                        "again within ") +
                std::to_string(restart_timeout_ms_ / 1000) + " s (last lookup of '" + name_ +
                "': " + last + ")");
  }
  return Verdict{Verdict::Kind::kAskAgain, ""};
}

}  // namespace rayx::detail
