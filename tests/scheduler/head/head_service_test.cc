// HeadService driven message by message on a manual clock.
#include "head/head_service.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/content_hash.h"
#include "protocol/codec.h"
#include "transport/message.h"

namespace rayx::scheduler {
namespace head_service_test {  // this file's own (unit tests compile in batches)

using protocol::MessageType;
using transport::Frames;

constexpr char kToken[] = "s3cret-token";

class HeadServiceTest : public ::testing::Test {
 protected:
  HeadServiceTest() : service_(MakeOptions(), clock_) {}

  static HeadServiceOptions MakeOptions() {
    HeadServiceOptions o;
    o.token = kToken;
    o.cluster_id = "cluster-1";
    o.heartbeat_period_ms = 100;
    o.nodes.node_timeout_ms = 700;
    o.where = "head 127.0.0.1:6380";
    return o;
  }

  static protocol::RegisterNodeRequest Hello(const std::string& token = kToken) {
    protocol::RegisterNodeRequest req;
    req.token = token;
    req.rayx_version = kRayxVersion;
    req.address = "10.0.0.7";
    req.hostname = "worker-7";
    req.agent_pid = 777;
    req.resources = {{"CPU", 5}, {"tpu", 4}};
    req.labels = {{"zone", "a"}};
    return req;
  }

  // Sends `frames` and expects a reply envelope of `type` answering `id`.
  template <typename Reply>
  Reply Call(Frames frames, uint64_t id, MessageType type = Reply::kType,
             const transport::Principal& principal = transport::Principal::Cluster()) {
    auto reply = service_.Handle(frames, "tcp://peer", principal);
    EXPECT_TRUE(reply.has_value());
    if (!reply) return Reply{};
    EXPECT_EQ(reply->size(), 2u);
    auto env = protocol::Decode<protocol::Envelope>(transport::FrameView((*reply)[0]));
    EXPECT_TRUE(env.ok()) << env.status();
    if (!env.ok()) return Reply{};
    EXPECT_EQ(env->t, static_cast<uint16_t>(type));
    EXPECT_EQ(env->id, id);
    EXPECT_EQ(env->v, kProtocolVersion);
    auto body = protocol::Decode<Reply>(transport::FrameView((*reply)[1]));
    EXPECT_TRUE(body.ok()) << body.status();
    return body.ok() ? *body : Reply{};
  }

  protocol::ErrorReply CallError(Frames frames, uint64_t id,
                                 const transport::Principal& principal =
                                     transport::Principal::Cluster()) {
    return Call<protocol::ErrorReply>(std::move(frames), id, MessageType::kErrorReply, principal);
  }

  NodeId Register(uint64_t id = 1) {
    auto reply = Call<protocol::RegisterNodeReply>(transport::MakeMessage(Hello(), id), id);
    EXPECT_FALSE(reply.node_id.IsNil());
    return reply.node_id;
  }

  ClusterStatus QueryStatus(uint64_t id = 99) {
    return Call<protocol::GetClusterStatusReply>(
               transport::MakeMessage(protocol::GetClusterStatusRequest{kToken}, id), id)
        .status;
  }

  static Frames RawMessage(const std::string& envelope, const std::string& body) {
    Frames frames;
    frames.push_back(transport::MakeFrame(envelope));
    frames.push_back(transport::MakeFrame(body));
    return frames;
  }

