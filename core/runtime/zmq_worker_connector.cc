// ZeroMQ links to workers.
#include "runtime/zmq_worker_connector.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <zmq.hpp>

#include "common/logging.h"
#include "transport/zmq_socket_loop.h"

namespace rayx::detail {

namespace {
// Values of any size travel in frames; this bounds one frame on worker links.
constexpr int64_t kMaxDataFrameBytes = int64_t{1} << 31;
// A TCP connection to a worker that is not up by then counts as lost (a
// node that vanished answers no SYN; the kernel would retry for minutes).
constexpr int kConnectTimeoutMs = 10000;
// When a lost link would dial again (it is dropped before then).
constexpr int kRedialMs = 1000;

class ZmqWorkerLink final : public WorkerLink {
 public:
  ZmqWorkerLink(boost::asio::io_context& io, zmq::context_t& context)
      : socket(context, zmq::socket_type::dealer),
        monitor(context, zmq::socket_type::pair),
        disconnect_wait(io) {}
  // libzmq 4.3 sends monitor events with a blocking send from its I/O thread:
  // closing the reader while the socket can still emit (its disconnect) would
  // stall that thread, and with it every socket of the context. So the
  // monitor is stopped first, then the socket closes, then the reader.
  ~ZmqWorkerLink() override {
    disconnect_wait.cancel();
    monitor_loop.reset();
    loop.reset();
    if (socket.handle() != nullptr) {
      zmq_socket_monitor(socket.handle(), nullptr, 0);
      socket.close();
    }
    monitor.close();
  }
  bool Send(transport::Frames& frames) override { return loop && loop->Send(frames); }
  void ReceiveWaiting() override {
    if (loop) loop->ReceiveWaiting();
  }
  bool AwaitDisconnect(int64_t wait_ms, std::function<void()> lost) override {
    if (!monitor_loop) return false;  // never connected: nothing will come
    disconnect_wait.expires_after(std::chrono::milliseconds(wait_ms));
    disconnect_wait.async_wait([alive = std::weak_ptr<bool>(this->alive),
                                lost = std::move(lost)](const boost::system::error_code& ec) {
      if (!ec && alive.lock()) lost();
    });
    return true;
  }

  zmq::socket_t socket;
  zmq::socket_t monitor;
  std::unique_ptr<transport::ZmqSocketLoop> loop;
  std::unique_ptr<transport::ZmqSocketLoop> monitor_loop;
  boost::asio::steady_timer disconnect_wait;
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
};
}  // namespace

std::unique_ptr<WorkerLink> ZmqWorkerConnector::Connect(const std::string& address,
                                                        const JobId& job,
                                                        const std::optional<transport::ActorKey>& actor_key,
                                                        MessageHandler on_message,
                                                        LostHandler on_lost) {
  auto link = std::make_unique<ZmqWorkerLink>(io_, context_);
  auto security = security_(job, actor_key);
  if (!security.ok()) {
    // Not ours to reach: the link is lost before it begins.
    RAYX_LOG(Warning) << "not connecting to the worker at " << address << ": "
                      << security.status().message();
    link->socket.close();
    boost::asio::post(io_, [alive = std::weak_ptr<bool>(link->alive),
                            on_lost = std::move(on_lost)] {
      if (alive.lock()) on_lost();  // only while the link lives
    });
    return link;
  }
  link->socket.set(zmq::sockopt::linger, 0);
  transport::MakeClient(link->socket, *security);
  link->socket.set(zmq::sockopt::maxmsgsize, kMaxDataFrameBytes);
  link->socket.set(zmq::sockopt::sndhwm, 0);
  link->socket.set(zmq::sockopt::rcvhwm, 0);
  // Reconnects stay on: without them (reconnect_ivl -1) libzmq 4.3 ends the
  // connection's session at the disconnect and drops the replies it had
  // read and not yet handed over: a worker's last answers, sent just before
  // it exits, would be lost. The link ends at its first loss anyway, so a
  // dead worker is dialled again at most once, a while later.
  link->socket.set(zmq::sockopt::reconnect_ivl, kRedialMs);
  link->socket.set(zmq::sockopt::connect_timeout, kConnectTimeoutMs);
  // Losses come through a monitor socket: DISCONNECTED when a connected
  // worker goes, CLOSED when a connection attempt failed (refused: the
  // address is a dead worker's; or timed out). Either is final: the link is
  // dropped, its redial never comes.
  std::string monitor = "inproc://rayx-monitor-" + std::to_string(++next_monitor_);
  zmq_socket_monitor(link->socket.handle(), monitor.c_str(),
                     ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED);
  link->monitor.connect(monitor);
  link->socket.connect(address);
  link->loop = std::make_unique<transport::ZmqSocketLoop>(io_, link->socket, std::move(on_message));
  // The monitor's event and the replies before it reach this thread through
  // different sockets, in either order: a worker that answered and then exited
  // has its answers read first.
  link->monitor_loop = std::make_unique<transport::ZmqSocketLoop>(
      io_, link->monitor,
      [data = link->loop.get(), on_lost = std::move(on_lost)](transport::Frames&) {
        data->ReceiveWaiting();
        on_lost();
      });
  link->loop->Start();
  link->monitor_loop->Start();
  return link;
}

}  // namespace rayx::detail
