// The head's jobs, worker leases and named actors.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "head/actor_directory.h"
#include "head/head_outbox.h"
#include "head/job_table.h"
#include "head/lease_scheduler.h"
#include "head/node_table.h"
#include "head/placement_group_manager.h"
#include "protocol/placement_messages.h"
#include "protocol/process_messages.h"
#include "protocol/messages.h"

namespace rayx::scheduler {

// The head itself as a lease owner (a submitted job's entrypoint): hears of
// its leases through these calls, with the request id it chose.
class HeadLeaseOwner {
 public:
  virtual ~HeadLeaseOwner() = default;
  virtual void OnLeaseGranted(uint64_t request_id, const protocol::RequestLeaseReply& grant) = 0;
  virtual void OnLeaseFailed(uint64_t request_id, const Status& status) = 0;
  virtual void OnProcessExited(const protocol::ProcessExitedNotice& notice) = 0;
  // The lease ended unseen: its node was declared dead while it ran, or a
  // lease granted before the head restarted did not come back (its node did
  // not rejoin, or its processes ended while the head was down and the agent
  // did not report how). `why` says which.
  virtual void OnLeaseLost(const LeaseId& lease_id, const std::string& why) = 0;
};

// Design: a lease is a worker process holding resources on one node, granted to
// one caller (a driver or a worker that submits work). The caller then talks to
// the worker directly; the head sees one request per lease, not per task.
//
// A request waits in a FIFO queue while no node has the resources free, and is
// re-examined whenever resources free up or a node joins. A request no alive
// node could ever hold is answered at once with the reason. The checks, the
// policy's decision and the queue are the LeaseScheduler's (lease_scheduler.h);
// this class grants and keeps the leases. Granting is two
// steps: resources are taken on the chosen node, the node's agent is asked to
// start a worker, and the caller gets its reply when the agent reports the
// worker's address.
//
// Jobs: every caller registers under a job and heartbeats. When the job's
// driver finishes or goes silent, every lease of the job is ended (its worker
// killed, its resources freed) except detached actors, which outlive the job.
//
// Restart: with a HeadStore, jobs, leases and named actors are written
// through (a lease when granted, when running, when it ends). A restarted head
// Restores them; the leases of a node wait, unconfirmed, until its agent
// rejoins and reports what still runs (OnNodeRejoined): those are accounted
// again (the same devices, the same bundle), the rest ended; or until the node
// is declared dead (OnNodeDead). Owners keep their leases: drivers connect
// with a fixed routing id, so the owner of a lease is still its owner.
//
// Blocked leases lend their CPU (Ray's rule; lease_manager_lending.cc): while
// the calls in a lease's worker wait in get/wait for objects that are not
// ready (LeaseBlockedNotice from the runtime inside that worker), its CPU
// goes back to its node, or to its placement group bundle, so that the work
// it waits for can be granted; its GPUs, memory and custom resources stay
// held. When it resumes it takes the CPU back at once, overdrawing the node
// (or bundle) if that CPU was granted meanwhile: CPU may be over-committed
// for a while, GPUs and memory never are. The node table (and, inside
// groups, the bundle) is the one book of what is taken; a lease records only
// what it lends (`lent_cpu`). Invariant, checked by CheckAccounting: for
// every alive node and resource, total - available + overdrawn CPU equals the
// bundles reserved there plus each lease outside groups' resources less what
// it lends; within each bundle likewise with its leases. Every path that ends
// a lease (returned, its worker exited or was killed, its node died, its job
// or group ended, its start failed) gives back what it holds now, never the
// CPU it lent, so no CPU is freed twice or lost. A restarted head knows no
// lease as blocked: rejoining nodes account their live leases whole (CPU may
// be overdrawn), and the runtimes tell the new head again after they register
// (a notice that comes before the lease's node rejoined is kept until then).
//
// Owned by the head's event loop; not thread-safe.
class LeaseManager {
 public:
  struct Options {
    int64_t job_timeout_ms = 5000;  // driver silence after which its job ends
    std::string head_address;       // given to workers, "host:port"
  };

