// The CLI's driver connection to the head.
#include "cluster_client.h"

#include <algorithm>

#include "common/address.h"
#include "common/process_control.h"
#include "common/session_dir.h"
#include "rayx/version.h"
#include "transport/zmq_frame.h"

namespace rayx::cli {

namespace {
// The longest one wait on the head's socket lasts before the connection's
// events are looked at again.
constexpr int64_t kReceiveSliceMs = 250;
}  // namespace

using transport::Credential;
using transport::Frames;
using transport::FrameView;

ClusterClient::ClusterClient(std::string address, std::string token)
    : address_(std::move(address)), token_(std::move(token)), head_(context_, zmq::socket_type::dealer) {
  head_.set(zmq::sockopt::linger, 0);
  head_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(protocol::kMaxControlFrameBytes));
  // A fixed routing id: a restarted head that restored this job's leases sends
  // their notices (process exits) to the same peer once it registered again.
  head_.set(zmq::sockopt::routing_id, "rayx-" + detail::RandomHex(12));
  transport::MakeClient(head_, transport::ClientSecurity::ClusterToHead(token_));
  head_handshakes_ =
      std::make_unique<transport::HandshakeWatch>(context_, head_, /*successes=*/true);
}

ClusterClient::~ClusterClient() {
  if (!finished_ && !job_id_.IsNil()) (void)FinishJob(2000);
}

Result<std::unique_ptr<ClusterClient>> ClusterClient::Connect(const std::string& address,
                                                              const std::string& token,
                                                              int64_t timeout_ms) {
  auto hp = ParseHostPort(address);
  if (!hp.ok()) return hp.status();
  std::unique_ptr<ClusterClient> client(new ClusterClient(hp->ToString(), token));
  try {
    client->head_.connect(hp->ZmqEndpoint());
  } catch (const zmq::error_t& e) {
    return Status::InvalidArgument("cannot connect to " + hp->ToString() + ": " + e.what());
  }
  protocol::RegisterDriverRequest req;
  req.token = token;
  req.rayx_version = kRayxVersion;
  req.pid = static_cast<int32_t>(getpid());
  // The agent on this machine watches this process: when it is killed, its
  // job (a launch's ranks) ends at once, not after the heartbeat silence.
  auto head_ip = ResolveIpv4(hp->host);
  auto local_ip = head_ip.ok() ? LocalAddressToward(*head_ip) : head_ip.status();
  req.node_ip = local_ip.ok() ? *local_ip : "";
  auto reply = client->Call<protocol::RegisterDriverReply>(req, timeout_ms);
  if (!reply.ok()) {
    if (reply.status().code() == StatusCode::kUnavailable) {
      return Status::Unavailable("no rayx head answered at " + hp->ToString() + " within " +
                                 std::to_string(timeout_ms) + " ms: start one with `rayx start "
                                 "--head`, or pass --address HOST:PORT");
    }
    return reply.status();
  }
  client->job_id_ = reply->job_id;
  client->data_mode_ = reply->wire_security ? transport::WireSecurity::kEncrypted
                                            : transport::WireSecurity::kAuthenticated;
  client->registration_ = req;
  client->registration_.job_id = reply->job_id;
  client->heartbeat_period_ms_ = std::max<int64_t>(reply->heartbeat_period_ms, 10);
  client->next_heartbeat_ = std::chrono::steady_clock::now();
  client->last_heard_ = std::chrono::steady_clock::now();
  return client;
}

