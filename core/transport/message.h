// Building and reading the frames of a wire message.
#pragma once

#include <cstdint>
#include <string_view>

#include <zmq.hpp>

#include "protocol/codec.h"
#include "rayx/status.h"
#include "transport/zmq_socket_loop.h"

namespace rayx::transport {

// [Envelope][body] for `body`, tagged with request id `id`.
template <typename T>
Frames MakeMessage(const T& body, uint64_t id) {
  protocol::Envelope env;
  env.t = static_cast<uint16_t>(T::kType);
  env.id = id;
  Frames frames;
  frames.push_back(MakeFrame(protocol::Encode(env)));
  frames.push_back(MakeFrame(protocol::Encode(body)));
  return frames;
}

// [Envelope][ErrorReply] carrying `status`, answering request `id`.
Frames MakeErrorMessage(const Status& status, std::string_view where, uint64_t id);

// Receives one whole multipart message, blocking. Throws zmq::error_t like recv.
inline Frames ReceiveMessage(zmq::socket_t& socket) {
  Frames frames;
  bool more = true;
  while (more) {
    zmq::message_t part;
    if (!socket.recv(part)) break;
    more = part.more();
    frames.push_back(std::move(part));
  }
  return frames;
}

inline std::string_view FrameView(const zmq::message_t& frame) {
  return {static_cast<const char*>(frame.data()), frame.size()};
}

}  // namespace rayx::transport