  // `groups` (the head's placement groups, whose bundles leases inside
  // groups draw from) and `outbox` must outlive this manager.
  LeaseManager(Options options, NodeTable& nodes, PlacementGroupManager& groups,
               HeadOutbox& outbox);
  // Who hears of the leases the head itself owns (RequestLeaseForHead).
  void SetHeadOwner(HeadLeaseOwner* owner) { head_owner_ = owner; }

  void SetHeadAddress(const std::string& address) { options_.head_address = address; }
  // Called with a job's id when the job ends (after its leases are ended).
  // Called when a job starts (a driver's new job, a submitted job).
  void SetJobStartObserver(std::function<void(const JobId& job_id)> observer) {
    job_start_observer_ = std::move(observer);
  }
  // Calls `fn` with each job that runs or still holds a lease (a detached
  // actor outlives its job), possibly more than once. O(jobs + leases).
  void ForEachLiveJob(const std::function<void(const JobId& job_id)>& fn) const;
  void SetJobEndObserver(std::function<void(const JobId& job_id)> observer) {
    job_end_observer_ = std::move(observer);
  }
  // Called with a lease's id and why it ended, whenever a granted lease ends
  // (returned, its worker or node gone, its job or placement group ended).
  // `job_ended`: it ended because its whole job did.
  using LeaseEndObserver =
      std::function<void(const LeaseId& lease_id, const std::string& cause, bool job_ended)>;
  void SetLeaseEndObserver(LeaseEndObserver observer) {
    lease_end_observer_ = std::move(observer);
  }
  // Called with the routing id of each runtime hosted by a lease that ended
  // (a worker's runtime: it is gone with its worker).
  void SetHostedPeerEndObserver(std::function<void(const std::string& peer)> observer) {
    hosted_peer_end_observer_ = std::move(observer);
  }

  // Writes jobs, leases, named actors and placement groups through to `store`
  // (nullptr: none), which must outlive this manager.
  void SetStore(HeadStore* store);
  // Loads what a previous head life stored (after NodeTable::Restore): jobs
  // (heartbeat time `now_ms`), named actors, placement groups, and the leases,
  // which stay unconfirmed until their node rejoins or dies.
  void Restore(const HeadState& state, int64_t now_ms);
  // A node the head knew before it restarted is back (NodeTable::Rejoin ran):
  // its bundles and the leases its agent still runs (`live`) are accounted
  // again; a live lease the head does not know as granted is killed; a stored
  // lease that no longer runs ends, after applying the process exits the
  // agent reports (`exits`) so their owners hear of them.
  void OnNodeRejoined(const NodeId& node, const std::string& agent_peer,
                      const std::vector<protocol::LiveLease>& live,
                      const std::vector<protocol::ExitedProcess>& exits);

  void OnNodeRegistered(const NodeId& node, const std::string& agent_peer);
  // Once no node is rejoining any more: answers the requests and group waits
  // that waited for rejoining nodes and still cannot ever be placed.
  void AfterRejoins();
  // After Restore, once every manager is restored: stored leases and bundles
  // on nodes the store no longer has (the previous head died between burying
  // a node and ending what it held) end as on a node death.
  void EndWhatLostNodesHeld();
  // Leases on a dead node are gone (its workers died with it).
  // `why`: how it died, for the owners of its leases (LeasesLostNotice).
  void OnNodeDead(const NodeId& node, const std::string& why = "");

  // `peer`: the caller's connection. A worker's runtime (req.host_lease_id
  // set) is recorded under its worker's lease: when that lease ends, so do the
  // leases and requests of `peer` (its worker is gone; nobody would return them).
  protocol::RegisterDriverReply RegisterDriver(const protocol::RegisterDriverRequest& req,
                                               int64_t now_ms, const std::string& cluster_id,
                                               const std::string& peer = "");
  bool DriverHeartbeat(const JobId& job_id, int64_t now_ms);
  // A job whose life the head itself supervises (rayx job submit): it does not
  // end when drivers stop heartbeating, only through FinishJob.
  void AddSupervisedJob(const JobId& job_id, int64_t now_ms);
  // Ends the job; returns how many workers were told to stop. `hand_over`:
  // the driver's detached named actors still being constructed, which the
  // head creates again itself (those with a restart request) or stops.
  uint32_t FinishJob(const JobId& job_id, const std::string& why,
                     const std::vector<protocol::ActorInfo>& hand_over = {});
  // Ends jobs whose drivers went silent.
  void ExpireSilentJobs(int64_t now_ms);

