// The node agent's ZeroMQ connection to the head.
#include "agent/head_connection.h"

#include "protocol/codec.h"
#include "rayx/ids.h"

namespace rayx::worker {

ZmqHeadConnection::ZmqHeadConnection(boost::asio::io_context& io, HostPort head,
                                     transport::ClientSecurity security)
    : io_(io),
      head_(std::move(head)),
      security_(std::move(security)),
      dealer_(context_, zmq::socket_type::dealer) {}

ZmqHeadConnection::~ZmqHeadConnection() {
  loop_.reset();
  dealer_.close();
}

void ZmqHeadConnection::Start(MessageHandler on_message) {
  dealer_.set(zmq::sockopt::linger, 0);
  dealer_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(protocol::kMaxControlFrameBytes));
  // Heartbeats queued while the head is unreachable are useless once stale.
  dealer_.set(zmq::sockopt::sndhwm, 100);
  // A routing id of its own for the agent's life: the head addresses the
  // node's agent by it, so a reconnect (a dropped TCP connection, a restarted
  // head) must not give the agent a new one (the head's ROUTER hands the id
  // over to the new connection).
  dealer_.set(zmq::sockopt::routing_id, "rayx-agent-" + detail::RandomHex(12));
  transport::MakeClient(dealer_, security_);
  dealer_.connect(head_.ZmqEndpoint());
  loop_ = std::make_unique<transport::ZmqSocketLoop>(io_, dealer_, std::move(on_message));
  loop_->Start();
}

bool ZmqHeadConnection::Send(transport::Frames& frames) { return loop_ && loop_->Send(frames); }

}  // namespace rayx::worker
