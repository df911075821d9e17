// A blocking request/reply client over a ZeroMQ DEALER socket, for one-shot
// callers (the CLI, tests, QueryClusterStatus). Daemons use ZmqSocketLoop.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include <zmq.hpp>

#include "common/address.h"
#include "protocol/codec.h"
#include "rayx/status.h"
#include "transport/message.h"
#include "transport/security.h"
#include "transport/zmq_frame.h"

namespace rayx::transport {

// Not thread-safe; one outstanding call at a time.
class SyncClient {
 public:
  // Connects lazily (ZeroMQ) proving `security`'s credential; fails only on a
  // malformed endpoint. A server that refuses the credential makes calls fail
  // with Unauthenticated (not a timeout).
  static Result<std::unique_ptr<SyncClient>> Connect(const HostPort& address,
                                                      const ClientSecurity& security);

  // Sends `request` and waits up to `timeout_ms` for the matching reply.
  // Returns the remote error as a Status when the peer answered ErrorReply,
  // Unavailable when nobody answered in time, InvalidArgument on a reply that
  // does not decode.
  template <typename Reply, typename Request>
  Result<Reply> Call(const Request& request, int64_t timeout_ms) {
    uint64_t id = ++next_id_;
    Frames frames = MakeMessage(request, id);
    auto raw = RoundTrip(frames, id, static_cast<uint16_t>(Reply::kType), timeout_ms);
    if (!raw.ok()) return raw.status();
    return protocol::Decode<Reply>(*raw);
  }
  // Like Call, with raw payload bytes sent as frame 2 (`payload`) and the
  // reply's frame 2 returned beside it.
  template <typename Reply, typename Request>
  Result<std::pair<Reply, std::string>> CallWithPayload(const Request& request,
                                                        std::string_view payload,
                                                        int64_t timeout_ms) {
    uint64_t id = ++next_id_;
    Frames frames = MakeMessage(request, id);
    frames.push_back(MakeFrame(payload));
    std::string reply_payload;
    auto raw = RoundTrip(frames, id, static_cast<uint16_t>(Reply::kType), timeout_ms,
                         &reply_payload);
    if (!raw.ok()) return raw.status();
    auto reply = protocol::Decode<Reply>(*raw);
    if (!reply.ok()) return reply.status();
    return std::make_pair(std::move(*reply), std::move(reply_payload));
  }

 private:
  explicit SyncClient(const HostPort& address);
  // Returns the reply body bytes of type `want_type`.
  Result<std::string> RoundTrip(Frames& frames, uint64_t id, uint16_t want_type,
                                int64_t timeout_ms, std::string* payload = nullptr);

  HostPort address_;
  zmq::context_t context_{1};
  zmq::socket_t socket_;
  std::unique_ptr<HandshakeWatch> handshakes_;
  uint64_t next_id_ = 0;
};

// One request to `address` ("host:port") and its reply, on a fresh client:
// InvalidArgument for a malformed address, else what SyncClient::Call returns.
template <typename Reply, typename Request>
Result<Reply> CallOnce(const std::string& address, const ClientSecurity& security,
                       const Request& request, int64_t timeout_ms) {
  auto hp = ParseHostPort(address);
  if (!hp.ok()) return hp.status();
  auto client = SyncClient::Connect(*hp, security);
  if (!client.ok()) return client.status();
  return (*client)->template Call<Reply>(request, timeout_ms);
}

}  // namespace rayx::transport
