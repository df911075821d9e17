// A head restarted on the same state file, driven message by message on a
// manual clock: its nodes rejoin as themselves with what they still run, its
// drivers register again, and KV, named actors, groups and jobs are still there.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "head_fixture.h"

namespace rayx::scheduler {
namespace head_restart_service_test {  // this file's own (unit tests compile in batches)

using namespace testing_fixture;  // NOLINT: the fixture's names and constants

class HeadRestartTest : public HeadFixture {
 protected:
  // Registers detached actor "keeper" of `job` on `grant` (request `id`).
  void RegisterKeeper(const JobId& job, const protocol::RequestLeaseReply& grant, uint64_t id) {
    protocol::RegisterActorRequest actor;
    actor.actor.name = "keeper";
    actor.actor.job_id = job;
    actor.actor.lease_id = grant.lease_id;
    actor.actor.worker_address = grant.worker_address;
    actor.actor.detached = true;
    Call<protocol::RegisterActorReply>(actor, kDriver, id);
  }
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
  pg.placement_group_id = PlacementGroupId::FromWire("group-1");
  pg.bundles = {{{"CPU", 1}, {"GPU", 1}}};
  pg.detached = true;
  auto group = Call<protocol::CreatePlacementGroupReply>(pg, kDriver, 4).group;
  ASSERT_EQ(group.state, protocol::PlacementGroupState::kCreated);
  int group_gpu = group.locations.at(0).gpu_ids.at(0);
  // A detached named actor outside the group, holding the other GPU.
  auto grant = Lease(job, {{"GPU", 1}});
  ASSERT_EQ(grant.gpu_ids.size(), 1u);
  EXPECT_NE(grant.gpu_ids[0], group_gpu);
  RegisterKeeper(job, grant, 5);
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
  rejoin.live_leases = {
      {grant.lease_id, job, {{"GPU", 1}}, grant.gpu_ids, 4242, false},
      {member.lease_id, job, {{"CPU", 1}, {"GPU", 1}}, member.gpu_ids, 4243, false},
      {LeaseId::FromWire("unknown-lease"), job, {{"CPU", 1}}, {}, 4244, false}};
  auto rejoined = Call<protocol::RegisterNodeReply>(rejoin, kAgent, 16);
  EXPECT_EQ(rejoined.node_id, joined.node_id);
  EXPECT_EQ(rejoined.epoch, joined.epoch);
  auto [to_agent, kill] = Take<protocol::KillWorkersRequest>();
  EXPECT_EQ(kill.lease_ids, std::vector<LeaseId>{LeaseId::FromWire("unknown-lease")});
  ClusterStatus status = Status();
  ASSERT_EQ(status.AliveNodeCount(), 1u);
  EXPECT_EQ(status.nodes[0].available.at("GPU"), 0) << "both devices are held by live workers";
  EXPECT_EQ(status.nodes[0].available.at("CPU"), 3) << "the bundle keeps its reservation";
  EXPECT_EQ(Call<protocol::HeartbeatReply>(beat, kAgent, 17).known, true);

