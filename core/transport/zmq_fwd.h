// Names ZeroMQ's context for headers outside the transport that pass one along
// (to PullObject, to the worker loop) without including ZeroMQ.
#pragma once

// cppzmq (4.x) defines these as plain classes in namespace zmq; the .cc files
// that use them include <zmq.hpp>.
namespace zmq {
class context_t;
}  // namespace zmq
