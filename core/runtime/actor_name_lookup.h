// A handle's wait for a worker of its actor's name, as an explicit state
// machine: each answer of the head's lookup is one Step.
#pragma once

#include <cstdint>
#include <string>

#include "protocol/messages.h"
#include "rayx/ids.h"
#include "rayx/status.h"

namespace rayx::detail {

// A handle waiting for its actor's worker asks the head to answer within this
// long (the head answers sooner when the name changes), and asks again at
// most this often when the head answers at once without one.
inline constexpr int64_t kLookupWaitMs = 5000;
inline constexpr int64_t kLookupPeriodMs = 200;

// Design: a handle whose actor has no worker (being created, or restarting
// after `old_address` died) looks the name up at the head until it names a
// worker other than the old one. What the name shows on the way decides how
// a missing name is read:
//
//   kNothingSeen --starting--> kReservation --(no worker, not starting)--> kHeadRestart
//        \------------------(no worker, not starting)-------------------^
//
// - kReservation: a creator's constructor runs. Its owner restarting the
//   actor reserves the name again right behind the lost lease's end, so a
//   missing name is taken for gone only on a second look kLookupPeriodMs later.
// - kHeadRestart: the head creates the actor again; a missing name means
//   that failed (or the actor was killed): gone at once.
// - A name with no worker proves the constructor runs: the deadline moves to
//   `now + restart_timeout_ms` (a constructor takes what it takes).
// - The name held by another actor, or the deadline passed: gone.
//
// No I/O and no clock of its own (the caller passes `now`): the submitter
// asks, this decides. One per wait: a later loss starts from nothing.
class ActorNameLookup {
 public:
  struct Verdict {
    enum class Kind {
      kFound,     // the name has a new worker: connect to the answer's
      kAskAgain,  // look again (parked at the head up to WaitMs)
      kGone,      // the actor is gone for good: `why` says so
    };
    Kind kind = Kind::kAskAgain;
    std::string why;
  };

  // `reservation_seen`: the name was already seen reserved (a handle found
  // by name while its constructor runs).
  ActorNameLookup(std::string name, ActorId actor_id, std::string old_address,
                  int64_t deadline_ms, int64_t restart_timeout_ms, bool reservation_seen = false);

  // The wait the next lookup asks the head to park for
  // (GetActorRequest::wait_ms): 0 to check at once that a name found missing
  // stays missing, else up to `max_wait_ms` before the deadline.
  int64_t WaitMs(int64_t now_ms, int64_t max_wait_ms) const;
  // What the answer `found` (the name's entry, or why there is none) means.
  Verdict Step(const Result<protocol::ActorInfo>& found, int64_t now_ms);

  const std::string& old_address() const { return old_address_; }
  int64_t deadline_ms() const { return deadline_ms_; }

 private:
  enum class Seen { kNothingSeen, kReservation, kHeadRestart };
  Verdict Gone(std::string why);

  std::string name_;
  ActorId actor_id_;
  std::string old_address_;
  int64_t deadline_ms_;
  int64_t restart_timeout_ms_;
  Seen seen_ = Seen::kNothingSeen;
  int64_t missing_since_ms_ = -1;  // when the name was first found missing, after that
};

}  // namespace rayx::detail