  ManualClock clock_;
  HeadService service_;
};

// An upload that stops is dropped by the head's own tick (every 10 s), not only
// when another upload or a submission comes: its part file goes.
TEST(HeadServiceUploads, AnAbandonedUploadIsDroppedByTheTick) {
  ManualClock clock;
  std::string dir = ::testing::TempDir() + "rayx-head-uploads-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  HeadServiceOptions o;
  o.token = kToken;
  o.cluster_id = "cluster-1";
  o.where = "head";
  o.jobs.package_dir = dir;
  o.jobs.upload_expiry_ms = 60000;
  HeadService service(o, clock);
  const std::string bytes(1000, 'x');
  protocol::PutPackageRequest put;
  put.hash = ContentHashHex(bytes);
  put.total_size = bytes.size();
  Frames frames = transport::MakeMessage(put, 1);
  frames.push_back(transport::MakeFrame(bytes.substr(0, 100)));
  auto reply = service.Handle(frames, "tcp://peer", transport::Principal::Cluster());
  ASSERT_TRUE(reply.has_value());
  auto parts = [&] {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.is_regular_file();
    return n;
  };
  ASSERT_EQ(parts(), 1u) << "the first chunk left no part";
  clock.Advance(30000);
  service.ExpireSilentNodes();
  EXPECT_EQ(parts(), 1u) << "an upload in progress was dropped";
  clock.Advance(40000);
  service.ExpireSilentNodes();
  EXPECT_EQ(parts(), 0u) << "an abandoned upload's part outlived its expiry";
  std::filesystem::remove_all(dir);
}

TEST_F(HeadServiceTest, RegisterWithRightTokenGetsIdAndTimings) {
  auto reply = Call<protocol::RegisterNodeReply>(transport::MakeMessage(Hello(), 42), 42);
  EXPECT_FALSE(reply.node_id.IsNil());
  EXPECT_EQ(reply.cluster_id, "cluster-1");
  EXPECT_EQ(reply.heartbeat_period_ms, 100);
  EXPECT_EQ(reply.node_timeout_ms, 700);
  const NodeInfo* node = service_.nodes().FindAlive(reply.node_id);
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->address, "10.0.0.7");
  EXPECT_EQ(node->hostname, "worker-7");
  EXPECT_EQ(node->agent_pid, 777);
  EXPECT_EQ(node->total, (ResourceMap{{"CPU", 5}, {"tpu", 4}}));
  EXPECT_EQ(node->labels, (LabelMap{{"zone", "a"}}));
  EXPECT_EQ(node->registered_at_ms, clock_.WallMs());
  EXPECT_EQ(service_.rejected_count(), 0u);
}

// Only the cluster's credential registers a node: a job's (its workers') and a
// connection that proved nothing are refused, whatever token the body names.
TEST_F(HeadServiceTest, RegisterFromAJobOrNobodyIsUnauthenticated) {
  for (const transport::Principal& who :
       {transport::Principal::Job(JobId::FromWire("0123456789abcdef")), transport::Principal()}) {
    auto err = CallError(transport::MakeMessage(Hello(kToken), 5), 5, who);
    EXPECT_EQ(err.code, static_cast<uint8_t>(StatusCode::kUnauthenticated)) << who.ToString();
    EXPECT_NE(err.message.find("only holders of the cluster token"), std::string::npos)
        << err.message;
    EXPECT_EQ(err.where, "head 127.0.0.1:6380");
  }
  EXPECT_EQ(service_.nodes().alive_count(), 0u);
  EXPECT_EQ(service_.rejected_count(), 2u);
}

TEST_F(HeadServiceTest, RegisterWithOtherRayxVersionNamesBothVersions) {
  auto hello = Hello();
  hello.rayx_version = "9.9.9";
  auto err = CallError(transport::MakeMessage(hello, 6), 6);
  EXPECT_EQ(err.code, static_cast<uint8_t>(StatusCode::kInvalidArgument));
  EXPECT_NE(err.message.find("9.9.9"), std::string::npos) << err.message;
  EXPECT_NE(err.message.find(std::string("head runs rayx ") + kRayxVersion), std::string::npos)
      << err.message;
  EXPECT_EQ(service_.nodes().alive_count(), 0u);
}

TEST_F(HeadServiceTest, RegisterWithInvalidResourceAmountIsRefused) {
  auto hello = Hello();
  hello.resources["tpu"] = -1;
  auto err = CallError(transport::MakeMessage(hello, 6), 6);
  EXPECT_EQ(err.code, static_cast<uint8_t>(StatusCode::kInvalidArgument));
  EXPECT_NE(err.message.find("\"tpu\""), std::string::npos) << err.message;
  hello.resources["tpu"] = std::nan("");
  err = CallError(transport::MakeMessage(hello, 7), 7);
  EXPECT_EQ(err.code, static_cast<uint8_t>(StatusCode::kInvalidArgument));
  // The head tracks each GPU: a count no node has would be an allocation that
  // size (a head once died of std::bad_alloc here).
  hello.resources.erase("tpu");
  hello.resources["GPU"] = 1e13;
  err = CallError(transport::MakeMessage(hello, 8), 8);
  EXPECT_EQ(err.code, static_cast<uint8_t>(StatusCode::kInvalidArgument));
  EXPECT_NE(err.message.find("at most 65536 GPUs"), std::string::npos) << err.message;
  EXPECT_EQ(service_.nodes().alive_count(), 0u);
}

TEST_F(HeadServiceTest, OtherProtocolVersionIsRefusedNamingBoth) {
  protocol::Envelope env;
  env.v = kProtocolVersion + 1;
  env.t = static_cast<uint16_t>(MessageType::kRegisterNodeRequest);
  env.id = 11;
  auto err = CallError(RawMessage(protocol::Encode(env), protocol::Encode(Hello())), 11);
  EXPECT_EQ(err.code, static_cast<uint8_t>(StatusCode::kInvalidArgument));
  EXPECT_NE(err.message.find("protocol " + std::to_string(kProtocolVersion + 1)),
            std::string::npos)
      << err.message;
  EXPECT_NE(err.message.find("speaks protocol " + std::to_string(kProtocolVersion)),
            std::string::npos)
      << err.message;
  EXPECT_EQ(service_.nodes().alive_count(), 0u);
}

TEST_F(HeadServiceTest, UnknownMessageTypeFromRegisteredPeerIsInvalidArgument) {
  Register();
  for (uint16_t type : {uint16_t{0}, uint16_t{3}, uint16_t{1000}, uint16_t{65535}}) {
    protocol::Envelope env;
    env.t = type;
    env.id = 12;
    auto err = CallError(RawMessage(protocol::Encode(env), protocol::Encode(Hello())), 12);
    EXPECT_EQ(err.code, static_cast<uint8_t>(StatusCode::kInvalidArgument)) << type;
    EXPECT_NE(err.message.find("unknown message type"), std::string::npos) << err.message;
  }
  EXPECT_EQ(service_.rejected_count(), 4u);
}

TEST_F(HeadServiceTest, UnknownMessageTypeFromUnknownPeerIsRefused) {
  protocol::Envelope env;
  env.t = 1000;
  env.id = 14;
  auto err = CallError(RawMessage(protocol::Encode(env), protocol::Encode(Hello())), 14);
  EXPECT_NE(err.code, static_cast<uint8_t>(StatusCode::kOk));
  EXPECT_FALSE(err.message.empty());
  EXPECT_EQ(service_.rejected_count(), 1u);
}

TEST_F(HeadServiceTest, GarbageEnvelopeIsDropped) {
  Frames frames = RawMessage("\xc1garbage", protocol::Encode(Hello()));
  EXPECT_FALSE(service_.Handle(frames, "tcp://peer").has_value());
  EXPECT_EQ(service_.rejected_count(), 1u);
  Frames empty = RawMessage("", "");
  EXPECT_FALSE(service_.Handle(empty, "tcp://peer").has_value());
  EXPECT_EQ(service_.rejected_count(), 2u);
}

TEST_F(HeadServiceTest, GarbageBodyWithValidEnvelopeIsInvalidArgument) {
  protocol::Envelope env;
  env.t = static_cast<uint16_t>(MessageType::kRegisterNodeRequest);
  env.id = 13;
  auto err = CallError(RawMessage(protocol::Encode(env), "\x93\x01"), 13);
  EXPECT_EQ(err.code, static_cast<uint8_t>(StatusCode::kInvalidArgument));
  EXPECT_NE(err.message.find("malformed RegisterNodeRequest"), std::string::npos) << err.message;
  // Well-formed msgpack of the wrong shape.
  env.t = static_cast<uint16_t>(MessageType::kHeartbeatRequest);
  err = CallError(RawMessage(protocol::Encode(env), protocol::Encode(std::string("x"))), 13);
  EXPECT_EQ(err.code, static_cast<uint8_t>(StatusCode::kInvalidArgument));
  EXPECT_NE(err.message.find("malformed HeartbeatRequest"), std::string::npos) << err.message;
  EXPECT_EQ(service_.rejected_count(), 2u);
}

TEST_F(HeadServiceTest, OutOfRangeEnumFromRegisteredPeerIsInvalidArgument) {
  Register();
  protocol::CreatePlacementGroupRequest group;
  group.job_id = JobId::FromWire("job-1");
  group.bundles = {{{"CPU", 1}}};
  group.strategy = static_cast<protocol::PlacementStrategy>(9);  // no rayx sends this
  auto err = CallError(transport::MakeMessage(group, 14), 14);
  EXPECT_EQ(err.code, static_cast<uint8_t>(StatusCode::kInvalidArgument));
  EXPECT_NE(err.message.find("placement strategy 9 is not one of 0..3"), std::string::npos)
      << err.message;
  protocol::RequestLeaseRequest lease;
  lease.job_id = JobId::FromWire("job-1");
  lease.resources = {{"CPU", 1}};
  lease.strategy = static_cast<protocol::LeaseStrategy>(200);
  err = CallError(transport::MakeMessage(lease, 15), 15);
  EXPECT_EQ(err.code, static_cast<uint8_t>(StatusCode::kInvalidArgument));
  EXPECT_NE(err.message.find("scheduling strategy 200 is not one of 0..2"), std::string::npos)
      << err.message;
  EXPECT_EQ(QueryStatus().AliveNodeCount(), 1u);  // still serving
}

TEST_F(HeadServiceTest, OneFrameMessageIsDropped) {
  Frames frames = transport::MakeMessage(Hello(), 1);
  frames.pop_back();
  EXPECT_FALSE(service_.Handle(frames, "tcp://peer").has_value());
  Frames none;
  EXPECT_FALSE(service_.Handle(none, "tcp://peer").has_value());
  EXPECT_EQ(service_.rejected_count(), 2u);
  EXPECT_EQ(service_.nodes().alive_count(), 0u);
}

TEST_F(HeadServiceTest, ExtraPayloadFramesAreIgnored) {
  Frames frames = transport::MakeMessage(Hello(), 3);
  frames.push_back(transport::MakeFrame("payload"));
  auto reply = Call<protocol::RegisterNodeReply>(std::move(frames), 3);
  EXPECT_NE(service_.nodes().FindAlive(reply.node_id), nullptr);
}

// A connection that proved nothing gets no status (ZAP keeps such peers out;
// the router refuses them too).
TEST_F(HeadServiceTest, StatusRequestFromNobodyIsRefused) {
  Register();
  auto err = CallError(transport::MakeMessage(protocol::GetClusterStatusRequest{}, 21), 21,
                       transport::Principal());
  EXPECT_EQ(err.code, static_cast<uint8_t>(StatusCode::kUnauthenticated));
  EXPECT_EQ(service_.rejected_count(), 1u);
}

TEST_F(HeadServiceTest, StatusListsNodesAndTotals) {
  NodeId a = Register(1);
  NodeId b = Register(2);
  clock_.Advance(50);
  ClusterStatus status = QueryStatus();
  EXPECT_EQ(status.rayx_version, kRayxVersion);
  EXPECT_EQ(status.cluster_id, "cluster-1");
  EXPECT_EQ(status.head_uptime_ms, 50);
  EXPECT_EQ(status.heartbeat_period_ms, 100);
  EXPECT_EQ(status.node_timeout_ms, 700);
  ASSERT_EQ(status.nodes.size(), 2u);
  EXPECT_EQ(status.nodes[0].node_id, a);
  EXPECT_EQ(status.nodes[1].node_id, b);
  EXPECT_EQ(status.nodes[0].last_heartbeat_age_ms, 50);
  EXPECT_EQ(status.AliveNodeCount(), 2u);
  EXPECT_EQ(status.TotalResources(), (ResourceMap{{"CPU", 10}, {"tpu", 8}}));
  EXPECT_EQ(status.AvailableResources(), (ResourceMap{{"CPU", 10}, {"tpu", 8}}));
}

TEST_F(HeadServiceTest, StoppingTheClusterTellsEveryAgentAndRefusesNewNodes) {
  NodeId a = Register(1);
  NodeId b = Register(2);
  auto beat = [&](const NodeId& id, uint64_t seq) {
    return Call<protocol::HeartbeatReply>(
        transport::MakeMessage(
            protocol::HeartbeatRequest{id, seq, 0, service_.nodes().EpochOf(id)}, seq),
        seq);
  };
  EXPECT_EQ(beat(a, 10).stop, "") << "a running cluster asks nobody to leave";
  // A job's credential (its workers') does not stop the cluster.
  auto refused = CallError(transport::MakeMessage(protocol::StopClusterRequest{"", "done"}, 11), 11,
                           transport::Principal::Job(JobId::FromWire("0123456789abcdef")));
  EXPECT_EQ(refused.code, static_cast<uint8_t>(StatusCode::kUnauthenticated));
  EXPECT_EQ(beat(a, 12).stop, "") << "a refused stop stops nothing";

  auto stopped = Call<protocol::StopClusterReply>(
      transport::MakeMessage(protocol::StopClusterRequest{"s3cret-token", "the job ended"}, 13),
      13);
  EXPECT_EQ(stopped.alive_nodes, 2u);
  EXPECT_EQ(beat(a, 14).stop, "the job ended");
  EXPECT_EQ(beat(b, 15).stop, "the job ended");
  auto late = CallError(transport::MakeMessage(Hello(), 16), 16);
  EXPECT_EQ(late.code, static_cast<uint8_t>(StatusCode::kUnavailable));
  EXPECT_NE(late.message.find("the cluster is being stopped (the job ended)"), std::string::npos)
      << late.message;
}

TEST_F(HeadServiceTest, SilentNodeIsDeclaredDeadWithReason) {
  NodeId id = Register();
  clock_.Advance(700);
  service_.ExpireSilentNodes();
  EXPECT_NE(service_.nodes().FindAlive(id), nullptr) << "exactly the timeout is still alive";
  clock_.Advance(1);
  service_.ExpireSilentNodes();
  ClusterStatus status = QueryStatus();
  ASSERT_EQ(status.nodes.size(), 1u);
  EXPECT_FALSE(status.nodes[0].alive);
  EXPECT_NE(status.nodes[0].death_reason.find("no heartbeat for 701 ms"), std::string::npos)
      << status.nodes[0].death_reason;
  EXPECT_EQ(status.AliveNodeCount(), 0u);
  EXPECT_TRUE(status.TotalResources().empty());
  // Its agent learns it must register again.
  auto hb = Call<protocol::HeartbeatReply>(
      transport::MakeMessage(protocol::HeartbeatRequest{id, 1}, 31), 31);
  EXPECT_FALSE(hb.known);
}

// Heartbeats keep a node alive; what is free on it stays the head's own
// account (nothing is leased here: all of it).
TEST_F(HeadServiceTest, HeartbeatKeepsNodeAliveAndLeavesTheHeadsAccountAsItWas) {
  NodeId id = Register();
  for (uint64_t seq = 1; seq <= 20; ++seq) {
    clock_.Advance(500);
    auto hb = Call<protocol::HeartbeatReply>(
        transport::MakeMessage(
            protocol::HeartbeatRequest{id, seq, 0, service_.nodes().EpochOf(id)}, seq),
        seq);
    EXPECT_TRUE(hb.known);
    service_.ExpireSilentNodes();
  }
  ClusterStatus status = QueryStatus();
  ASSERT_EQ(status.nodes.size(), 1u);
  EXPECT_TRUE(status.nodes[0].alive);
  EXPECT_EQ(status.AvailableResources(), status.TotalResources());
}

// A heartbeat that wants no reply gets none while all is well (the agent asks
// for one about once a second), but it still keeps the node alive, and the
// head answers at once when it has something to say.
TEST_F(HeadServiceTest, AHeartbeatWithoutWantReplyIsAnsweredOnlyWithNews) {
  NodeId id = Register();
  protocol::HeartbeatRequest beat{id, 1, 0, service_.nodes().EpochOf(id)};
  beat.want_reply = false;
  for (uint64_t seq = 1; seq <= 10; ++seq) {
    clock_.Advance(500);
    beat.seq = seq;
    auto frames = transport::MakeMessage(beat, seq);
    EXPECT_FALSE(service_.Handle(frames, "tcp://peer", transport::Principal::Cluster()))
        << "a reply nobody asked for";
    service_.ExpireSilentNodes();
  }
  EXPECT_EQ(QueryStatus().AliveNodeCount(), 1u) << "unanswered heartbeats keep the node alive";
  beat.epoch += 1;  // another incarnation: the head says so though not asked
  auto hb = Call<protocol::HeartbeatReply>(transport::MakeMessage(beat, 11), 11);
  EXPECT_FALSE(hb.known);
}

TEST_F(HeadServiceTest, EachRegistrationGetsALargerEpochAndOnlyItKeepsTheNodeAlive) {
  auto first = Call<protocol::RegisterNodeReply>(transport::MakeMessage(Hello(), 1), 1);
  auto second = Call<protocol::RegisterNodeReply>(transport::MakeMessage(Hello(), 2), 2);
  EXPECT_GT(first.epoch, 0u);
  EXPECT_GT(second.epoch, first.epoch);
  EXPECT_EQ(service_.nodes().EpochOf(first.node_id), first.epoch);
  // A heartbeat of another epoch is not this node's: the agent must fence.
  auto stale = Call<protocol::HeartbeatReply>(
      transport::MakeMessage(protocol::HeartbeatRequest{first.node_id, 1, 0, second.epoch}, 3),
      3);
  EXPECT_FALSE(stale.known);
  auto current = Call<protocol::HeartbeatReply>(
      transport::MakeMessage(protocol::HeartbeatRequest{first.node_id, 2, 0, first.epoch}, 4),
      4);
  EXPECT_TRUE(current.known);
}

TEST_F(HeadServiceTest, AnAgentJoiningAgainEndsThePreviousNodeItNames) {
  NodeId old_id = Register(1);
  auto hello = Hello();
  hello.previous_node_id = old_id;
  auto reply = Call<protocol::RegisterNodeReply>(transport::MakeMessage(hello, 2), 2);
  EXPECT_NE(reply.node_id, old_id);
  EXPECT_EQ(service_.nodes().FindAlive(old_id), nullptr);
  EXPECT_NE(service_.nodes().FindAlive(reply.node_id), nullptr);
  ClusterStatus status = QueryStatus();
  ASSERT_EQ(status.nodes.size(), 2u);
  EXPECT_NE(status.nodes[1].death_reason.find("joined again"), std::string::npos)
      << status.nodes[1].death_reason;
}

TEST_F(HeadServiceTest, AnotherPeerCannotEndANodeByNamingIt) {
  NodeId old_id = Register(1);
  auto hello = Hello();
  hello.previous_node_id = old_id;
  Frames frames = transport::MakeMessage(hello, 2);
  auto reply = service_.Handle(frames, "tcp://someone-else");
  ASSERT_TRUE(reply.has_value());
  EXPECT_NE(service_.nodes().FindAlive(old_id), nullptr);
  EXPECT_EQ(service_.nodes().alive_count(), 2u);
}

// A worker start reply or exit notice from a node incarnation that is not the
// current one (declared dead, or stamped with another epoch) is dropped.
TEST_F(HeadServiceTest, AgentMessagesOfAnotherIncarnationAreRefused) {
  std::vector<std::pair<std::string, Frames>> sent;
  service_.SetOutbox([&](const std::string& peer, Frames frames) {
    sent.emplace_back(peer, std::move(frames));
  });
  auto node = Call<protocol::RegisterNodeReply>(transport::MakeMessage(Hello(), 1), 1);
  Frames other_hello = transport::MakeMessage(Hello(), 9);
  ASSERT_TRUE(service_.Handle(other_hello, "tcp://other-agent").has_value());
  protocol::RegisterDriverRequest driver;
  driver.token = kToken;
  driver.rayx_version = kRayxVersion;
  Frames reg = transport::MakeMessage(driver, 2);
  auto job_reply = service_.Handle(reg, "tcp://driver");
  ASSERT_TRUE(job_reply.has_value());
  auto job = protocol::Decode<protocol::RegisterDriverReply>(transport::FrameView((*job_reply)[1]));
  ASSERT_TRUE(job.ok());
  // The new job's credential is announced to both agents (their object servers
  // admit its workers).
  ASSERT_EQ(sent.size(), 2u);
  for (const auto& [peer, frames] : sent) {
    auto notice_env = protocol::Decode<protocol::Envelope>(transport::FrameView(frames[0]));
    ASSERT_TRUE(notice_env.ok());
    EXPECT_EQ(notice_env->t, static_cast<uint16_t>(MessageType::kJobCredentialNotice));
    auto notice =
        protocol::Decode<protocol::JobCredentialNotice>(transport::FrameView(frames[1]));
    ASSERT_TRUE(notice.ok());
    EXPECT_EQ(notice->job_id, job->job_id);
    EXPECT_TRUE(notice->admitted);
  }
  EXPECT_TRUE(service_.admitted_jobs().count(job->job_id));
  sent.clear();
  protocol::RequestLeaseRequest lease;
  lease.job_id = job->job_id;
  lease.resources = {{"CPU", 1}};
  lease.executable = "/bin/true";
  lease.strategy = protocol::LeaseStrategy::kNodeAffinity;
  lease.affinity_node_id = node.node_id.Hex();
  Frames request = transport::MakeMessage(lease, 3);
  EXPECT_FALSE(service_.Handle(request, "tcp://driver").has_value());
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].first, "tcp://peer");
  auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(sent[0].second[0]));
  ASSERT_TRUE(env.ok());
  auto start = protocol::Decode<protocol::StartWorkerRequest>(transport::FrameView(sent[0].second[1]));
  ASSERT_TRUE(start.ok());
  EXPECT_EQ(start->epoch, node.epoch) << "the head addresses the current incarnation";
  sent.clear();

  protocol::StartWorkerReply started;
  started.lease_id = start->lease_id;
  started.worker_address = "tcp://10.0.0.7:7000";
  // Another epoch, or the right epoch from another peer: dropped, no grant.
  started.epoch = node.epoch + 1;
  Frames stale = transport::MakeMessage(started, env->id);
  EXPECT_FALSE(service_.Handle(stale, "tcp://peer").has_value());
  started.epoch = node.epoch;
  Frames elsewhere = transport::MakeMessage(started, env->id);
  EXPECT_FALSE(service_.Handle(elsewhere, "tcp://other-agent").has_value());
  EXPECT_TRUE(sent.empty());
  EXPECT_EQ(service_.stale_incarnation_count(), 2u);
  // The current incarnation's reply grants the lease.
  Frames current = transport::MakeMessage(started, env->id);
  EXPECT_FALSE(service_.Handle(current, "tcp://peer").has_value());
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].first, "tcp://driver");
  EXPECT_EQ(service_.stale_incarnation_count(), 2u);
}

