// A driver's printer of its job's workers' output (log_to_driver).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "protocol/messages.h"

namespace rayx::detail {

// Writes each line of a WorkerOutputNotice to a file descriptor (the
// driver's stdout) as "(source) line", Ray's format, on a thread of its own:
// the runtime's I/O thread only queues, so a stdout nobody reads never stalls
// the runtime. At most `max_queued_bytes` wait; lines beyond that are dropped
// and one line says how many.
class OutputPrinter {
 public:
  explicit OutputPrinter(int fd, size_t max_queued_bytes = 8 << 20);
  ~OutputPrinter();  // writes what is queued (at most a second), then stops
  OutputPrinter(const OutputPrinter&) = delete;
  OutputPrinter& operator=(const OutputPrinter&) = delete;

  void Print(const protocol::WorkerOutputNotice& notice);

 private:
  void Run();

  const int fd_;
  const size_t max_queued_bytes_;
  std::mutex mu_;
  std::condition_variable wake_;

  std::deque<std::string> queue_;  // each a block of whole lines
  size_t queued_bytes_ = 0;
  uint64_t dropped_lines_ = 0;
  bool stop_ = false;
  using Clock = std::chrono::steady_clock;
  // Set when stopping: what is still queued then is written until a second later.
  std::atomic<Clock::time_point> give_up_at_{Clock::time_point::max()};

  std::thread thread_;
};

}  // namespace rayx::detail
