// A head restarted on the same state file, driven message by message on a
// manual clock: its nodes rejoin as themselves with what they still run, its
// drivers register again, and KV, named actors, groups and jobs are still there.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "common/clock.h"
#include "head/head_service.h"
#include "head/head_store.h"
#include "protocol/codec.h"
#include "transport/message.h"

namespace rayx::scheduler {
namespace {

namespace fs = std::filesystem;
using protocol::MessageType;
using transport::Frames;

constexpr char kToken[] = "s3cret-token";
constexpr char kAgent[] = "agent-a";
constexpr char kDriver[] = "rayx-driver-1";

// A message the head sent through its outbox (not a direct reply).
struct Sent {
  std::string peer;
  uint16_t type = 0;
  uint64_t id = 0;
  std::string body;
};

class HeadRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "rayx-head-restart-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    StartHead();
  }
  void TearDown() override {
    head_.reset();
    store_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Starts (or restarts: the previous one is SIGKILLed, so to speak) a head
  // on the state file.
  void StartHead() {
    head_.reset();
    store_.reset();
    auto store = HeadStore::Open(dir_ + "/head_state.sqlite3");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    auto state = store_->Load();
    ASSERT_TRUE(state.ok()) << state.status();
    HeadServiceOptions o;
    o.token = kToken;
    o.cluster_id = "cluster-" + std::to_string(++starts_);
    o.heartbeat_period_ms = 100;
    o.nodes.node_timeout_ms = 700;
    o.nodes.rejoin_timeout_ms = 5000;
    o.leases.job_timeout_ms = job_timeout_ms_;
    o.store = store_.get();
    o.restored = std::move(*state);
    head_ = std::make_unique<HeadService>(std::move(o), clock_);
    head_->SetOutbox([this](const std::string& peer, Frames frames) {
      auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(frames[0]));
      ASSERT_TRUE(env.ok());
      sent_.push_back({peer, env->t, env->id, std::string(transport::FrameView(frames[1]))});
    });
    sent_.clear();
  }

  // Sends `body` from `peer`; returns the immediate reply's type and body.
  template <typename Req>
  std::pair<uint16_t, std::string> Send(const Req& body, const std::string& peer, uint64_t id) {
    Frames frames = transport::MakeMessage(body, id);
    auto reply = head_->Handle(frames, peer);
    if (!reply) return {0, ""};
    auto env = protocol::Decode<protocol::Envelope>(transport::FrameView((*reply)[0]));
    EXPECT_TRUE(env.ok());
    return {env->t, std::string(transport::FrameView((*reply)[1]))};
  }
  template <typename Reply, typename Req>
  Reply Call(const Req& body, const std::string& peer, uint64_t id = 7) {
    auto [type, bytes] = Send(body, peer, id);
    if (type == static_cast<uint16_t>(MessageType::kErrorReply)) {
      auto error = protocol::Decode<protocol::ErrorReply>(bytes);
      ADD_FAILURE() << "error reply: " << (error.ok() ? error->message : "undecodable");
      return Reply{};
    }
    EXPECT_EQ(type, static_cast<uint16_t>(Reply::kType));
    auto reply = protocol::Decode<Reply>(bytes);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : Reply{};
  }
  template <typename Req>
  protocol::ErrorReply CallError(const Req& body, const std::string& peer, uint64_t id = 7) {
    auto [type, bytes] = Send(body, peer, id);
    EXPECT_EQ(type, static_cast<uint16_t>(MessageType::kErrorReply));
    auto error = protocol::Decode<protocol::ErrorReply>(bytes);
    return error.ok() ? *error : protocol::ErrorReply{};
  }
  // The oldest outbox message of `type`, removed; fails when there is none.
  template <typename T>
  std::pair<Sent, T> Take() {
    for (auto it = sent_.begin(); it != sent_.end(); ++it) {
      if (it->type != static_cast<uint16_t>(T::kType)) continue;
      Sent s = *it;
      sent_.erase(it);
      auto body = protocol::Decode<T>(s.body);
      EXPECT_TRUE(body.ok()) << body.status();
      return {s, body.ok() ? *body : T{}};
    }
    ADD_FAILURE() << "no " << protocol::MessageTypeName(static_cast<uint16_t>(T::kType))
                  << " was sent";
    return {};
  }

