// Counting a worker's waiting calls and telling the head (LeaseBlockedNotice).
#include "runtime/blocked_calls.h"

#include <utility>

namespace rayx::detail {

BlockedCalls::BlockedCalls(Deps deps, int64_t delay_ms)
    : delay_ms_(delay_ms), deps_(std::move(deps)) {}

void BlockedCalls::Enter() {
  std::lock_guard<std::mutex> lock(mu_);
  if (waiting_++ != 0 || stopped_) return;
  uint64_t epoch = ++epoch_;
  if (told_blocked_) return;  // the head still thinks so: nothing to tell
  deps_.post([this, epoch] {
    std::function<void(int64_t, std::function<void()>)> after;
    {
      std::lock_guard<std::mutex> relock(mu_);
      if (stopped_ || epoch != epoch_) return;  // it ended already
      after = deps_.after;
    }
    after(delay_ms_, [this, epoch] { OnDelay(epoch); });
  });
}

void BlockedCalls::Leave() {
  std::lock_guard<std::mutex> lock(mu_);
  if (waiting_ == 0 || --waiting_ != 0 || stopped_) return;
  ++epoch_;  // the delay running for this wait is void
  if (told_blocked_) deps_.post([this] { OnIdle(); });
}

void BlockedCalls::OnDelay(uint64_t epoch) {
  std::function<void(bool)> notify;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_ || epoch != epoch_ || waiting_ == 0 || told_blocked_) return;
    told_blocked_ = true;
    notify = deps_.notify;
  }
  notify(true);
}

void BlockedCalls::OnIdle() {
  std::function<void(bool)> notify;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_ || waiting_ != 0 || !told_blocked_) return;  // waits again: still blocked
    told_blocked_ = false;
    notify = deps_.notify;
  }
  notify(false);
}

void BlockedCalls::Resync() {
  std::function<void(bool)> notify;
  bool blocked = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    blocked = told_blocked_;
    notify = deps_.notify;
  }
  notify(blocked);
}

void BlockedCalls::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  deps_ = Deps{};
}

size_t BlockedCalls::waiting() {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

bool BlockedCalls::told_blocked() {
  std::lock_guard<std::mutex> lock(mu_);
  return told_blocked_;
}

}  // namespace rayx::detail
