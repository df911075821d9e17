// LeaseManager driven call by call with a real NodeTable and a recording sender.
#include "head/lease_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <string>
#include <vector>

#include "head/frame_outbox.h"
#include "policy/resource_demand.h"
#include "protocol/codec.h"
#include "transport/message.h"

namespace rayx::scheduler {
namespace lease_manager_test {  // this file's own (unit tests compile in batches)

using protocol::MessageType;

constexpr int64_t kJobTimeout = 1000;
constexpr int64_t kT0 = 50'000;

// One message the manager sent: its peer and decoded envelope, body kept raw.
struct Sent {
  std::string peer;
  protocol::Envelope env;
  std::string body;

  MessageType type() const { return static_cast<MessageType>(env.t); }

  template <typename T>
  T As() const {
    EXPECT_EQ(env.t, static_cast<uint16_t>(T::kType)) << "message to " << peer;
    auto decoded = protocol::Decode<T>(body);
    EXPECT_TRUE(decoded.ok()) << decoded.status();
    return decoded.ok() ? *decoded : T{};
  }
  protocol::ErrorReply Error() const {
    EXPECT_EQ(type(), MessageType::kErrorReply) << "message to " << peer;
    auto decoded = protocol::Decode<protocol::ErrorReply>(body);
    EXPECT_TRUE(decoded.ok()) << decoded.status();
    return decoded.ok() ? *decoded : protocol::ErrorReply{};
  }
};

class LeaseManagerTest : public ::testing::Test {
 protected:
  LeaseManagerTest()
      : leases_(LeaseManager::Options{kJobTimeout, "10.0.0.1:6380"}, nodes_, groups_, outbox_) {
    outbox_.SetSend([this](const std::string& peer, transport::Frames frames) {
      Record(peer, std::move(frames));
    });
  }

  void Record(const std::string& peer, transport::Frames frames) {
    ASSERT_EQ(frames.size(), 2u);
    auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(frames[0]));
    ASSERT_TRUE(env.ok()) << env.status();
    EXPECT_EQ(env->v, kProtocolVersion);
    sent_.push_back(Sent{peer, *env, std::string(transport::FrameView(frames[1]))});
  }

  // Registers a node in both the table and the manager; the agent's peer is "agent-<address>".
  NodeId AddNode(const std::string& address, ResourceMap total) {
    NodeInfo info;
    info.address = address;
    info.hostname = "host-" + address;
    info.total = std::move(total);
    NodeId id = nodes_.Register(info, kT0, 0);
    leases_.OnNodeRegistered(id, "agent-" + address);
    return id;
  }

  JobId NewJob(int64_t now_ms = kT0) {
    return leases_.RegisterDriver(protocol::RegisterDriverRequest{}, now_ms, "cluster-1").job_id;
  }

  static protocol::RequestLeaseRequest Shape(const JobId& job, ResourceMap resources,
                                             bool detached = false) {
    protocol::RequestLeaseRequest req;
    req.job_id = job;
    req.resources = std::move(resources);
    req.executable = "/bin/driver";
    req.working_dir = "/tmp/wd";
    req.detached = detached;
    return req;
  }

  double Available(const NodeId& node, const std::string& resource) {
    const NodeInfo* info = nodes_.FindAlive(node);
    EXPECT_NE(info, nullptr);
    if (info == nullptr) return -1;
    auto it = info->available.find(resource);
    return it == info->available.end() ? 0 : it->second;
  }

  // Takes the messages sent so far.
  std::vector<Sent> Take() {
    std::vector<Sent> out;
    out.swap(sent_);
    return out;
  }

  // Takes exactly one message, which must be a StartWorkerRequest; returns its request id.
  uint64_t TakeStart(const std::string& agent_peer, protocol::StartWorkerRequest* out = nullptr) {
    auto sent = Take();
    EXPECT_EQ(sent.size(), 1u);
    if (sent.size() != 1) return 0;
    EXPECT_EQ(sent[0].peer, agent_peer);
    auto start = sent[0].As<protocol::StartWorkerRequest>();
    if (out) *out = start;
    return sent[0].env.id;
  }

  // Starts the worker for head request `start_id` and returns the lease the owner got.
  protocol::RequestLeaseReply Started(uint64_t start_id, const std::string& owner_peer,
                                      uint64_t owner_request_id,
                                      const std::string& address = "tcp://10.0.0.2:7000") {
    protocol::StartWorkerReply reply;
    reply.worker_address = address;
    reply.worker_pid = 4242;
    leases_.OnStartWorkerReply(start_id, reply);
    auto sent = Take();
    EXPECT_EQ(sent.size(), 1u);
    if (sent.size() != 1) return {};
    EXPECT_EQ(sent[0].peer, owner_peer);
    EXPECT_EQ(sent[0].env.id, owner_request_id);
    return sent[0].As<protocol::RequestLeaseReply>();
  }

  // Requests and starts a lease on the (only fitting) node; returns its lease id.
  LeaseId Grant(const JobId& job, ResourceMap resources, const std::string& agent_peer,
                uint64_t request_id = 1, bool detached = false) {
    leases_.RequestLease("driver", request_id, Shape(job, std::move(resources), detached));
    uint64_t start_id = TakeStart(agent_peer);
    return Started(start_id, "driver", request_id).lease_id;
  }

  // The messages of one type, in order. Ending a job may also notify agents in
  // other ways; the tests look at kills, starts and replies only.
  static std::vector<Sent> OfType(const std::vector<Sent>& sent, MessageType type) {
    std::vector<Sent> out;
    for (const Sent& s : sent) {
      if (s.type() == type) out.push_back(s);
    }
    return out;
  }

  static std::vector<LeaseId> KilledLeases(const std::vector<Sent>& sent,
                                           const std::string& agent_peer) {
    std::vector<LeaseId> out;
    for (const Sent& s : sent) {
      if (s.type() != MessageType::kKillWorkersRequest) continue;
      EXPECT_EQ(s.peer, agent_peer);
      for (const auto& id : s.As<protocol::KillWorkersRequest>().lease_ids) out.push_back(id);
    }
    return out;
  }

  // Looks up actor `name` for `peer`'s request `id`, parked for up to `wait_ms`.
  void LookUp(const std::string& name, const std::string& peer, uint64_t id, int64_t wait_ms,
              const std::string& stale_worker = "") {
    protocol::GetActorRequest req;
    req.name = name;
    req.wait_ms = wait_ms;
    req.stale_worker = stale_worker;
    leases_.LookupActor(Requester{peer, id}, req, kT0);
  }

  // Registers the runtime at `peer` as running inside lease `host`'s worker.
  void RuntimeInside(const JobId& job, const LeaseId& host, const std::string& peer) {
    protocol::RegisterDriverRequest runtime;
    runtime.job_id = job;
    runtime.host_lease_id = host;
    leases_.RegisterDriver(runtime, kT0, "cluster-1", peer);
  }

  protocol::ActorInfo Actor(const std::string& name, const JobId& job, const LeaseId& lease_id,
                            bool detached = false) {
    protocol::ActorInfo actor;
    actor.actor_id = ActorId::FromWire("actor-" + name);
    actor.name = name;
    actor.job_id = job;
    actor.class_name = "Counter::Create";
    actor.worker_address = "tcp://10.0.0.2:7000";
    actor.lease_id = lease_id;
    actor.detached = detached;
    return actor;
  }

  // The worker of `lease` (pid 4242) was killed by `signal` (SIGKILL), or with
  // signal 0 exited with `exit_code`, as its agent reports.
  void WorkerKilled(const LeaseId& lease, int signal = 9, int exit_code = 0) {
    protocol::ProcessExitedNotice exited;
    exited.lease_id = lease;
    exited.pid = 4242;
    exited.signal = signal;
    exited.exit_code = exit_code;
    exited.all_exited = true;
    leases_.OnProcessExited(exited);
  }

  // Registers detached actor "keeper" on `lease`, which the head may restart
  // (a restart request for Counter::Create with `max_restarts`), and ends
  // its job: its owner is gone.
  void OrphanRestartable(const JobId& job, const LeaseId& lease, int32_t max_restarts,
                         std::vector<std::string> init_args = {}) {
    protocol::RequestLeaseRequest again = Shape(job, {{"CPU", 1}}, /*detached=*/true);
    again.for_actor = true;
    again.init.function = "Counter::Create";
    again.init.actor_id = ActorId::FromWire("actor-keeper");
    again.init.args = std::move(init_args);
    protocol::ActorInfo keeper = Actor("keeper", job, lease, /*detached=*/true);
    keeper.max_restarts = max_restarts;
    keeper.restart_request = protocol::Encode(again);
    ASSERT_TRUE(leases_.RegisterActor(keeper).ok());
    leases_.FinishJob(job, "done");
    Take();
  }

  NodeTable nodes_{NodeTable::Options{1500, 100}};
  std::vector<Sent> sent_;
  FrameOutbox outbox_{"head"};
  PlacementGroupManager groups_{nodes_, outbox_};
  LeaseManager leases_;
};

// ---- Drivers and jobs ---------------------------------------------------------------

TEST_F(LeaseManagerTest, RegisterDriverGivesNewJobIdAndHeartbeatPeriod) {
  auto a = leases_.RegisterDriver(protocol::RegisterDriverRequest{}, kT0, "cluster-1");
  auto b = leases_.RegisterDriver(protocol::RegisterDriverRequest{}, kT0, "cluster-1");
  EXPECT_FALSE(a.job_id.IsNil());
  EXPECT_NE(a.job_id, b.job_id);
  EXPECT_EQ(a.cluster_id, "cluster-1");
  // The driver heartbeats several times within the job timeout.
  EXPECT_GT(a.heartbeat_period_ms, 0);
  EXPECT_LT(a.heartbeat_period_ms, kJobTimeout);
  EXPECT_TRUE(leases_.DriverHeartbeat(a.job_id, kT0 + 1));
  EXPECT_TRUE(leases_.DriverHeartbeat(b.job_id, kT0 + 1));
  EXPECT_TRUE(Take().empty());
}

TEST_F(LeaseManagerTest, RegisterDriverWithJobIdJoinsThatJob) {
  JobId job = NewJob();
  protocol::RegisterDriverRequest req;
  req.job_id = job;
  EXPECT_EQ(leases_.RegisterDriver(req, kT0, "cluster-1").job_id, job);
}

TEST_F(LeaseManagerTest, HeartbeatPeriodHasAFloorForTinyTimeouts) {
  FrameOutbox dropped("head");
  PlacementGroupManager no_groups(nodes_, dropped);
  LeaseManager tiny(LeaseManager::Options{1, ""}, nodes_, no_groups, dropped);
  EXPECT_GE(tiny.RegisterDriver({}, kT0, "c").heartbeat_period_ms, 10);
}

TEST_F(LeaseManagerTest, HeartbeatOfUnknownJobIsFalse) {
  EXPECT_FALSE(leases_.DriverHeartbeat(JobId::FromWire("no-such-job"), kT0));
}

TEST_F(LeaseManagerTest, ExpireSilentJobsEndsOnlyJobsSilentBeyondTimeout) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 4}});
  JobId quiet = NewJob(kT0);
  JobId chatty = NewJob(kT0);
  LeaseId quiet_lease = Grant(quiet, {{"CPU", 1}}, "agent-10.0.0.2", 1);
  LeaseId chatty_lease = Grant(chatty, {{"CPU", 1}}, "agent-10.0.0.2", 2);
  EXPECT_EQ(Available(node, "CPU"), 2);

  ASSERT_TRUE(leases_.DriverHeartbeat(chatty, kT0 + 800));
  leases_.ExpireSilentJobs(kT0 + kJobTimeout);  // exactly the timeout: still fine
  EXPECT_TRUE(Take().empty());
  EXPECT_EQ(leases_.lease_count(), 2u);

  leases_.ExpireSilentJobs(kT0 + kJobTimeout + 1);
  EXPECT_EQ(KilledLeases(Take(), "agent-10.0.0.2"), std::vector<LeaseId>{quiet_lease});
  EXPECT_EQ(leases_.lease_count(), 1u);
  EXPECT_EQ(Available(node, "CPU"), 3);
  EXPECT_FALSE(leases_.DriverHeartbeat(quiet, kT0 + kJobTimeout + 2));
  EXPECT_TRUE(leases_.DriverHeartbeat(chatty, kT0 + kJobTimeout + 2));
  EXPECT_TRUE(leases_.ReturnLease(chatty_lease).ok());
}

