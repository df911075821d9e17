// Counts the calls of a worker's lease that wait for objects, and tells the
// head when they start and stop waiting (LeaseBlockedNotice).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>

namespace rayx::detail {

// Design: Ray's rule. A task or actor call that waits in get/wait for an
// object that is not ready lends its lease's CPU to other work (the work it
// waits for, on a small node), and takes it back when it resumes.
//
// User threads count themselves in and out (Enter once their wait has to
// block, Leave when it ends; BlockedScope does both); a worker running
// several calls at once (a threaded or async actor) counts each. The I/O
// thread decides what the head should hear: blocked once some call has waited
// for `delay_ms` without the count dropping to zero, unblocked as soon as
// none waits. It sends only changes of what it last sent, so notices
// alternate; Resync sends the current state again after the connection to the
// head was restored (a notice may have been lost with it, or the head
// restarted and knows nothing).
//
// The delay: a get that is answered within it costs nothing (no message, no
// scheduling pass, no worker started on the lent CPU to then be overdrawn).
// 10 ms is long next to what this machine needs to answer a get whose result
// is on its way (a task round trip on a warm worker takes well under a
// millisecond, docs/performance.md) and short next to what lending buys: a
// worker process for the work that waits takes tens of milliseconds (a C++
// worker) to seconds (Python) to start. A tree of blocked tasks pays it once
// per level.
//
// Thread safety: Enter, Leave and Stop from any thread (one mutex; a post to
// the I/O thread only when the count leaves or returns to zero); Resync on
// the I/O thread. After Stop nothing is posted or sent.
class BlockedCalls {
 public:
  static constexpr int64_t kDefaultDelayMs = 10;

  struct Deps {
    // Runs `fn` on the I/O thread, later (never inline).
    std::function<void(std::function<void()> fn)> post;
    // On the I/O thread: runs `fn` there after `delay_ms`, replacing (never
    // running) the one it was given before, if it is still waiting.
    std::function<void(int64_t delay_ms, std::function<void()> fn)> after;
    // On the I/O thread: sends LeaseBlockedNotice{blocked} to the head.
    std::function<void(bool blocked)> notify;
  };

  explicit BlockedCalls(Deps deps, int64_t delay_ms = kDefaultDelayMs);
  BlockedCalls(const BlockedCalls&) = delete;
  BlockedCalls& operator=(const BlockedCalls&) = delete;

  // A call starts waiting (its wait has to block).
  void Enter();
  // It stopped waiting. REQUIRES: it entered.
  void Leave();
  // Sends what the head last heard again (I/O thread).
  void Resync();
  // Nothing is posted or sent after this returns.
  void Stop();

  // Calls waiting now, and whether the head was told they are (tests).
  size_t waiting();
  bool told_blocked();

 private:
  void OnDelay(uint64_t epoch);  // I/O thread
  void OnIdle();                 // I/O thread

  const int64_t delay_ms_;
  std::mutex mu_;
  Deps deps_;                  // under mu_ (cleared by Stop)
  size_t waiting_ = 0;         // under mu_
  uint64_t epoch_ = 0;         // under mu_: bumped when waiting_ leaves or returns to 0
  bool told_blocked_ = false;  // under mu_: what the head last heard
  bool stopped_ = false;       // under mu_
};

}  // namespace rayx::detail
