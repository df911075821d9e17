// The runtime's link to the head: request ids, replies, heartbeats.
#include "runtime/head_client.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>

#include <boost/asio/post.hpp>

#include "common/logging.h"
#include "rayx/ids.h"
#include "transport/message.h"

namespace rayx::detail {

using protocol::MessageType;
using transport::FrameView;
using transport::Frames;

using protocol::IsRegisterFirst;

HeadClient::HeadClient(boost::asio::io_context& io, zmq::context_t& context, HostPort head,
                       transport::ClientSecurity security, Options options)
    : HeadClient(io, MakeZmqHeadLink(io, context, head, security), head, options) {}

HeadClient::HeadClient(boost::asio::io_context& io, std::unique_ptr<HeadLink> link,
                       HostPort head, Options options)
    : io_(io),
      head_(std::move(head)),
      options_(options),
      clock_(options.clock != nullptr ? *options.clock : system_clock_),
      link_(std::move(link)),
      heartbeat_timer_(io) {}

HeadClient::~HeadClient() = default;

void HeadClient::Start() {
  last_heard_ms_ = NowMs();
  link_->Start([this](Frames& frames) { OnMessage(frames); },
               [this](HeadLink::Event event) { OnLinkEvent(event); });
}

void HeadClient::Stop() {
  StopHeartbeats();
  heartbeat_timer_.cancel();
  link_->Stop();
}

bool HeadClient::SendOnSocket(Frames& frames) { return link_->Send(frames); }

void HeadClient::OnLinkEvent(HeadLink::Event event) {
  if (event == HeadLink::Event::kDisconnected) {
    disconnected_ = true;
    return;
  }
  if (!disconnected_) return;
  disconnected_ = false;
  if (!registration_) return;  // not registered yet: nothing to restore
  // Everything unanswered now went out on the connection that dropped.
  const uint64_t sent_before = next_request_;
  protocol::DriverHeartbeatRequest probe;
  probe.job_id = registration_->job_id;
  Call<protocol::DriverHeartbeatReply>(
      probe, [this, sent_before](Result<protocol::DriverHeartbeatReply> r) {
        // "register first" (a restarted head) is handled by OnMessage, which
        // sends the waiting calls again after registering.
        if (!r.ok()) return;
        ResendAfterReconnect(sent_before);
        if (on_restored_) on_restored_();
      });
}

void HeadClient::ResendAfterReconnect(uint64_t sent_before) {
  // The same head answered: the connection dropped (a TCP reset, a network
  // blip) and ZeroMQ made a new one. A reply the head sent meanwhile, or a
  // request still in the dead connection, is lost: send every call still
  // waiting again, under its own id and in order. The head answers a repeat
  // from what it answered the first time (RequestDedup), so nothing is done
  // twice; a duplicate reply finds no call here and is dropped.
  std::vector<uint64_t> again;
  for (const auto& [call_id, pending] : calls_) {
    if (call_id < sent_before && pending.resend && call_id != reregister_id_) {
      again.push_back(call_id);
    }
  }
  if (again.empty()) return;
  RAYX_LOG(Info) << "the connection to the head at " << head_.ToString()
                 << " dropped and is back: sending " << again.size() << " waiting calls again";
  SendAgain(std::move(again));
}

void HeadClient::SendAgain(std::vector<uint64_t> ids) {
  std::sort(ids.begin(), ids.end());  // in the order they were first sent
  for (uint64_t call_id : ids) {
    auto it = calls_.find(call_id);
    if (it == calls_.end()) continue;
    if (!SendFrames(it->second.frames)) {
      RawCallback cb = std::move(it->second.done);
      calls_.erase(it);
      cb(Status::Unavailable("cannot send to the head at " + head_.ToString()));
    }
  }
}

void HeadClient::CallEncoded(uint16_t type, std::string body, uint16_t reply_type,
                             std::function<void(Result<std::string>)> done) {
  uint64_t id = NextRequestId();
  protocol::Envelope env;
  env.t = type;
  env.id = id;
  Frames frames;
  frames.push_back(transport::MakeFrame(protocol::Encode(env)));
  frames.push_back(transport::MakeFrame(body));
  // Heartbeats and the registration itself are not sent again after a head
  // restart (Reregister sends its own registration).
  bool resend = type != static_cast<uint16_t>(MessageType::kDriverHeartbeatRequest) &&
                type != static_cast<uint16_t>(MessageType::kRegisterDriverRequest);
  Send(
      id, frames,
      [reply_type, done = std::move(done)](Result<RawReply> raw) {
        if (!raw.ok()) return done(raw.status());
        if (raw->first != reply_type) {
          return done(
              Status::Internal("unexpected reply " + protocol::MessageTypeName(raw->first)));
        }
        done(std::move(raw->second));
      },
      resend);
}

bool HeadClient::NotifyEncoded(uint16_t type, const std::string& body) {
  protocol::Envelope env;
  env.t = type;
  env.id = 0;  // no answer is expected, so none is matched
  Frames frames;
  frames.push_back(transport::MakeFrame(protocol::Encode(env)));
  frames.push_back(transport::MakeFrame(body));
  return SendOnSocket(frames);
}

Result<std::string> HeadClient::CallSyncEncoded(uint16_t type, std::string body,
                                                uint16_t reply_type, int64_t timeout_ms) {
  auto promise = std::make_shared<std::promise<Result<std::string>>>();
  auto future = promise->get_future();
  boost::asio::post(io_, [this, type, body = std::move(body), reply_type, promise]() mutable {
    CallEncoded(type, std::move(body), reply_type,
                [promise](Result<std::string> r) { promise->set_value(std::move(r)); });
  });
  if (future.wait_for(std::chrono::milliseconds(timeout_ms)) != std::future_status::ready) {
    return Status::Unavailable("the head at " + head_.ToString() + " did not answer within " +
                               std::to_string(timeout_ms / 1000) +
                               " s: is the cluster running (rayx status)?");
  }
  return future.get();
}

void HeadClient::Send(uint64_t id, Frames& frames, RawCallback done, bool resend) {
  Pending& slot = calls_[id];
  slot.done = std::move(done);
  slot.resend = resend;
  if (resend) {
    for (const auto& frame : frames) slot.frames.emplace_back(FrameView(frame));
  }
  if (!SendOnSocket(frames)) {
    RawCallback cb = std::move(slot.done);
    calls_.erase(id);
    cb(Status::Unavailable("cannot send to the head at " + head_.ToString()));
  }
}

bool HeadClient::SendFrames(const std::vector<std::string>& frames) {
  Frames copy;
  for (const auto& frame : frames) copy.push_back(transport::MakeFrame(frame));
  return SendOnSocket(copy);
}

void HeadClient::SetRegistration(protocol::RegisterDriverRequest request) {
  registration_ = std::move(request);
}

void HeadClient::OnMessage(Frames& frames) {
  if (frames.size() < 2) return;
  auto env = protocol::Decode<protocol::Envelope>(FrameView(frames[0]));
  if (!env.ok()) return;
  last_heard_ms_ = NowMs();
  timed_out_ = false;
  if (env->t == static_cast<uint16_t>(MessageType::kLeasesLostNotice)) {
    auto notice = protocol::Decode<protocol::LeasesLostNotice>(FrameView(frames[1]));
    if (!notice.ok()) {
      RAYX_LOG(Warning) << "dropped an undecodable LeasesLostNotice: " << notice.status();
    } else if (on_leases_lost_) {
      on_leases_lost_(*notice);
    }
    return;
  }
  if (env->t == static_cast<uint16_t>(MessageType::kWorkerOutputNotice)) {
    auto notice = protocol::Decode<protocol::WorkerOutputNotice>(FrameView(frames[1]));
    if (notice.ok() && on_worker_output_) on_worker_output_(*notice);
    return;
  }
  if (env->t == static_cast<uint16_t>(MessageType::kGroupMemberDiedNotice)) {
    auto notice = protocol::Decode<protocol::GroupMemberDiedNotice>(FrameView(frames[1]));
    if (!notice.ok()) {
      RAYX_LOG(Warning) << "dropped an undecodable GroupMemberDiedNotice: " << notice.status();
    } else if (on_group_member_died_) {
      on_group_member_died_(*notice);
    }
    return;
  }
  auto it = calls_.find(env->id);
  if (it == calls_.end()) return;
  if (env->t == static_cast<uint16_t>(MessageType::kErrorReply)) {
    auto error = protocol::Decode<protocol::ErrorReply>(FrameView(frames[1]));
    Status status = error.ok() ? error->ToStatus() : error.status();
    if (IsRegisterFirst(status) && registration_ && !heartbeats_stopped_) {
      // The head restarted: this call waits for the registration, then goes again.
      if (!it->second.resend) calls_.erase(it);
      Reregister();
      return;
    }
    RawCallback cb = std::move(it->second.done);
    calls_.erase(it);
    cb(status);
    return;
  }
  RawCallback cb = std::move(it->second.done);
  calls_.erase(it);
  cb(std::make_pair(env->t, std::string(FrameView(frames[1]))));
}

void HeadClient::Reregister() {
  if (reregister_id_ != 0) return;  // already under way
  uint64_t id = NextRequestId();
  reregister_id_ = id;
  RAYX_LOG(Info) << "the head at " << head_.ToString()
                 << " restarted (it no longer knows this connection): registering again";
  Frames frames = transport::MakeMessage(*registration_, id);
  Send(
      id, frames,
      [this, id](Result<RawReply> raw) {
        reregister_id_ = 0;
        Status status = raw.ok() ? Status::OK() : raw.status();
        if (raw.ok() && raw->first != static_cast<uint16_t>(MessageType::kRegisterDriverReply)) {
          status = Status::Internal("unexpected reply " + protocol::MessageTypeName(raw->first));
        }
        if (!status.ok()) {
          FailWaiting(Status(status.code(), "the head at " + head_.ToString() +
                                                " restarted and refused this program: " +
                                                status.message()));
          return;
        }
        if (on_reregistered_) on_reregistered_();
        if (on_restored_) on_restored_();
        // Everything sent before the registration and still unanswered was
        // refused by the new head or lost with the old one: send it again,
        // under its own id, in the order it was first sent.
        std::vector<uint64_t> again;
        for (const auto& [call_id, pending] : calls_) {
          if (call_id < id && pending.resend) again.push_back(call_id);
        }
        RAYX_LOG(Info) << "registered again with the head at " << head_.ToString()
                       << "; sending " << again.size() << " waiting calls again";
        SendAgain(std::move(again));
      },
      /*resend=*/false);
}

void HeadClient::FailWaiting(const Status& status) {
  std::vector<uint64_t> ids;
  for (const auto& [id, pending] : calls_) {
    if (id != reregister_id_ && pending.resend) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  for (uint64_t id : ids) {
    auto it = calls_.find(id);
    if (it == calls_.end()) continue;
    RawCallback cb = std::move(it->second.done);
    calls_.erase(it);
    cb(status);
  }
}

void HeadClient::StartHeartbeats(JobId job_id, int64_t period_ms,
                                 std::function<WorkCounts()> counts) {
  heartbeat_job_ = std::move(job_id);
  heartbeat_counts_ = std::move(counts);
  heartbeat_period_ms_ = period_ms;
  Heartbeat();
}

void HeadClient::StopHeartbeats() { heartbeats_stopped_ = true; }

void HeadClient::Heartbeat() {
  if (heartbeats_stopped_) return;
  protocol::DriverHeartbeatRequest req;
  req.job_id = heartbeat_job_;
  if (heartbeat_counts_) {
    WorkCounts counts = heartbeat_counts_();
    req.tasks = counts.tasks;
    req.collectives = counts.Collectives();
  }
  Call<protocol::DriverHeartbeatReply>(req, [](Result<protocol::DriverHeartbeatReply>) {});
  // Heartbeats that go unanswered are dropped, so they cannot pile up.
  int64_t silent = NowMs() - last_heard_ms_;
  if (silent > options_.head_timeout_ms && !timed_out_) {
    timed_out_ = true;
    std::erase_if(calls_, [&](const auto& entry) {
      return !entry.second.resend && entry.first != reregister_id_;
    });
    FailWaiting(Status::Unavailable(
        "the head at " + head_.ToString() + " has not answered for " +
        std::to_string(silent / 1000) +
        " s: it is down or restarting (calls to running actors and leased workers still work; "
        "new work needs the head: check `rayx status`, restart it with the same `rayx start "
        "--head` command)"));
  }
  heartbeat_timer_.expires_after(std::chrono::milliseconds(heartbeat_period_ms_));
  heartbeat_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) Heartbeat();
  });
}

void HeadClient::RequestLease(const protocol::RequestLeaseRequest& request, LeaseCallback done) {
  Call<protocol::RequestLeaseReply>(request, std::move(done));
}

void HeadClient::ReturnLease(const LeaseId& lease_id) {
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

void HeadClient::DropActorName(const std::string& name, const ActorId& actor_id) {
  protocol::DropActorNameRequest req;
  req.name = name;
  req.actor_id = actor_id;
  Call<protocol::DropActorNameReply>(req, [](Result<protocol::DropActorNameReply>) {});
}

void HeadClient::LookupActor(const protocol::GetActorRequest& req, ActorCallback done) {
  Call<protocol::GetActorReply>(req, [done = std::move(done)](Result<protocol::GetActorReply> r) {
    if (!r.ok()) return done(r.status());
    done(std::move(r->actor));
  });
}

}  // namespace rayx::detail
