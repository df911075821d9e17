// The head's request handling, apart from its sockets: frames in, reply out.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "common/clock.h"
#include "common/work_counters.h"
#include "head/checkpoint_adoption.h"
#include "head/frame_outbox.h"
#include "head/group_watch.h"
#include "head/job_manager.h"
#include "head/kv_store.h"
#include "head/lease_manager.h"
#include "head/node_table.h"
#include "head/output_tail.h"
#include "head/request_dedup.h"
#include "head/request_router.h"
#include "protocol/group_messages.h"
#include "protocol/job_messages.h"
#include "protocol/kv_messages.h"
#include "protocol/messages.h"
#include "protocol/placement_messages.h"
#include "protocol/process_messages.h"
#include "transport/frame.h"

namespace rayx::scheduler {

struct HeadServiceOptions {
  // The cluster token: the head's socket admits its holders and the jobs
  // derived from it (transport/security.h). REQUIRES: non-empty.
  std::string token;
  // How workers and object servers protect their sockets, as nodes and
  // drivers are told (the head's own socket is always encrypted).
  // Default: authenticated (PLAIN).
  transport::WireSecurity wire_security = transport::WireSecurity::kAuthenticated;
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
  // The key-value store's sizes and wait bounds.
  KvLimits kv;
  // Where the head's tables are written through (not owned; must outlive the
  // service), or nullptr to keep them in memory only. Default: none.
  HeadStore* store = nullptr;
  // What `store` held when the head started (HeadStore::Load): the cluster of
  // the head's previous life, restored by the constructor. Its cluster_id
  // replaces `cluster_id`.
  HeadState restored;
};

// Applies each request to the node table, the leases and the jobs, and builds
// the reply. Every message type is registered once with a RequestRouter (its
// request type, who may send it, its handler); the router does the decoding,
// authentication and error replies. Owned by the head's event loop; not
// thread-safe.
class HeadService {
 public:
  HeadService(HeadServiceOptions options, const Clock& clock);

  // Where messages that are not the immediate reply go (deferred lease grants,
  // requests to agents). `peer` is a routing id as passed to Handle. Default:
  // dropped.
  void SetOutbox(FrameOutbox::SendFn send) {
    send_ = send;
    outbox_.SetSend(std::move(send));
  }
  // The "host:port" workers use to reach the head.
  void SetHeadAddress(const std::string& address) { leases_.SetHeadAddress(address); }

  // Handles one message (routing frame already removed). Returns the reply to
  // send back now, or nullopt when there is none (dropped, or answered later
  // through the outbox). `peer` is the sender's routing id.
  // A registered runtime's repeat of a request (sent again after its
  // connection dropped) is answered from RequestDedup instead.
  // `principal` is who the sender's connection proved to be (ZAP).
  std::optional<transport::Frames> Handle(
      transport::Frames& frames, const std::string& peer,
      const transport::Principal& principal = transport::Principal::Cluster());

  // Jobs whose credential the cluster admits: from a job's start until it has
  // ended and none of its leases (detached actors) is left. `observer` hears
  // each change (the head's socket admits exactly these jobs); node agents are
  // told through JobCredentialNotice and RegisterNodeReply::admitted_jobs.
  using CredentialObserver = std::function<void(const JobId& job, bool admitted)>;
  void SetCredentialObserver(CredentialObserver observer) {
    credential_observer_ = std::move(observer);
  }
  const std::unordered_set<JobId>& admitted_jobs() const { return admitted_jobs_; }

  // Declares silent nodes dead and ends KV and placement group waits whose
  // deadline passed; called once per heartbeat period. Also writes the summary
  // of rejection log lines suppressed in the last 10 s.
  void ExpireSilentNodes();

  // Logs how many rejections were not logged line by line, and the latest one.
  void FlushRejectionLog() { router_.FlushRejectionLog(); }