  // Answers now (an error) or later (when a worker runs) through the outbox.
  void RequestLease(const std::string& peer, uint64_t request_id,
                    const protocol::RequestLeaseRequest& req);
  // The same for a lease the head itself owns: answered through the
  // HeadLeaseOwner. REQUIRES: SetHeadOwner was called.
  void RequestLeaseForHead(uint64_t request_id, const protocol::RequestLeaseRequest& req);
  Status ReturnLease(const LeaseId& lease_id);
  // The runtime at `peer`, inside lease `lease_id`'s worker, says its calls
  // wait in get/wait (`blocked`) or no longer do (LeaseBlockedNotice): the
  // lease lends its CPU or takes it back (see the class comment). Idempotent.
  // NotFound for a lease that is not granted (it ended: nothing to do);
  // Unauthenticated when `peer` is not the runtime inside that lease's worker.
  // For a lease restored after a head restart whose node has not rejoined
  // yet, the state is kept and applied when it rejoins.
  Status SetLeaseBlocked(const std::string& peer, const LeaseId& lease_id, bool blocked);
  // Leases whose worker is blocked, and the CPU they lend.
  size_t blocked_count() const { return blocked_leases_; }
  double lent_cpu() const { return lent_cpu_; }
  // Checks the class comment's invariant over every alive node, bundle and
  // lease, that no GPU device is leased beyond one whole device, and the
  // blocked counts. Internal naming the first disagreement.
  // O(leases + bundles + nodes): for tests, not the head's loop.
  Status CheckAccounting() const;
  // Withdraws a request of the head's own (RequestLeaseForHead) that has not
  // been granted yet: queued, it is dropped; starting, its lease ends and its
  // worker is stopped. The owner hears nothing more of it. False when there
  // was nothing left to withdraw.
  bool CancelHeadRequest(uint64_t request_id);
  // An agent's answer to a start request. A reply for a lease that ended while
  // its worker started stops that worker.
  void OnStartWorkerReply(uint64_t request_id, const protocol::StartWorkerReply& reply);
  void OnStartWorkerError(uint64_t request_id, const Status& error);

  // A process of a process lease ended: the owner hears of it; the lease ends
  // when its last process has. Or the worker of a worker lease exited by
  // itself: its lease ends and its owner gets a LeasesLostNotice.
  void OnProcessExited(const protocol::ProcessExitedNotice& notice);
  // What the worker of a detached actor's lease said of its constructor
  // (relayed by its agent): kept on the lease, and it finishes the head's
  // take-over of that actor if one waits for it (CreatorGone).
  void OnActorConstruction(const protocol::ActorConstructionNotice& notice);

  // Placement groups are PlacementGroupManager's (HeadService creates,
  // waits for and lists them there); removing one ends its leases first:
  // stops the leases placed in the group, then frees it. False when unknown.
  bool RemovePlacementGroup(const PlacementGroupId& group_id);
  // True while `job_id` runs (its driver heartbeats, or the head supervises it).
  bool JobLive(const JobId& job_id) const { return jobs_.Live(job_id); }
  // Answers actor lookups whose deadline passed.
  void Tick(int64_t now_ms);
  std::vector<protocol::LeaseListEntry> ListLeases() const;
  // The node a start request (head request id) or a lease is on, for checking
  // that an agent's answer comes from that node's current incarnation.
  std::optional<NodeId> NodeOfStart(uint64_t request_id) const;
  std::optional<NodeId> NodeOfLease(const LeaseId& lease_id) const;
  // `with_unconfirmed`: also a stored lease waiting for its node to rejoin.
  std::optional<JobId> JobOfLease(const LeaseId& lease_id, bool with_unconfirmed = false) const;
  // The routing id of the alive node's agent, or nullptr.
  const std::string* AgentPeerOf(const NodeId& node) const;
  // Calls `fn` with each registered node agent's routing id.
  void ForEachAgentPeer(const std::function<void(const std::string& peer)>& fn) const {
    for (const auto& [node, peer] : agent_peers_) fn(peer);
  }