TEST_F(LeaseManagerTest, FinishUnknownJobStopsNothing) {
  EXPECT_EQ(leases_.FinishJob(JobId::FromWire("nope"), "test"), 0u);
  JobId job = NewJob();
  EXPECT_EQ(leases_.FinishJob(job, "test"), 0u);
  EXPECT_EQ(leases_.FinishJob(job, "again"), 0u);
  EXPECT_TRUE(KilledLeases(Take(), "").empty());
}

// ---- Requesting leases ----------------------------------------------------------------

TEST_F(LeaseManagerTest, InfeasibleRequestIsAnsweredAtOnceNamingResourceAndLargestNode) {
  AddNode("10.0.0.2", {{"CPU", 4}, {"GPU", 2}});
  AddNode("10.0.0.3", {{"CPU", 8}, {"GPU", 4}});
  JobId job = NewJob();
  leases_.RequestLease("driver", 17, Shape(job, {{"CPU", 1}, {"GPU", 8}}));
  auto sent = Take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].peer, "driver");
  EXPECT_EQ(sent[0].env.id, 17u);
  auto err = sent[0].Error();
  EXPECT_EQ(err.code, static_cast<uint8_t>(StatusCode::kInfeasible));
  EXPECT_EQ(err.message.rfind("infeasible", 0), 0u) << err.message;
  EXPECT_NE(err.message.find("GPU: 8"), std::string::npos) << err.message;
  EXPECT_NE(err.message.find("GPU 4"), std::string::npos) << err.message;
  EXPECT_EQ(leases_.pending_count(), 0u);
  EXPECT_EQ(leases_.lease_count(), 0u);
}

// One rule for a GPU amount (ResourceDemand::CheckGpuAmount), one code: a
// share of one device, or whole devices; 1.5 is refused as asked wrongly.
TEST_F(LeaseManagerTest, AGpuAmountAboveOneThatIsNotWholeIsAnInvalidArgument) {
  AddNode("10.0.0.2", {{"CPU", 4}, {"GPU", 2}});
  JobId job = NewJob();
  leases_.RequestLease("driver", 18, Shape(job, {{"CPU", 1}, {"GPU", 1.5}}));
  auto sent = Take();
  ASSERT_EQ(sent.size(), 1u);
  auto err = sent[0].Error();
  EXPECT_EQ(err.code, static_cast<uint8_t>(StatusCode::kInvalidArgument));
  EXPECT_EQ(err.message, policy::ResourceDemand::CheckGpuAmount(1.5).message());
  EXPECT_NE(err.message.find("whole number of devices"), std::string::npos) << err.message;
  EXPECT_EQ(leases_.pending_count(), 0u);
  EXPECT_TRUE(policy::ResourceDemand::CheckGpuAmount(0.25).ok());
  EXPECT_TRUE(policy::ResourceDemand::CheckGpuAmount(1).ok());
  EXPECT_TRUE(policy::ResourceDemand::CheckGpuAmount(3).ok());
}

// A past production bug (the node table's old fit scan, now the policy's reasons): when every
// resource fits on some node but no single node has them all, the reason lists
// nothing: "needs {} on one node; the largest alive node has  (2 alive nodes)".
TEST_F(LeaseManagerTest, InfeasibleMixOfResourcesOnDifferentNodesSaysWhatIsMissing) {
  AddNode("10.0.0.2", {{"CPU", 8}});
  AddNode("10.0.0.3", {{"CPU", 1}, {"GPU", 4}});
  leases_.RequestLease("driver", 1, Shape(NewJob(), {{"CPU", 8}, {"GPU", 4}}));
  auto sent = Take();
  ASSERT_EQ(sent.size(), 1u);
  auto err = sent[0].Error();
  EXPECT_EQ(err.message.rfind("infeasible", 0), 0u) << err.message;
  EXPECT_EQ(err.message.find("needs {}"), std::string::npos) << err.message;
  EXPECT_EQ(err.message.find("has  ("), std::string::npos) << err.message;
}

TEST_F(LeaseManagerTest, UnknownResourceIsInfeasible) {
  AddNode("10.0.0.2", {{"CPU", 4}});
  leases_.RequestLease("driver", 3, Shape(NewJob(), {{"tpu", 1}}));
  auto sent = Take();
  ASSERT_EQ(sent.size(), 1u);
  auto err = sent[0].Error();
  EXPECT_EQ(err.message.rfind("infeasible", 0), 0u) << err.message;
  EXPECT_NE(err.message.find("tpu"), std::string::npos) << err.message;
  EXPECT_EQ(leases_.pending_count(), 0u);
}

TEST_F(LeaseManagerTest, RequestWithNoNodesIsInfeasible) {
  leases_.RequestLease("driver", 3, Shape(NewJob(), {{"CPU", 1}}));
  auto sent = Take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].Error().message.rfind("infeasible", 0), 0u);
  EXPECT_EQ(leases_.pending_count(), 0u);
}

TEST_F(LeaseManagerTest, FeasibleRequestTakesResourcesAndAsksTheNodesAgent) {
  AddNode("10.0.0.2", {{"CPU", 1}});
  NodeId node = AddNode("10.0.0.3", {{"CPU", 4}, {"GPU", 2}});
  JobId job = NewJob();
  leases_.RequestLease("driver", 9, Shape(job, {{"CPU", 2}, {"GPU", 1}}));

  protocol::StartWorkerRequest start;
  uint64_t start_id = TakeStart("agent-10.0.0.3", &start);
  EXPECT_FALSE(start.lease_id.IsNil());
  EXPECT_EQ(start.job_id, job);
  EXPECT_EQ(start.executable, "/bin/driver");
  EXPECT_EQ(start.working_dir, "/tmp/wd");
  EXPECT_EQ(start.resources, (ResourceMap{{"CPU", 2}, {"GPU", 1}}));
  EXPECT_EQ(start.head_address, "10.0.0.1:6380");
  EXPECT_NE(start_id, 0u);
  EXPECT_EQ(Available(node, "CPU"), 2);
  EXPECT_EQ(Available(node, "GPU"), 1);
  EXPECT_EQ(leases_.lease_count(), 1u);
  EXPECT_EQ(leases_.pending_count(), 0u);
}

TEST_F(LeaseManagerTest, HeadAddressSetLaterIsGivenToWorkers) {
  AddNode("10.0.0.2", {{"CPU", 1}});
  leases_.SetHeadAddress("192.168.1.1:7000");
  leases_.RequestLease("driver", 1, Shape(NewJob(), {{"CPU", 1}}));
  protocol::StartWorkerRequest start;
  TakeStart("agent-10.0.0.2", &start);
  EXPECT_EQ(start.head_address, "192.168.1.1:7000");
}

TEST_F(LeaseManagerTest, StartWorkerReplyAnswersTheRequesterWithWorkerAndNode) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 2}});
  JobId job = NewJob();
  leases_.RequestLease("driver-peer", 31, Shape(job, {{"CPU", 1}}));
  protocol::StartWorkerRequest start;
  uint64_t start_id = TakeStart("agent-10.0.0.2", &start);

  auto grant = Started(start_id, "driver-peer", 31, "tcp://10.0.0.2:7123");
  EXPECT_EQ(grant.lease_id, start.lease_id);
  EXPECT_EQ(grant.worker_address, "tcp://10.0.0.2:7123");
  EXPECT_EQ(grant.node_id, node.Hex());
  EXPECT_EQ(grant.node_address, "10.0.0.2");
  EXPECT_EQ(grant.worker_pid, 4242);

  // A second reply for the same start request is ignored.
  leases_.OnStartWorkerReply(start_id, protocol::StartWorkerReply{});
  EXPECT_TRUE(Take().empty());
  // So is a reply to a request the head never sent.
  leases_.OnStartWorkerReply(start_id + 1000, protocol::StartWorkerReply{});
  EXPECT_TRUE(Take().empty());
}

TEST_F(LeaseManagerTest, EachGrantGetsDistinctLeaseAndStartRequestIds) {
  AddNode("10.0.0.2", {{"CPU", 3}});
  JobId job = NewJob();
  protocol::StartWorkerRequest a, b;
  leases_.RequestLease("driver", 1, Shape(job, {{"CPU", 1}}));
  uint64_t id_a = TakeStart("agent-10.0.0.2", &a);
  leases_.RequestLease("driver", 2, Shape(job, {{"CPU", 1}}));
  uint64_t id_b = TakeStart("agent-10.0.0.2", &b);
  EXPECT_NE(a.lease_id, b.lease_id);
  EXPECT_NE(id_a, id_b);
  // Replies in the other order reach the right requests.
  EXPECT_EQ(Started(id_b, "driver", 2).lease_id, b.lease_id);
  EXPECT_EQ(Started(id_a, "driver", 1).lease_id, a.lease_id);
}

TEST_F(LeaseManagerTest, BusyResourcesQueueTheRequestUntilReturnLeaseFreesThem) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 1}});
  JobId job = NewJob();
  LeaseId first = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 1);
  EXPECT_EQ(Available(node, "CPU"), 0);

  leases_.RequestLease("driver", 2, Shape(job, {{"CPU", 1}}));
  EXPECT_TRUE(Take().empty());
  EXPECT_EQ(leases_.pending_count(), 1u);
  EXPECT_EQ(leases_.PendingShapes(), (std::map<std::string, int>{{"{CPU: 1}", 1}}));

  ASSERT_TRUE(leases_.ReturnLease(first).ok());
  auto sent = Take();
  ASSERT_EQ(sent.size(), 2u);
  // The returned lease's worker is stopped...
  EXPECT_EQ(sent[0].peer, "agent-10.0.0.2");
  EXPECT_EQ(sent[0].As<protocol::KillWorkersRequest>().lease_ids, std::vector<LeaseId>{first});
  // ...and the waiting request gets the freed CPU.
  EXPECT_EQ(sent[1].peer, "agent-10.0.0.2");
  auto start = sent[1].As<protocol::StartWorkerRequest>();
  EXPECT_NE(start.lease_id, first);
  EXPECT_EQ(leases_.pending_count(), 0u);
  EXPECT_TRUE(leases_.PendingShapes().empty());
  EXPECT_EQ(Available(node, "CPU"), 0);
  EXPECT_EQ(Started(sent[1].env.id, "driver", 2).lease_id, start.lease_id);
}

TEST_F(LeaseManagerTest, OneReturnedLeaseServesEveryWaitingRequestItsResourcesFit) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 3}});
  JobId job = NewJob();
  LeaseId big = Grant(job, {{"CPU", 3}}, "agent-10.0.0.2");
  for (uint64_t id : {2, 3, 4, 5}) leases_.RequestLease("driver", id, Shape(job, {{"CPU", 1}}));
  EXPECT_TRUE(Take().empty());

  ASSERT_TRUE(leases_.ReturnLease(big).ok());
  auto starts = OfType(Take(), MessageType::kStartWorkerRequest);
  ASSERT_EQ(starts.size(), 3u);
  EXPECT_EQ(leases_.pending_count(), 1u);
  EXPECT_EQ(Available(node, "CPU"), 0);
  // In request order.
  Started(starts[0].env.id, "driver", 2);
  Started(starts[1].env.id, "driver", 3);
  Started(starts[2].env.id, "driver", 4);
}

