// Runs a ZeroMQ socket inside a Boost.Asio io_context.
//
// ZeroMQ exposes readiness through ZMQ_FD, which is edge-triggered: it signals
// once when the socket's state changes, and any operation on the socket (a send
// included) may consume that edge. So after every wake-up and after every send we
// drain while ZMQ_EVENTS says POLLIN, and only then wait on the fd again. A
// drain handles at most kMaxBatch messages before yielding to the io_context so
// timers (heartbeats, timeouts) are never starved by a flood.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <zmq.hpp>

#include "transport/frame.h"
#include "transport/zmq_fwd.h"

namespace rayx::transport {

// Messages with more frames than this are received in full but dropped.
inline constexpr size_t kMaxFramesPerMessage = 64;

// Owned by the event loop's thread; not thread-safe. The socket must outlive it.
class ZmqSocketLoop {
 public:
  // `on_message` receives each complete multipart message; an over-long one is
  // reported to `on_dropped` instead.
  using MessageHandler = std::function<void(Frames& frames)>;
  using DropHandler = std::function<void(size_t frame_count)>;
  // Called after each pass over the socket that handled a message, before the
  // loop waits or yields: what the handlers held back (a store transaction,
  // replies) can be finished for the whole pass at once.
  using BatchEndHandler = std::function<void()>;

  ZmqSocketLoop(boost::asio::io_context& io, zmq::socket_t& socket, MessageHandler on_message,
                DropHandler on_dropped = nullptr);
  ~ZmqSocketLoop();
  ZmqSocketLoop(const ZmqSocketLoop&) = delete;
  ZmqSocketLoop& operator=(const ZmqSocketLoop&) = delete;

  // Begins watching the socket.
  void Start();
  // Set before Start().
  void SetBatchEnd(BatchEndHandler on_batch_end) { on_batch_end_ = std::move(on_batch_end); }

  // Sends all frames without blocking. Returns false (and sends nothing more)
  // when the peer's queue is full or unroutable; the caller decides whether that
  // matters. Schedules a drain, as the send may have consumed the read edge.
  bool Send(Frames& frames);

  // Hands every message the socket holds now to the handler before
  // returning: what another socket reports (a monitor's disconnect, a node's
  // notice that the peer exited) is acted on after the messages the peer sent
  // before it. Handlers must not destroy this loop.
  void ReceiveWaiting();

 private:
  static constexpr int kMaxBatch = 256;
  enum class Received { kNone, kHandled, kDropped };
  // Receives one message and hands it on; kNone when none waits. Throws
  // zmq::error_t when the socket cannot be read.
  Received ReceiveOne();
  void Arm();
  void Drain();
  void ScheduleDrain();
  void EndBatch();

  boost::asio::io_context& io_;
  zmq::socket_t& socket_;
  boost::asio::posix::stream_descriptor fd_;
  MessageHandler on_message_;
  DropHandler on_dropped_;
  BatchEndHandler on_batch_end_;
  bool drain_scheduled_ = false;
  bool waiting_ = false;
  // Lets queued handlers notice that this object is gone.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace rayx::transport
