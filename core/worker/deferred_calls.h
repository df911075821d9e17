// Answers of a worker's deferred calls, handed from the threads that make them
// to the worker loop's thread.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rayx/detail/registry.h"

namespace rayx::detail {

// The answers of calls that finish after their function returned
// (RemoteFunction::invoke_deferrable), queued for the worker loop.
//
// Design: a ZeroMQ socket is not thread-safe, so only the loop's thread ever
// sends; other threads Answer into this queue, and the first answer into an
// empty queue makes an eventfd readable, which RunWorker polls beside its
// ROUTER socket (and only while calls are deferred, so a worker that never
// defers keeps its plain blocking receive). Each call has a token the loop
// chose; the queue does not know what the tokens mean.
//
// Thread safety: MakeCall and Take on the loop's thread; the DeferredCalls it
// makes answer from any thread, and may outlive the queue.
class DeferredCalls {
 public:
  struct Answer {
    uint64_t token = 0;
    bool ok = true;
    std::string value;  // the result, or the error's message
    std::string error_type;
    bool item = false;  // a generator's item (`value`), not the answer
  };

  // Throws std::system_error when no eventfd can be made.
  DeferredCalls();
  ~DeferredCalls();
  DeferredCalls(const DeferredCalls&) = delete;
  DeferredCalls& operator=(const DeferredCalls&) = delete;

  // The call `token` answers into this queue, once; a DeferredCall whose last
  // copy goes unanswered answers {false, "...never answered", "CallDropped"}.
  DeferredCall MakeCall(uint64_t token);
  // Every answer so far, in the order they came, and the fd cleared.
  std::vector<Answer> Take();
  // Readable while answers wait (poll it; never read it).
  int fd() const;

 private:
  struct Queue;
  class Sink;
  std::shared_ptr<Queue> queue_;
};

}  // namespace rayx::detail
