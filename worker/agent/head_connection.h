// The node agent's connection to the head, behind an interface so tests can fake it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <zmq.hpp>

#include "common/address.h"
#include "transport/security.h"
#include "transport/zmq_socket_loop.h"

namespace rayx::worker {

// Messages to and from the head: [envelope][body][payload...] frames.
//
// Single-threaded: used on the agent's io_context only.
class HeadConnection {
 public:
  using MessageHandler = std::function<void(transport::Frames& frames)>;
  virtual ~HeadConnection() = default;

  // Connects; from then on every message from the head goes to `on_message`
  // (on the agent's io_context). REQUIRES: called once, before Send.
  virtual void Start(MessageHandler on_message) = 0;
  // Queues `frames` without blocking. Returns false (nothing more is sent)
  // when the queue to the head is full.
  virtual bool Send(transport::Frames& frames) = 0;
};

// The ZeroMQ DEALER connection to the head's ROUTER (CURVE: the agent proves
// the cluster's credential and checks that the head holds the cluster's key).
// Owns its socket.
class ZmqHeadConnection final : public HeadConnection {
 public:
  ZmqHeadConnection(boost::asio::io_context& io, HostPort head,
                    transport::ClientSecurity security);
  ~ZmqHeadConnection() override;

  void Start(MessageHandler on_message) override;
  bool Send(transport::Frames& frames) override;

 private:
  boost::asio::io_context& io_;
  HostPort head_;
  transport::ClientSecurity security_;
  zmq::context_t context_{1};
  zmq::socket_t dealer_;
  std::unique_ptr<transport::ZmqSocketLoop> loop_;
};

}  // namespace rayx::worker