  // Named actors (their names: ActorDirectory; lease_manager_actors.cc).
  // With `actor.starting`: reserves the name for an actor being created by
  // the runtime at `peer` (until it registers, its creation is dropped, its
  // job ends or `peer`'s worker ends); a detached actor's reservation keeps
  // its constructor call (`restart_request`, sent again with it once known),
  // so that the head creates the actor itself when its creator ends first.
  // Without: names the actor's running worker, taking over its own
  // reservation. AlreadyExists when another actor holds the name.
  Status RegisterActor(const protocol::ActorInfo& actor, const std::string& peer = "");
  // Frees `name` when it is still reserved for `actor_id`; false otherwise.
  bool DropActorName(const std::string& name, const ActorId& actor_id) {
    return actors_.DropReservation(name, actor_id);
  }
  Result<protocol::ActorInfo> GetActor(const std::string& name) const { return actors_.Get(name); }
  // See ActorDirectory::Lookup.
  void LookupActor(const Requester& to, const protocol::GetActorRequest& req, int64_t now_ms) {
    actors_.Lookup(to, req, now_ms);
  }
  size_t parked_actor_lookups() const { return actors_.parked_lookups(); }
  // True when `lease_id` is a live detached lease of job `job_id`.
  // After a head restart, also a stored lease whose node has not rejoined yet.
  bool IsDetachedLeaseOf(const LeaseId& lease_id, const JobId& job_id) const;
  // Whether the runtime at `peer` runs inside a detached actor's worker,
  // which may lease workers after its job ended (they end with it).
  bool HostedByDetachedActor(const std::string& peer) const;
  // True while `lease_id` is granted, or stored and waiting for its node to
  // rejoin a restarted head.
  bool IsLeaseLive(const LeaseId& lease_id) const {
    return leases_.count(lease_id) > 0 || IsUnconfirmed(lease_id);
  }
  // True when `lease_id` is a granted detached lease (it outlives its job).
  bool IsDetached(const LeaseId& lease_id) const {
    auto it = leases_.find(lease_id);
    return it != leases_.end() && it->second.detached;
  }
  // Registers the runtime of a detached actor's worker whose job has ended
  // (REQUIRES: IsDetachedLeaseOf): like RegisterDriver, without the job.
  protocol::RegisterDriverReply RegisterDetachedWorker(const protocol::RegisterDriverRequest& req,
                                                       const std::string& cluster_id,
                                                       const std::string& peer);

  size_t lease_count() const { return leases_.size(); }
  // Asks the agent of `node` to report when driver process `pid` of `job_id`
  // exits (DriverExitedNotice). False when the node has no agent here.
  bool WatchDriver(const NodeId& node, const JobId& job_id, int32_t pid);
  // Policy decisions the node table refused (they are made on its own book
  // of resources and devices); always 0.
  uint64_t invariant_violations() const { return invariant_violations_; }
  size_t pending_count() const { return scheduler_.size(); }
  // Policy decisions made so far (for tests of scheduling cost).
  uint64_t decisions() const { return scheduler_.decisions(); }
  // Pending demands grouped by shape, for `rayx status`; infeasible placement
  // groups with their reasons.
  std::map<std::string, int> PendingShapes() const;
  std::map<std::string, std::string> InfeasibleShapes() const;