TEST_F(LeaseManagerTest, ReturnLeaseFreesResourcesAndUnknownLeaseIsNotFound) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 2}});
  LeaseId lease = Grant(NewJob(), {{"CPU", 2}}, "agent-10.0.0.2");
  EXPECT_EQ(Available(node, "CPU"), 0);
  ASSERT_TRUE(leases_.ReturnLease(lease).ok());
  EXPECT_EQ(Available(node, "CPU"), 2);
  EXPECT_EQ(leases_.lease_count(), 0u);
  Take();
  Status again = leases_.ReturnLease(lease);
  EXPECT_EQ(again.code(), StatusCode::kNotFound);
  EXPECT_TRUE(Take().empty());
}

// A task that submits work holds leases through its worker's runtime; when the
// task's own lease ends (its worker is killed), those leases end too instead of
// holding their CPUs until the job ends.
TEST_F(LeaseManagerTest, EndingALeaseEndsTheLeasesOfTheRuntimeInsideItsWorker) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 4}});
  JobId job = NewJob();
  LeaseId outer = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2");
  RuntimeInside(job, outer, "worker-runtime");
  leases_.RequestLease("worker-runtime", 7, Shape(job, {{"CPU", 1}}));
  uint64_t start = TakeStart("agent-10.0.0.2");
  LeaseId inner = Started(start, "worker-runtime", 7).lease_id;
  protocol::RequestLeaseRequest detached = Shape(job, {{"CPU", 1}}, /*detached=*/true);
  leases_.RequestLease("worker-runtime", 8, detached);
  LeaseId kept = Started(TakeStart("agent-10.0.0.2"), "worker-runtime", 8).lease_id;
  leases_.RequestLease("worker-runtime", 9, Shape(job, {{"CPU", 4}}));  // waits
  EXPECT_EQ(leases_.pending_count(), 1u);
  EXPECT_EQ(Available(node, "CPU"), 1);

  ASSERT_TRUE(leases_.ReturnLease(outer).ok());
  auto killed = KilledLeases(Take(), "agent-10.0.0.2");
  EXPECT_THAT(killed, ::testing::UnorderedElementsAre(outer, inner));
  EXPECT_EQ(leases_.lease_count(), 1u) << "the detached actor's lease outlives its creator";
  EXPECT_EQ(leases_.pending_count(), 0u) << "nobody is left to take the waiting grant";
  EXPECT_EQ(Available(node, "CPU"), 3);
  EXPECT_TRUE(leases_.ReturnLease(kept).ok());
}

TEST_F(LeaseManagerTest, PendingShapesGroupsWaitingRequestsByShape) {
  AddNode("10.0.0.2", {{"CPU", 1}, {"GPU", 1}});
  JobId job = NewJob();
  Grant(job, {{"CPU", 1}, {"GPU", 1}}, "agent-10.0.0.2");
  leases_.RequestLease("driver", 2, Shape(job, {{"CPU", 1}}));
  leases_.RequestLease("driver", 3, Shape(job, {{"CPU", 1}}));
  leases_.RequestLease("driver", 4, Shape(job, {{"CPU", 0.5}, {"GPU", 1}, {"memory", 0}}));
  EXPECT_TRUE(Take().empty());
  EXPECT_EQ(leases_.pending_count(), 3u);
  EXPECT_EQ(leases_.PendingShapes(),
            (std::map<std::string, int>{{"{CPU: 1}", 2}, {"{CPU: 0.5, GPU: 1}", 1}}));
}

TEST_F(LeaseManagerTest, WaitingRequestsAreGrantedFifoWhenANodeJoins) {
  AddNode("10.0.0.2", {{"CPU", 1}});
  JobId job = NewJob();
  Grant(job, {{"CPU", 1}}, "agent-10.0.0.2");
  leases_.RequestLease("first", 10, Shape(job, {{"CPU", 1}}));
  leases_.RequestLease("second", 11, Shape(job, {{"CPU", 1}}));
  EXPECT_TRUE(Take().empty());
  ASSERT_EQ(leases_.pending_count(), 2u);

  // Room for one: the older request gets it.
  NodeId joined = AddNode("10.0.0.3", {{"CPU", 1}});
  uint64_t start_id = TakeStart("agent-10.0.0.3");
  EXPECT_EQ(leases_.pending_count(), 1u);
  EXPECT_EQ(Available(joined, "CPU"), 0);
  auto grant = Started(start_id, "first", 10);
  EXPECT_EQ(grant.node_id, joined.Hex());

  // The next node serves the second.
  AddNode("10.0.0.4", {{"CPU", 1}});
  start_id = TakeStart("agent-10.0.0.4");
  EXPECT_EQ(leases_.pending_count(), 0u);
  Started(start_id, "second", 11);
}

TEST_F(LeaseManagerTest, WaitingRequestThatDoesNotFitDoesNotBlockOthersWhenResourcesFree) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 2}, {"GPU", 1}});
  JobId job = NewJob();
  LeaseId big = Grant(job, {{"CPU", 2}, {"GPU", 1}}, "agent-10.0.0.2");
  leases_.RequestLease("gpu", 2, Shape(job, {{"CPU", 2}, {"GPU", 1}}));
  leases_.RequestLease("cpu", 3, Shape(job, {{"CPU", 1}}));
  EXPECT_TRUE(Take().empty());
  ASSERT_EQ(leases_.pending_count(), 2u);

  // Some other node's resources come back (here: a small node joins); the
  // GPU request still cannot run, but the CPU request behind it can.
  AddNode("10.0.0.3", {{"CPU", 1}});
  uint64_t start_id = TakeStart("agent-10.0.0.3");
  Started(start_id, "cpu", 3);
  EXPECT_EQ(leases_.PendingShapes(), (std::map<std::string, int>{{"{CPU: 2, GPU: 1}", 1}}));

  ASSERT_TRUE(leases_.ReturnLease(big).ok());
  auto sent = Take();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1].type(), MessageType::kStartWorkerRequest);
  EXPECT_EQ(sent[1].peer, "agent-10.0.0.2");
  EXPECT_EQ(leases_.pending_count(), 0u);
  EXPECT_EQ(Available(node, "GPU"), 0);
}

// Production bug (scheduler/head/lease_manager.cc:111): a new request is only
// tried at once when the queue is empty; otherwise it is queued without a
// scheduling pass, so a request that fits now waits behind an unrelated one
// that does not, until some lease ends or a node joins. The class comment says
// such a request must not block others of another shape.
TEST_F(LeaseManagerTest, NewRequestThatFitsIsNotBlockedByAWaitingRequestOfAnotherShape) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 2}, {"GPU", 1}});
  JobId job = NewJob();
  Grant(job, {{"CPU", 1}, {"GPU", 1}}, "agent-10.0.0.2");
  leases_.RequestLease("gpu", 2, Shape(job, {{"GPU", 1}}));
  EXPECT_TRUE(Take().empty());
  leases_.RequestLease("cpu", 3, Shape(job, {{"CPU", 1}}));
  // One CPU is free: the CPU request should start now.
  TakeStart("agent-10.0.0.2");
  EXPECT_EQ(Available(node, "CPU"), 0);
  EXPECT_EQ(leases_.PendingShapes(), (std::map<std::string, int>{{"{GPU: 1}", 1}}));
}

TEST_F(LeaseManagerTest, RequestOfUnregisteredJobIsNotGranted) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 1}});
  leases_.RequestLease("driver", 1, Shape(JobId::FromWire("never-registered"), {{"CPU", 1}}));
  EXPECT_TRUE(Take().empty());
  EXPECT_EQ(leases_.lease_count(), 0u);
  EXPECT_EQ(Available(node, "CPU"), 1);
}

// ---- Ending jobs ----------------------------------------------------------------------

TEST_F(LeaseManagerTest, FinishJobEndsItsLeasesAndDropsItsPendingRequests) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 2}});
  JobId job = NewJob();
  JobId other = NewJob();
  LeaseId a = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 1);
  LeaseId kept = Grant(other, {{"CPU", 1}}, "agent-10.0.0.2", 2);
  leases_.RequestLease("driver", 3, Shape(job, {{"CPU", 2}}));
  EXPECT_TRUE(Take().empty());
  ASSERT_EQ(leases_.pending_count(), 1u);

  EXPECT_EQ(leases_.FinishJob(job, "its driver finished"), 1u);
  auto sent = Take();
  EXPECT_EQ(KilledLeases(sent, "agent-10.0.0.2"), std::vector<LeaseId>{a});
  // No worker started for the dropped request, and its requester hears nothing.
  EXPECT_TRUE(OfType(sent, MessageType::kStartWorkerRequest).empty());
  EXPECT_TRUE(OfType(sent, MessageType::kErrorReply).empty());
  EXPECT_EQ(leases_.pending_count(), 0u);
  EXPECT_EQ(leases_.lease_count(), 1u);
  EXPECT_EQ(Available(node, "CPU"), 1);
  EXPECT_FALSE(leases_.DriverHeartbeat(job, kT0 + 1));
  EXPECT_TRUE(leases_.ReturnLease(kept).ok());
  EXPECT_EQ(leases_.ReturnLease(a).code(), StatusCode::kNotFound);
}

// Regression: the resources a finishing job frees must not be granted to that
// same job's queued requests.
TEST_F(LeaseManagerTest, FinishJobDoesNotGrantFreedResourcesToTheSameJob) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 1}});
  JobId job = NewJob();
  LeaseId lease = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2");
  leases_.RequestLease("driver", 2, Shape(job, {{"CPU", 1}}));
  leases_.RequestLease("driver", 3, Shape(job, {{"CPU", 1}}));
  ASSERT_EQ(leases_.pending_count(), 2u);
  Take();

  EXPECT_EQ(leases_.FinishJob(job, "done"), 1u);
  auto sent = Take();
  EXPECT_EQ(KilledLeases(sent, "agent-10.0.0.2"), std::vector<LeaseId>{lease});
  EXPECT_TRUE(OfType(sent, MessageType::kStartWorkerRequest).empty());
  EXPECT_EQ(leases_.lease_count(), 0u);
  EXPECT_EQ(leases_.pending_count(), 0u);
  EXPECT_EQ(Available(node, "CPU"), 1);
}

TEST_F(LeaseManagerTest, FinishJobGrantsFreedResourcesToOtherJobs) {
  AddNode("10.0.0.2", {{"CPU", 1}});
  JobId job = NewJob();
  JobId waiting = NewJob();
  LeaseId lease = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2");
  leases_.RequestLease("other-driver", 5, Shape(waiting, {{"CPU", 1}}));
  EXPECT_TRUE(Take().empty());

  EXPECT_EQ(leases_.FinishJob(job, "done"), 1u);
  auto sent = Take();
  EXPECT_EQ(KilledLeases(sent, "agent-10.0.0.2"), std::vector<LeaseId>{lease});
  auto starts = OfType(sent, MessageType::kStartWorkerRequest);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].peer, "agent-10.0.0.2");
  EXPECT_EQ(starts[0].As<protocol::StartWorkerRequest>().job_id, waiting);
  EXPECT_EQ(leases_.pending_count(), 0u);
  Started(starts[0].env.id, "other-driver", 5);
}

TEST_F(LeaseManagerTest, WorkerStartingWhenItsJobFinishedIsNotAnswered) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 1}});
  JobId job = NewJob();
  leases_.RequestLease("driver", 1, Shape(job, {{"CPU", 1}}));
  protocol::StartWorkerRequest start;
  uint64_t start_id = TakeStart("agent-10.0.0.2", &start);
  EXPECT_EQ(leases_.FinishJob(job, "done"), 1u);
  EXPECT_EQ(KilledLeases(Take(), "agent-10.0.0.2"), std::vector<LeaseId>{start.lease_id});
  EXPECT_EQ(Available(node, "CPU"), 1);
  // The late reply answers nobody; the worker it reports is stopped (again:
  // the agent may have started it before the first kill came).
  leases_.OnStartWorkerReply(start_id, protocol::StartWorkerReply{});
  auto sent = Take();
  EXPECT_TRUE(OfType(sent, MessageType::kRequestLeaseReply).empty());
  EXPECT_EQ(KilledLeases(sent, "agent-10.0.0.2"), std::vector<LeaseId>{start.lease_id});
  EXPECT_EQ(Available(node, "CPU"), 1);
  // A second reply to the same request is not one.
  leases_.OnStartWorkerReply(start_id, protocol::StartWorkerReply{});
  EXPECT_TRUE(Take().empty());
}

