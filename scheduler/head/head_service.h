// The head's request handling, apart from its sockets: frames in, reply out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>

#include "common/clock.h"
#include "common/logging.h"
#include "head/job_manager.h"
#include "head/lease_manager.h"
#include "head/node_table.h"
#include "protocol/messages.h"
#include "transport/zmq_socket_loop.h"

namespace rayx::scheduler {

struct HeadServiceOptions {
  // The cluster token every hello must carry. REQUIRES: non-empty.
  std::string token;
  // Random id of this cluster, shown by `rayx status`.
  std::string cluster_id;
  // How often agents heartbeat. Default 250 ms.
  int64_t heartbeat_period_ms = 250;
  NodeTable::Options nodes;
  // Names this head in error replies: "head 10.0.0.1".
  std::string where = "head";
  // Jobs and leases.
  LeaseManager::Options leases;
  // Submitted jobs and their working directory packages.
  JobManager::Options jobs;
};

// Decodes each request, applies it to the node table and builds the reply.
// Hostile input never throws or aborts: a request whose envelope does not decode
// is dropped (there is no request id to answer); any other bad request gets an
// ErrorReply. Every drop or refusal is logged, rate-limited so a flood cannot
// fill the disk. Owned by the head's event loop; not thread-safe.
class HeadService {
 public:
  HeadService(HeadServiceOptions options, const Clock& clock);

  // Where messages that are not the immediate reply go (deferred lease grants,
  // requests to agents). `peer` is a routing id as passed to Handle. Default:
  // dropped.
  void SetOutbox(LeaseManager::SendFn send) { send_ = std::move(send); }
  // The "host:port" workers use to reach the head.
  void SetHeadAddress(const std::string& address) { leases_.SetHeadAddress(address); }

  // Handles one message (routing frame already removed). Returns the reply to
  // send back now, or nullopt when there is none (dropped, or answered later
  // through the outbox). `peer` is the sender's routing id.
  std::optional<transport::Frames> Handle(transport::Frames& frames, const std::string& peer);

  // Declares silent nodes dead; called once per heartbeat period. Also writes
  // the summary of rejection log lines suppressed in the last 10 s.
  void ExpireSilentNodes();

  // Logs how many rejections were not logged line by line, and the latest one.
  void FlushRejectionLog();

  const NodeTable& nodes() const { return nodes_; }
  const LeaseManager& leases() const { return leases_; }
  // Messages dropped or refused since start (for tests and metrics).
  uint64_t rejected_count() const { return rejected_; }

 private:
  transport::Frames OnRegister(const protocol::RegisterNodeRequest& req, uint64_t id,
                               const std::string& peer);
  transport::Frames OnHeartbeat(const protocol::HeartbeatRequest& req, uint64_t id);
  transport::Frames OnUnregister(const protocol::UnregisterNodeRequest& req, uint64_t id);
  transport::Frames OnGetClusterStatus(const protocol::GetClusterStatusRequest& req,
                                       uint64_t id, const std::string& peer);
  transport::Frames Refuse(const Status& status, uint64_t id, const std::string& peer,
                           const std::string& what);
  std::optional<transport::Frames> HandleSubmittedJobMessage(uint16_t type, std::string_view body,
                                                             uint64_t id, const std::string& peer,
                                                             const transport::Frames& frames);
  std::optional<transport::Frames> HandleJobMessage(uint16_t type, std::string_view body,
                                                    uint64_t id, const std::string& peer);
  bool TokenMatches(const std::string& presented) const;
  static std::string PeerName(const std::string& peer);
  void LogRejection(const std::string& line);

  HeadServiceOptions options_;
  const Clock& clock_;
  NodeTable nodes_;
  LeaseManager::SendFn send_ = [](const std::string&, transport::Frames) {};
  LeaseManager leases_;
  JobManager jobs_;
  // Routing ids that presented the token (agents and drivers). Job and lease
  // messages from any other peer are refused.
  std::unordered_set<std::string> authenticated_peers_;
  int64_t started_ms_;
  uint64_t rejected_ = 0;
  uint64_t handled_ = 0;
  detail::LogRateLimiter reject_log_limiter_{20, std::chrono::seconds(10)};
  uint64_t suppressed_since_flush_ = 0;
  std::string last_suppressed_;
  int64_t last_flush_ms_ = 0;
};

}  // namespace rayx::scheduler
