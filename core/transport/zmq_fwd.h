// Names ZeroMQ's context and socket for headers outside the transport that
// pass one along (to PullObject, to the worker loop) or own one behind a
// pointer, without including ZeroMQ.
#pragma once

#include <memory>

// cppzmq (4.x) defines these as plain classes in namespace zmq; the .cc files
// that use them include <zmq.hpp>.
namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq

namespace rayx::transport {

// Owns a ZeroMQ context (one I/O thread) for code that only passes it along.
class ZmqContext {
 public:
  ZmqContext();
  ~ZmqContext();
  ZmqContext(const ZmqContext&) = delete;
  ZmqContext& operator=(const ZmqContext&) = delete;
  zmq::context_t& get() { return *context_; }

 private:
  std::unique_ptr<zmq::context_t> context_;
};

}  // namespace rayx::transport