  protocol::RegisterNodeRequest Hello() const {
    protocol::RegisterNodeRequest req;
    req.token = kToken;
    req.rayx_version = kRayxVersion;
    req.address = "10.0.0.7";
    req.hostname = "node-a";
    req.agent_pid = 777;
    req.resources = {{"CPU", 4}, {"GPU", 2}};
    return req;
  }
  protocol::RegisterDriverRequest Driver(const std::string& job_id = "") const {
    protocol::RegisterDriverRequest req;
    req.token = kToken;
    req.rayx_version = kRayxVersion;
    req.job_id = job_id;
    return req;
  }
  // A lease granted by the head and started by the agent: its grant.
  protocol::RequestLeaseReply Lease(const std::string& job_id, ResourceMap resources,
                                    const std::string& group = "",
                                    const std::string& owner = kDriver) {
    protocol::RequestLeaseRequest req;
    req.job_id = job_id;
    req.resources = std::move(resources);
    req.for_actor = true;
    req.placement_group_id = group;
    req.bundle_index = group.empty() ? -1 : 0;
    auto [type, bytes] = Send(req, owner, 50);
    EXPECT_EQ(type, 0) << "a lease request is answered through the outbox";
    auto [to_agent, start] = Take<protocol::StartWorkerRequest>();
    EXPECT_EQ(to_agent.peer, kAgent);
    protocol::StartWorkerReply started;
    started.lease_id = start.lease_id;
    started.worker_address = "tcp://10.0.0.7:4000";
    started.worker_pid = 4242;
    started.epoch = start.epoch;
    Send(started, kAgent, to_agent.id);
    auto [to_driver, grant] = Take<protocol::RequestLeaseReply>();
    EXPECT_EQ(to_driver.peer, owner);
    return grant;
  }
  ClusterStatus Status() {
    return Call<protocol::GetClusterStatusReply>(protocol::GetClusterStatusRequest{kToken},
                                                 "cli", 99)
        .status;
  }

  std::string dir_;
  ManualClock clock_;
  std::unique_ptr<HeadStore> store_;
  std::unique_ptr<HeadService> head_;
  std::deque<Sent> sent_;
  int starts_ = 0;
  int64_t job_timeout_ms_ = 3000;
};

