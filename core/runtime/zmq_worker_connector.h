// Links to workers over ZeroMQ DEALER sockets, with disconnects from a monitor.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "runtime/worker_link.h"
#include "transport/security.h"
#include "transport/zmq_fwd.h"

namespace rayx::detail {

// Makes one DEALER socket per worker (no high-water marks, no reconnects: a
// dead worker is not dialled again) and a monitor socket that reports its
// loss: a disconnection, or a connection that was refused or not up within
// 10 s (an address whose worker is already gone). Used on the I/O thread
// only; `io` and `context` must outlive it and every link it made.
class ZmqWorkerConnector final : public WorkerConnector {
 public:
  // How to prove who this process is to a worker of a job (or why it may not).
  // `actor_key`: as Connect's.
  using SecurityFor = std::function<Result<transport::ClientSecurity>(
      const JobId& job, const std::optional<transport::ActorKey>& actor_key)>;
  ZmqWorkerConnector(boost::asio::io_context& io, zmq::context_t& context, SecurityFor security)
      : io_(io), context_(context), security_(std::move(security)) {}

  std::unique_ptr<WorkerLink> Connect(const std::string& address, const JobId& job,
                                      const std::optional<transport::ActorKey>& actor_key,
                                      MessageHandler on_message, LostHandler on_lost) override;

 private:
  boost::asio::io_context& io_;
  zmq::context_t& context_;
  SecurityFor security_;
  uint64_t next_monitor_ = 0;
};

}  // namespace rayx::detail