 private:
  // Who a lease's answers go to, and a request waiting: lease_scheduler.h.
  using Owner = LeaseOwner;
  using OwnerKind = LeaseOwner::Kind;
  using Pending = PendingLease;
  struct Lease {
    LeaseId lease_id;
    JobId job_id;
    NodeId node;
    ResourceMap resources;
    std::vector<int> gpu_ids;
    Owner owner;
    bool running = false;
    bool detached = false;
    bool for_actor = false;
    ActorId actor_id;            // for_actor: the actor (RequestLeaseRequest::actor_id)
    bool process = false;        // a process lease (rayx launch, rayx job)
    PlacementGroupId group_id;   // placement group, or ""
    int32_t bundle_index = -1;
    int32_t pid = 0;
    std::string worker_address;  // for_actor, once running
    bool blocked = false;        // its worker waits in get/wait (SetLeaseBlocked)
    double lent_cpu = 0;         // while blocked: the CPU it lends, else 0
    // A detached actor's constructor call as its worker reports it
    // (ActorConstructionNotice; only leases started with report_construction).
    enum class Construction { kUnknown, kBegan, kSucceeded, kFailed };
    Construction construction = Construction::kUnknown;
    std::string construction_error;
    // The request, until its worker runs: a lease whose node dies before
    // that is requested again (the caller never hears of the lost node).
    std::optional<protocol::RequestLeaseRequest> request;
  };
  // Grants queued requests while resources allow, in order; a request that does
  // not fit now does not block those behind it of another shape.
  void SchedulePending();
  // Ends what the runtimes inside lease `lease_id`'s worker held.
  void EndHostedLeases(const LeaseId& lease_id);
  // Records that the runtime at `peer` runs inside lease `lease_id`'s worker.
  void AddHostedPeer(const LeaseId& lease_id, const std::string& peer);
  // False when it must wait; true when granted or answered with an error.
  // `decided`: where the policy placed it just now (node and devices), if it
  // did; the node table takes exactly that.
  bool TryGrant(Pending& pending, std::optional<policy::Scheduled> decided = std::nullopt);
  // False when the request's job ended (and nothing lets it outlive the job).
  bool JobAllows(const Pending& pending) const;
  // What `lease` holds now: its resources, less the CPU it lends.
  static ResourceMap Held(const Lease& lease);
  // `lease`'s worker blocked: its CPU goes back to its node or bundle (the
  // caller runs the queue). REQUIRES: !lease.blocked.
  void Lend(Lease& lease);
  // It resumed: the lent CPU is taken back, overdrawing if it must.
  // REQUIRES: lease.blocked.
  void Reclaim(Lease& lease);
  // `lease` ends: it is blocked no more (its lent CPU was never its own).
  void ForgetBlocked(const Lease& lease);
  // `cause` completes "the lease ended: ..." for the lease end observer.
  void EndLease(const LeaseId& lease_id, bool kill_worker, const std::string& cause);
  void OnWorkerExited(const Lease& lease, const protocol::ProcessExitedNotice& notice);
  // Detached actors the head restarts (lease_manager_actors.cc).
  // True when nobody but the head would restart `lease`'s actor: the head
  // owns it already, or its owner's job has ended.
  bool OwnerGone(const Lease& lease) const;
  // Takes out of the named actors those of `lease_id` the head must restart
  // (detached, restartable by the head, restarts left), when `owner_gone`.
  std::vector<protocol::ActorInfo> TakeRestartable(const LeaseId& lease_id, bool owner_gone);
  // `lease`'s worker or node died under a live owner: the names of its
  // restartable actors stay reserved for that owner (which restarts them and
  // names the new worker, or drops the name) instead of going with the lease.
  void HoldNamesForOwner(const Lease& lease);
  // Requests a new worker for `info` (its lease request with the constructor).
  // `count`: this is a new restart (false: one begun before a head restart).
  void RestartActor(protocol::ActorInfo info, const std::string& cause, bool count = true);
  void OnActorRestartGranted(uint64_t request_id, const protocol::RequestLeaseReply& grant);
  void OnActorRestartFailed(uint64_t request_id, const Status& status);
  // Writes the lease through to the store.
  void SaveLease(const Lease& lease);
  // Frees the names reserved by the runtime at `peer` (it is gone), and
  // stops their actors.
  void DropReservationsOf(const std::string& peer);
  // Ends the leases and drops the queued requests made for actor `actor_id`,
  // also leases restored from the previous head on nodes not rejoined yet.
  void EndActorLeases(const ActorId& actor_id, const std::string& cause);
  // The creator of the actor reserved under `name` is gone (`cause`) before
  // its constructor finished: a detached one whose reservation carries its
  // constructor call (sent with it, or handed over at the driver's exit) is
  // created again by the head as its owner; any other is stopped and its
  // name freed. A no-op when `name` is not a reservation.
  void CreatorGone(const std::string& name, const std::string& cause);
  // The head takes over the actor reserved under `name`, whose constructor
  // runs (or ran) on `lease`'s worker: it names that worker once the
  // constructor succeeded, or frees the name when it failed.
  void Adopt(const std::string& name, Lease& lease, const std::string& cause);
  // The constructor of adopted `lease` ended (lease.construction says how).
  void FinishAdoption(LeaseId lease_id);  // a copy: the lease may end here
  // `lease_id` ended (`cause`): if its actor was adopted and still being
  // constructed, it is created again (as after any restartable loss) or its
  // name freed.
  void AdoptionLost(const LeaseId& lease_id, const std::string& cause);
  // True while `lease_id` is a stored lease waiting for its node to rejoin.
  // O(unconfirmed leases): only worker runtimes registering after a restart ask.
  bool IsUnconfirmed(const LeaseId& lease_id) const;
  // A stored lease whose worker is gone (not reported live, or its node
  // died): applies `exits` for it, or tells a head owner it ended unseen.
  void DropUnconfirmed(const StoredLease& lease, const std::string& why,
                       const std::vector<protocol::ExitedProcess>& exits);
  void Request(const Owner& owner, const protocol::RequestLeaseRequest& req);
  void ReplyError(const Owner& owner, const Status& status);