TEST_F(HeadRestartTest, ANodeRejoinsAsItselfWithItsLiveLeasesAndTheRestIsStillThere) {
  auto joined = Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  ASSERT_FALSE(joined.node_id.IsNil());
  auto job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  protocol::KvPutRequest put;
  put.ns = "app";
  put.key = "model";
  put.value = "weights-v1";
  Call<protocol::KvPutReply>(put, kDriver, 3);
  protocol::CreatePlacementGroupRequest pg;
  pg.job_id = job;
  pg.placement_group_id = "group-1";
  pg.bundles = {{{"CPU", 1}, {"GPU", 1}}};
  pg.detached = true;
  auto group = Call<protocol::CreatePlacementGroupReply>(pg, kDriver, 4).group;
  ASSERT_EQ(group.state, "CREATED");
  int group_gpu = group.locations.at(0).gpu_ids.at(0);
  // A detached named actor outside the group, holding the other GPU.
  auto grant = Lease(job, {{"GPU", 1}});
  ASSERT_EQ(grant.gpu_ids.size(), 1u);
  EXPECT_NE(grant.gpu_ids[0], group_gpu);
  protocol::RegisterActorRequest actor;
  actor.actor.name = "keeper";
  actor.actor.job_id = job;
  actor.actor.lease_id = grant.lease_id;
  actor.actor.worker_address = grant.worker_address;
  actor.actor.detached = true;
  Call<protocol::RegisterActorReply>(actor, kDriver, 5);
  // An actor in the group's bundle.
  auto member = Lease(job, {{"CPU", 1}, {"GPU", 1}}, "group-1");
  EXPECT_EQ(member.gpu_ids, std::vector<int>{group_gpu});
  std::string cluster_id = Status().cluster_id;

  StartHead();  // the head restarts; the agent and the driver live on
  EXPECT_EQ(Status().cluster_id, cluster_id) << "a restarted head is the same cluster";
  EXPECT_EQ(Status().AliveNodeCount(), 0u) << "nodes are back only once they rejoin";

  // The agent's next heartbeat is told to rejoin, not to fence itself.
  protocol::HeartbeatRequest beat;
  beat.node_id = joined.node_id;
  beat.epoch = joined.epoch;
  auto answer = Call<protocol::HeartbeatReply>(beat, kAgent, 10);
  EXPECT_FALSE(answer.known);
  EXPECT_TRUE(answer.rejoin);
  protocol::HeartbeatRequest other = beat;
  other.epoch = joined.epoch + 1;
  EXPECT_FALSE(Call<protocol::HeartbeatReply>(other, kAgent, 11).rejoin)
      << "another epoch is another incarnation: it must fence";

  // The driver's connection is new to this head: it registers again, same job.
  protocol::KvGetRequest get;
  get.ns = "app";
  get.key = "model";
  auto refused = CallError(get, kDriver, 12);
  EXPECT_EQ(refused.code, static_cast<uint8_t>(StatusCode::kUnauthenticated));
  EXPECT_EQ(refused.message.rfind("register first", 0), 0u) << refused.message;
  EXPECT_EQ(Call<protocol::RegisterDriverReply>(Driver(job), kDriver, 13).job_id, job);
  EXPECT_EQ(Call<protocol::KvGetReply>(get, kDriver, 14).value, "weights-v1");
  protocol::GetActorRequest by_name;
  by_name.name = "keeper";
  EXPECT_EQ(Call<protocol::GetActorReply>(by_name, kDriver, 15).actor.worker_address,
            grant.worker_address);

  // The agent rejoins with its two live leases (and one the head never granted).
  protocol::RegisterNodeRequest rejoin = Hello();
  rejoin.rejoin = true;
  rejoin.previous_node_id = joined.node_id;
  rejoin.previous_epoch = joined.epoch;
  rejoin.live_leases = {{grant.lease_id, job, {{"GPU", 1}}, grant.gpu_ids, 4242, false},
                        {member.lease_id, job, {{"CPU", 1}, {"GPU", 1}}, member.gpu_ids, 4243,
                         false},
                        {"unknown-lease", job, {{"CPU", 1}}, {}, 4244, false}};
  auto rejoined = Call<protocol::RegisterNodeReply>(rejoin, kAgent, 16);
  EXPECT_EQ(rejoined.node_id, joined.node_id);
  EXPECT_EQ(rejoined.epoch, joined.epoch);
  auto [to_agent, kill] = Take<protocol::KillWorkersRequest>();
  EXPECT_EQ(kill.lease_ids, std::vector<std::string>{"unknown-lease"});
  ClusterStatus status = Status();
  ASSERT_EQ(status.AliveNodeCount(), 1u);
  EXPECT_EQ(status.nodes[0].available.at("GPU"), 0) << "both devices are held by live workers";
  EXPECT_EQ(status.nodes[0].available.at("CPU"), 3) << "the bundle keeps its reservation";
  EXPECT_EQ(Call<protocol::HeartbeatReply>(beat, kAgent, 17).known, true);

  // The group is still there, and its bundle is full; the named actor's lease
  // is the head's again (returning it frees its device for new work).
  auto listed = Call<protocol::ListStateReply>(protocol::ListStateRequest{kToken}, "cli", 18);
  ASSERT_EQ(listed.placement_groups.size(), 1u);
  EXPECT_EQ(listed.placement_groups[0].state, "CREATED");
  EXPECT_EQ(listed.leases.size(), 2u);
  protocol::ReturnLeaseRequest give_back;
  give_back.lease_id = grant.lease_id;
  EXPECT_TRUE(Call<protocol::ReturnLeaseReply>(give_back, kDriver, 19).ok);
  auto again = Lease(job, {{"GPU", 1}});
  EXPECT_EQ(again.gpu_ids, grant.gpu_ids) << "the freed device, never the group's";
}

