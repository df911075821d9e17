// The connections with calls to send, flushed once per burst of work.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "protocol/push_tasks.h"

namespace rayx::detail {

class WorkerConnection;

// Batching across connections: the first call queued on any connection posts
// one flush to the io_context; the flush sends every queued connection's calls
// (after the I/O thread's current work, so a burst of submissions leaves as a
// few large messages). The message buffers are reused from flush to flush.
//
// Thread safety: the I/O thread only. Holds the queued connections until they
// are flushed (or Clear); `io` outlives it.
class WorkerSendQueue {
 public:
  WorkerSendQueue(boost::asio::io_context& io, std::string job_id);

  // Queues `conn` for the next flush (once until it is flushed).
  void Add(WorkerConnection& conn);
  // Flushes now when a flush is due (the end of a burst).
  void FlushIfDue() {
    if (flush_posted_) Flush();
  }
  // Sends every queued connection's calls.
  void Flush();
  // Forgets every queued connection (shutdown).
  void Clear() { queue_.clear(); }

 private:
  boost::asio::io_context& io_;
  const std::string job_id_;
  std::vector<std::shared_ptr<WorkerConnection>> queue_, flushing_;
  bool flush_posted_ = false;
  protocol::PushTasksWriter writer_;
  std::string body_;
};

}  // namespace rayx::detail
