#include "runtime/output_printer.h"

#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

namespace rayx::detail {

OutputPrinter::OutputPrinter(int fd, size_t max_queued_bytes)
    : fd_(fd), max_queued_bytes_(max_queued_bytes), thread_([this] { Run(); }) {}

OutputPrinter::~OutputPrinter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    give_up_at_.store(Clock::now() + std::chrono::seconds(1));
  }
  wake_.notify_all();
  thread_.join();
}

void OutputPrinter::Print(const protocol::WorkerOutputNotice& notice) {
  std::string block;
  size_t lines = 0;
  for (const auto& batch : notice.batches) {
    for (const auto& line : batch.lines) {
      block += '(';
      block += batch.source;
      block += ") ";
      block += line;
      block += '\n';
      ++lines;
    }
  }
  if (block.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queued_bytes_ + block.size() > max_queued_bytes_) {
      dropped_lines_ += lines;
    } else {
      queued_bytes_ += block.size();
      queue_.push_back(std::move(block));
    }
  }
  wake_.notify_one();
}

void OutputPrinter::Run() {
  // A closed stdout (a pipe whose reader left) must not kill the driver.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty() || dropped_lines_ > 0; });
    if (queue_.empty() && dropped_lines_ == 0) return;  // stopping, all written
    std::string block;
    if (!queue_.empty()) {
      block = std::move(queue_.front());
      queue_.pop_front();
      queued_bytes_ -= block.size();
    }
    if (queue_.empty() && dropped_lines_ > 0) {
      block += "(rayx) " + std::to_string(dropped_lines_) +
               " lines of worker output dropped: this process's stdout took them slower than "
               "they came (they are in the workers' logs on their nodes)\n";
      dropped_lines_ = 0;
    }
    lock.unlock();
    // At most PIPE_BUF bytes once poll says there is room: a write never
    // blocks, so stopping waits at most until give_up_at_.
    size_t done = 0;
    while (done < block.size()) {
      if (Clock::now() >= give_up_at_.load()) break;
      pollfd room{fd_, POLLOUT, 0};
      int ready = ::poll(&room, 1, 100);
      if (ready < 0 && errno != EINTR) break;
      if (ready <= 0) continue;
      if (room.revents & (POLLERR | POLLNVAL)) break;
      ssize_t n = ::write(fd_, block.data() + done, std::min<size_t>(block.size() - done, PIPE_BUF));
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) break;  // stdout is gone: the lines are dropped
      done += static_cast<size_t>(n);
    }
    lock.lock();
    if (Clock::now() >= give_up_at_.load()) return;
  }
}

}  // namespace rayx::detail