TEST_F(HeadRestartTest, ANodeThatDoesNotRejoinDiesAndTakesItsLeasesAndActorsAlong) {
  auto joined = Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  auto job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  auto grant = Lease(job, {{"GPU", 1}});
  protocol::RegisterActorRequest actor;
  actor.actor.name = "keeper";
  actor.actor.job_id = job;
  actor.actor.lease_id = grant.lease_id;
  actor.actor.detached = true;
  Call<protocol::RegisterActorReply>(actor, kDriver, 3);

  job_timeout_ms_ = 60000;  // the job outlives the node here
  StartHead();
  clock_.Advance(5001);
  head_->ExpireSilentNodes();
  ClusterStatus status = Status();
  ASSERT_EQ(status.nodes.size(), 1u);
  EXPECT_FALSE(status.nodes[0].alive);
  EXPECT_NE(status.nodes[0].death_reason.find("did not rejoin"), std::string::npos)
      << status.nodes[0].death_reason;
  // Too late: its agent must fence and join as a new node.
  protocol::RegisterNodeRequest rejoin = Hello();
  rejoin.rejoin = true;
  rejoin.previous_node_id = joined.node_id;
  rejoin.previous_epoch = joined.epoch;
  auto refused = CallError(rejoin, kAgent, 4);
  EXPECT_EQ(refused.code, static_cast<uint8_t>(StatusCode::kNotFound)) << refused.message;
  EXPECT_EQ(Call<protocol::RegisterDriverReply>(Driver(job), kDriver, 5).job_id, job);
  protocol::GetActorRequest by_name;
  by_name.name = "keeper";
  EXPECT_EQ(CallError(by_name, kDriver, 6).code, static_cast<uint8_t>(StatusCode::kNotFound));

  // Nothing of it comes back after one more restart either.
  StartHead();
  EXPECT_EQ(Status().nodes.size(), 0u);
}

TEST_F(HeadRestartTest, AJobWhoseDriverDoesNotComeBackEndsAfterTheJobTimeout) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  auto job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  protocol::KvPutRequest put;
  put.ns = "app";
  put.key = "scoped";
  put.value = "x";
  put.job_id = job;
  Call<protocol::KvPutReply>(put, kDriver, 3);

  StartHead();
  EXPECT_EQ(Call<protocol::RegisterDriverReply>(Driver(job), "rayx-other", 4).job_id, job)
      << "the job survives the restart";
  clock_.Advance(3001);
  head_->ExpireSilentNodes();
  auto refused = CallError(Driver(job), "rayx-third", 5);
  EXPECT_EQ(refused.code, static_cast<uint8_t>(StatusCode::kNotFound)) << refused.message;
  protocol::KvGetRequest get;
  get.ns = "app";
  get.key = "scoped";
  Call<protocol::RegisterDriverReply>(Driver(), "rayx-third", 6);
  EXPECT_FALSE(Call<protocol::KvGetReply>(get, "rayx-third", 7).found)
      << "the job's keys went with it";
}