void ClusterClient::SendFrames(Frames& frames) {
  try {
    (void)transport::SendFrames(head_, frames, zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
  }
}

std::optional<Frames> ClusterClient::Receive(int64_t timeout_ms) {
  // A new connection to the head (it restarted): heartbeat at once, so that
  // a restarted head hears from this job, which registers again, now rather
  // than a heartbeat period later (its notices, rank exits, wait till then).
  if (const uint64_t n = head_handshakes_->Succeeded(); n != handshakes_) {
    if (handshakes_ != 0 || n > 1) next_heartbeat_ = std::chrono::steady_clock::now();
    handshakes_ = n;
  }
  // Polled in short slices, so a new connection is seen within one.
  timeout_ms = std::min<int64_t>(timeout_ms, kReceiveSliceMs);
  zmq::pollitem_t item{head_.handle(), 0, ZMQ_POLLIN, 0};
  try {
    zmq::poll(&item, 1, std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0)));
    if (!(item.revents & ZMQ_POLLIN)) return std::nullopt;
    Frames frames = transport::ReceiveFrames(head_);
    if (frames.size() < 2) return std::nullopt;
    last_heard_ = std::chrono::steady_clock::now();
    if (IdOf(frames) != 0 && IdOf(frames) == reregister_id_) {
      reregister_id_ = 0;
      if (!AsError(frames).ok()) job_alive_ = false;  // the restarted head lost the job
      return std::nullopt;
    }
    if (IdOf(frames) != 0 && IdOf(frames) == heartbeat_id_) {
      Status error = AsError(frames);
      if (protocol::IsRegisterFirst(error)) {
        // The head restarted: register again as this job (once at a time).
        if (reregister_id_ == 0) {
          reregister_id_ = ++next_id_;
          transport::Frames again = transport::MakeMessage(registration_, reregister_id_);
          SendFrames(again);
        }
        next_heartbeat_ = std::chrono::steady_clock::now();  // confirm it soon
        return std::nullopt;
      }
      auto hb = protocol::Decode<protocol::DriverHeartbeatReply>(FrameView(frames[1]));
      if (!error.ok() || (hb.ok() && !hb->known)) job_alive_ = false;
      return std::nullopt;
    }
    return frames;
  } catch (const zmq::error_t&) {
    return std::nullopt;
  }
}

void ClusterClient::MaybeHeartbeat() {
  auto now = std::chrono::steady_clock::now();
  if (job_id_.IsNil() || finished_ || now < next_heartbeat_) return;
  next_heartbeat_ = now + std::chrono::milliseconds(heartbeat_period_ms_);
  protocol::DriverHeartbeatRequest req;
  req.job_id = job_id_;
  heartbeat_id_ = Send(req);
  // The head forgets a job after 5 heartbeat periods of silence; a head silent
  // for much longer than that is gone.
  if (now - last_heard_ > std::chrono::milliseconds(30 * heartbeat_period_ms_ + 10000)) {
    job_alive_ = false;
  }
}

std::optional<Frames> ClusterClient::Next(int64_t timeout_ms) {
  MaybeHeartbeat();
  if (!inbox_.empty()) {
    Frames frames = std::move(inbox_.front());
    inbox_.pop_front();
    return frames;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now()).count();
    auto frames = Receive(std::min<int64_t>(std::max<int64_t>(left, 0), heartbeat_period_ms_));
    if (frames) return frames;
    MaybeHeartbeat();
    if (left <= 0) return std::nullopt;
  }
}

Result<Frames> ClusterClient::WaitFor(uint64_t id, int64_t timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    MaybeHeartbeat();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      if (std::string why = head_handshakes_->Failure(); !why.empty()) {
        return Status::Unauthenticated("the rayx head at " + address_ +
                                       " did not let this process in: " + why);
      }
      return Status::Unavailable("the rayx head at " + address_ + " did not answer within " +
                                 std::to_string(timeout_ms) + " ms");
    }
    if (std::string why = head_handshakes_->Failure(); !why.empty()) {
      return Status::Unauthenticated("the rayx head at " + address_ +
                                     " did not let this process in: " + why);
    }
    auto frames = Receive(std::min<int64_t>(left, heartbeat_period_ms_));
    if (!frames) continue;
    if (IdOf(*frames) == id) return std::move(*frames);
    if (inbox_.size() < 100000) inbox_.push_back(std::move(*frames));
  }
}

Status ClusterClient::FinishJob(int64_t timeout_ms) {
  if (finished_ || job_id_.IsNil()) return Status::OK();
  finished_ = true;
  protocol::FinishJobRequest req;
  req.job_id = job_id_;
  auto reply = Call<protocol::FinishJobReply>(req, timeout_ms);
  if (!reply.ok() && protocol::IsRegisterFirst(reply.status())) {
    // The head restarted since this client last spoke to it: register again
    // as this job, then end it.
    auto registered = Call<protocol::RegisterDriverReply>(registration_, timeout_ms);
    if (!registered.ok()) return registered.status();
    reply = Call<protocol::FinishJobReply>(req, timeout_ms);
  }
  return reply.ok() ? Status::OK() : reply.status();
}

