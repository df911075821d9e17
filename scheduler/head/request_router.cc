// The head's typed dispatch: envelope, authentication, decoding and error replies.
#include "head/request_router.h"

#include <cstdio>

#include <msgpack.hpp>

namespace rayx::scheduler {

using transport::FrameView;
using transport::Frames;

namespace {

// Finds the top-level "token" string of a map, skipping everything else
// without allocating; gives up on anything that is not a map or is nested
// deeper or wider than the decode limits allow.
class TokenVisitor : public msgpack::null_visitor {
 public:
  bool start_array(uint32_t n) {
    return depth_ > 0 && n <= limits_.max_array && Enter();
  }
  bool end_array() { return Leave(); }
  bool start_map(uint32_t n) { return n <= limits_.max_map && Enter(); }
  bool end_map() { return Leave(); }
  bool start_map_key() {
    in_key_ = depth_ == 1;
    return true;
  }
  bool end_map_key() {
    in_key_ = false;
    return true;
  }
  bool end_map_value() {
    if (depth_ == 1) next_is_token_ = false;
    return true;
  }
  bool visit_str(const char* data, uint32_t size) {
    if (size > limits_.max_str) return false;
    std::string_view s(data, size);
    if (in_key_) {
      next_is_token_ = s == "token";
    } else if (depth_ == 1 && next_is_token_) {
      token_ = s;
    }
    return true;
  }
  std::string_view token() const { return token_; }

 private:
  bool Enter() { return ++depth_ <= limits_.max_depth; }
  bool Leave() {
    --depth_;
    return true;
  }

  protocol::DecodeLimits limits_;
  size_t depth_ = 0;
  bool in_key_ = false;
  bool next_is_token_ = false;
  std::string_view token_;
};

}  // namespace

Result<std::string_view> PeekToken(std::string_view body) {
  TokenVisitor visitor;
  size_t offset = 0;
  bool parsed = false;
  try {
    parsed = msgpack::parse(body.data(), body.size(), offset, visitor);
  } catch (const std::exception&) {
    parsed = false;
  }
  if (!parsed || offset != body.size()) {
    return Status::InvalidArgument("the body is not one msgpack map within the limits");
  }
  return visitor.token();
}

RequestRouter::RequestRouter(Options options, PeerCheck authenticated)
    : options_(std::move(options)), authenticated_(std::move(authenticated)) {
  RAYX_CHECK(!options_.token.empty()) << "the head needs a cluster token";
}

bool RequestRouter::TokenMatches(std::string_view presented) const {
  // Constant time in the token's content, so timing does not leak a prefix.
  const std::string& want = options_.token;
  unsigned diff = presented.size() == want.size() ? 0 : 1;
  for (size_t i = 0; i < want.size(); ++i) {
    diff |= static_cast<unsigned char>(want[i]) ^
            static_cast<unsigned char>(i < presented.size() ? presented[i] : 0);
  }
  return diff == 0;
}

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

std::optional<Frames> RequestRouter::Dispatch(Frames& frames, const std::string& peer_id) {
  auto env = DecodeEnvelope(frames, peer_id);
  if (!env.ok()) {
    ++handled_;
    LogRejection(env.status().message());
    return std::nullopt;
  }
  return Dispatch(*env, frames, peer_id);
}

std::optional<Frames> RequestRouter::Dispatch(const protocol::Envelope& envelope, Frames& frames,
                                              const std::string& peer_id) {
  ++handled_;
  const std::string peer = PeerName(peer_id);
  Call call{peer_id, peer, envelope.id, protocol::MessageTypeName(envelope.t), frames};
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
  if (route.auth == Auth::kAuthenticatedPeer && !authenticated_(peer_id)) {
    refused = Status::Unauthenticated(route.refusal);
  } else if (route.auth == Auth::kToken ||
             (route.auth == Auth::kPeerOrToken && !authenticated_(peer_id))) {
    auto token = PeekToken(body);
    if (!token.ok()) {
      refused = Status::InvalidArgument("malformed " + call.type_name + ": " +
                                        token.status().message());
    } else if (!TokenMatches(*token)) {
      refused = Status::Unauthenticated(route.refusal);
    }
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