  const NodeTable& nodes() const { return nodes_; }
  const std::string& cluster_id() const { return options_.cluster_id; }
  // What `rayx status` and `rayx list` show (the dashboard reads StatusSnapshot
  // and the lease manager's lists: one snapshot of the nodes per request).
  ClusterStatus StatusSnapshot() const;
  protocol::ListStateReply ListSnapshot() const;
  const JobManager& jobs() const { return jobs_; }
  // The last lines each job's workers printed (for the dashboard).
  const OutputTail& output_tail() const { return output_tail_; }
  // What drivers and nodes' workers did since the head started (tasks
  // submitted, collective operations run), from drivers' and agents'
  // heartbeats (never per task or operation).
  const WorkCounts& work_totals() const { return work_totals_; }
  // Where the dashboard is served, for ClusterStatus::dashboard_url.
  void SetDashboardUrl(std::string url) { dashboard_url_ = std::move(url); }
  const LeaseManager& leases() const { return leases_; }
  const PlacementGroupManager& groups() const { return groups_; }
  const KvStore& kv() const { return kv_; }
  const GroupWatch& group_watch() const { return group_watch_; }
  // The collective groups the head watches, then the newest of those that
  // lost a member (GroupWatch::List), with their jobs.
  std::vector<protocol::CollectiveGroupInfo> ListCollectiveGroups() const;
  static constexpr size_t kMaxListedCollectiveGroups = 1000;
  static constexpr size_t kMaxListedEndedGroups = 50;
  // Messages dropped or refused since start (for tests and metrics).
  uint64_t rejected_count() const { return router_.rejected_count(); }
  // Agent messages dropped because they came from a node incarnation that is
  // not the current one (a node declared dead, or another epoch).
  uint64_t stale_incarnation_count() const { return stale_incarnation_count_; }
  // Requests of runtimes that arrived again and were answered from
  // RequestDedup (or dropped while their first copy is parked).
  uint64_t repeated_request_count() const { return repeated_requests_; }
  const RequestDedup& dedup() const { return dedup_; }
  // Routing ids that registered (agents, drivers, workers' runtimes).
  size_t authenticated_peer_count() const { return sessions_.size(); }

 private:
  // Registers `handler` for its request type: one line per message.
  template <typename Req, typename R>
  void On(Auth auth, std::string refusal, Result<R> (HeadService::*handler)(const Req&, Call&)) {
    On(Req::kType, auth, std::move(refusal), handler);
  }
  template <typename Req, typename R>
  void On(protocol::MessageType type, Auth auth, std::string refusal,
          Result<R> (HeadService::*handler)(const Req&, Call&)) {
    router_.Add<Req>(type, auth, std::move(refusal),
                     [this, handler](const Req& req, Call& call) { return (this->*handler)(req, call); });
  }
  void RegisterRoutes();
  // OK when the sender may act for `job` (the cluster, or that job's own
  // credential); else Unauthenticated naming `what` it tried.
  static Status CheckJob(const JobId& job, const Call& call, const char* what);
  // OK when `peer` is the agent of alive node `node` and `epoch` is its current
  // epoch; otherwise logs and counts the refusal of `what` and returns why.
  Status CheckIncarnation(const std::string& peer, const NodeId& node, uint64_t epoch,
                          const std::string& what);
  // Ends an alive node: its leases and its bundles go (LeaseManager::OnNodeDead).
  void NodeDied(const NodeId& node, const std::string& why);
  // A restarted head's node coming back (RegisterNodeRequest::rejoin).
  Result<protocol::RegisterNodeReply> Rejoin(const protocol::RegisterNodeRequest& req, Call& call);
  protocol::RegisterNodeReply NodeReply(const NodeId& node) const;

