// Blocking request/reply over ZeroMQ.
#include "transport/sync_client.h"

#include <algorithm>

namespace rayx::transport {

SyncClient::SyncClient(const HostPort& address)
    : address_(address), socket_(context_, zmq::socket_type::dealer) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(protocol::kMaxControlFrameBytes));
}

Result<std::unique_ptr<SyncClient>> SyncClient::Connect(const HostPort& address,
                                                        const ClientSecurity& security) {
  std::unique_ptr<SyncClient> client(new SyncClient(address));
  try {
    MakeClient(client->socket_, security);
    client->handshakes_ = std::make_unique<HandshakeWatch>(client->context_, client->socket_);
    client->socket_.connect(address.ZmqEndpoint());
  } catch (const zmq::error_t& e) {
    return Status::InvalidArgument("cannot connect to " + address.ToString() + ": " + e.what());
  }
  return client;
}

Result<std::string> SyncClient::RoundTrip(Frames& frames, uint64_t id, uint16_t want_type,
                                          int64_t timeout_ms, std::string* payload) {
  auto unavailable = [&] {
    if (std::string why = handshakes_ ? handshakes_->Failure() : ""; !why.empty()) {
      return Status::Unauthenticated(address_.ToString() + " did not let this process in: " + why);
    }
    return Status::Unavailable("no reply from " + address_.ToString() + " within " +
                               std::to_string(timeout_ms) +
                               " ms: is a rayx head running there (rayx start --head), and is "
                               "the port reachable from this machine?");
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  try {
    // A DEALER queues while connecting; dontwait only fails at the HWM.
    if (!SendFrames(socket_, frames, zmq::send_flags::dontwait)) return unavailable();
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return unavailable();
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      // A refused handshake is final (the credential will not change): it
      // ends the wait within a poll slice.
      zmq::poll(&item, 1, std::min(left, std::chrono::milliseconds(100)));
      if (!(item.revents & ZMQ_POLLIN)) {
        if (std::string why = handshakes_ ? handshakes_->Failure() : ""; !why.empty()) {
          return Status::Unauthenticated(address_.ToString() + " did not let this process in: " +
                                         why);
        }
        continue;
      }
      Frames reply = ReceiveFrames(socket_);
      if (reply.size() < 2) continue;
      auto env = protocol::Decode<protocol::Envelope>(FrameView(reply[0]));
      if (!env.ok()) return env.status();
      if (env->id != id) continue;  // a late reply to an earlier, timed-out call
      if (env->t == static_cast<uint16_t>(protocol::MessageType::kErrorReply)) {
        auto error = protocol::Decode<protocol::ErrorReply>(FrameView(reply[1]));
        if (!error.ok()) return error.status();
        return error->ToStatus();
      }
      if (env->t != want_type) {
        return Status::InvalidArgument("unexpected reply " + protocol::MessageTypeName(env->t) +
                                       " from " + address_.ToString() + ", expected " +
                                       protocol::MessageTypeName(want_type));
      }
      if (payload && reply.size() > 2) *payload = std::string(FrameView(reply[2]));
      return std::string(FrameView(reply[1]));
    }
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("talking to " + address_.ToString() + " failed: " + e.what());
  }
}

}  // namespace rayx::transport
