// Garbage sent to the head's port by an authenticated peer (strangers do not
// even reach it: attacker_test): dropped with a log line, the head keeps
// serving real nodes.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <zmq.hpp>

#include "common/address.h"
#include "protocol/codec.h"
#include "protocol/job_messages.h"
#include "protocol/placement_messages.h"
#include "protocol/process_messages.h"
#include "transport/message.h"
#include "transport/security.h"
#include "util/local_cluster.h"

namespace rayx::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Sends multipart messages on a raw DEALER socket that proves `security`.
class RawPeer {
 public:
  RawPeer(const std::string& address, const transport::ClientSecurity& security)
      : socket_(context_, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    transport::MakeClient(socket_, security);
    socket_.connect(address.rfind("tcp://", 0) == 0 ? address : "tcp://" + address);
  }
  void Send(const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      zmq::message_t m(frames[i].data(), frames[i].size());
      auto flags = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
      ASSERT_TRUE(socket_.send(m, flags));
    }
  }
  // Waits for one reply; returns its frames (empty on timeout).
  std::vector<std::string> Receive(int timeout_ms) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms));
    std::vector<std::string> out;
    if (!(item.revents & ZMQ_POLLIN)) return out;
    bool more = true;
    while (more) {
      zmq::message_t m;
      if (!socket_.recv(m)) break;
      more = m.more();
      out.emplace_back(static_cast<const char*>(m.data()), m.size());
    }
    return out;
  }

 private:
  zmq::context_t context_{1};
  zmq::socket_t socket_;
};

std::string Envelope(uint16_t type, uint64_t id, uint32_t version = kProtocolVersion) {
  protocol::Envelope env;
  env.v = version;
  env.t = type;
  env.id = id;
  return protocol::Encode(env);
}

// The head answers `request` frames with an ErrorReply of `code`.
void ExpectErrorReply(RawPeer& peer, const std::vector<std::string>& request, StatusCode code) {
  peer.Send(request);
  auto reply = peer.Receive(5000);
  ASSERT_EQ(reply.size(), 2u) << "no reply to a malformed request";
  auto env = protocol::Decode<protocol::Envelope>(reply[0]);
  ASSERT_TRUE(env.ok());
  ASSERT_EQ(env->t, static_cast<uint16_t>(protocol::MessageType::kErrorReply));
  auto error = protocol::Decode<protocol::ErrorReply>(reply[1]);
  ASSERT_TRUE(error.ok());
  EXPECT_EQ(error->code, static_cast<uint8_t>(code)) << error->message;
}

// [envelope][body] for message `body` with request id `id`, then `payload`
// frames.
template <typename M>
std::vector<std::string> Request(const M& body, uint64_t id,
                                 std::vector<std::string> payload = {}) {
  std::vector<std::string> frames{Envelope(static_cast<uint16_t>(M::kType), id),
                                  protocol::Encode(body)};
  for (auto& p : payload) frames.push_back(std::move(p));
  return frames;
}