  // Nodes.
  Result<protocol::RegisterNodeReply> OnRegisterNode(const protocol::RegisterNodeRequest& req,
                                                     Call& call);
  // Empty when the agent wants no reply and there is nothing to say.
  Result<std::optional<protocol::HeartbeatReply>> OnHeartbeat(
      const protocol::HeartbeatRequest& req, Call& call);
  Result<protocol::UnregisterNodeReply> OnUnregister(const protocol::UnregisterNodeRequest& req,
                                                     Call& call);
  Result<protocol::GetClusterStatusReply> OnGetClusterStatus(
      const protocol::GetClusterStatusRequest& req, Call& call);
  Result<protocol::StopClusterReply> OnStopCluster(const protocol::StopClusterRequest& req,
                                                   Call& call);
  Result<protocol::ListStateReply> OnListState(const protocol::ListStateRequest& req, Call& call);
  Result<NoReply> OnProcessExited(const protocol::ProcessExitedNotice& req, Call& call);
  Result<NoReply> OnDriverExited(const protocol::DriverExitedNotice& req, Call& call);
  Result<NoReply> OnActorConstruction(const protocol::ActorConstructionNotice& req, Call& call);
  // An agent's batch of a job's workers' output: to the job's drivers that
  // asked for it.
  Result<NoReply> OnWorkerOutput(const protocol::WorkerOutputNotice& req, Call& call);
  // A driver about to end its job: every agent reads its workers' output
  // now; the driver is answered once all did (or kOutputFlushMs passed).
  Result<NoReply> OnFlushOutput(const protocol::FlushOutputRequest& req, Call& call);
  Result<NoReply> OnOutputFlushed(const protocol::FlushOutputReply& req, Call& call);
  void ExpireOutputFlushes(int64_t now);
  Result<NoReply> OnAgentError(const protocol::ErrorReply& req, Call& call);
  Result<NoReply> OnStartWorkerReply(const protocol::StartWorkerReply& req, Call& call);
  // Submitted jobs and packages.
  Result<protocol::SubmitJobReply> OnSubmitJob(const protocol::SubmitJobRequest& req, Call& call);
  Result<protocol::GetJobReply> OnGetJob(const protocol::GetJobRequest& req, Call& call);
  Result<protocol::ListJobsReply> OnListJobs(const protocol::ListJobsRequest& req, Call& call);
  Result<protocol::StopJobReply> OnStopJob(const protocol::StopJobRequest& req, Call& call);
  Result<protocol::HasPackageReply> OnHasPackage(const protocol::HasPackageRequest& req,
                                                 Call& call);
  Result<protocol::KeepPackageReply> OnKeepPackage(const protocol::KeepPackageRequest& req,
                                                  Call& call);
  Result<protocol::PutPackageReply> OnPutPackage(const protocol::PutPackageRequest& req,
                                                 Call& call);
  Result<ReplyWithPayload<protocol::GetPackageReply>> OnGetPackage(
      const protocol::GetPackageRequest& req, Call& call);
  // Drivers, leases, actors and placement groups.
  Result<protocol::RegisterDriverReply> OnRegisterDriver(
      const protocol::RegisterDriverRequest& req, Call& call);
  Result<protocol::DriverHeartbeatReply> OnDriverHeartbeat(
      const protocol::DriverHeartbeatRequest& req, Call& call);
  Result<protocol::FinishJobReply> OnFinishJob(const protocol::FinishJobRequest& req, Call& call);
  Result<NoReply> OnRequestLease(const protocol::RequestLeaseRequest& req, Call& call);
  Result<protocol::ReturnLeaseReply> OnReturnLease(const protocol::ReturnLeaseRequest& req,
                                                   Call& call);
  Result<NoReply> OnLeaseBlocked(const protocol::LeaseBlockedNotice& req, Call& call);
  Result<protocol::RegisterActorReply> OnRegisterActor(const protocol::RegisterActorRequest& req,
                                                       Call& call);
  Result<NoReply> OnGetActor(const protocol::GetActorRequest& req, Call& call);
  Result<protocol::DropActorNameReply> OnDropActorName(const protocol::DropActorNameRequest& req,
                                                       Call& call);
  Result<protocol::CreatePlacementGroupReply> OnCreatePlacementGroup(
      const protocol::CreatePlacementGroupRequest& req, Call& call);
  Result<NoReply> OnWaitPlacementGroup(const protocol::WaitPlacementGroupRequest& req,
                                       Call& call);
  Result<protocol::RemovePlacementGroupReply> OnRemovePlacementGroup(
      const protocol::RemovePlacementGroupRequest& req, Call& call);

  // The key-value store.
  Result<protocol::KvPutReply> OnKvPut(const protocol::KvPutRequest& req, Call& call);
  Result<protocol::KvGetReply> OnKvGet(const protocol::KvGetRequest& req, Call& call);
  Result<NoReply> OnKvWait(const protocol::KvWaitRequest& req, Call& call);
  Result<protocol::KvDeleteReply> OnKvDelete(const protocol::KvDeleteRequest& req, Call& call);
  Result<protocol::KvListReply> OnKvList(const protocol::KvListRequest& req, Call& call);
  Result<protocol::CheckpointRecordsReply> OnCheckpointRecords(
      const protocol::CheckpointRecordsRequest& req, Call& call);
  Result<protocol::AdoptCheckpointsReply> OnAdoptCheckpoints(
      const protocol::AdoptCheckpointsRequest& req, Call& call);
  // Sends the answers of waits that ended.
  void AnswerKvWaits(std::vector<KvWaitAnswer> answers);
  // Collective groups' members.
  Result<protocol::WatchGroupReply> OnWatchGroup(const protocol::WatchGroupRequest& req,
                                                 Call& call);
  Result<protocol::UnwatchGroupReply> OnUnwatchGroup(const protocol::UnwatchGroupRequest& req,
                                                     Call& call);

