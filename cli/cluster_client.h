// The CLI's connection to a cluster as a job's driver (rayx launch, rayx job):
// requests to the head, the notices it pushes, and calls to node agents.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "protocol/codec.h"
#include "protocol/messages.h"
#include "rayx/status.h"
#include "transport/message.h"
#include "token_flags.h"
#include "transport/security.h"
#include "transport/sync_client.h"

namespace rayx::cli {

// Registers a new job with the head on Connect and heartbeats for it while the
// caller keeps calling Next (the job ends when this process stops heartbeating:
// a killed CLI leaves nothing running). Single-threaded.
class ClusterClient {
 public:
  // Returns Unavailable when no head answers, Unauthenticated for a wrong token.
  static Result<std::unique_ptr<ClusterClient>> Connect(const std::string& address,
                                                        const std::string& token,
                                                        int64_t timeout_ms);
  ~ClusterClient();

  const JobId& job_id() const { return job_id_; }
  const std::string& address() const { return address_; }

  // Sends a request to the head and returns its id; the reply arrives through
  // Next (or Call).
  template <typename Request>
  uint64_t Send(const Request& request) {
    uint64_t id = ++next_id_;
    transport::Frames frames = transport::MakeMessage(request, id);
    SendFrames(frames);
    return id;
  }
  // Sends and waits for the reply, queueing other messages for Next.
  template <typename Reply, typename Request>
  Result<Reply> Call(const Request& request, int64_t timeout_ms) {
    uint64_t id = Send(request);
    auto frames = WaitFor(id, timeout_ms);
    if (!frames.ok()) return frames.status();
    auto status = AsError(*frames);
    if (!status.ok()) return status;
    return protocol::Decode<Reply>(transport::FrameView((*frames)[1]));
  }
  // The next message from the head (replies to Send, notices), waiting at most
  // `timeout_ms`; heartbeats for the job when due. nullopt on timeout.
  std::optional<transport::Frames> Next(int64_t timeout_ms);
  // False once the head said the job is gone (or stopped answering heartbeats).
  bool job_alive() const { return job_alive_; }
  // Ends the job: the head stops all its workers and processes, everywhere.
  Status FinishJob(int64_t timeout_ms = 5000);

  // A request to a node agent's object server ("tcp://ip:port"). Returns the
  // reply's frames ([envelope][body][payload...]), or the remote error. Keeps
  // heartbeating the job while it waits.
  template <typename Request>
  Result<transport::Frames> CallAgent(const std::string& object_address, const Request& request,
                                      int64_t timeout_ms) {
    return CallAgentFrames(object_address, transport::MakeMessage(request, ++next_id_),
                           timeout_ms);
  }

  // The status carried by an ErrorReply, or OK for any other message.
  static Status AsError(const transport::Frames& frames);
  static uint16_t TypeOf(const transport::Frames& frames);
  static uint64_t IdOf(const transport::Frames& frames);

 private:
  ClusterClient(std::string address, std::string token);
  void SendFrames(transport::Frames& frames);
  Result<transport::Frames> CallAgentFrames(const std::string& object_address,
                                            transport::Frames request, int64_t timeout_ms);
  Result<transport::Frames> WaitFor(uint64_t id, int64_t timeout_ms);
  std::optional<transport::Frames> Receive(int64_t timeout_ms);
  void MaybeHeartbeat();

  std::string address_;
  std::string token_;
  JobId job_id_;
  // Node agents' object servers: the cluster's mechanism (from registration).
  transport::WireSecurity data_mode_ = transport::WireSecurity::kAuthenticated;
  zmq::context_t context_{1};
  zmq::socket_t head_;
  std::unique_ptr<transport::HandshakeWatch> head_handshakes_;
  uint64_t handshakes_ = 0;  // succeeded so far: one more is a new connection
  std::map<std::string, zmq::socket_t> agents_;
  std::deque<transport::Frames> inbox_;
  uint64_t next_id_ = 0;
  int64_t heartbeat_period_ms_ = 1000;
  std::chrono::steady_clock::time_point next_heartbeat_;
  std::chrono::steady_clock::time_point last_heard_;
  uint64_t heartbeat_id_ = 0;
  // After a head restart (a "register first" refusal) the registration is
  // sent again with this job's id; notices then reach this fixed routing id.
  protocol::RegisterDriverRequest registration_;
  uint64_t reregister_id_ = 0;
  bool job_alive_ = true;
  bool finished_ = false;
};

// Where the cluster is and its token: --address, else $RAYX_ADDRESS, else the
// cluster started on this machine; --token-file, else $RAYX_TOKEN, else
// $RAYX_TOKEN_FILE, else this machine's session files. Returns
// {"host:port", token} or an error that says what to pass.
Result<std::pair<std::string, std::string>> ResolveCluster(std::string address,
                                                           const TokenFlags& token_flags,
                                                           const std::string& temp_dir);

// A one-shot connection to the head at `address` as the cluster (status, jobs,
// lists).
Result<std::unique_ptr<transport::SyncClient>> ConnectToHead(const std::string& address,
                                                             const std::string& token);

// How this CLI reaches node agents' object servers: the cluster's mechanism
// (authenticated or encrypted), as the head says.
Result<transport::ClientSecurity> AgentSecurityOf(transport::SyncClient& head,
                                                  const std::string& token);

}  // namespace rayx::cli