// Each test on a fresh one-node cluster.
class HostileInput : public ::testing::Test {
 protected:
  void SetUp() override {
    auto started = LocalCluster::Start();
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = std::move(*started);
  }
  // A holder of the cluster token, at the head.
  transport::ClientSecurity AsCluster() const {
    return transport::ClientSecurity::ClusterToHead(cluster_->token());
  }
  // A member of a new job (its workers' credential), at the head.
  transport::ClientSecurity AsNewJob() const {
    RawPeer driver(cluster_->address(), AsCluster());
    protocol::RegisterDriverRequest hello;
    hello.rayx_version = kRayxVersion;
    protocol::Envelope env;
    env.t = static_cast<uint16_t>(hello.kType);
    env.id = 1;
    driver.Send({protocol::Encode(env), protocol::Encode(hello)});
    auto reply = driver.Receive(5000);
    EXPECT_EQ(reply.size(), 2u);
    auto job = protocol::Decode<protocol::RegisterDriverReply>(reply.at(1));
    EXPECT_TRUE(job.ok());
    transport::Credential cluster = transport::Credential::Cluster(cluster_->token());
    return transport::ClientSecurity::Head(*cluster.ForJob(job->job_id), cluster.CurvePublicKey());
  }
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(HostileInput, HeadSurvivesGarbageAndKeepsServing) {
  auto& cluster = *cluster_;
  auto head = cluster.head_process();
  std::mt19937 rng(42);
  auto random_bytes = [&](size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
  };

  {
    RawPeer peer(cluster.address(), AsCluster());
    // Random frames in random numbers.
    for (int i = 0; i < 200; ++i) {
      std::vector<std::string> frames;
      for (int f = 0; f < 1 + static_cast<int>(rng() % 4); ++f) {
        frames.push_back(random_bytes(rng() % 300));
      }
      peer.Send(frames);
    }
    // Truncated msgpack: a valid envelope cut short.
    std::string env = Envelope(2, 1);
    peer.Send({env.substr(0, env.size() - 3), "x"});
    // Deeply nested arrays as the envelope and as the body.
    std::string nested(100000, '\x91');
    nested += '\xc0';
    peer.Send({nested, nested});
    // A header claiming a 4-billion-element array.
    peer.Send({std::string("\xdd\xff\xff\xff\xff", 5), "x"});
    // Too many frames.
    peer.Send(std::vector<std::string>(200, "f"));
    // A bad body, an unknown type, another protocol: each gets an error reply.
    ExpectErrorReply(peer, {Envelope(2, 7), nested}, StatusCode::kInvalidArgument);
    ExpectErrorReply(peer, {Envelope(999, 8), "\x80"}, StatusCode::kInvalidArgument);
    ExpectErrorReply(peer, {Envelope(2, 9, 77), "\x80"}, StatusCode::kInvalidArgument);
    // A flood of requests of unknown types.
    for (int i = 0; i < 2000; ++i) peer.Send({Envelope(999, 100 + i), "\x80"});
    ExpectErrorReply(peer, {Envelope(999, 5000), "\x80"}, StatusCode::kInvalidArgument);
  }
  {
    // A node claiming more GPUs than a node can have (the head tracks each
    // device; an allocation that size once ended the head).
    RawPeer peer(cluster.address(), AsCluster());
    protocol::RegisterNodeRequest greedy;
    greedy.token = cluster.token();
    greedy.rayx_version = kRayxVersion;
    greedy.address = "127.0.0.9";
    greedy.resources = {{"CPU", 1}, {"GPU", 1e13}};
    ExpectErrorReply(peer, {Envelope(2, 1), protocol::Encode(greedy)},
                     StatusCode::kInvalidArgument);
  }
  {
    // An oversized frame: libzmq drops the connection before buffering it.
    RawPeer big(cluster.address(), AsCluster());
    big.Send({Envelope(2, 1), std::string(protocol::kMaxControlFrameBytes + 1024, 'a')});
  }
  // Raw TCP bytes that are not even ZMTP.
  {
    auto hp = ParseHostPort(cluster.address());
    ASSERT_TRUE(hp.ok());
    for (int i = 0; i < 20; ++i) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(hp->port);
      inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
      ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
      std::string junk = random_bytes(1 + rng() % 2000);
      ASSERT_GT(write(fd, junk.data(), junk.size()), 0);
      close(fd);
    }
  }

  // The head still runs, answers status and accepts a real node.
  EXPECT_TRUE(detail::IsRunning(head));
  auto node = cluster.AddNode({.num_cpus = 2});
  ASSERT_TRUE(node.ok()) << node.status();
  auto status = cluster.GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->AliveNodeCount(), 2u);
  EXPECT_EQ(status->TotalResources()["CPU"], 3);

  // Each drop left a log line, rate-limited so the flood did not fill the log:
  // the suppressed ones are summarized on the head's next timer tick.
  std::string log;
  WaitUntil(
      [&] {
        log = ReadFile(cluster.head_log_path());
        return log.find("suppressed ") != std::string::npos;
      },
      5000);
  EXPECT_NE(log.find("undecodable envelope"), std::string::npos) << log;
  EXPECT_NE(log.find("too many rejected messages"), std::string::npos) << log;
  EXPECT_NE(log.find("rejected-message log lines; the latest:"), std::string::npos) << log;
  EXPECT_LT(std::count(log.begin(), log.end(), '\n'), 500) << "the flood was logged line by line";
}