TEST_F(LeaseManagerTest, DetachedRequestLeaseSurvivesFinishJob) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 2}});
  JobId job = NewJob();
  LeaseId detached = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 1, /*detached=*/true);
  LeaseId normal = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 2);
  EXPECT_EQ(leases_.FinishJob(job, "done"), 1u);
  EXPECT_EQ(KilledLeases(Take(), "agent-10.0.0.2"), std::vector<LeaseId>{normal});
  EXPECT_EQ(leases_.lease_count(), 1u);
  EXPECT_EQ(Available(node, "CPU"), 1);
  EXPECT_TRUE(leases_.ReturnLease(detached).ok());
}

// A detached actor outlives its job and may start tasks of its own: the
// requests of its worker's runtime are granted after the job ended, and those
// leases end with that worker; another runtime of the ended job gets nothing.
TEST_F(LeaseManagerTest, ADetachedActorsWorkerLeasesWorkersAfterItsJobEnded) {
  AddNode("10.0.0.2", {{"CPU", 4}});
  JobId job = NewJob();
  LeaseId detached = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 1, /*detached=*/true);
  protocol::RegisterDriverRequest registration;
  registration.job_id = job;
  registration.host_lease_id = detached;
  leases_.RegisterDriver(registration, kT0, "cluster", "actor-runtime");
  // A lease it took while the job ran outlives the job with it.
  leases_.RequestLease("actor-runtime", 6, Shape(job, {{"CPU", 1}}));
  LeaseId earlier = Started(TakeStart("agent-10.0.0.2"), "actor-runtime", 6).lease_id;
  ASSERT_FALSE(earlier.IsNil());
  EXPECT_EQ(leases_.FinishJob(job, "done"), 0u) << "the detached actor's own lease was ended";
  Take();

  leases_.RequestLease("actor-runtime", 7, Shape(job, {{"CPU", 1}}));
  uint64_t start_id = TakeStart("agent-10.0.0.2");
  LeaseId task_lease = Started(start_id, "actor-runtime", 7).lease_id;
  ASSERT_FALSE(task_lease.IsNil());
  leases_.RequestLease("driver", 9, Shape(job, {{"CPU", 1}}));
  EXPECT_TRUE(Take().empty()) << "a lease was granted to a runtime of an ended job";

  // The actor's worker goes: the lease it held goes with it.
  ASSERT_TRUE(leases_.ReturnLease(detached).ok());
  std::vector<LeaseId> killed = KilledLeases(Take(), "agent-10.0.0.2");
  EXPECT_NE(std::find(killed.begin(), killed.end(), task_lease), killed.end());
  EXPECT_NE(std::find(killed.begin(), killed.end(), earlier), killed.end());
}

TEST_F(LeaseManagerTest, RegisteringADetachedActorMakesItsLeaseSurviveFinishJob) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 2}});
  JobId job = NewJob();
  LeaseId detached = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 1);
  LeaseId attached = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 2);
  ASSERT_TRUE(leases_.RegisterActor(Actor("keeper", job, detached, true)).ok());
  ASSERT_TRUE(leases_.RegisterActor(Actor("temp", job, attached, false)).ok());

  EXPECT_EQ(leases_.FinishJob(job, "done"), 1u);
  EXPECT_EQ(KilledLeases(Take(), "agent-10.0.0.2"), std::vector<LeaseId>{attached});
  EXPECT_EQ(Available(node, "CPU"), 1);

  // Named actors of the finished job are gone; detached ones stay.
  auto keeper = leases_.GetActor("keeper");
  ASSERT_TRUE(keeper.ok()) << keeper.status();
  EXPECT_EQ(keeper->lease_id, detached);
  EXPECT_TRUE(keeper->detached);
  EXPECT_EQ(leases_.GetActor("temp").status().code(), StatusCode::kNotFound);
}

TEST_F(LeaseManagerTest, SilentJobKeepsDetachedActor) {
  AddNode("10.0.0.2", {{"CPU", 2}});
  JobId job = NewJob(kT0);
  LeaseId lease = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2");
  ASSERT_TRUE(leases_.RegisterActor(Actor("keeper", job, lease, true)).ok());
  leases_.ExpireSilentJobs(kT0 + 10 * kJobTimeout);
  EXPECT_TRUE(KilledLeases(Take(), "agent-10.0.0.2").empty());
  EXPECT_FALSE(leases_.DriverHeartbeat(job, kT0 + 10 * kJobTimeout));  // the job did end
  EXPECT_TRUE(leases_.GetActor("keeper").ok());
  EXPECT_EQ(leases_.lease_count(), 1u);
}

// ---- Failures -------------------------------------------------------------------------

// A detached actor whose owner's job has ended is restarted by the head when
// its worker dies: a new worker is started with the constructor call (init),
// and the name points at it once it runs. Restarts run out like the owner's.
TEST_F(LeaseManagerTest, TheHeadRestartsADetachedActorWhoseOwnerIsGone) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 2}});
  JobId job = NewJob();
  LeaseId lease = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 1, /*detached=*/true);
  OrphanRestartable(job, lease, /*max_restarts=*/1, {"\x07"});

  WorkerKilled(lease);
  protocol::StartWorkerRequest start;
  uint64_t start_id = 0;
  for (const Sent& sent : Take()) {
    if (sent.type() != MessageType::kStartWorkerRequest) continue;
    start = sent.As<protocol::StartWorkerRequest>();
    start_id = sent.env.id;
  }
  ASSERT_NE(start_id, 0u) << "no new worker was asked for";
  EXPECT_EQ(start.init.function, "Counter::Create");
  EXPECT_EQ(start.init.actor_id.Hex(), "actor-keeper");
  EXPECT_EQ(start.init.args, std::vector<std::string>{"\x07"});
  auto waiting = leases_.GetActor("keeper");
  ASSERT_TRUE(waiting.ok()) << "the name stays while the actor restarts";
  EXPECT_TRUE(waiting->worker_address.empty());

  protocol::StartWorkerReply started;
  started.worker_address = "tcp://10.0.0.2:7100";
  started.worker_pid = 5151;
  leases_.OnStartWorkerReply(start_id, started);
  EXPECT_TRUE(Take().empty()) << "the head owns the new lease: nobody is sent a grant";
  auto restarted = leases_.GetActor("keeper");
  ASSERT_TRUE(restarted.ok());
  EXPECT_EQ(restarted->worker_address, "tcp://10.0.0.2:7100");
  EXPECT_EQ(restarted->actor_id.Hex(), "actor-keeper");
  EXPECT_EQ(restarted->max_restarts, 0);
  EXPECT_EQ(restarted->restarts_done, 1);
  EXPECT_EQ(Available(node, "CPU"), 1);

  // Its restarts are spent: the next death ends it, name and resources.
  WorkerKilled(restarted->lease_id);
  EXPECT_EQ(OfType(Take(), MessageType::kStartWorkerRequest).size(), 0u);
  EXPECT_EQ(leases_.GetActor("keeper").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Available(node, "CPU"), 2);
}

// The same when its node dies: the new worker goes to a node that is alive.
TEST_F(LeaseManagerTest, ADetachedActorOnADeadNodeIsRestartedElsewhereByTheHead) {
  NodeId dying = AddNode("10.0.0.2", {{"CPU", 1}});
  JobId job = NewJob();
  LeaseId lease = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 1, /*detached=*/true);
  NodeId other = AddNode("10.0.0.3", {{"CPU", 1}});
  OrphanRestartable(job, lease, /*max_restarts=*/-1);
  ASSERT_TRUE(nodes_.MarkDead(dying, "test"));
  leases_.OnNodeDead(dying, "no heartbeat within 1500 ms");
  auto starts = OfType(Take(), MessageType::kStartWorkerRequest);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].peer, "agent-10.0.0.3");
  EXPECT_EQ(starts[0].As<protocol::StartWorkerRequest>().init.function, "Counter::Create");
  EXPECT_EQ(Available(other, "CPU"), 0);
  EXPECT_EQ(leases_.GetActor("keeper")->max_restarts, -1) << "no limit stays no limit";
}

// A handle that kills the actor while the head restarts it returns the lease
// it knew: the actor stays dead, and the new worker goes when it arrives.
TEST_F(LeaseManagerTest, ADetachedActorKilledWhileTheHeadRestartsItStaysDead) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 2}});
  JobId job = NewJob();
  LeaseId lease = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 1, /*detached=*/true);
  OrphanRestartable(job, lease, /*max_restarts=*/-1);
  protocol::ProcessExitedNotice exited;
  exited.lease_id = lease;
  exited.all_exited = true;
  leases_.OnProcessExited(exited);
  auto starts = OfType(Take(), MessageType::kStartWorkerRequest);
  ASSERT_EQ(starts.size(), 1u);

  EXPECT_TRUE(leases_.ReturnLease(lease).ok()) << "the kill of a handle that knew the old lease";
  EXPECT_EQ(leases_.GetActor("keeper").status().code(), StatusCode::kNotFound);
  protocol::StartWorkerReply started;
  started.worker_address = "tcp://10.0.0.2:7100";
  leases_.OnStartWorkerReply(starts[0].env.id, started);
  auto kills = KilledLeases(Take(), "agent-10.0.0.2");
  EXPECT_EQ(kills.size(), 1u) << "the new worker is stopped";
  EXPECT_EQ(Available(node, "CPU"), 2);
  EXPECT_EQ(leases_.ReturnLease(lease).code(), StatusCode::kNotFound) << "only once";
}

// While its owner's job runs, the owner restarts its actor: the head does not.
TEST_F(LeaseManagerTest, ADetachedActorWithALiveOwnerIsNotRestartedByTheHead) {
  AddNode("10.0.0.2", {{"CPU", 2}});
  JobId job = NewJob();
  LeaseId lease = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 1, /*detached=*/true);
  protocol::RequestLeaseRequest again = Shape(job, {{"CPU", 1}}, /*detached=*/true);
  again.init.function = "Counter::Create";
  protocol::ActorInfo keeper = Actor("keeper", job, lease, /*detached=*/true);
  keeper.max_restarts = -1;
  keeper.restart_request = protocol::Encode(again);
  ASSERT_TRUE(leases_.RegisterActor(keeper).ok());
  protocol::ProcessExitedNotice exited;
  exited.lease_id = lease;
  exited.all_exited = true;
  leases_.OnProcessExited(exited);
  EXPECT_EQ(OfType(Take(), MessageType::kStartWorkerRequest).size(), 0u);
  EXPECT_EQ(leases_.GetActor("keeper").status().code(), StatusCode::kNotFound)
      << "the owner registers the name again when it has restarted the actor";
}

// A worker that exits by itself (its agent saw it): its lease ends at once,
// resources and name included, even when its owner is gone (a detached actor
// of a finished job), and a live owner is told naming the worker and how.
TEST_F(LeaseManagerTest, AWorkerThatExitsByItselfEndsItsLeaseAndTellsItsOwner) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 2}});
  JobId job = NewJob();
  LeaseId detached = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 1, /*detached=*/true);
  LeaseId attached = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 2);
  ASSERT_TRUE(leases_.RegisterActor(Actor("keeper", job, detached, true)).ok());
  EXPECT_EQ(Available(node, "CPU"), 0);

  WorkerKilled(attached);
  auto sent = Take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].peer, "driver");
  auto lost = sent[0].As<protocol::LeasesLostNotice>();
  EXPECT_EQ(lost.lease_ids, std::vector<LeaseId>{attached});
  EXPECT_EQ(lost.node_id, node.Hex());
  EXPECT_EQ(lost.reason, "worker pid 4242 on node 10.0.0.2 (" + node.Short() +
                             ") was killed by signal 9");
  EXPECT_EQ(Available(node, "CPU"), 1);
  EXPECT_TRUE(KilledLeases(sent, "agent-10.0.0.2").empty()) << "it is dead already";

  // The job ends; later the detached actor's worker exits: its CPU is free and
  // its name is gone, though no owner is left to return the lease.
  leases_.FinishJob(job, "done");
  Take();
  WorkerKilled(detached, /*signal=*/0, /*exit_code=*/3);
  EXPECT_EQ(Available(node, "CPU"), 2);
  EXPECT_EQ(leases_.lease_count(), 0u);
  EXPECT_EQ(leases_.GetActor("keeper").status().code(), StatusCode::kNotFound);
  // A second notice for the same lease changes nothing.
  WorkerKilled(detached, /*signal=*/0, /*exit_code=*/3);
  EXPECT_EQ(Available(node, "CPU"), 2);
}

