// The head daemon's sockets and timers.
#include "head/head_server.h"

#include <cstdio>

#include "protocol/codec.h"
#include "transport/message.h"

namespace rayx::scheduler {

HeadServer::HeadServer(boost::asio::io_context& io, HeadServerOptions options, const Clock& clock)
    : io_(io),
      options_(std::move(options)),
      service_(options_.service, clock),
      verifier_(std::make_shared<transport::ClusterVerifier>(options_.service.token)),
      router_(context_, zmq::socket_type::router),
      expiry_timer_(io) {}

HeadServer::~HeadServer() {
  loop_.reset();
  router_.close();
  zap_.reset();
}

Status HeadServer::Start() {
  // Before the socket accepts anyone: who may connect.
  for (const JobId& job : service_.admitted_jobs()) verifier_->AllowJob(job);
  service_.SetCredentialObserver([this](const JobId& job, bool admitted) {
    if (admitted) {
      verifier_->AllowJob(job);
    } else {
      verifier_->ForgetJob(job);
    }
  });
  zap_ = std::make_unique<transport::ZapServer>(context_, verifier_, "head");
  router_.set(zmq::sockopt::linger, 0);
  // The head carries only control messages: always encrypted (CURVE), so
  // agents and drivers also know they talk to the cluster's head.
  transport::MakeServer(router_, transport::WireSecurity::kEncrypted,
                        transport::Credential::Cluster(options_.service.token));
  // An address that keeps connecting without the credential is shut out.
  zap_->Guard(router_);
  // libzmq drops (and disconnects) a peer sending a frame over this size, before
  // buffering it: an oversized frame costs us nothing.
  router_.set(zmq::sockopt::maxmsgsize,
              static_cast<int64_t>(protocol::kMaxControlFrameBytes));
  router_.set(zmq::sockopt::sndhwm, 10000);
  router_.set(zmq::sockopt::rcvhwm, 100000);
  // Drivers connect with a fixed routing id (it survives a head restart): one
  // that reconnects before its old connection is seen closed takes its id over
  // instead of being ignored. Only a connection that proved the same principal
  // can use the session (RequestRouter), so a taken-over id gains nothing.
  router_.set(zmq::sockopt::router_handover, true);
  std::string endpoint = "tcp://" + options_.bind_host + ":" +
                         (options_.port == 0 ? std::string("*") : std::to_string(options_.port));
  try {
    router_.bind(endpoint);
  } catch (const zmq::error_t& e) {
    if (e.num() == EADDRINUSE) {
      return Status::Unavailable("port " + std::to_string(options_.port) +
                                 " is already in use on this machine: choose another with "
                                 "--port, or stop the program using it (`rayx stop` if it is "
                                 "another rayx head)");
    }
    return Status::InvalidArgument("cannot listen on " + endpoint + ": " + e.what());
  }
  std::string last = router_.get(zmq::sockopt::last_endpoint);
  port_ = static_cast<uint16_t>(std::stoi(last.substr(last.rfind(':') + 1)));
  loop_ = std::make_unique<transport::ZmqSocketLoop>(
      io_, router_, [this](transport::Frames& frames) { OnMessage(frames); },
      [this](size_t count) {
        uint64_t suppressed = 0;
        if (drop_log_limiter_.Allow(std::chrono::steady_clock::now(), &suppressed)) {
          RAYX_LOG(Warning) << "dropped a message of " << count << " frames (limit "
                            << transport::kMaxFramesPerMessage << ")";
        }
      });
  service_.SetOutbox(
      [this](const std::string& peer, transport::Frames frames) { SendTo(peer, std::move(frames)); });
  loop_->SetBatchEnd([this] { EndBatch(); });
  loop_->Start();
  ScheduleExpiry();
  return Status::OK();
}

void HeadServer::OnMessage(transport::Frames& frames) {
  // frames[0] is the ROUTER's routing id of the sender.
  if (frames.size() < 2) return;
  if (!in_batch_) {
    in_batch_ = true;
    if (options_.service.store) options_.service.store->BeginBatch();
  }
  transport::Frames request(std::make_move_iterator(frames.begin() + 1),
                            std::make_move_iterator(frames.end()));
  std::string peer(transport::FrameView(frames[0]));
  // Who the connection proved to be (ZAP); every message of it says so.
  transport::Principal principal = transport::PeerPrincipal(request[0]);
  auto reply = service_.Handle(request, peer, principal);
  if (reply) SendTo(peer, std::move(*reply));
}

void HeadServer::SendTo(const std::string& peer, transport::Frames frames) {
  transport::Frames out;
  out.reserve(frames.size() + 1);
  out.push_back(transport::MakeFrame(peer));
  for (auto& frame : frames) out.push_back(std::move(frame));
  if (in_batch_) {
    held_.push_back(std::move(out));
    return;
  }
  // A full or vanished peer loses this message: its requests time out.
  (void)loop_->Send(out);
}

void HeadServer::EndBatch() {
  in_batch_ = false;
  if (options_.service.store) options_.service.store->EndBatch();
  for (auto& out : held_) (void)loop_->Send(out);
  held_.clear();
}

void HeadServer::ScheduleExpiry() {
  expiry_timer_.expires_after(std::chrono::milliseconds(options_.service.heartbeat_period_ms));
  expiry_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    service_.ExpireSilentNodes();
    ScheduleExpiry();
  });
}

}  // namespace rayx::scheduler
