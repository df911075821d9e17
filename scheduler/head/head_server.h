// The head daemon's event loop: a ROUTER socket and timers around HeadService.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <zmq.hpp>

#include "head/head_service.h"
#include "transport/security.h"
#include "transport/zap_server.h"
#include "transport/zmq_socket_loop.h"

namespace rayx::scheduler {

struct HeadServerOptions {
  // Interface to bind. Default: all (rayx-head binds its --node-ip-address).
  std::string bind_host = "0.0.0.0";
  // 0 picks a free port (tests); see port() after Start().
  uint16_t port = kDefaultHeadPort;
  HeadServiceOptions service;
};

// One thread runs `io` and with it everything here: no locks.
class HeadServer {
 public:
  HeadServer(boost::asio::io_context& io, HeadServerOptions options, const Clock& clock);
  ~HeadServer();

  // Binds and starts serving. Returns Unavailable with advice when the port is in
  // use, InvalidArgument for a bad bind address.
  Status Start();
  uint16_t port() const { return port_; }
  // The cluster's id (a restored one after a restart).
  const std::string& cluster_id() const { return service_.cluster_id(); }
  void SetHeadAddress(const std::string& address) { service_.SetHeadAddress(address); }
  // Connections refused because they proved no credential (for tests).
  uint64_t refused_connections() const { return zap_ ? zap_->refused_count() : 0; }
  // The service, for the dashboard (read on this thread only).
  HeadService& service() { return service_; }

 private:
  void OnMessage(transport::Frames& frames);
  void ScheduleExpiry();

  void SendTo(const std::string& peer, transport::Frames frames);
  // Ends a pass of the socket loop: commits the pass's writes (HeadStore's
  // group commit), then sends what the pass held back.
  void EndBatch();

  boost::asio::io_context& io_;
  HeadServerOptions options_;
  HeadService service_;
  zmq::context_t context_{1};
  // Who may connect: the cluster, and jobs that run or hold leases.
  std::shared_ptr<transport::ClusterVerifier> verifier_;
  std::unique_ptr<transport::ZapServer> zap_;
  zmq::socket_t router_;
  std::unique_ptr<transport::ZmqSocketLoop> loop_;
  boost::asio::steady_timer expiry_timer_;
  uint16_t port_ = 0;
  // Within a pass of the socket loop (from its first message to EndBatch):
  // messages are held in `held_` until the pass's writes are committed.
  bool in_batch_ = false;
  std::vector<transport::Frames> held_;
  detail::LogRateLimiter drop_log_limiter_{20, std::chrono::seconds(10)};
};

}  // namespace rayx::scheduler