// A node dies: its leases end (no kills: the workers died with it); a request
// whose worker had not started yet goes back to the queue for another node,
// unless it can only run on that node (hard affinity), which is answered.
TEST_F(LeaseManagerTest, NodeDeathDropsItsLeasesAndRequeuesNotYetStartedRequests) {
  NodeId dying = AddNode("10.0.0.2", {{"CPU", 3}});
  NodeId other = AddNode("10.0.0.3", {{"GPU", 1}});
  JobId job = NewJob();
  LeaseId running = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 1);
  LeaseId elsewhere = Grant(job, {{"GPU", 1}}, "agent-10.0.0.3", 2);
  ASSERT_TRUE(leases_.RegisterActor(Actor("on-dead-node", job, running)).ok());
  leases_.RequestLease("starter", 3, Shape(job, {{"CPU", 1}}));
  uint64_t start_id = TakeStart("agent-10.0.0.2");
  auto pinned = Shape(job, {{"CPU", 1}});
  pinned.strategy = protocol::LeaseStrategy::kNodeAffinity;
  pinned.affinity_node_id = dying.Hex();
  leases_.RequestLease("pinned", 4, pinned);
  (void)TakeStart("agent-10.0.0.2");
  ASSERT_EQ(leases_.lease_count(), 4u);

  ASSERT_TRUE(nodes_.MarkDead(dying, "test"));
  leases_.OnNodeDead(dying, "no heartbeat within 1500 ms");
  auto sent = Take();
  // The running lease's owner hears that it is lost; the pinned request gets
  // an error; no kills (the workers died with the node).
  ASSERT_EQ(sent.size(), 2u);
  auto lost = OfType(sent, MessageType::kLeasesLostNotice);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].peer, "driver");
  auto notice = lost[0].As<protocol::LeasesLostNotice>();
  EXPECT_EQ(notice.lease_ids, std::vector<LeaseId>{running});
  EXPECT_EQ(notice.node_id, dying.Hex());
  EXPECT_EQ(notice.reason,
            "node 10.0.0.2 (" + dying.Short() + ") was declared dead: no heartbeat within 1500 ms");
  auto errors = OfType(sent, MessageType::kErrorReply);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].peer, "pinned");
  EXPECT_EQ(errors[0].env.id, 4u);
  auto err = errors[0].Error();
  EXPECT_EQ(err.code, static_cast<uint8_t>(StatusCode::kUnavailable));
  EXPECT_NE(err.message.find("died"), std::string::npos) << err.message;

  EXPECT_EQ(leases_.lease_count(), 1u);
  EXPECT_EQ(leases_.ReturnLease(running).code(), StatusCode::kNotFound);
  EXPECT_EQ(leases_.GetActor("on-dead-node").status().code(), StatusCode::kNotFound);
  // A late start reply for the dead node's worker is ignored.
  leases_.OnStartWorkerReply(start_id, protocol::StartWorkerReply{});
  EXPECT_TRUE(Take().empty());
  EXPECT_EQ(Available(other, "GPU"), 0);
  EXPECT_TRUE(leases_.ReturnLease(elsewhere).ok());
  (void)Take();  // the returned lease's kill
  // The starter's request waits for a node with a CPU, and goes to one that joins.
  EXPECT_EQ(leases_.PendingShapes().size(), 1u);
  AddNode("10.0.0.4", {{"CPU", 1}});
  protocol::StartWorkerRequest start;
  TakeStart("agent-10.0.0.4", &start);
  EXPECT_EQ(start.resources, (ResourceMap{{"CPU", 1}}));
}

// A request queued behind a busy node it is pinned to (hard affinity) is
// answered when that node dies, not left queued for ever; a soft one waits
// for any node.
TEST_F(LeaseManagerTest, QueuedHardAffinityToANodeThatDiesIsAnswered) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 1}});
  JobId job = NewJob();
  LeaseId busy = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 1);
  auto pinned = Shape(job, {{"CPU", 1}});
  pinned.strategy = protocol::LeaseStrategy::kNodeAffinity;
  pinned.affinity_node_id = node.Hex();
  leases_.RequestLease("pinned", 2, pinned);
  auto soft = pinned;
  soft.affinity_soft = true;
  leases_.RequestLease("soft", 3, soft);
  EXPECT_TRUE(Take().empty());
  ASSERT_EQ(leases_.pending_count(), 2u);

  ASSERT_TRUE(nodes_.MarkDead(node, "test"));
  leases_.OnNodeDead(node, "no heartbeat within 1500 ms");
  auto errors = OfType(Take(), MessageType::kErrorReply);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].peer, "pinned");
  EXPECT_EQ(errors[0].env.id, 2u);
  auto err = errors[0].Error();
  EXPECT_EQ(err.code, static_cast<uint8_t>(StatusCode::kUnavailable));
  EXPECT_NE(err.message.find("10.0.0.2"), std::string::npos) << err.message;
  EXPECT_NE(err.message.find("hard node affinity"), std::string::npos) << err.message;
  EXPECT_EQ(leases_.pending_count(), 1u);
  EXPECT_EQ(leases_.ReturnLease(busy).code(), StatusCode::kNotFound);
  AddNode("10.0.0.3", {{"CPU", 1}});
  TakeStart("agent-10.0.0.3");
  EXPECT_EQ(leases_.pending_count(), 0u);
}

// Every lease's end runs a scheduling pass: with many equal requests queued,
// the pass makes one policy decision for them, not one each, and still grants
// in order.
TEST_F(LeaseManagerTest, APassDecidesOnceForManyEqualQueuedRequests) {
  AddNode("10.0.0.2", {{"CPU", 1}});
  JobId job = NewJob();
  LeaseId busy = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 1);
  constexpr int kQueued = 1000;
  for (int i = 0; i < kQueued; ++i) {
    leases_.RequestLease("driver", 100 + static_cast<uint64_t>(i), Shape(job, {{"CPU", 1}}));
  }
  ASSERT_EQ(leases_.pending_count(), static_cast<size_t>(kQueued));
  uint64_t before = leases_.decisions();
  ASSERT_TRUE(leases_.ReturnLease(busy).ok());
  EXPECT_LE(leases_.decisions() - before, 3u);
  EXPECT_EQ(leases_.pending_count(), static_cast<size_t>(kQueued - 1));
  // The oldest request got the CPU.
  auto starts = OfType(Take(), MessageType::kStartWorkerRequest);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_FALSE(Started(starts[0].env.id, "driver", 100).lease_id.IsNil());
}

// The node table's book (the policy view's devices) is the only one: the
// accounting check derives each device's use from the leases themselves.
// Shares of one device and whole devices are fine; a device freed behind a
// live lease's back and granted again is caught, naming the device.
TEST_F(LeaseManagerTest, DevicesLeasedTwiceAreCaughtByTheAccountingCheck) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 8}, {"GPU", 2}});
  JobId job = NewJob();
  LeaseId half_a = Grant(job, {{"GPU", 0.5}}, "agent-10.0.0.2", 1);
  LeaseId half_b = Grant(job, {{"GPU", 0.5}}, "agent-10.0.0.2", 2);
  LeaseId whole = Grant(job, {{"GPU", 1}}, "agent-10.0.0.2", 3);
  EXPECT_TRUE(leases_.CheckAccounting().ok()) << leases_.CheckAccounting();
  EXPECT_TRUE(leases_.ReturnLease(half_a).ok());
  EXPECT_TRUE(leases_.ReturnLease(half_b).ok());
  (void)Take();
  EXPECT_TRUE(leases_.CheckAccounting().ok()) << leases_.CheckAccounting();
  // Corrupt the book: device 1 is free there while `whole` holds it.
  nodes_.Release(node, {{"GPU", 1}}, {1});
  nodes_.TryAcquire(node, {{"GPU", 1}}, nullptr);  // takes device 0 back out of play
  (void)Grant(job, {{"GPU", 1}}, "agent-10.0.0.2", 4);
  Status checked = leases_.CheckAccounting();
  EXPECT_EQ(checked.code(), StatusCode::kInternal);
  EXPECT_NE(checked.message().find("device 1 of node " + node.Short() + " is leased 2"),
            std::string::npos)
      << checked;
  EXPECT_EQ(leases_.invariant_violations(), 0u) << "the policy and the table agreed";
  (void)whole;
}

TEST_F(LeaseManagerTest, RequestsNoLongerGoToADeadNodesAgent) {
  NodeId dying = AddNode("10.0.0.2", {{"CPU", 1}});
  JobId job = NewJob();
  ASSERT_TRUE(nodes_.MarkDead(dying, "test"));
  leases_.OnNodeDead(dying);
  leases_.RequestLease("driver", 1, Shape(job, {{"CPU", 1}}));
  auto sent = Take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].peer, "driver");
  EXPECT_EQ(sent[0].Error().message.rfind("infeasible", 0), 0u);
}

TEST_F(LeaseManagerTest, StartWorkerErrorAnswersTheRequesterAndFreesResources) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 1}});
  JobId job = NewJob();
  leases_.RequestLease("driver", 12, Shape(job, {{"CPU", 1}}));
  uint64_t start_id = TakeStart("agent-10.0.0.2");
  EXPECT_EQ(Available(node, "CPU"), 0);

  leases_.OnStartWorkerError(start_id, Status::Internal("exec /bin/driver: no such file"));
  auto sent = Take();
  ASSERT_EQ(sent.size(), 1u);  // the error; no kill for a worker that never ran
  EXPECT_EQ(sent[0].peer, "driver");
  EXPECT_EQ(sent[0].env.id, 12u);
  auto err = sent[0].Error();
  EXPECT_EQ(err.code, static_cast<uint8_t>(StatusCode::kInternal));
  EXPECT_NE(err.message.find("exec /bin/driver: no such file"), std::string::npos)
      << err.message;
  EXPECT_EQ(Available(node, "CPU"), 1);
  EXPECT_EQ(leases_.lease_count(), 0u);

  // Repeated or unknown errors are ignored.
  leases_.OnStartWorkerError(start_id, Status::Internal("again"));
  leases_.OnStartWorkerError(999, Status::Internal("unknown"));
  EXPECT_TRUE(Take().empty());
}

TEST_F(LeaseManagerTest, StartWorkerErrorLetsAWaitingRequestRun) {
  AddNode("10.0.0.2", {{"CPU", 1}});
  JobId job = NewJob();
  leases_.RequestLease("a", 1, Shape(job, {{"CPU", 1}}));
  uint64_t start_id = TakeStart("agent-10.0.0.2");
  leases_.RequestLease("b", 2, Shape(job, {{"CPU", 1}}));
  EXPECT_TRUE(Take().empty());
  leases_.OnStartWorkerError(start_id, Status::Unavailable("fork failed"));
  auto sent = Take();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].peer, "a");
  EXPECT_EQ(sent[0].type(), MessageType::kErrorReply);
  EXPECT_EQ(sent[1].peer, "agent-10.0.0.2");
  EXPECT_EQ(sent[1].type(), MessageType::kStartWorkerRequest);
  Started(sent[1].env.id, "b", 2);
}

// ---- Named actors ---------------------------------------------------------------------

