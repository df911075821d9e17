// The runtime's link to the head: request ids, replies, heartbeats.
#include "runtime/head_client.h"

#include "common/logging.h"

namespace rayx::detail {

using protocol::MessageType;
using transport::FrameView;
using transport::Frames;

HeadClient::HeadClient(boost::asio::io_context& io, zmq::context_t& context, HostPort head)
    : io_(io),
      head_(std::move(head)),
      socket_(context, zmq::socket_type::dealer),
      heartbeat_timer_(io) {}

HeadClient::~HeadClient() {
  // The watch goes before the socket it reads.
  loop_.reset();
}

void HeadClient::Start() {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(protocol::kMaxControlFrameBytes));
  socket_.connect(head_.ZmqEndpoint());
  loop_ = std::make_unique<transport::ZmqSocketLoop>(
      io_, socket_, [this](Frames& frames) { OnMessage(frames); });
  loop_->Start();
}

void HeadClient::Stop() {
  StopHeartbeats();
  heartbeat_timer_.cancel();
  loop_.reset();
}

void HeadClient::Send(uint64_t id, Frames& frames, RawCallback done) {
  auto& slot = calls_[id];
  slot = std::move(done);
  if (!loop_ || !loop_->Send(frames)) {
    RawCallback cb = std::move(slot);
    calls_.erase(id);
    cb(Status::Unavailable("cannot send to the head at " + head_.ToString()));
  }
}

void HeadClient::OnMessage(Frames& frames) {
  if (frames.size() < 2) return;
  auto env = protocol::Decode<protocol::Envelope>(FrameView(frames[0]));
  if (!env.ok()) return;
  if (env->t == static_cast<uint16_t>(MessageType::kLeasesLostNotice)) {
    auto notice = protocol::Decode<protocol::LeasesLostNotice>(FrameView(frames[1]));
    if (!notice.ok()) {
      RAYX_LOG(Warning) << "dropped an undecodable LeasesLostNotice: " << notice.status();
    } else if (on_leases_lost_) {
      on_leases_lost_(*notice);
    }
    return;
  }
  auto it = calls_.find(env->id);
  if (it == calls_.end()) return;
  RawCallback cb = std::move(it->second);
  calls_.erase(it);
  if (env->t == static_cast<uint16_t>(MessageType::kErrorReply)) {
    auto error = protocol::Decode<protocol::ErrorReply>(FrameView(frames[1]));
    cb(error.ok() ? error->ToStatus() : error.status());
    return;
  }
  cb(std::make_pair(env->t, std::string(FrameView(frames[1]))));
}

void HeadClient::StartHeartbeats(std::string job_id, int64_t period_ms) {
  heartbeat_job_ = std::move(job_id);
  heartbeat_period_ms_ = period_ms;
  Heartbeat();
}

void HeadClient::StopHeartbeats() { heartbeats_stopped_ = true; }

void HeadClient::Heartbeat() {
  if (heartbeats_stopped_) return;
  protocol::DriverHeartbeatRequest req;
  req.job_id = heartbeat_job_;
  Call<protocol::DriverHeartbeatReply>(req, [](Result<protocol::DriverHeartbeatReply>) {});
  heartbeat_timer_.expires_after(std::chrono::milliseconds(heartbeat_period_ms_));
  heartbeat_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) Heartbeat();
  });
}

void HeadClient::RequestLease(const protocol::RequestLeaseRequest& request, LeaseCallback done) {
  Call<protocol::RequestLeaseReply>(request, std::move(done));
}

void HeadClient::ReturnLease(const std::string& lease_id) {
  protocol::ReturnLeaseRequest req;
  req.lease_id = lease_id;
  Call<protocol::ReturnLeaseReply>(req, [](Result<protocol::ReturnLeaseReply>) {});
}

void HeadClient::RegisterActor(const protocol::ActorInfo& actor) {
  protocol::RegisterActorRequest req;
  req.actor = actor;
  Call<protocol::RegisterActorReply>(req, [name = actor.name](Result<protocol::RegisterActorReply> r) {
    if (!r.ok()) RAYX_LOG(Warning) << "actor '" << name << "': " << r.status();
  });
}

void HeadClient::LookupActor(const std::string& name, ActorCallback done) {
  protocol::GetActorRequest req;
  req.name = name;
  Call<protocol::GetActorReply>(req, [done = std::move(done)](Result<protocol::GetActorReply> r) {
    if (!r.ok()) return done(r.status());
    done(std::move(r->actor));
  });
}

}  // namespace rayx::detail