TEST_F(HeadServiceTest, HeartbeatFromUnknownNodeIsNotKnown) {
  auto hb = Call<protocol::HeartbeatReply>(
      transport::MakeMessage(protocol::HeartbeatRequest{NodeId::FromRandom(), 1}, 4), 4);
  EXPECT_FALSE(hb.known);
}

TEST_F(HeadServiceTest, UnregisterMarksDeadImmediately) {
  NodeId id = Register();
  auto reply = Call<protocol::UnregisterNodeReply>(
      transport::MakeMessage(protocol::UnregisterNodeRequest{id, "rayx stop"}, 8), 8);
  EXPECT_TRUE(reply.ok);
  EXPECT_EQ(service_.nodes().FindAlive(id), nullptr);
  ClusterStatus status = QueryStatus();
  ASSERT_EQ(status.nodes.size(), 1u);
  EXPECT_FALSE(status.nodes[0].alive);
  EXPECT_EQ(status.nodes[0].death_reason, "rayx stop");
  // A second unregister finds nothing alive.
  reply = Call<protocol::UnregisterNodeReply>(
      transport::MakeMessage(protocol::UnregisterNodeRequest{id, ""}, 9), 9);
  EXPECT_FALSE(reply.ok);
}

TEST_F(HeadServiceTest, UnregisterWithoutReasonSaysStopped) {
  NodeId id = Register();
  Call<protocol::UnregisterNodeReply>(
      transport::MakeMessage(protocol::UnregisterNodeRequest{id, ""}, 8), 8);
  ClusterStatus status = QueryStatus();
  ASSERT_EQ(status.nodes.size(), 1u);
  EXPECT_EQ(status.nodes[0].death_reason, "stopped");
}

TEST_F(HeadServiceTest, FloodOfBadHellosLeavesGoodRegistrationWorking) {
  // Hellos over a connection that proved only a job's credential.
  const transport::Principal job = transport::Principal::Job(JobId::FromWire("0123456789abcdef"));
  for (uint64_t i = 0; i < 10000; ++i) {
    Frames frames = transport::MakeMessage(Hello(), i);
    auto reply = service_.Handle(frames, "tcp://attacker", job);
    ASSERT_TRUE(reply.has_value());
  }
  EXPECT_EQ(service_.rejected_count(), 10000u);
  EXPECT_EQ(service_.nodes().alive_count(), 0u);
  NodeId id = Register(10001);
  EXPECT_NE(service_.nodes().FindAlive(id), nullptr);
  EXPECT_EQ(service_.rejected_count(), 10000u);
}

}  // namespace
}  // namespace rayx::scheduler