Result<Frames> ClusterClient::CallAgentFrames(const std::string& object_address,
                                              Frames request, int64_t timeout_ms) {
  auto it = agents_.find(object_address);
  if (it == agents_.end()) {
    zmq::socket_t socket(context_, zmq::socket_type::dealer);
    socket.set(zmq::sockopt::linger, 0);
    try {
      Credential cluster = Credential::Cluster(token_);
      transport::MakeClient(socket, data_mode_, cluster, cluster.CurvePublicKey());
      socket.connect(object_address);
    } catch (const zmq::error_t& e) {
      return Status::InvalidArgument("cannot connect to the node agent at " + object_address +
                                     ": " + e.what());
    }
    it = agents_.emplace(object_address, std::move(socket)).first;
  }
  zmq::socket_t& socket = it->second;
  uint64_t id = IdOf(request);
  try {
    (void)transport::SendFrames(socket, request, zmq::send_flags::dontwait);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) break;
      // A slow agent never holds up the job's heartbeat: waits are sliced.
      MaybeHeartbeat();
      zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(std::min<int64_t>(left, 100)));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      Frames reply = transport::ReceiveFrames(socket);
      if (reply.size() < 2) continue;
      if (IdOf(reply) != id) continue;  // late reply to an earlier call
      Status status = AsError(reply);
      if (!status.ok()) return status;
      return reply;
    }
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("talking to the node agent at " + object_address +
                               " failed: " + e.what());
  }
  // A lost reply must not be mistaken for a later one: start a fresh socket.
  agents_.erase(object_address);
  return Status::Unavailable("the node agent at " + object_address + " did not answer within " +
                             std::to_string(timeout_ms) + " ms");
}

Status ClusterClient::AsError(const Frames& frames) {
  if (frames.size() < 2 || TypeOf(frames) != static_cast<uint16_t>(protocol::MessageType::kErrorReply)) {
    return Status::OK();
  }
  auto error = protocol::Decode<protocol::ErrorReply>(FrameView(frames[1]));
  return error.ok() ? error->ToStatus() : error.status();
}

uint16_t ClusterClient::TypeOf(const Frames& frames) {
  if (frames.empty()) return 0;
  auto env = protocol::Decode<protocol::Envelope>(FrameView(frames[0]));
  return env.ok() ? env->t : 0;
}

uint64_t ClusterClient::IdOf(const Frames& frames) {
  if (frames.empty()) return 0;
  auto env = protocol::Decode<protocol::Envelope>(FrameView(frames[0]));
  return env.ok() ? env->id : 0;
}

Result<std::pair<std::string, std::string>> ResolveCluster(std::string address,
                                                           const TokenFlags& token_flags,
                                                           const std::string& temp_dir) {
  if (address.empty()) {
    if (const char* a = std::getenv("RAYX_ADDRESS")) address = a;
  }
  auto given = token_flags.Resolve();
  if (!given.ok()) return given.status();
  std::string token = *given;
  if (address.empty()) {
    auto local = detail::FindLocalCluster(temp_dir);
    if (!local.ok()) return local.status();
    address = local->address;
    if (token.empty()) token = local->token;
  }
  auto hp = ParseHostPort(address, kDefaultHeadPort);
  if (!hp.ok()) return hp.status();
  address = hp->ToString();
  if (token.empty()) {
    if (auto t = detail::FindTokenFor(temp_dir, address)) token = *t;
  }
  if (token.empty()) {
    return Status::InvalidArgument("no cluster token for " + address +
                                   ": set RAYX_TOKEN or pass --token-file FILE (the token is in "
                                   "the head machine's session: `rayx start --head` says where)");
  }
  return std::make_pair(address, token);
}

Result<std::unique_ptr<transport::SyncClient>> ConnectToHead(const std::string& address,
                                                             const std::string& token) {
  auto hp = ParseHostPort(address);
  if (!hp.ok()) return hp.status();
  return transport::SyncClient::Connect(*hp, transport::ClientSecurity::ClusterToHead(token));
}

Result<transport::ClientSecurity> AgentSecurityOf(transport::SyncClient& head,
                                                  const std::string& token) {
  auto status = head.Call<protocol::GetClusterStatusReply>(protocol::GetClusterStatusRequest{},
                                                           5000);
  if (!status.ok()) return status.status();
  auto mode = transport::ParseWireSecurity(status->status.wire_security);
  if (!mode.ok()) return mode.status();
  transport::Credential cluster = transport::Credential::Cluster(token);
  std::string key = cluster.CurvePublicKey();
  return transport::ClientSecurity::ObjectServer(*mode, std::move(cluster), std::move(key));
}

}  // namespace rayx::cli