TEST_F(LeaseManagerTest, RegisteredActorIsFoundByName) {
  AddNode("10.0.0.2", {{"CPU", 1}});
  JobId job = NewJob();
  LeaseId lease = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2");
  ASSERT_TRUE(leases_.RegisterActor(Actor("counter", job, lease)).ok());
  auto found = leases_.GetActor("counter");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->actor_id.Hex(), "actor-counter");
  EXPECT_EQ(found->job_id, job);
  EXPECT_EQ(found->class_name, "Counter::Create");
  EXPECT_EQ(found->worker_address, "tcp://10.0.0.2:7000");
  EXPECT_EQ(found->lease_id, lease);
}

TEST_F(LeaseManagerTest, RegisterActorRefusesDuplicateNameEmptyNameAndUnknownLease) {
  AddNode("10.0.0.2", {{"CPU", 2}});
  JobId job = NewJob();
  LeaseId a = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 1);
  LeaseId b = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 2);
  ASSERT_TRUE(leases_.RegisterActor(Actor("counter", job, a)).ok());

  Status dup = leases_.RegisterActor(Actor("counter", job, b));
  EXPECT_EQ(dup.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(dup.message().find("'counter'"), std::string::npos) << dup;
  EXPECT_EQ(leases_.GetActor("counter")->lease_id, a);  // the first one stays

  Status unknown = leases_.RegisterActor(Actor("ghost", job, LeaseId::FromWire("no-such-lease")));
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_FALSE(leases_.GetActor("ghost").ok());

  EXPECT_EQ(leases_.RegisterActor(Actor("", job, b)).code(), StatusCode::kInvalidArgument);
}

TEST_F(LeaseManagerTest, GetUnknownActorIsNotFoundAndMentionsDetached) {
  auto missing = leases_.GetActor("nobody");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("'nobody'"), std::string::npos);
  EXPECT_NE(missing.status().message().find("Detached"), std::string::npos)
      << missing.status();
}

TEST_F(LeaseManagerTest, ReturningAnActorsLeaseForgetsItsNameAndFreesIt) {
  AddNode("10.0.0.2", {{"CPU", 2}});
  JobId job = NewJob();
  LeaseId lease = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 1);
  ASSERT_TRUE(leases_.RegisterActor(Actor("counter", job, lease)).ok());
  ASSERT_TRUE(leases_.ReturnLease(lease).ok());
  EXPECT_EQ(KilledLeases(Take(), "agent-10.0.0.2"), std::vector<LeaseId>{lease});
  EXPECT_EQ(leases_.GetActor("counter").status().code(), StatusCode::kNotFound);
  // The name can be used again.
  LeaseId next = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 2);
  EXPECT_TRUE(leases_.RegisterActor(Actor("counter", job, next)).ok());
}

TEST_F(LeaseManagerTest, NamedActorsOfAFinishedJobDisappearOthersStay) {
  AddNode("10.0.0.2", {{"CPU", 3}});
  JobId job = NewJob();
  JobId other = NewJob();
  LeaseId mine = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 1);
  LeaseId keeper = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 2);
  LeaseId theirs = Grant(other, {{"CPU", 1}}, "agent-10.0.0.2", 3);
  ASSERT_TRUE(leases_.RegisterActor(Actor("mine", job, mine)).ok());
  ASSERT_TRUE(leases_.RegisterActor(Actor("keeper", job, keeper, true)).ok());
  ASSERT_TRUE(leases_.RegisterActor(Actor("theirs", other, theirs)).ok());

  leases_.FinishJob(job, "done");
  EXPECT_EQ(leases_.GetActor("mine").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(leases_.GetActor("keeper").ok());
  EXPECT_TRUE(leases_.GetActor("theirs").ok());
  // The name of the ended actor is free again.
  EXPECT_EQ(leases_.RegisterActor(Actor("mine", other, theirs)).code(), StatusCode::kOk);
}

// ---- Names reserved at creation (ActorInfo::starting) ------------------------------

protocol::ActorInfo Reservation(const std::string& name, const std::string& actor,
                                const JobId& job, bool detached = false) {
  protocol::ActorInfo info;
  info.actor_id = ActorId::FromWire(actor);
  info.name = name;
  info.job_id = job;
  info.class_name = "Counter::Create";
  info.detached = detached;
  info.starting = true;
  info.metadata = "meta-of-" + actor;
  return info;
}

TEST_F(LeaseManagerTest, AReservedNameIsFoundAtOnceAndRefusesASecondActor) {
  AddNode("10.0.0.2", {{"CPU", 1}});
  JobId job = NewJob();
  ASSERT_TRUE(leases_.RegisterActor(Reservation("svc", "actor-1", job), "driver").ok());
  auto found = leases_.GetActor("svc");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_TRUE(found->starting);
  EXPECT_EQ(found->worker_address, "");
  EXPECT_EQ(found->metadata, "meta-of-actor-1");
  EXPECT_TRUE(leases_.RegisterActor(Reservation("svc", "actor-1", job), "driver").ok())
      << "the same reservation sent again is no conflict";

  Status second = leases_.RegisterActor(Reservation("svc", "actor-2", job), "driver");
  EXPECT_EQ(second.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(second.message().find("constructor is still running"), std::string::npos) << second;

  // The constructor ran: the owner names the worker; the metadata stays.
  LeaseId lease = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2");
  protocol::ActorInfo running = Actor("svc", job, lease);
  running.actor_id = ActorId::FromWire("actor-1");
  ASSERT_TRUE(leases_.RegisterActor(running, "driver").ok());
  found = leases_.GetActor("svc");
  EXPECT_FALSE(found->starting);
  EXPECT_EQ(found->worker_address, "tcp://10.0.0.2:7000");
  EXPECT_EQ(found->metadata, "meta-of-actor-1");
  EXPECT_EQ(leases_.RegisterActor(Reservation("svc", "actor-1", job), "driver").code(),
            StatusCode::kAlreadyExists)
      << "a registered actor's name cannot be reserved again, even by its own id";
  EXPECT_FALSE(leases_.DropActorName("svc", ActorId::FromWire("actor-1")))
      << "a running actor's name goes with its lease, not by a drop";
}

TEST_F(LeaseManagerTest, OnlyItsOwnActorDropsAReservedName) {
  JobId job = NewJob();
  ASSERT_TRUE(leases_.RegisterActor(Reservation("svc", "actor-1", job), "driver").ok());
  EXPECT_FALSE(leases_.DropActorName("svc", ActorId::FromWire("actor-2")));
  EXPECT_TRUE(leases_.GetActor("svc").ok());
  EXPECT_TRUE(leases_.DropActorName("svc", ActorId::FromWire("actor-1")));
  EXPECT_EQ(leases_.GetActor("svc").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(leases_.RegisterActor(Reservation("svc", "actor-2", job), "driver").ok());
}

TEST_F(LeaseManagerTest, ReservedNamesGoWithTheirJobDetachedOnesToo) {
  JobId job = NewJob();
  JobId other = NewJob();
  ASSERT_TRUE(leases_.RegisterActor(Reservation("mine", "actor-1", job), "driver").ok());
  ASSERT_TRUE(
      leases_.RegisterActor(Reservation("keeper", "actor-2", job, /*detached=*/true), "driver")
          .ok());
  ASSERT_TRUE(leases_.RegisterActor(Reservation("theirs", "actor-3", other), "driver-2").ok());
  leases_.FinishJob(job, "done");
  EXPECT_FALSE(leases_.GetActor("mine").ok());
  EXPECT_FALSE(leases_.GetActor("keeper").ok()) << "nobody is left to register it";
  EXPECT_TRUE(leases_.GetActor("theirs").ok());
}

TEST_F(LeaseManagerTest, ReservedNamesGoWhenTheWorkerThatMadeThemEnds) {
  AddNode("10.0.0.2", {{"CPU", 2}});
  JobId job = NewJob();
  LeaseId outer = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2");
  RuntimeInside(job, outer, "worker-runtime");
  ASSERT_TRUE(leases_.RegisterActor(
                         Reservation("nested", "actor-1", job, /*detached=*/true), "worker-runtime")
                  .ok());
  ASSERT_TRUE(leases_.RegisterActor(Reservation("top", "actor-2", job), "driver").ok());
  // The nested actor's (detached) lease: its constructor runs for that worker.
  protocol::RequestLeaseRequest req = Shape(job, {{"CPU", 1}}, /*detached=*/true);
  req.for_actor = true;
  req.actor_id = ActorId::FromWire("actor-1");
  leases_.RequestLease("worker-runtime", 5, req);
  LeaseId nested = Started(TakeStart("agent-10.0.0.2"), "worker-runtime", 5).lease_id;
  ASSERT_TRUE(leases_.ReturnLease(outer).ok());
  EXPECT_THAT(KilledLeases(Take(), "agent-10.0.0.2"), ::testing::UnorderedElementsAre(outer, nested))
      << "nobody is left to name the nested actor: it would run for good";
  EXPECT_FALSE(leases_.GetActor("nested").ok());
  EXPECT_TRUE(leases_.GetActor("top").ok());
}

TEST_F(LeaseManagerTest, ANameReservedByADetachedActorOutlivesItsJob) {
  AddNode("10.0.0.2", {{"CPU", 2}});
  JobId job = NewJob();
  LeaseId controller = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2", 1, /*detached=*/true);
  RuntimeInside(job, controller, "controller-runtime");
  ASSERT_TRUE(leases_.RegisterActor(Reservation("replica", "actor-1", job), "controller-runtime")
                  .ok());
  protocol::RequestLeaseRequest req = Shape(job, {{"CPU", 1}});
  req.for_actor = true;
  req.actor_id = ActorId::FromWire("actor-1");
  leases_.RequestLease("controller-runtime", 5, req);
  Started(TakeStart("agent-10.0.0.2"), "controller-runtime", 5);
  leases_.FinishJob(job, "its driver finished");
  EXPECT_TRUE(KilledLeases(Take(), "agent-10.0.0.2").empty())
      << "the detached controller's half-made replica was stopped with the job";
  auto found = leases_.GetActor("replica");
  ASSERT_TRUE(found.ok()) << "its creator lives on and will name it";
  EXPECT_TRUE(found->starting);
}

// A detached actor whose driver exits while its constructor runs: the head
// creates it again itself, or stops it; nothing is left without a name.
class HandOverTest : public LeaseManagerTest {
 protected:
  // Job `job_` reserved detached "llm" and holds its lease, constructor running.
  void SetUp() override {
    AddNode("10.0.0.2", {{"CPU", 2}});
    job_ = NewJob();
    ASSERT_TRUE(
        leases_.RegisterActor(Reservation("llm", "actor-1", job_, /*detached=*/true), "driver")
            .ok());
    protocol::RequestLeaseRequest req = Shape(job_, {{"CPU", 1}}, /*detached=*/true);
    req.for_actor = true;
    req.actor_id = ActorId::FromWire("actor-1");
    leases_.RequestLease("driver", 1, req);
    lease_ = Started(TakeStart("agent-10.0.0.2", &start_), "driver", 1).lease_id;
  }
  // What lease_'s worker says of its constructor, through its agent.
  void Constructor(uint8_t stage, const std::string& error = "") {
    protocol::ActorConstructionNotice notice;
    notice.lease_id = lease_;
    notice.stage = stage;
    notice.error = error;
    leases_.OnActorConstruction(notice);
  }
  protocol::ActorInfo HandOver(bool with_constructor) {
    protocol::ActorInfo info = Reservation("llm", "actor-1", job_, /*detached=*/true);
    info.max_restarts = 0;
    if (with_constructor) {
      protocol::RequestLeaseRequest again = Shape(job_, {{"CPU", 1}}, /*detached=*/true);
      again.for_actor = true;
      again.actor_id = ActorId::FromWire("actor-1");
      again.init.function = "Model::Create";
      again.init.actor_id = ActorId::FromWire("actor-1");
      again.init.args = {"weights-v1"};
      info.restart_request = protocol::Encode(again);
    }
    return info;
  }
  // `sent` stopped lease_'s worker and started no other; name and lease are gone.
  void ExpectStoppedForGood(const std::vector<Sent>& sent) {
    EXPECT_EQ(KilledLeases(sent, "agent-10.0.0.2"), std::vector<LeaseId>{lease_});
    EXPECT_TRUE(OfType(sent, MessageType::kStartWorkerRequest).empty());
    EXPECT_FALSE(leases_.GetActor("llm").ok());
    EXPECT_EQ(leases_.lease_count(), 0u);
  }
  JobId job_;
  LeaseId lease_;
  protocol::StartWorkerRequest start_;  // lease_'s
};

TEST_F(HandOverTest, AnActorBeingConstructedIsListedUnderItsReservedName) {
  auto listed = leases_.ListLeases();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].lease_id, lease_);
  EXPECT_EQ(listed[0].kind, protocol::LeaseKind::kActor);
  EXPECT_EQ(listed[0].actor_name, "llm");
  EXPECT_EQ(listed[0].class_name, "Counter::Create");
}