  Options options_;
  NodeTable& nodes_;
  HeadOutbox& outbox_;
  HeadLeaseOwner* head_owner_ = nullptr;
  std::unordered_map<NodeId, std::string> agent_peers_;
  JobTable jobs_;
  std::function<void(const JobId& job_id)> job_start_observer_;
  std::unordered_map<LeaseId, Lease> leases_;
  // A StartWorkerRequest sent to a node's agent, until the agent answers (or
  // the node dies). Kept when its lease ends first, so that a worker that
  // started anyway is stopped when its late reply comes.
  struct StartRequest {
    LeaseId lease_id;
    NodeId node;
  };
  std::unordered_map<uint64_t, StartRequest> start_requests_;  // by head request id
  // The requests that wait, and the policy that places them.
  LeaseScheduler scheduler_{nodes_};
  // lease id -> the connections of runtimes inside that lease's worker, and
  // back (bounded by the registered runtimes; both go when the lease ends).
  std::unordered_map<LeaseId, std::vector<std::string>> hosted_peers_;
  std::unordered_map<std::string, LeaseId> host_lease_of_peer_;
  ActorDirectory actors_;
  // Adopted actors whose constructor still runs, by lease.
  struct Adoption {
    std::string name;
    ActorId actor_id;
    Owner creator;  // the lease's owner before: it keeps it if it names the actor after all
    bool unfollowed = false;  // its worker's reports stopped: the head ends it itself
  };
  std::unordered_map<LeaseId, Adoption> adopting_;
  // The reservation `adoption` waits to finish, or nullptr when its name was
  // freed or went to another actor meanwhile.
  const protocol::ActorInfo* ReservationOf(const Adoption& adoption) const;
  uint64_t invariant_violations_ = 0;
  PlacementGroupManager& groups_;
  uint64_t next_request_id_ = 1;
  std::function<void(const JobId& job_id)> job_end_observer_;
  LeaseEndObserver lease_end_observer_;
  std::function<void(const std::string& peer)> hosted_peer_end_observer_;
  // The head's requests for detached actors it restarts (kHeadActor owners;
  // numbered apart from JobManager's kHeadJob requests).
  std::unordered_map<uint64_t, std::string> actor_restarts_;  // request id -> actor name
  // The lease each restarting actor had, while it restarts: a handle that
  // kills the actor returns that lease (it knows no other).
  std::unordered_map<LeaseId, std::string> restarting_from_;  // old lease id -> actor name
  uint64_t next_actor_restart_ = 1;
  JobId job_ending_;  // the job FinishJob is ending leases of, if any
  HeadStore* store_ = nullptr;
  // Leases stored by the previous head life, by node, until the node rejoins.
  std::unordered_map<NodeId, std::vector<StoredLease>> unconfirmed_;
  // After a restart, until every restored node rejoined or died.
  bool rejoin_window_open_ = false;
  // Stored leases said to be blocked before their node rejoined (bounded by
  // unconfirmed_): lent once they are accounted again.
  std::unordered_set<LeaseId> blocked_unconfirmed_;
  size_t blocked_leases_ = 0;  // granted leases with `blocked`
  double lent_cpu_ = 0;        // the sum of their `lent_cpu`
};

}  // namespace rayx::scheduler