  // The group is still there, and its bundle is full; the named actor's lease
  // is the head's again (returning it frees its device for new work).
  auto listed = Call<protocol::ListStateReply>(protocol::ListStateRequest{kToken}, "cli", 18);
  ASSERT_EQ(listed.placement_groups.size(), 1u);
  EXPECT_EQ(listed.placement_groups[0].state, protocol::PlacementGroupState::kCreated);
  EXPECT_EQ(listed.leases.size(), 2u);
  protocol::ReturnLeaseRequest give_back;
  give_back.lease_id = grant.lease_id;
  EXPECT_TRUE(Call<protocol::ReturnLeaseReply>(give_back, kDriver, 19).ok);
  auto again = Lease(job, {{"GPU", 1}});
  EXPECT_EQ(again.gpu_ids, grant.gpu_ids) << "the freed device, never the group's";
}

// Detached actors the head took over from a driver killed during their
// constructors: one it had named survives a head restart; one whose
// constructor still ran is created again by the restarted head from its
// stored constructor call, and its first worker, which nobody could reach or
// return, stops when its node rejoins.
TEST_F(HeadRestartTest, ATakenOverActorTheHeadHadNotNamedIsCreatedAgainAfterARestart) {
  auto joined = Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  auto job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  std::map<std::string, protocol::RequestLeaseReply> grants;
  uint64_t id = 3;
  for (const std::string name : {"made", "making"}) {
    ActorId actor = ActorId::FromWire("actor-" + name);
    protocol::RegisterActorRequest reserve;
    reserve.actor.name = name;
    reserve.actor.actor_id = actor;
    reserve.actor.job_id = job;
    reserve.actor.detached = true;
    reserve.actor.starting = true;
    protocol::RequestLeaseRequest again;  // its constructor call, sent with the reservation
    again.job_id = job;
    again.resources = {{"CPU", 1}};
    again.for_actor = true;
    again.detached = true;
    again.actor_id = actor;
    again.init = {"Model::Create", actor, {"weights-of-" + name}};
    reserve.actor.restart_request = protocol::Encode(again);
    Call<protocol::RegisterActorReply>(reserve, kDriver, id++);
    grants[name] = Lease(job, {{"CPU", 1}}, "", kDriver, /*detached=*/true, actor);
    protocol::ActorConstructionNotice began;
    began.lease_id = grants[name].lease_id;
    began.stage = protocol::ActorConstructionNotice::kBegan;
    began.epoch = joined.epoch;
    Send(began, kAgent, id++);
  }
  protocol::FinishJobRequest finish;  // the driver ends; both are taken over
  finish.job_id = job;
  Call<protocol::FinishJobReply>(finish, kDriver, id++);
  protocol::ActorConstructionNotice done;
  done.lease_id = grants["made"].lease_id;
  done.stage = protocol::ActorConstructionNotice::kSucceeded;
  done.epoch = joined.epoch;
  Send(done, kAgent, id++);
  sent_.clear();

  StartHead();
  protocol::RegisterNodeRequest rejoin = Hello();
  rejoin.rejoin = true;
  rejoin.previous_node_id = joined.node_id;
  rejoin.previous_epoch = joined.epoch;
  for (const auto& [name, grant] : grants) {
    rejoin.live_leases.push_back({grant.lease_id, job, {{"CPU", 1}}, {}, 4242, false});
  }
  Call<protocol::RegisterNodeReply>(rejoin, kAgent, id++);
  auto [to_agent, kill] = Take<protocol::KillWorkersRequest>();
  EXPECT_EQ(kill.lease_ids, std::vector<LeaseId>{grants["making"].lease_id});
  auto [restart_to, restart] = Take<protocol::StartWorkerRequest>();
  EXPECT_EQ(restart.init.args, std::vector<std::string>{"weights-of-making"})
      << "the restarted head creates the one it had not named yet";
  Call<protocol::RegisterDriverReply>(Driver(), "later-driver", id++);
  protocol::GetActorRequest by_name;
  by_name.name = "made";
  EXPECT_EQ(Call<protocol::GetActorReply>(by_name, "later-driver", id++).actor.lease_id,
            grants["made"].lease_id);
  EXPECT_EQ(Status().nodes.at(0).available.at("CPU"), 2)
      << "the named one and the new worker hold one each; the stopped one's is free";
}

// A detached actor whose creator dies after a head restart, while its
// constructor still runs on the worker the previous head granted: the creator
// reserved the name again with the restarted head (ReReserveNames), then went
// silent. That worker is stopped when the head creates the actor again,
// whether its node rejoined before the creator went or after, so the actor
// never runs twice and the old worker's CPU is not booked for nobody.
class RestoredActorLeaseTest : public HeadRestartTest,
                               public ::testing::WithParamInterface<bool> {
 protected:
  // Detached actor "model"'s reservation, carrying its constructor call.
  protocol::RegisterActorRequest Reservation(const JobId& job) {
    ActorId actor = ActorId::FromWire("actor-model");
    protocol::RegisterActorRequest reserve;
    reserve.actor.name = "model";
    reserve.actor.actor_id = actor;
    reserve.actor.job_id = job;
    reserve.actor.detached = true;
    reserve.actor.starting = true;
    protocol::RequestLeaseRequest again;
    again.job_id = job;
    again.resources = {{"CPU", 1}};
    again.for_actor = true;
    again.detached = true;
    again.actor_id = actor;
    again.init = {"Model::Create", actor, {"weights"}};
    reserve.actor.restart_request = protocol::Encode(again);
    return reserve;
  }
};

TEST_P(RestoredActorLeaseTest, ItsOldWorkerIsStoppedWhenTheHeadCreatesItAgain) {
  const bool rejoin_first = GetParam();
  job_timeout_ms_ = 500;  // shorter than the node timeout: the node stays alive
  auto joined = Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  auto job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  auto reserve = Reservation(job);
  Call<protocol::RegisterActorReply>(reserve, kDriver, 3);
  auto grant = Lease(job, {{"CPU", 1}}, "", kDriver, /*detached=*/true, reserve.actor.actor_id);

  StartHead();
  // The driver registers again and holds its name again, then dies.
  EXPECT_EQ(Call<protocol::RegisterDriverReply>(Driver(job), kDriver, 4).job_id, job);
  Call<protocol::RegisterActorReply>(reserve, kDriver, 5);
  protocol::RegisterNodeRequest rejoin = Hello();
  rejoin.rejoin = true;
  rejoin.previous_node_id = joined.node_id;
  rejoin.previous_epoch = joined.epoch;
  rejoin.live_leases.push_back({grant.lease_id, job, {{"CPU", 1}}, {}, 4242, false});
  auto expire_job = [&] {
    clock_.Advance(job_timeout_ms_ + 1);
    head_->ExpireSilentNodes();
  };
  if (rejoin_first) {
    Call<protocol::RegisterNodeReply>(rejoin, kAgent, 10);
    ASSERT_EQ(Status().nodes.at(0).available.at("CPU"), 3) << "the live worker's CPU is booked";
    expire_job();
  } else {
    expire_job();
    Call<protocol::RegisterNodeReply>(rejoin, kAgent, 10);
  }
  auto [to_agent, kill] = Take<protocol::KillWorkersRequest>();
  EXPECT_EQ(kill.lease_ids, std::vector<LeaseId>{grant.lease_id})
      << "the worker still constructing it for the gone creator";
  auto [start_to, start] = Take<protocol::StartWorkerRequest>();
  EXPECT_EQ(start.init.args, std::vector<std::string>{"weights"}) << "created again by the head";
  EXPECT_NE(start.lease_id, grant.lease_id);
  EXPECT_EQ(Status().nodes.at(0).available.at("CPU"), 3)
      << "one CPU for the new worker, none left booked for the stopped one";
}

INSTANTIATE_TEST_SUITE_P(NodeRejoins, RestoredActorLeaseTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& param_info) {
                           return param_info.param ? "BeforeTheCreatorGoes" : "AfterTheCreatorWent";
                         });

TEST_F(HeadRestartTest, ANodeThatDoesNotRejoinDiesAndTakesItsLeasesAndActorsAlong) {
  auto joined = Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  auto job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  auto grant = Lease(job, {{"GPU", 1}});
  RegisterKeeper(job, grant, 3);

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

// The previous head stopped after burying a node (its row is gone) but before
// ending what it held: the restarted head ends those leases and re-places
// those bundles at once, instead of waiting for a node that cannot rejoin.
TEST_F(HeadRestartTest, LeasesAndBundlesOfANodeBuriedJustBeforeACrashEndAtRestart) {
  auto joined = Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  auto job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  protocol::CreatePlacementGroupRequest pg;
  pg.job_id = job;
  pg.placement_group_id = PlacementGroupId::FromWire("group-1");
  pg.bundles = {{{"CPU", 1}}};
  pg.detached = true;
  ASSERT_EQ(Call<protocol::CreatePlacementGroupReply>(pg, kDriver, 3).group.state,
            protocol::PlacementGroupState::kCreated);
  auto grant = Lease(job, {{"GPU", 1}});
  RegisterKeeper(job, grant, 4);

  store_->DeleteNode(joined.node_id);  // buried; the crash comes before the rest
  job_timeout_ms_ = 60000;
  StartHead();
  auto listed = Call<protocol::ListStateReply>(protocol::ListStateRequest{kToken}, "cli", 5);
  EXPECT_TRUE(listed.leases.empty()) << listed.leases.size() << " leases of a buried node";
  ASSERT_EQ(listed.placement_groups.size(), 1u);
  EXPECT_EQ(listed.placement_groups[0].state, protocol::PlacementGroupState::kPending);
  EXPECT_NE(listed.placement_groups[0].reason.find("died"), std::string::npos)
      << listed.placement_groups[0].reason;
  EXPECT_EQ(Call<protocol::RegisterDriverReply>(Driver(job), kDriver, 6).job_id, job);
  protocol::GetActorRequest by_name;
  by_name.name = "keeper";
  EXPECT_EQ(CallError(by_name, kDriver, 7).code, static_cast<uint8_t>(StatusCode::kNotFound));
  // A new node gets the group's bundle at once.
  auto fresh = Call<protocol::RegisterNodeReply>(Hello(), "agent-2", 8);
  ASSERT_FALSE(fresh.node_id.IsNil());
  listed = Call<protocol::ListStateReply>(protocol::ListStateRequest{kToken}, "cli", 9);
  ASSERT_EQ(listed.placement_groups.size(), 1u);
  EXPECT_EQ(listed.placement_groups[0].state, protocol::PlacementGroupState::kCreated);
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

// Keys deleted by prefix are deleted from the state file too: a restarted head
// does not bring them back.
TEST_F(HeadRestartTest, KeysDeletedByPrefixStayDeletedAfterARestart) {
  Call<protocol::RegisterDriverReply>(Driver(), kDriver, 1);
  uint64_t id = 2;
  for (const char* key : {"g/1", "g/2", "h/1"}) {
    protocol::KvPutRequest put;
    put.ns = "app";
    put.key = key;
    put.value = "x";
    Call<protocol::KvPutReply>(put, kDriver, id++);
  }
  protocol::KvDeleteRequest by_prefix;
  by_prefix.ns = "app";
  by_prefix.key = "g/";
  by_prefix.prefix = true;
  EXPECT_EQ(Call<protocol::KvDeleteReply>(by_prefix, kDriver, id++).count, 2u);

  StartHead();
  Call<protocol::RegisterDriverReply>(Driver(), "rayx-other", id++);
  protocol::KvListRequest list;
  list.ns = "app";
  EXPECT_EQ(Call<protocol::KvListReply>(list, "rayx-other", id++).keys,
            std::vector<std::string>{"h/1"});
}

// A job that ends while its node has not rejoined yet: the node's lease of it
// is stopped when it does, and what that lease held is free again.
TEST_F(HeadRestartTest, ALeaseOfAJobThatEndedBeforeItsNodeRejoinedIsStoppedAndFreed) {
  auto joined = Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  auto job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  auto grant = Lease(job, {{"CPU", 1}, {"GPU", 1}});

  StartHead();
  clock_.Advance(3001);  // the driver does not come back: its job ends
  head_->ExpireSilentNodes();
  protocol::RegisterNodeRequest rejoin = Hello();
  rejoin.rejoin = true;
  rejoin.previous_node_id = joined.node_id;
  rejoin.previous_epoch = joined.epoch;
  rejoin.live_leases = {{grant.lease_id, job, {{"CPU", 1}, {"GPU", 1}}, grant.gpu_ids, 4242,
                         false}};
  Call<protocol::RegisterNodeReply>(rejoin, kAgent, 3);
  auto [to_agent, kill] = Take<protocol::KillWorkersRequest>();
  EXPECT_EQ(kill.lease_ids, std::vector<LeaseId>{grant.lease_id});
  ClusterStatus status = Status();
  ASSERT_EQ(status.AliveNodeCount(), 1u);
  EXPECT_EQ(status.nodes[0].available.at("CPU"), 4) << "the stopped lease's CPU is still booked";
  EXPECT_EQ(status.nodes[0].available.at("GPU"), 2) << "the stopped lease's GPU is still booked";
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
  pg.placement_group_id = PlacementGroupId::FromWire("group-1");
  pg.bundles = {{{"GPU", 1}}};
  Call<protocol::CreatePlacementGroupReply>(pg, kDriver, 6);
  protocol::WaitPlacementGroupRequest wait;
  wait.placement_group_id = PlacementGroupId::FromWire("group-1");
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
      placed = reply.ok() && reply->group.state == protocol::PlacementGroupState::kCreated;
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
    rejoin.live_leases = {
        {LeaseId::FromWire("lease"), JobId::FromWire("job"), {{"CPU", amount}}, {}, 1, false}};
    EXPECT_EQ(CallError(rejoin, kAgent, 2).code, static_cast<uint8_t>(StatusCode::kInvalidArgument))
        << amount;
  }
  rejoin.live_leases = {
      {LeaseId::FromWire("lease"), JobId::FromWire("job"), {{"GPU", 1}}, {-3}, 1, false}};
  EXPECT_EQ(CallError(rejoin, kAgent, 3).code, static_cast<uint8_t>(StatusCode::kInvalidArgument));
  rejoin.live_leases = {{LeaseId::FromWire("lease"),
                         JobId::FromWire("job"),
                         {{"GPU", 1}},
                         {7},
                         1,
                         false}};  // never granted
  EXPECT_FALSE(Call<protocol::RegisterNodeReply>(rejoin, kAgent, 4).node_id.IsNil());
  auto [to_agent, kill] = Take<protocol::KillWorkersRequest>();
  EXPECT_EQ(kill.lease_ids, std::vector<LeaseId>{LeaseId::FromWire("lease")});
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
  std::vector<LeaseId> killed;
  while (!sent_.empty()) {
    auto [to_agent, kill] = Take<protocol::KillWorkersRequest>();
    killed.insert(killed.end(), kill.lease_ids.begin(), kill.lease_ids.end());
  }
  EXPECT_EQ(killed, (std::vector<LeaseId>{actor.lease_id, task.lease_id}));
  EXPECT_EQ(Status().nodes.at(0).available.at("CPU"), 4);
}

// Submitted jobs: one whose entrypoint ended while the head was down gets the
// exit its agent reported on rejoin; one still running ends normally later.
TEST_F(HeadRestartTest, SubmittedJobsEndWithTheirEntrypointsAcrossARestart) {
  protocol::RegisterNodeRequest hello = Hello();
  hello.is_head_node = true;
  auto joined = Call<protocol::RegisterNodeReply>(hello, kAgent, 1);
  std::map<std::string, LeaseId> lease_of;
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
  ASSERT_EQ(protocol::Name(job("ended-meanwhile").state), "RUNNING");
  ASSERT_EQ(protocol::Name(job("never-started").state), "PENDING");

  StartHead();
  EXPECT_EQ(protocol::Name(job("never-started").state), "FAILED");
  EXPECT_NE(job("never-started").message.find("submit the job again"), std::string::npos);
  EXPECT_EQ(protocol::Name(job("still-running").state), "RUNNING") << "until its node says otherwise";
  protocol::RegisterNodeRequest rejoin = hello;
  rejoin.rejoin = true;
  rejoin.previous_node_id = joined.node_id;
  rejoin.previous_epoch = joined.epoch;
  rejoin.live_leases = {{lease_of["still-running"], JobId(), {}, {}, 555, true},
                        {lease_of["never-started"], JobId(), {}, {}, 556, true}};
  rejoin.recent_exits = {{lease_of["ended-meanwhile"], 0, 555, 3, 0, "bye", true}};
  Call<protocol::RegisterNodeReply>(rejoin, kAgent, 4);
  auto [to_agent, kill] = Take<protocol::KillWorkersRequest>();
  EXPECT_EQ(kill.lease_ids, std::vector<LeaseId>{lease_of["never-started"]});
  auto ended = job("ended-meanwhile");
  EXPECT_EQ(protocol::Name(ended.state), "FAILED");
  EXPECT_EQ(ended.exit_code, 3);
  EXPECT_NE(ended.message.find("exited with status 3"), std::string::npos) << ended.message;
  EXPECT_EQ(protocol::Name(job("still-running").state), "RUNNING");

  protocol::ProcessExitedNotice exit;
  exit.lease_id = lease_of["still-running"];
  exit.pid = 555;
  exit.all_exited = true;
  exit.epoch = joined.epoch;
  Send(exit, kAgent, 5);
  EXPECT_EQ(protocol::Name(job("still-running").state), "SUCCEEDED");
}

}  // namespace
}  // namespace rayx::scheduler
