// PollPacer: how long a thread that polls an asynchronous operation (an NCCL
// communicator, a CUDA stream) pauses between polls.
#pragma once

#include <algorithm>
#include <chrono>

namespace rayx::collective {

// For the first `spin` of a wait the poller only yields, so a short operation
// (a small NCCL allreduce takes tens of microseconds) is seen done at once, as
// a blocking cudaStreamSynchronize would see it; after that it sleeps 1/100 of
// the time waited so far, so a long operation is seen done at most 1% (plus the
// wake-up) late, half that on average, and never more than `max_sleep`, so an
// abort or the deadline is noticed within that. A plain value; not
// thread-safe (one per wait).
class PollPacer {
 public:
  using Clock = std::chrono::steady_clock;

  explicit PollPacer(Clock::time_point start,
                     std::chrono::microseconds spin = std::chrono::milliseconds(2),
                     std::chrono::microseconds max_sleep = std::chrono::milliseconds(1))
      : start_(start), spin_(spin), max_sleep_(max_sleep) {}

  // The pause before the next poll at `now`; zero means yield and poll again.
  std::chrono::microseconds Pause(Clock::time_point now) const {
    const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(now - start_);
    if (waited < spin_) return std::chrono::microseconds(0);
    return std::min(max_sleep_, std::max(std::chrono::microseconds(1), waited / 100));
  }

 private:
  Clock::time_point start_;
  std::chrono::microseconds spin_;
  std::chrono::microseconds max_sleep_;
};

}  // namespace rayx::collective
