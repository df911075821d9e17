// The transport's side of `Frame`: the ZeroMQ message a frame holds. Included
// only by the transport and the servers' ZeroMQ edges.
#pragma once

#include <cstdint>
#include <cstring>
#include <new>
#include <optional>
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

// One event of a socket monitor (zmq_socket_monitor): what happened (a
// ZMQ_EVENT_* id) and its value (an fd, an errno, a ZAP status).
struct MonitorEvent {
  uint16_t id = 0;
  uint32_t value = 0;
};

// The event a monitor message's frames carry, or nullopt when they are no
// event (libzmq's first frame: 2 bytes of id, 4 of value).
inline std::optional<MonitorEvent> ParseMonitorEvent(const Frames& frames) {
  if (frames.empty() || frames[0].size() < 6) return std::nullopt;
  MonitorEvent event;
  std::memcpy(&event.id, frames[0].View().data(), 2);
  std::memcpy(&event.value, frames[0].View().data() + 2, 4);
  return event;
}

// The next event pending on `monitor`, without blocking: nullopt when none is
// pending or the socket is closing. A malformed message is skipped.
inline std::optional<MonitorEvent> ReceiveMonitorEvent(zmq::socket_t& monitor) {
  while (true) {
    Frames frames;
    try {
      zmq::message_t first;
      if (!monitor.recv(first, zmq::recv_flags::dontwait)) return std::nullopt;
      const bool more = first.more();
      frames.push_back(ToFrame(std::move(first)));
      if (more) {
        for (auto& f : ReceiveFrames(monitor)) frames.push_back(std::move(f));  // parts arrive together
      }
    } catch (const zmq::error_t&) {
      return std::nullopt;
    }
    if (auto event = ParseMonitorEvent(frames)) return event;
  }
}

}  // namespace rayx::transport