  HeadServiceOptions options_;
  const Clock& clock_;
  NodeTable nodes_;
  FrameOutbox outbox_;
  PlacementGroupManager groups_;  // before leases_, which draw from its bundles
  LeaseManager leases_;
  JobManager jobs_;
  KvStore kv_;
  CheckpointAdoption checkpoint_adoption_{kv_};
  GroupWatch group_watch_;
  // Routing ids that presented the token (agents and drivers). Job and lease
  // messages from any other peer are refused.
  // A registered connection (routing id): who it proved to be, and whether it
  // is a node agent's.
  struct Session {
    transport::Principal principal;
    bool node = false;
  };
  bool IsNodeSession(const std::string& peer) const {
    auto it = sessions_.find(peer);
    return it != sessions_.end() && it->second.node;
  }
  std::unordered_map<std::string, Session> sessions_;
  // A head restored from its state ends leases whose owners have not
  // registered again yet (a rank that exits while `rayx launch` reconnects):
  // their notices wait here, per owner, until it registers again (as the
  // cluster), for kHoldOwnerNoticesMs after the start at most. Bounded.
  bool HoldOwnerNotice(const std::string& peer, transport::Frames& frames);
  void ReleaseOwnerNotices(const std::string& peer);
  std::unordered_map<std::string, std::vector<transport::Frames>> held_notices_;
  bool restored_from_state_ = false;
  FrameOutbox::SendFn send_;
  // Admits `job`'s credential (a new job) and tells the nodes.
  void AdmitJob(const JobId& job);
  // Stops admitting jobs that ended and hold no lease; at most every 10 s.
  void RetireEndedJobs(int64_t now_ms);
  std::unordered_set<JobId> admitted_jobs_;
  CredentialObserver credential_observer_;
  int64_t last_retire_ms_ = 0;
  // The driver and worker runtimes registered for each running job: they are
  // forgotten when it ends (one that goes on must register again), so the set
  // holds live runtimes only.
  std::unordered_map<JobId, std::vector<std::string>> peers_of_job_;
  // The drivers of each job that print its workers' output (log_to_driver).
  std::unordered_map<JobId, std::vector<std::string>> output_peers_of_job_;
  // Output flushes under way, by the id the agents answer.
  struct OutputFlush {
    Requester to;
    std::unordered_set<std::string> waiting;  // agents' routing ids
    int64_t deadline_ms = 0;
  };
  static constexpr int64_t kOutputFlushMs = 1000;
  static constexpr size_t kMaxOutputFlushes = 1024;
  std::unordered_map<uint64_t, OutputFlush> output_flushes_;
  OutputTail output_tail_;
  // Adds what `source`'s counts grew by since its last report to
  // work_totals_. Sources: a driver's routing id, WorkSource(node).
  void CountWork(const std::string& source, const WorkCounts& now);
  static std::string WorkSource(const NodeId& node) { return "node " + node.Hex(); }
  // Each source's last reported counts (a driver's forgotten with its job, a
  // node's when it dies), and the sum of what they grew by.
  std::unordered_map<std::string, WorkCounts> work_counted_;
  WorkCounts work_totals_;
  std::string dashboard_url_;
  uint64_t next_output_flush_ = 0;
  RequestRouter router_;
  // Registered runtimes' requests by id, for the repeats of a dropped connection.
  RequestDedup dedup_;
  uint64_t repeated_requests_ = 0;
  int64_t started_ms_;
  int64_t last_flush_ms_ = 0;
  uint64_t stale_incarnation_count_ = 0;
  // Why the cluster is being stopped (StopClusterRequest); empty while it runs.
  std::string stop_reason_;
};

}  // namespace rayx::scheduler
