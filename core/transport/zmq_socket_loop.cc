// ZeroMQ socket integration with Boost.Asio.
#include "transport/zmq_socket_loop.h"

#include <boost/asio/post.hpp>

#include "common/logging.h"
#include "transport/zmq_frame.h"

namespace rayx::transport {

ZmqSocketLoop::ZmqSocketLoop(boost::asio::io_context& io, zmq::socket_t& socket,
                             MessageHandler on_message, DropHandler on_dropped)
    : io_(io),
      socket_(socket),
      fd_(io, socket.get(zmq::sockopt::fd)),
      on_message_(std::move(on_message)),
      on_dropped_(std::move(on_dropped)) {}

ZmqSocketLoop::~ZmqSocketLoop() {
  *alive_ = false;
  boost::system::error_code ignored;
  fd_.cancel(ignored);
  // The fd belongs to the ZeroMQ socket: never let Asio close it.
  fd_.release();
}

void ZmqSocketLoop::Start() { ScheduleDrain(); }

void ZmqSocketLoop::Arm() {
  if (waiting_) return;
  waiting_ = true;
  std::weak_ptr<bool> alive = alive_;
  fd_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                 [this, alive](const boost::system::error_code& ec) {
                   if (alive.expired()) return;
                   waiting_ = false;
                   if (ec) return;  // cancelled at shutdown
                   Drain();
                 });
}

void ZmqSocketLoop::ScheduleDrain() {
  if (drain_scheduled_) return;
  drain_scheduled_ = true;
  std::weak_ptr<bool> alive = alive_;
  boost::asio::post(io_, [this, alive] {
    if (alive.expired()) return;
    drain_scheduled_ = false;
    Drain();
  });
}

void ZmqSocketLoop::EndBatch() {
  if (!on_batch_end_) return;
  try {
    on_batch_end_();
  } catch (const std::exception& e) {
    RAYX_LOG(Error) << "finishing a batch of messages failed: " << e.what();
  }
}

ZmqSocketLoop::Received ZmqSocketLoop::ReceiveOne() {
  if (!(socket_.get(zmq::sockopt::events) & ZMQ_POLLIN)) return Received::kNone;
  Frames frames;
  size_t count = 0;
  bool more = true;
  while (more) {
    zmq::message_t part;
    if (!socket_.recv(part, zmq::recv_flags::dontwait)) break;
    more = part.more();
    if (++count <= kMaxFramesPerMessage) frames.push_back(ToFrame(std::move(part)));
  }
  if (count > kMaxFramesPerMessage) {
    if (on_dropped_) on_dropped_(count);
    return Received::kDropped;
  }
  if (frames.empty()) return Received::kDropped;
  try {
    on_message_(frames);
  } catch (const zmq::error_t&) {
    throw;
  } catch (const std::exception& e) {
    // A handler's bug or an input it did not expect (an allocation too
    // big, say) costs that message, never the daemon.
    RAYX_LOG(Error) << "dropped a message whose handling failed: " << e.what();
  } catch (...) {
    RAYX_LOG(Error) << "dropped a message whose handling failed (a non-standard exception)";
  }
  return Received::kHandled;
}

void ZmqSocketLoop::ReceiveWaiting() {
  bool handled_any = false;
  try {
    for (Received r = ReceiveOne(); r != Received::kNone; r = ReceiveOne()) {
      handled_any |= r == Received::kHandled;
    }
  } catch (const zmq::error_t& e) {
    if (e.num() != ETERM) RAYX_LOG(Error) << "ZeroMQ receive failed: " << e.what();
  }
  if (handled_any) EndBatch();
  ScheduleDrain();  // the reads may have taken the fd's edge: watch it again
}

void ZmqSocketLoop::Drain() {
  bool handled_any = false;
  for (int handled = 0; handled < kMaxBatch; ++handled) {
    try {
      Received received = ReceiveOne();
      if (received == Received::kNone) {
        if (handled_any) EndBatch();
        Arm();
        return;
      }
      handled_any |= received == Received::kHandled;
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) {
        if (handled_any) EndBatch();  // what was handled still ends (a commit)
        return;
      }
      RAYX_LOG(Error) << "ZeroMQ receive failed: " << e.what();
    }
  }
  // More may be waiting: yield to timers, then continue.
  if (handled_any) EndBatch();
  ScheduleDrain();
}

bool ZmqSocketLoop::Send(Frames& frames) {
  bool ok = true;
  try {
    ok = SendFrames(socket_, frames, zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    // A terminated context, or a socket in a state that cannot send.
    ok = false;
  }
  ScheduleDrain();
  return ok;
}

ZmqContext::ZmqContext() : context_(std::make_unique<zmq::context_t>(1)) {}
ZmqContext::~ZmqContext() = default;

}  // namespace rayx::transport
