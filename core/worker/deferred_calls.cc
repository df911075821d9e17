// The queue of deferred calls' answers and its eventfd.
#include "worker/deferred_calls.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <system_error>

namespace rayx::detail {

// Shared by the queue and every call it made: the last one closes the fd.
struct DeferredCalls::Queue {
  int fd = -1;
  std::mutex mu;
  std::vector<Answer> answers;  // guarded by mu

  ~Queue() {
    if (fd >= 0) ::close(fd);
  }

  void Push(Answer answer) {
    bool was_empty;
    {
      std::lock_guard<std::mutex> lock(mu);
      was_empty = answers.empty();
      answers.push_back(std::move(answer));
    }
    // Only the first answer wakes the loop: it takes them all at once.
    if (was_empty) {
      uint64_t one = 1;
      ssize_t n;
      do {
        n = ::write(fd, &one, sizeof one);
      } while (n < 0 && errno == EINTR);
      // EAGAIN: the counter is full, so the fd is readable anyway.
    }
  }
};

// One call's answer: once, or CallDropped when nobody answered.
class DeferredCalls::Sink : public DeferredCall::Sink {
 public:
  Sink(std::shared_ptr<Queue> queue, uint64_t token) : queue_(std::move(queue)), token_(token) {}
  ~Sink() override {
    if (!answered_.exchange(true)) {
      queue_->Push({token_, false,
                    "the call's answer was dropped before it was given (a bug in the "
                    "function's deferred execution)",
                    "CallDropped"});
    }
  }
  void Answer(bool ok, std::string value, std::string error_type) override {
    if (answered_.exchange(true)) return;
    queue_->Push({token_, ok, std::move(value), std::move(error_type)});
  }
  void Item(std::string value) override {
    if (answered_.load()) return;
    queue_->Push({token_, true, std::move(value), "", /*item=*/true});
  }

 private:
  std::shared_ptr<Queue> queue_;
  uint64_t token_;
  std::atomic<bool> answered_{false};
};

DeferredCalls::DeferredCalls() : queue_(std::make_shared<Queue>()) {
  queue_->fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (queue_->fd < 0) {
    throw std::system_error(errno, std::generic_category(), "eventfd for deferred calls");
  }
}

DeferredCalls::~DeferredCalls() = default;

DeferredCall DeferredCalls::MakeCall(uint64_t token) {
  return DeferredCall(std::make_shared<Sink>(queue_, token));
}

std::vector<DeferredCalls::Answer> DeferredCalls::Take() {
  std::vector<Answer> out;
  std::lock_guard<std::mutex> lock(queue_->mu);
  // Cleared under the lock: an answer pushed after this sees an empty queue
  // and writes the fd again.
  uint64_t count;
  while (::read(queue_->fd, &count, sizeof count) < 0 && errno == EINTR) {
  }
  out.swap(queue_->answers);
  return out;
}

int DeferredCalls::fd() const { return queue_->fd; }

}  // namespace rayx::detail
