// Flushing queued calls to workers, once per burst.
#include "runtime/worker_send_queue.h"

#include <boost/asio/post.hpp>

#include "runtime/worker_connection.h"

namespace rayx::detail {

WorkerSendQueue::WorkerSendQueue(boost::asio::io_context& io, std::string job_id)
    : io_(io), job_id_(std::move(job_id)) {}

void WorkerSendQueue::Add(WorkerConnection& conn) {
  if (!conn.flush_queued) {
    conn.flush_queued = true;
    queue_.push_back(conn.shared_from_this());
  }
  // Sent once the I/O thread's current work is done, with whatever else
  // it queues meanwhile.
  if (!flush_posted_) {
    flush_posted_ = true;
    boost::asio::post(io_, [this] { Flush(); });
  }
}

void WorkerSendQueue::Flush() {
  flush_posted_ = false;  // a posted flush that finds nothing queued is a no-op
  flushing_.swap(queue_);
  for (auto& conn : flushing_) {
    conn->flush_queued = false;
    if (!conn->lost()) conn->SendQueued(writer_, body_, job_id_);
  }
  flushing_.clear();
}

}  // namespace rayx::detail