// Requests that reach the restarted head before its nodes rejoin wait for
// them: granted when they fit a rejoined node, refused once every node is back
// when they never can.
TEST_F(HeadRestartTest, RequestsBeforeTheNodesRejoinWaitForThem) {
  auto joined = Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  auto job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  StartHead();
  Call<protocol::RegisterDriverReply>(Driver(job), kDriver, 3);
  protocol::RequestLeaseRequest fits;
  fits.job_id = job;
  fits.resources = {{"GPU", 1}};
  EXPECT_EQ(Send(fits, kDriver, 4).first, 0) << "no answer yet: it waits";
  protocol::RequestLeaseRequest never = fits;
  never.resources = {{"GPU", 8}};
  EXPECT_EQ(Send(never, kDriver, 5).first, 0) << "no answer yet: it waits";
  protocol::CreatePlacementGroupRequest pg;
  pg.job_id = job;
  pg.placement_group_id = "group-1";
  pg.bundles = {{{"GPU", 1}}};
  Call<protocol::CreatePlacementGroupReply>(pg, kDriver, 6);
  protocol::WaitPlacementGroupRequest wait;
  wait.placement_group_id = "group-1";
  wait.timeout_ms = 10000;
  EXPECT_EQ(Send(wait, kDriver, 7).first, 0) << "parked until the nodes are back";
  EXPECT_TRUE(sent_.empty());

  protocol::RegisterNodeRequest rejoin = Hello();
  rejoin.rejoin = true;
  rejoin.previous_node_id = joined.node_id;
  rejoin.previous_epoch = joined.epoch;
  Call<protocol::RegisterNodeReply>(rejoin, kAgent, 8);
  auto [to_agent, start] = Take<protocol::StartWorkerRequest>();
  EXPECT_EQ(start.resources, fits.resources);
  bool refused = false, placed = false;
  for (const auto& s : sent_) {
    if (s.type == static_cast<uint16_t>(MessageType::kErrorReply) && s.id == 5) {
      auto error = protocol::Decode<protocol::ErrorReply>(s.body);
      refused = error.ok() && error->message.find("infeasible") != std::string::npos;
    }
    if (s.type == static_cast<uint16_t>(MessageType::kWaitPlacementGroupReply) && s.id == 7) {
      auto reply = protocol::Decode<protocol::WaitPlacementGroupReply>(s.body);
      placed = reply.ok() && reply->group.state == "CREATED";
    }
  }
  EXPECT_TRUE(refused) << "the 8-GPU request is refused once every node is back";
  EXPECT_TRUE(placed) << "the group is placed on the rejoined node";
}

// A rejoin is input from the network: bad amounts or devices are refused (the
// agent then fences itself), never trusted into the books.
TEST_F(HeadRestartTest, ARejoinWithBadLeasesIsRefused) {
  auto joined = Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  StartHead();
  protocol::RegisterNodeRequest rejoin = Hello();
  rejoin.rejoin = true;
  rejoin.previous_node_id = joined.node_id;
  rejoin.previous_epoch = joined.epoch;
  for (double amount : {-1.0, std::nan(""), 1e300}) {
    rejoin.live_leases = {{"lease", "job", {{"CPU", amount}}, {}, 1, false}};
    EXPECT_EQ(CallError(rejoin, kAgent, 2).code, static_cast<uint8_t>(StatusCode::kInvalidArgument))
        << amount;
  }
  rejoin.live_leases = {{"lease", "job", {{"GPU", 1}}, {-3}, 1, false}};
  EXPECT_EQ(CallError(rejoin, kAgent, 3).code, static_cast<uint8_t>(StatusCode::kInvalidArgument));
  rejoin.live_leases = {{"lease", "job", {{"GPU", 1}}, {7}, 1, false}};  // never granted
  EXPECT_FALSE(Call<protocol::RegisterNodeReply>(rejoin, kAgent, 4).node_id.IsNil());
  auto [to_agent, kill] = Take<protocol::KillWorkersRequest>();
  EXPECT_EQ(kill.lease_ids, std::vector<std::string>{"lease"});
  EXPECT_EQ(Status().nodes.at(0).available.at("GPU"), 2);
}

// A worker that submits work (an actor leasing workers of its own) registers
// again after the restart; when its actor's lease ends, so do its leases.
TEST_F(HeadRestartTest, LeasesOfAWorkersRuntimeStillEndWithItsWorker) {
  auto joined = Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  auto job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  auto actor = Lease(job, {{"CPU", 1}});
  constexpr char kWorker[] = "rayx-worker-1";
  protocol::RegisterDriverRequest inside = Driver(job);
  inside.host_lease_id = actor.lease_id;
  Call<protocol::RegisterDriverReply>(inside, kWorker, 3);
  auto task = Lease(job, {{"CPU", 1}}, "", kWorker);

  StartHead();
  Call<protocol::RegisterDriverReply>(Driver(job), kDriver, 4);
  Call<protocol::RegisterDriverReply>(inside, kWorker, 5);  // before the node is back
  protocol::RegisterNodeRequest rejoin = Hello();
  rejoin.rejoin = true;
  rejoin.previous_node_id = joined.node_id;
  rejoin.previous_epoch = joined.epoch;
  rejoin.live_leases = {{actor.lease_id, job, {{"CPU", 1}}, {}, 10, false},
                        {task.lease_id, job, {{"CPU", 1}}, {}, 11, false}};
  Call<protocol::RegisterNodeReply>(rejoin, kAgent, 6);
  EXPECT_TRUE(sent_.empty());
  protocol::ReturnLeaseRequest give_back;
  give_back.lease_id = actor.lease_id;
  Call<protocol::ReturnLeaseReply>(give_back, kDriver, 7);
  std::vector<std::string> killed;
  while (!sent_.empty()) {
    auto [to_agent, kill] = Take<protocol::KillWorkersRequest>();
    killed.insert(killed.end(), kill.lease_ids.begin(), kill.lease_ids.end());
  }
  EXPECT_EQ(killed, (std::vector<std::string>{actor.lease_id, task.lease_id}));
  EXPECT_EQ(Status().nodes.at(0).available.at("CPU"), 4);
}