TEST_F(HandOverTest, TheHeadCreatesAHandedOverActorAgainAndNamesItsWorker) {
  leases_.FinishJob(job_, "its driver finished", {HandOver(/*with_constructor=*/true)});
  auto sent = Take();
  EXPECT_EQ(KilledLeases(sent, "agent-10.0.0.2"), std::vector<LeaseId>{lease_})
      << "the worker constructing it for the gone driver stops";
  auto starts = OfType(sent, MessageType::kStartWorkerRequest);
  ASSERT_EQ(starts.size(), 1u);
  auto start = starts[0].As<protocol::StartWorkerRequest>();
  EXPECT_EQ(start.init.function, "Model::Create");
  EXPECT_EQ(start.init.args, std::vector<std::string>{"weights-v1"});
  auto found = leases_.GetActor("llm");
  ASSERT_TRUE(found.ok()) << "the name went with the job";
  EXPECT_FALSE(found->starting);
  EXPECT_EQ(found->worker_address, "");
  EXPECT_EQ(found->metadata, "meta-of-actor-1");
  // A handle waiting for it hears when its worker runs.
  LookUp("llm", "later-job", 9, 60000);
  protocol::StartWorkerReply reply;
  reply.worker_address = "tcp://10.0.0.2:7100";
  reply.worker_pid = 4343;
  leases_.OnStartWorkerReply(starts[0].env.id, reply);
  sent = Take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].peer, "later-job");
  EXPECT_EQ(sent[0].As<protocol::GetActorReply>().actor.worker_address, "tcp://10.0.0.2:7100");
}

TEST_F(HandOverTest, AHandedOverActorWhoseArgumentsCannotOutliveTheJobStops) {
  leases_.FinishJob(job_, "its driver finished", {HandOver(/*with_constructor=*/false)});
  ExpectStoppedForGood(Take());
}

TEST_F(HandOverTest, ADetachedActorNotHandedOverStopsWithItsJob) {
  // Its driver died without a word (SIGKILL): the job ends by silence.
  leases_.FinishJob(job_, "its driver stopped heartbeating");
  EXPECT_EQ(KilledLeases(Take(), "agent-10.0.0.2"), std::vector<LeaseId>{lease_})
      << "a detached lease whose actor was never named would run for good";
  EXPECT_FALSE(leases_.GetActor("llm").ok());
  EXPECT_EQ(leases_.lease_count(), 0u);
}

// The driver died without a word (SIGKILL), but the reservation it sent again
// with the constructor call (ActorSubmitter::ShareConstructor) lets the head
// create the actor itself, as Ray's GCS creates a detached actor.
TEST_F(HandOverTest, AReservationCarryingItsConstructorIsTakenOverWhenItsDriverDies) {
  ASSERT_TRUE(leases_.RegisterActor(HandOver(/*with_constructor=*/true), "driver").ok());
  LookUp("llm", "other-job", 3, 0);
  auto answered = Take();
  ASSERT_EQ(answered.size(), 1u);
  EXPECT_TRUE(answered[0].As<protocol::GetActorReply>().actor.restart_request.empty())
      << "a lookup must not see the constructor's arguments";
  leases_.FinishJob(job_, "its driver stopped heartbeating");
  auto sent = Take();
  EXPECT_EQ(KilledLeases(sent, "agent-10.0.0.2"), std::vector<LeaseId>{lease_});
  auto starts = OfType(sent, MessageType::kStartWorkerRequest);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].As<protocol::StartWorkerRequest>().init.function, "Model::Create");
  auto found = leases_.GetActor("llm");
  ASSERT_TRUE(found.ok()) << "the name went with the job";
  EXPECT_FALSE(found->starting);
}

// Only a detached actor outlives its creator, and only a bounded constructor
// call is kept.
TEST_F(HandOverTest, ANonDetachedOrOversizedConstructorIsNotKept) {
  protocol::ActorInfo oversized = HandOver(/*with_constructor=*/true);
  oversized.restart_request.resize(1 << 20, 'x');
  ASSERT_TRUE(leases_.RegisterActor(oversized, "driver").ok());
  JobId other = NewJob();
  protocol::ActorInfo attached = Reservation("scratch", "actor-2", other);
  attached.restart_request = HandOver(/*with_constructor=*/true).restart_request;
  ASSERT_TRUE(leases_.RegisterActor(attached, "driver-2").ok());
  leases_.FinishJob(job_, "its driver stopped heartbeating");
  leases_.FinishJob(other, "its driver stopped heartbeating");
  auto sent = Take();
  EXPECT_EQ(KilledLeases(sent, "agent-10.0.0.2"), std::vector<LeaseId>{lease_});
  EXPECT_TRUE(OfType(sent, MessageType::kStartWorkerRequest).empty());
  EXPECT_FALSE(leases_.GetActor("llm").ok());
  EXPECT_FALSE(leases_.GetActor("scratch").ok());
}

// A task that made a detached actor and returned before its constructor ran:
// its worker's end no longer stops the actor when the reservation carries
// the constructor.
TEST_F(HandOverTest, ADetachedActorATaskMadeIsTakenOverWhenTheTasksWorkerEnds) {
  LeaseId task = Grant(job_, {{"CPU", 1}}, "agent-10.0.0.2");
  RuntimeInside(job_, task, "task-runtime");
  protocol::ActorInfo made = HandOver(/*with_constructor=*/true);
  made.name = "made-by-task";
  made.actor_id = ActorId::FromWire("actor-2");
  ASSERT_TRUE(leases_.RegisterActor(made, "task-runtime").ok());
  ASSERT_TRUE(leases_.ReturnLease(task).ok());
  auto sent = Take();
  EXPECT_EQ(KilledLeases(sent, "agent-10.0.0.2"), std::vector<LeaseId>{task});
  auto starts = OfType(sent, MessageType::kStartWorkerRequest);
  ASSERT_EQ(starts.size(), 1u) << "the head creates it";
  EXPECT_EQ(starts[0].As<protocol::StartWorkerRequest>().init.function, "Model::Create");
  auto found = leases_.GetActor("made-by-task");
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found->starting);
}

TEST_F(HandOverTest, AnActorNamedBeforeTheJobEndedIsNotTakenOver) {
  protocol::ActorInfo running = Actor("llm", job_, lease_, /*detached=*/true);
  running.actor_id = ActorId::FromWire("actor-1");
  ASSERT_TRUE(leases_.RegisterActor(running, "driver").ok());
  leases_.FinishJob(job_, "its driver finished", {HandOver(/*with_constructor=*/true)});
  auto sent = Take();
  EXPECT_TRUE(KilledLeases(sent, "agent-10.0.0.2").empty());
  EXPECT_TRUE(OfType(sent, MessageType::kStartWorkerRequest).empty());
  EXPECT_EQ(leases_.GetActor("llm")->worker_address, "tcp://10.0.0.2:7000");
}

// The worker of a detached actor its owner constructs reports the
// constructor (through its agent): a creator gone while it runs leaves the
// actor to the head, which names that worker once it is made instead of
// constructing it a second time.
TEST_F(HandOverTest, ADetachedActorsWorkerIsAskedToReportItsConstructor) {
  EXPECT_TRUE(start_.report_construction);
  JobId other = NewJob();
  leases_.RequestLease("driver-2", 1, Shape(other, {{"CPU", 1}}, /*detached=*/true));
  protocol::StartWorkerRequest plain;
  TakeStart("agent-10.0.0.2", &plain);
  EXPECT_FALSE(plain.report_construction) << "not an actor";
}

TEST_F(HandOverTest, AnActorWhoseConstructorRunsIsTakenOverWithoutConstructingItAgain) {
  ASSERT_TRUE(leases_.RegisterActor(HandOver(/*with_constructor=*/true), "driver").ok());
  Constructor(protocol::ActorConstructionNotice::kBegan);
  LookUp("llm", "later-job", 9, 60000);
  leases_.FinishJob(job_, "its driver stopped heartbeating");
  auto sent = Take();
  EXPECT_TRUE(KilledLeases(sent, "agent-10.0.0.2").empty())
      << "the worker running its constructor goes on";
  EXPECT_TRUE(OfType(sent, MessageType::kStartWorkerRequest).empty()) << "no second construction";
  EXPECT_TRUE(OfType(sent, MessageType::kGetActorReply).empty()) << "nothing to call yet";
  auto reserved = leases_.GetActor("llm");
  ASSERT_TRUE(reserved.ok()) << "the name went with the job";
  EXPECT_TRUE(reserved->starting);
  Constructor(protocol::ActorConstructionNotice::kSucceeded);
  sent = Take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].peer, "later-job");
  auto found = sent[0].As<protocol::GetActorReply>().actor;
  EXPECT_FALSE(found.starting);
  EXPECT_EQ(found.worker_address, "tcp://10.0.0.2:7000");
  EXPECT_EQ(found.lease_id, lease_);
  EXPECT_EQ(found.metadata, "meta-of-actor-1");
  EXPECT_EQ(leases_.lease_count(), 1u);
}

TEST_F(HandOverTest, AConstructorThatEndedBeforeItsCreatorDiedIsNamedAtOnce) {
  // Handed over at the driver's exit, as the driver had it: no constructor
  // call is needed to take over an actor that is made already.
  Constructor(protocol::ActorConstructionNotice::kBegan);
  Constructor(protocol::ActorConstructionNotice::kSucceeded);
  leases_.FinishJob(job_, "its driver finished", {HandOver(/*with_constructor=*/false)});
  auto sent = Take();
  EXPECT_TRUE(KilledLeases(sent, "agent-10.0.0.2").empty());
  auto found = leases_.GetActor("llm");
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found->starting);
  EXPECT_EQ(found->worker_address, "tcp://10.0.0.2:7000");
}

TEST_F(HandOverTest, AConstructorThatFailedBeforeItsCreatorDiedFreesItsNameAtOnce) {
  ASSERT_TRUE(leases_.RegisterActor(HandOver(/*with_constructor=*/true), "driver").ok());
  Constructor(protocol::ActorConstructionNotice::kBegan);
  Constructor(protocol::ActorConstructionNotice::kFailed, "std::runtime_error: no weights");
  leases_.FinishJob(job_, "its driver stopped heartbeating");
  ExpectStoppedForGood(Take());
}

TEST_F(HandOverTest, ATakenOverConstructorThatCanNoLongerBeFollowedIsCreatedAgain) {
  ASSERT_TRUE(leases_.RegisterActor(HandOver(/*with_constructor=*/true), "driver").ok());
  Constructor(protocol::ActorConstructionNotice::kBegan);
  leases_.FinishJob(job_, "its driver stopped heartbeating");
  Take();
  // Its program closed the pipe: its end would never be heard.
  Constructor(protocol::ActorConstructionNotice::kUnfollowed);
  auto sent = Take();
  EXPECT_EQ(KilledLeases(sent, "agent-10.0.0.2"), std::vector<LeaseId>{lease_});
  auto starts = OfType(sent, MessageType::kStartWorkerRequest);
  ASSERT_EQ(starts.size(), 1u) << "the name would wait for good";
  EXPECT_EQ(starts[0].As<protocol::StartWorkerRequest>().init.function, "Model::Create");
  ASSERT_TRUE(leases_.GetActor("llm").ok());
  EXPECT_FALSE(leases_.GetActor("llm")->starting);
}

