// The transport's side of `Frame`: the ZeroMQ message a frame holds. Included
// only by the transport and the servers' ZeroMQ edges.
#pragma once

#include <new>
#include <utility>

#include <zmq.hpp>

#include "transport/frame.h"

namespace rayx::transport {

struct FrameAccess {
  static zmq::message_t& Message(Frame& frame) {
    return *std::launder(reinterpret_cast<zmq::message_t*>(frame.storage_));
  }
  static const zmq::message_t& Message(const Frame& frame) {
    return *std::launder(reinterpret_cast<const zmq::message_t*>(frame.storage_));
  }
  // A frame that takes `message` over (no copy).
  static Frame FromMessage(zmq::message_t&& message) {
    Frame frame;
    Message(frame) = std::move(message);
    return frame;
  }
};

inline zmq::message_t& ZmqMessage(Frame& frame) { return FrameAccess::Message(frame); }
inline Frame ToFrame(zmq::message_t&& message) { return FrameAccess::FromMessage(std::move(message)); }

// Sends `frames` as one multipart message; `flags` is added to every part
// (e.g. dontwait). Returns false when a part could not be queued (only with
// dontwait); throws zmq::error_t like send.
inline bool SendFrames(zmq::socket_t& socket, Frames& frames,
                       zmq::send_flags flags = zmq::send_flags::none) {
  for (size_t i = 0; i < frames.size(); ++i) {
    auto part = flags;
    if (i + 1 < frames.size()) part = part | zmq::send_flags::sndmore;
    if (!socket.send(ZmqMessage(frames[i]), part)) return false;
  }
  return true;
}

// Receives one whole multipart message, blocking. Throws zmq::error_t like recv.
inline Frames ReceiveFrames(zmq::socket_t& socket) {
  Frames frames;
  bool more = true;
  while (more) {
    zmq::message_t part;
    if (!socket.recv(part)) break;
    more = part.more();
    frames.push_back(ToFrame(std::move(part)));
  }
  return frames;
}

}  // namespace rayx::transport
