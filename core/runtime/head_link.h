// The transport under a HeadClient (head_client.h): frames to the head, what
// comes back, and when the connection drops and comes back. The client's
// logic (request ids, re-registration, resending, timeouts) is the client's;
// the link only carries frames, so tests drive the client over a fake.
#pragma once

#include <functional>
#include <memory>

#include "common/address.h"
#include "transport/frame.h"
#include "transport/security.h"
#include "transport/zmq_fwd.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace rayx::detail {

class HeadLink {
 public:
  enum class Event : uint8_t { kConnected, kDisconnected };
  virtual ~HeadLink() = default;
  // Connects and starts delivering what the head sends and the connection's
  // events, on the I/O thread.
  virtual void Start(std::function<void(transport::Frames&)> on_message,
                     std::function<void(Event)> on_event) = 0;
  // Queues `frames` for the head; false when not started (or stopped) or the
  // queue is full.
  virtual bool Send(transport::Frames& frames) = 0;
  // Nothing is delivered after this returns; later sends fail.
  virtual void Stop() = 0;
};

// ZeroMQ's: a DEALER to `head` proving `security` (CURVE to the head), with a
// fixed routing id (a restarted head knows this connection as the owner of
// the leases it had) and a socket monitor for the connection's events.
// `io` and `context` must outlive it.
std::unique_ptr<HeadLink> MakeZmqHeadLink(boost::asio::io_context& io, zmq::context_t& context,
                                          const HostPort& head,
                                          const transport::ClientSecurity& security);

}  // namespace rayx::detail
