// The head's typed dispatch: envelope, authentication, decoding and error replies.
#include "head/request_router.h"

#include <cstdio>


namespace rayx::scheduler {

using transport::FrameView;
using transport::Frames;

RequestRouter::RequestRouter(Options options, SessionCheck registered)
    : options_(std::move(options)), registered_(std::move(registered)) {}

std::string RequestRouter::PeerName(const std::string& peer_id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "peer#%06zx", std::hash<std::string>()(peer_id) & 0xffffff);
  return buf;
}

void RequestRouter::LogRejection(const std::string& line) {
  ++rejected_;
  uint64_t suppressed = 0;
  if (reject_log_limiter_.Allow(std::chrono::steady_clock::now(), &suppressed)) {
    if (suppressed > 0) {
      RAYX_LOG(Warning) << suppressed << " more rejected messages were not logged";
    }
    RAYX_LOG(Warning) << line;
    return;
  }
  if (++suppressed_since_flush_ == 1) {
    RAYX_LOG(Warning) << "too many rejected messages: logging at most 20 per 10 s; the rest "
                         "are counted and summarized";
  }
  last_suppressed_ = line;
}

void RequestRouter::FlushRejectionLog() {
  if (suppressed_since_flush_ == 0) return;
  RAYX_LOG(Warning) << "suppressed " << suppressed_since_flush_
                    << " rejected-message log lines; the latest: " << last_suppressed_;
  suppressed_since_flush_ = 0;
}

Frames RequestRouter::Refuse(const Status& status, const Call& call) {
  LogRejection("refused " + call.what + " from " + call.peer + ": " + status.ToString());
  return transport::MakeErrorMessage(status, options_.where, call.id);
}

Result<protocol::Envelope> RequestRouter::DecodeEnvelope(const Frames& frames,
                                                         const std::string& peer_id) {
  if (frames.size() < 2) {
    return Status::InvalidArgument("dropped a " + std::to_string(frames.size()) +
                                   "-frame message from " + PeerName(peer_id) +
                                   ": expected [envelope][body]");
  }
  auto env = protocol::Decode<protocol::Envelope>(FrameView(frames[0]));
  if (!env.ok()) {
    return Status::InvalidArgument("dropped a message from " + PeerName(peer_id) +
                                   " with an undecodable envelope: " + env.status().message());
  }
  return env;
}

std::optional<Frames> RequestRouter::Dispatch(Frames& frames, const std::string& peer_id,
                                              const transport::Principal& principal) {
  auto env = DecodeEnvelope(frames, peer_id);
  if (!env.ok()) {
    ++handled_;
    LogRejection(env.status().message());
    return std::nullopt;
  }
  return Dispatch(*env, frames, peer_id, principal);
}

std::optional<Frames> RequestRouter::Dispatch(const protocol::Envelope& envelope, Frames& frames,
                                              const std::string& peer_id,
                                              const transport::Principal& principal) {
  ++handled_;
  const std::string peer = PeerName(peer_id);
  Call call{peer_id, principal, peer, envelope.id, protocol::MessageTypeName(envelope.t), frames};
  call.what = call.type_name;
  if (Status version = protocol::CheckProtocolVersion(envelope, "this head"); !version.ok()) {
    return Refuse(version, call);
  }
  auto it = routes_.find(envelope.t);
  if (it == routes_.end()) {
    return Refuse(
        Status::InvalidArgument("unknown message type " + call.type_name + " for the head"), call);
  }
  const Route& route = it->second;
  std::string_view body = FrameView(frames[1]);
  Status refused;
  switch (route.auth) {
    case Auth::kCluster:
      if (!principal.is_cluster()) refused = Status::Unauthenticated(route.refusal);
      break;
    case Auth::kMember:
      if (!principal.valid()) refused = Status::Unauthenticated(route.refusal);
      break;
    case Auth::kSession:
      if (!principal.valid() || !registered_(peer_id, principal)) {
        refused = Status::Unauthenticated(route.refusal);
      }
      break;
  }
  if (!refused.ok()) {
    if (route.silent) return std::nullopt;
    return Refuse(refused, call);
  }
  auto reply = route.run(body, route.limits, call);
  if (reply.ok()) return std::move(*reply);
  if (route.silent) return std::nullopt;
  if (call.rejected) return Refuse(reply.status(), call);
  return transport::MakeErrorMessage(reply.status(), options_.where, call.id);
}

}  // namespace rayx::scheduler