// Submitted jobs: one whose entrypoint ended while the head was down gets the
// exit its agent reported on rejoin; one still running ends normally later.
TEST_F(HeadRestartTest, SubmittedJobsEndWithTheirEntrypointsAcrossARestart) {
  protocol::RegisterNodeRequest hello = Hello();
  hello.is_head_node = true;
  auto joined = Call<protocol::RegisterNodeReply>(hello, kAgent, 1);
  std::map<std::string, std::string> lease_of;
  for (const std::string id : {"ended-meanwhile", "still-running", "never-started"}) {
    protocol::SubmitJobRequest submit;
    submit.token = kToken;
    submit.submission_id = id;
    submit.entrypoint = {"sleep", "1"};
    Call<protocol::SubmitJobReply>(submit, "cli", 2);
    auto [to_agent, start] = Take<protocol::StartWorkerRequest>();
    ASSERT_EQ(start.processes.size(), 1u);
    lease_of[id] = start.lease_id;
    if (id == "never-started") continue;  // the head dies before the agent answers
    protocol::StartWorkerReply started;
    started.lease_id = start.lease_id;
    started.process_pids = {555};
    started.epoch = start.epoch;
    Send(started, kAgent, to_agent.id);
  }
  auto job = [&](const std::string& id) {
    protocol::GetJobRequest get;
    get.token = kToken;
    get.submission_id = id;
    return Call<protocol::GetJobReply>(get, "cli", 3).job;
  };
  ASSERT_EQ(job("ended-meanwhile").state, "RUNNING");
  ASSERT_EQ(job("never-started").state, "PENDING");

  StartHead();
  EXPECT_EQ(job("never-started").state, "FAILED");
  EXPECT_NE(job("never-started").message.find("submit the job again"), std::string::npos);
  EXPECT_EQ(job("still-running").state, "RUNNING") << "until its node says otherwise";
  protocol::RegisterNodeRequest rejoin = hello;
  rejoin.rejoin = true;
  rejoin.previous_node_id = joined.node_id;
  rejoin.previous_epoch = joined.epoch;
  rejoin.live_leases = {{lease_of["still-running"], "", {}, {}, 555, true},
                        {lease_of["never-started"], "", {}, {}, 556, true}};
  rejoin.recent_exits = {{lease_of["ended-meanwhile"], 0, 555, 3, 0, "bye", true}};
  Call<protocol::RegisterNodeReply>(rejoin, kAgent, 4);
  auto [to_agent, kill] = Take<protocol::KillWorkersRequest>();
  EXPECT_EQ(kill.lease_ids, std::vector<std::string>{lease_of["never-started"]});
  auto ended = job("ended-meanwhile");
  EXPECT_EQ(ended.state, "FAILED");
  EXPECT_EQ(ended.exit_code, 3);
  EXPECT_NE(ended.message.find("exited with status 3"), std::string::npos) << ended.message;
  EXPECT_EQ(job("still-running").state, "RUNNING");

  protocol::ProcessExitedNotice exit;
  exit.lease_id = lease_of["still-running"];
  exit.pid = 555;
  exit.all_exited = true;
  exit.epoch = joined.epoch;
  Send(exit, kAgent, 5);
  EXPECT_EQ(job("still-running").state, "SUCCEEDED");
}

}  // namespace
}  // namespace rayx::scheduler
