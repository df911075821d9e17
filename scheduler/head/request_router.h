// The head's typed dispatch: each message type registered once with its request
// type, its authentication rule and its handler.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "common/logging.h"
#include "protocol/codec.h"
#include "protocol/messages.h"
#include "rayx/status.h"
#include "transport/message.h"
#include "transport/security.h"

namespace rayx::scheduler {

// Who may send a message type. Checked before the body is decoded, against
// the principal the sender's connection proved (ZAP, transport/security.h):
// nothing reaches the router from a connection that proved nothing.
enum class Auth {
  kCluster,  // holders of the cluster token: daemons, the CLI, drivers
  kMember,   // the cluster or a job (a job's workers); handlers scope a job to itself
  kSession,  // a connection that registered (a node or a runtime) as the same principal
};

// A handler's answer when there is no reply now: the request is parked and
// answered later through the outbox, or it is a notice that has no reply.
struct NoReply {};

// A reply followed by one raw payload frame (never copied into msgpack).
template <typename Reply>
struct ReplyWithPayload {
  Reply reply;
  std::string payload;
};

template <typename T>
struct IsOptionalReply : std::false_type {};
template <typename Reply>
struct IsOptionalReply<std::optional<Reply>> : std::true_type {};

template <typename T>
struct IsReplyWithPayload : std::false_type {};
template <typename Reply>
struct IsReplyWithPayload<ReplyWithPayload<Reply>> : std::true_type {};

// One request being handled: who sent it and which frames it came in.
struct Call {
  const std::string& peer_id;  // routing id: the key for later answers
  const transport::Principal& principal;  // who the sender's connection proved to be
  std::string peer;            // printable name of the sender, for logs
  uint64_t id = 0;             // request id, echoed in the reply
  std::string type_name;
  const transport::Frames& frames;
  // Set by Reject: the error is logged (rate-limited) and counted as a refusal.
  bool rejected = false;
  std::string what;  // how a refusal names the request in the log

  // Marks this call refused and returns `status` (an error). Use for hostile or
  // misconfigured senders; plain "not found"-style answers just return a Status.
  Status Reject(Status status, std::string what_for_log = "") {
    rejected = true;
    if (!what_for_log.empty()) what = std::move(what_for_log);
    return status;
  }
  // The raw frame after the body, or empty.
  std::string_view Payload() const {
    return frames.size() > 2 ? transport::FrameView(frames[2]) : std::string_view();
  }
};

// Design: the envelope, the protocol version, the authentication rule, the body's
// decoding and the ErrorReply are handled here once for every message type; a
// handler sees a decoded request and returns its reply (or an error Status, or
// NoReply). The rule is checked against the connection's principal before the
// body is parsed. Sessions (kSession) are bound to the connection's principal:
// a routing id that registered as one principal is not that session for a
// connection that proved another (a job cannot take over a driver's session by
// presenting its routing id).
//
// Hostile input never throws: a message whose envelope does not decode is
// dropped (there is no request id to answer), any other bad request gets an
// ErrorReply. Refusals are logged, rate-limited so a flood cannot fill the disk.
// Owned by the head's event loop; not thread-safe.
class RequestRouter {
 public:
  struct Options {
    std::string where;  // names the head in error replies
  };
  // True when the routing id registered before as `principal`.
  using SessionCheck =
      std::function<bool(const std::string& peer_id, const transport::Principal& principal)>;

  RequestRouter(Options options, SessionCheck registered);

  // Registers the handler of Req (a protocol struct with kType). `refusal` is the
  // Unauthenticated message for a sender that fails `auth`. `Fn` is called as
  // fn(const Req&, Call&) and returns Result<R>, where R is a protocol reply, a
  // ReplyWithPayload<...> or NoReply.
  template <typename Req, typename Fn>
  void Add(Auth auth, std::string refusal, Fn fn) {
    Add<Req>(Req::kType, auth, std::move(refusal), std::move(fn));
  }
  template <typename Req, typename Fn>
  void Add(protocol::MessageType type, Auth auth, std::string refusal, Fn fn);

