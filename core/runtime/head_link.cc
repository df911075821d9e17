#include "runtime/head_link.h"

#include <boost/asio/io_context.hpp>
#include <zmq.hpp>

#include "rayx/ids.h"
#include "protocol/codec.h"
#include "transport/message.h"
#include "transport/zmq_frame.h"
#include "transport/zmq_socket_loop.h"

namespace rayx::detail {

namespace {

class ZmqHeadLink final : public HeadLink {
 public:
  ZmqHeadLink(boost::asio::io_context& io, zmq::context_t& context, HostPort head,
              transport::ClientSecurity security)
      : io_(io),
        head_(std::move(head)),
        security_(std::move(security)),
        socket_(context, zmq::socket_type::dealer),
        monitor_(context, zmq::socket_type::pair) {}
  ~ZmqHeadLink() override {
    StopMonitor();
    loop_.reset();  // the watch goes before the socket it reads
  }

  void Start(std::function<void(transport::Frames&)> on_message,
             std::function<void(Event)> on_event) override {
    socket_.set(zmq::sockopt::linger, 0);
    // A fixed routing id: a restarted head knows this connection as the owner
    // of the leases it had (ids that start with a zero byte are ZeroMQ's own).
    socket_.set(zmq::sockopt::routing_id, "rayx-" + RandomHex(12));
    socket_.set(zmq::sockopt::maxmsgsize,
                static_cast<int64_t>(protocol::kMaxControlFrameBytes));
    transport::MakeClient(socket_, security_);
    std::string monitor = "inproc://rayx-head-monitor-" + RandomHex(8);
    zmq_socket_monitor(socket_.handle(), monitor.c_str(),
                       ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED);
    monitor_.connect(monitor);
    monitor_loop_ = std::make_unique<transport::ZmqSocketLoop>(
        io_, monitor_, [on_event = std::move(on_event)](transport::Frames& frames) {
          auto parsed = transport::ParseMonitorEvent(frames);
          if (!parsed) return;
          if (parsed->id == ZMQ_EVENT_DISCONNECTED) on_event(Event::kDisconnected);
          if (parsed->id == ZMQ_EVENT_CONNECTED) on_event(Event::kConnected);
        });
    monitor_loop_->Start();
    socket_.connect(head_.ZmqEndpoint());
    loop_ = std::make_unique<transport::ZmqSocketLoop>(io_, socket_, std::move(on_message));
    loop_->Start();
  }

  bool Send(transport::Frames& frames) override { return loop_ && loop_->Send(frames); }

  void Stop() override {
    StopMonitor();
    loop_.reset();
  }

 private:
  // libzmq sends monitor events with a blocking send from its I/O thread: the
  // monitor is stopped before the socket can emit more (its close), and its
  // reader closes last.
  void StopMonitor() {
    if (!monitor_loop_) return;
    monitor_loop_.reset();
    zmq_socket_monitor(socket_.handle(), nullptr, 0);
    monitor_.close();
  }

  boost::asio::io_context& io_;
  const HostPort head_;
  const transport::ClientSecurity security_;
  zmq::socket_t socket_;
  std::unique_ptr<transport::ZmqSocketLoop> loop_;
  zmq::socket_t monitor_;  // PAIR: the socket's connection events
  std::unique_ptr<transport::ZmqSocketLoop> monitor_loop_;
};

}  // namespace

std::unique_ptr<HeadLink> MakeZmqHeadLink(boost::asio::io_context& io, zmq::context_t& context,
                                          const HostPort& head,
                                          const transport::ClientSecurity& security) {
  return std::make_unique<ZmqHeadLink>(io, context, head, security);
}

}  // namespace rayx::detail