TEST_F(HandOverTest, AnUnfollowedConstructorIsConstructedAgainIfItsCreatorGoesLater) {
  ASSERT_TRUE(leases_.RegisterActor(HandOver(/*with_constructor=*/true), "driver").ok());
  Constructor(protocol::ActorConstructionNotice::kBegan);
  Constructor(protocol::ActorConstructionNotice::kUnfollowed);
  leases_.FinishJob(job_, "its driver stopped heartbeating");
  auto sent = Take();
  EXPECT_EQ(KilledLeases(sent, "agent-10.0.0.2"), std::vector<LeaseId>{lease_})
      << "not taken over: its end would never be heard";
  EXPECT_EQ(OfType(sent, MessageType::kStartWorkerRequest).size(), 1u);
}

TEST_F(HandOverTest, ATakenOverConstructorThatFailsFreesTheNameAndTheWorker) {
  ASSERT_TRUE(leases_.RegisterActor(HandOver(/*with_constructor=*/true), "driver").ok());
  Constructor(protocol::ActorConstructionNotice::kBegan);
  leases_.FinishJob(job_, "its driver stopped heartbeating");
  Take();
  LookUp("llm", "later-job", 9, 60000);
  Constructor(protocol::ActorConstructionNotice::kFailed, "std::runtime_error: no weights");
  auto sent = Take();
  EXPECT_EQ(KilledLeases(sent, "agent-10.0.0.2"), std::vector<LeaseId>{lease_});
  EXPECT_TRUE(OfType(sent, MessageType::kStartWorkerRequest).empty())
      << "a failed constructor is not retried";
  auto replies = OfType(sent, MessageType::kErrorReply);
  ASSERT_EQ(replies.size(), 1u) << "the waiting lookup hears the name is gone";
  EXPECT_FALSE(leases_.GetActor("llm").ok());
  EXPECT_EQ(leases_.lease_count(), 0u);
}

TEST_F(HandOverTest, ATakenOverActorWhoseWorkerDiesInItsConstructorIsRestarted) {
  protocol::ActorInfo restartable = HandOver(/*with_constructor=*/true);
  restartable.max_restarts = 1;
  ASSERT_TRUE(leases_.RegisterActor(restartable, "driver").ok());
  Constructor(protocol::ActorConstructionNotice::kBegan);
  leases_.FinishJob(job_, "its driver stopped heartbeating");
  Take();
  WorkerKilled(lease_);
  auto starts = OfType(Take(), MessageType::kStartWorkerRequest);
  ASSERT_EQ(starts.size(), 1u) << "the head constructs it again";
  EXPECT_EQ(starts[0].As<protocol::StartWorkerRequest>().init.function, "Model::Create");
  auto found = leases_.GetActor("llm");
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found->starting);
  EXPECT_EQ(found->restarts_done, 1);
}

TEST_F(HandOverTest, AnOwnerThatNamesItsActorAfterATakeOverKeepsIt) {
  // The driver went silent (a pause), not dead: it names its actor after all.
  ASSERT_TRUE(leases_.RegisterActor(HandOver(/*with_constructor=*/true), "driver").ok());
  Constructor(protocol::ActorConstructionNotice::kBegan);
  leases_.FinishJob(job_, "its driver stopped heartbeating");
  Take();
  protocol::ActorInfo named = Actor("llm", job_, lease_, /*detached=*/true);
  named.actor_id = ActorId::FromWire("actor-1");
  ASSERT_TRUE(leases_.RegisterActor(named, "driver").ok());
  Constructor(protocol::ActorConstructionNotice::kSucceeded);
  EXPECT_TRUE(KilledLeases(Take(), "agent-10.0.0.2").empty());
  EXPECT_EQ(leases_.GetActor("llm")->lease_id, lease_);
}

// An actor's worker or node dies while its owner lives: a restartable one
// keeps its name for that owner, which restarts it (or drops the name).
class NodeLossTest : public LeaseManagerTest {
 protected:
  // Named actor "svc" (`max_restarts`) runs on 10.0.0.2, owned by "driver".
  void Run(int32_t max_restarts) {
    node_ = AddNode("10.0.0.2", {{"CPU", 1}});
    job_ = NewJob();
    protocol::RequestLeaseRequest req = Shape(job_, {{"CPU", 1}});
    req.for_actor = true;
    req.actor_id = ActorId::FromWire("actor-svc");
    leases_.RequestLease("driver", 1, req);
    LeaseId lease = Started(TakeStart("agent-10.0.0.2"), "driver", 1).lease_id;
    protocol::ActorInfo svc = Actor("svc", job_, lease);
    svc.max_restarts = max_restarts;
    ASSERT_TRUE(leases_.RegisterActor(svc, "driver").ok());
  }
  NodeId node_;
  JobId job_;
};

TEST_F(NodeLossTest, ARestartableActorsNameIsHeldForItsOwner) {
  Run(/*max_restarts=*/1);
  LookUp("svc", "handle", 5, 60000, /*stale_worker=*/"tcp://10.0.0.2:7000");
  leases_.OnNodeDead(node_, "no heartbeat");
  auto found = leases_.GetActor("svc");
  ASSERT_TRUE(found.ok()) << "the name went with the node";
  EXPECT_TRUE(found->starting);
  EXPECT_EQ(found->worker_address, "");
  EXPECT_EQ(leases_.RegisterActor(Reservation("svc", "actor-other", job_), "driver-2").code(),
            StatusCode::kAlreadyExists)
      << "another actor took the name of one being restarted";
  EXPECT_TRUE(leases_.RegisterActor(Reservation("svc", "actor-svc", job_), "driver").ok())
      << "its owner's own reservation";
  // The handle waiting for a new worker heard that the name changed.
  bool answered = false;
  for (const Sent& sent : Take()) answered = answered || (sent.peer == "handle" && sent.env.id == 5);
  EXPECT_TRUE(answered);
  // Its owner gives up on it (no node fits): the name is free.
  EXPECT_TRUE(leases_.DropActorName("svc", ActorId::FromWire("actor-svc")));
  EXPECT_FALSE(leases_.GetActor("svc").ok());
}

// A detached one keeps its constructor call while its name is held: should
// its owner die before restarting it, the head takes it over.
TEST_F(NodeLossTest, AHeldDetachedActorIsTakenOverWhenItsOwnerDiesBeforeRestartingIt) {
  node_ = AddNode("10.0.0.2", {{"CPU", 1}});
  AddNode("10.0.0.3", {{"CPU", 1}});
  job_ = NewJob();
  protocol::RequestLeaseRequest req = Shape(job_, {{"CPU", 1}}, /*detached=*/true);
  req.for_actor = true;
  req.actor_id = ActorId::FromWire("actor-svc");
  req.affinity_node_id = node_.Hex();
  req.strategy = protocol::LeaseStrategy::kNodeAffinity;
  leases_.RequestLease("driver", 1, req);
  LeaseId lease = Started(TakeStart("agent-10.0.0.2"), "driver", 1).lease_id;
  protocol::ActorInfo svc = Actor("svc", job_, lease, /*detached=*/true);
  svc.actor_id = ActorId::FromWire("actor-svc");
  svc.max_restarts = 1;
  protocol::RequestLeaseRequest again = Shape(job_, {{"CPU", 1}}, /*detached=*/true);
  again.for_actor = true;
  again.actor_id = svc.actor_id;
  again.init.function = "Model::Create";
  again.init.actor_id = svc.actor_id;
  svc.restart_request = protocol::Encode(again);
  ASSERT_TRUE(leases_.RegisterActor(svc, "driver").ok());
  ASSERT_TRUE(nodes_.MarkDead(node_, "test"));
  leases_.OnNodeDead(node_, "no heartbeat");
  ASSERT_TRUE(leases_.GetActor("svc").ok());
  EXPECT_TRUE(leases_.GetActor("svc")->starting);
  Take();
  leases_.FinishJob(job_, "its driver stopped heartbeating");
  auto starts = OfType(Take(), MessageType::kStartWorkerRequest);
  ASSERT_EQ(starts.size(), 1u) << "the held name's actor was stopped with its owner";
  EXPECT_EQ(starts[0].As<protocol::StartWorkerRequest>().init.function, "Model::Create");
  ASSERT_TRUE(leases_.GetActor("svc").ok());
}

TEST_F(NodeLossTest, AnActorWithoutRestartsLosesItsNameWithItsNode) {
  Run(/*max_restarts=*/0);
  leases_.OnNodeDead(node_, "no heartbeat");
  EXPECT_FALSE(leases_.GetActor("svc").ok());
}

TEST_F(LeaseManagerTest, AParkedLookupIsAnsweredWhenTheNameGetsItsWorker) {
  AddNode("10.0.0.2", {{"CPU", 1}});
  JobId job = NewJob();
  ASSERT_TRUE(leases_.RegisterActor(Reservation("svc", "actor-1", job), "driver").ok());
  LookUp("svc", "handle", 41, 5000);
  EXPECT_TRUE(Take().empty()) << "answered before the actor had a worker";
  EXPECT_EQ(leases_.parked_actor_lookups(), 1u);

  LeaseId lease = Grant(job, {{"CPU", 1}}, "agent-10.0.0.2");
  protocol::ActorInfo running = Actor("svc", job, lease);
  running.actor_id = ActorId::FromWire("actor-1");
  ASSERT_TRUE(leases_.RegisterActor(running, "driver").ok());
  auto sent = Take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].peer, "handle");
  EXPECT_EQ(sent[0].env.id, 41u);
  auto reply = sent[0].As<protocol::GetActorReply>();
  EXPECT_EQ(reply.actor.worker_address, "tcp://10.0.0.2:7000");
  EXPECT_FALSE(reply.actor.starting);
  EXPECT_EQ(leases_.parked_actor_lookups(), 0u);

  // A handle that lost that worker waits for another one; not found now.
  LookUp("svc", "handle", 42, 5000, /*stale_worker=*/"tcp://10.0.0.2:7000");
  EXPECT_TRUE(Take().empty());
  // Without a change it is answered at its deadline, with what the head has.
  leases_.Tick(kT0 + 4999);
  EXPECT_TRUE(Take().empty());
  leases_.Tick(kT0 + 5000);
  sent = Take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].env.id, 42u);
  EXPECT_EQ(sent[0].As<protocol::GetActorReply>().actor.worker_address, "tcp://10.0.0.2:7000");
}

TEST_F(LeaseManagerTest, AParkedLookupHearsAtOnceThatTheNameWasDropped) {
  JobId job = NewJob();
  ASSERT_TRUE(leases_.RegisterActor(Reservation("svc", "actor-1", job), "driver").ok());
  LookUp("svc", "handle", 7, 60000);
  ASSERT_TRUE(leases_.DropActorName("svc", ActorId::FromWire("actor-1")));
  auto sent = Take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].Error().code, static_cast<uint8_t>(StatusCode::kNotFound));
  EXPECT_NE(sent[0].Error().message.find("'svc'"), std::string::npos);
  // Unparked: a later change answers nobody twice.
  ASSERT_TRUE(leases_.RegisterActor(Reservation("svc", "actor-2", job), "driver").ok());
  EXPECT_TRUE(Take().empty());
}

TEST_F(LeaseManagerTest, ALookupWithoutWaitIsAnsweredAtOnce) {
  LookUp("nobody", "handle", 3, /*wait_ms=*/0);
  auto sent = Take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].Error().code, static_cast<uint8_t>(StatusCode::kNotFound));
  EXPECT_EQ(leases_.parked_actor_lookups(), 0u);
}

}  // namespace
}  // namespace rayx::scheduler