  // Registers a message type whose failures are never answered (errors agents
  // send back: answering an error with an error could loop).
  void SetSilent(protocol::MessageType type) { routes_.at(static_cast<uint16_t>(type)).silent = true; }
  // Decodes the body of `type` with `limits` instead of the defaults (a message
  // whose handler gives a clearer error for an oversized field).
  void SetDecodeLimits(protocol::MessageType type, protocol::DecodeLimits limits) {
    routes_.at(static_cast<uint16_t>(type)).limits = limits;
  }

  // Handles one message (routing frame already removed). Returns the reply to
  // send now, or nullopt (dropped, a notice, or answered later).
  // `principal` is who the sender's connection proved to be.
  std::optional<transport::Frames> Dispatch(transport::Frames& frames, const std::string& peer_id,
                                            const transport::Principal& principal);
  // The same with the envelope already decoded by a caller that looked at it
  // first. REQUIRES: `envelope` is DecodeEnvelope(frames, peer_id).
  std::optional<transport::Frames> Dispatch(const protocol::Envelope& envelope,
                                            transport::Frames& frames, const std::string& peer_id,
                                            const transport::Principal& principal);
  // The message's envelope, or InvalidArgument saying why the message is
  // dropped (too few frames, an undecodable envelope).
  static Result<protocol::Envelope> DecodeEnvelope(const transport::Frames& frames,
                                                   const std::string& peer_id);

  static std::string PeerName(const std::string& peer_id);

  // Logs a refused or dropped message (rate-limited) and counts it.
  void LogRejection(const std::string& line);
  // Logs how many rejections were not logged line by line, and the latest one.
  void FlushRejectionLog();

  uint64_t rejected_count() const { return rejected_; }
  uint64_t handled_count() const { return handled_; }

 private:
  using Run = std::function<Result<std::optional<transport::Frames>>(
      std::string_view body, const protocol::DecodeLimits& limits, Call& call)>;
  struct Route {
    Auth auth = Auth::kCluster;
    std::string refusal;
    bool silent = false;
    protocol::DecodeLimits limits;
    Run run;
  };

  template <typename R>
  static std::optional<transport::Frames> Encode(R reply, uint64_t id);

  transport::Frames Refuse(const Status& status, const Call& call);

  Options options_;
  SessionCheck registered_;
  std::unordered_map<uint16_t, Route> routes_;
  uint64_t rejected_ = 0;
  uint64_t handled_ = 0;
  detail::LogRateLimiter reject_log_limiter_{20, std::chrono::seconds(10)};
  uint64_t suppressed_since_flush_ = 0;
  std::string last_suppressed_;
};

template <typename R>
std::optional<transport::Frames> RequestRouter::Encode(R reply, uint64_t id) {
  if constexpr (std::is_same_v<R, NoReply>) {
    return std::nullopt;
  } else if constexpr (IsOptionalReply<R>::value) {  // a reply only when there is one
    if (!reply) return std::nullopt;
    return transport::MakeMessage(*reply, id);
  } else if constexpr (IsReplyWithPayload<R>::value) {
    transport::Frames out = transport::MakeMessage(reply.reply, id);
    out.push_back(transport::MakeFrame(reply.payload));
    return out;
  } else {
    return transport::MakeMessage(reply, id);
  }
}

template <typename Req, typename Fn>
void RequestRouter::Add(protocol::MessageType type, Auth auth, std::string refusal, Fn fn) {
  Route route;
  route.auth = auth;
  route.refusal = std::move(refusal);
  route.run = [fn = std::move(fn)](std::string_view body, const protocol::DecodeLimits& limits,
                                   Call& call) -> Result<std::optional<transport::Frames>> {
    auto req = protocol::Decode<Req>(body, limits);
    if (!req.ok()) {
      return call.Reject(
          Status::InvalidArgument("malformed " + call.type_name + ": " + req.status().message()));
    }
    auto reply = fn(*req, call);
    if (!reply.ok()) return reply.status();
    return Encode(std::move(*reply), call.id);
  };
  bool added = routes_.emplace(static_cast<uint16_t>(type), std::move(route)).second;
  RAYX_CHECK(added) << "message type " << protocol::MessageTypeName(static_cast<uint16_t>(type))
                    << " registered twice";
}

}  // namespace rayx::scheduler