// The job, package, placement group and process messages refuse what they must
// (no token, not registered, bad hashes, oversized packages) and the agent's
// object server serves only logs it knows.
TEST_F(HostileInput, JobPackageGroupAndLogRequestsAreChecked) {
  auto& cluster = *cluster_;
  RawPeer peer(cluster.address(), AsCluster());
  RawPeer job(cluster.address(), AsNewJob());
  // A job's credential submits no job.
  protocol::SubmitJobRequest submit;
  submit.entrypoint = {"true"};
  ExpectErrorReply(job, Request(submit, 1), StatusCode::kUnauthenticated);

  protocol::PutPackageRequest put;
  put.hash = "../../etc/passwd";
  put.total_size = 4;
  ExpectErrorReply(peer, Request(put, 2, {"data"}), StatusCode::kInvalidArgument);
  put.hash = std::string(64, 'a');
  put.total_size = uint64_t{1} << 40;  // over the limit
  ExpectErrorReply(peer, Request(put, 3, {"data"}), StatusCode::kInvalidArgument);
  put.total_size = 8;
  put.offset = 4;  // does not follow what was received
  ExpectErrorReply(peer, Request(put, 4, {"data"}), StatusCode::kInvalidArgument);
  // Keeping packages: a content hash and a package the head has.
  protocol::KeepPackageRequest keep;
  keep.owner = "train:run";
  keep.hash = "../../etc/passwd";
  ExpectErrorReply(peer, Request(keep, 7), StatusCode::kInvalidArgument);
  keep.hash = std::string(64, 'a');
  ExpectErrorReply(peer, Request(keep, 8), StatusCode::kNotFound);
  // Sessions: a connection that did not register has none.
  protocol::CreatePlacementGroupRequest group;
  group.bundles = {{{"CPU", 1}}};
  ExpectErrorReply(peer, Request(group, 6), StatusCode::kUnauthenticated);
  protocol::ProcessExitedNotice exited;
  exited.lease_id = LeaseId::FromWire("x");
  ExpectErrorReply(peer, Request(exited, 7), StatusCode::kUnauthenticated);

  // The agent's object server: unknown logs are refused, garbage is dropped.
  auto status = cluster.GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  std::string objects = status->nodes.at(0).object_address;
  ASSERT_EQ(objects.rfind("tcp://", 0), 0u) << objects;
  transport::Credential token = transport::Credential::Cluster(cluster.token());
  RawPeer agent(objects, transport::ClientSecurity::ObjectServer(
                             transport::WireSecurity::kAuthenticated, token, ""));
  for (int i = 0; i < 50; ++i) agent.Send({"\xc1garbage", "\xff"});
  protocol::ReadLogRequest read;
  read.lease_id = LeaseId::FromWire("../../etc/passwd");
  ExpectErrorReply(agent, Request(read, 9), StatusCode::kNotFound);
  // Still serving: a port is reserved.
  agent.Send(Request(protocol::ReservePortRequest{}, 10));
  auto reply = agent.Receive(5000);
  ASSERT_EQ(reply.size(), 2u);
  auto port = protocol::Decode<protocol::ReservePortReply>(reply[1]);
  ASSERT_TRUE(port.ok());
  EXPECT_GT(port->port, 0u);
  // And the head still answers.
  EXPECT_TRUE(cluster.GetStatus().ok());
}

TEST_F(HostileInput, OutOfRangeEnumsAreRefusedAndTheHeadKeepsServing) {
  auto& cluster = *cluster_;
  RawPeer peer(cluster.address(), AsCluster());
  protocol::RegisterDriverRequest hello;
  hello.rayx_version = kRayxVersion;
  peer.Send(Request(hello, 1));
  auto registered = peer.Receive(5000);
  ASSERT_EQ(registered.size(), 2u);
  auto driver = protocol::Decode<protocol::RegisterDriverReply>(registered[1]);
  ASSERT_TRUE(driver.ok()) << driver.status();
  protocol::CreatePlacementGroupRequest group;
  group.job_id = driver->job_id;
  group.bundles = {{{"CPU", 1}}};
  group.strategy = static_cast<protocol::PlacementStrategy>(200);
  ExpectErrorReply(peer, Request(group, 2), StatusCode::kInvalidArgument);
  protocol::RequestLeaseRequest lease;
  lease.job_id = driver->job_id;
  lease.resources = {{"CPU", 1}};
  lease.strategy = static_cast<protocol::LeaseStrategy>(3);
  ExpectErrorReply(peer, Request(lease, 3), StatusCode::kInvalidArgument);
  // A well-formed group is still created.
  group.strategy = protocol::PlacementStrategy::kPack;
  peer.Send(Request(group, 4));
  auto reply = peer.Receive(5000);
  ASSERT_EQ(reply.size(), 2u);
  auto created = protocol::Decode<protocol::CreatePlacementGroupReply>(reply[1]);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->group.state, protocol::PlacementGroupState::kCreated);
}

}  // namespace
}  // namespace rayx::testing
