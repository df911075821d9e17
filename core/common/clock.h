// Time behind an interface, so logic that depends on it can run on a manual clock.
#pragma once

#include <chrono>
#include <cstdint>

namespace rayx {

// The longest wait a request may ask for (a day): longer timeouts are clamped
// to it, so that now + timeout never overflows.
inline constexpr int64_t kLongestWaitMs = int64_t{24} * 3600 * 1000;

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic milliseconds; only differences are meaningful.
  virtual int64_t NowMs() const = 0;
  // Wall-clock milliseconds since the Unix epoch, for display.
  virtual int64_t WallMs() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  int64_t WallMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that moves only when told to. Not thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ms = 1'000'000) : now_ms_(start_ms) {}
  int64_t NowMs() const override { return now_ms_; }
  int64_t WallMs() const override { return 1'700'000'000'000 + now_ms_; }
  void Advance(int64_t ms) { now_ms_ += ms; }

 private:
  int64_t now_ms_;
};

}  // namespace rayx
