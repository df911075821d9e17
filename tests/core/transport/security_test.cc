// Credentials, ZAP and PLAIN/CURVE servers over real ZeroMQ sockets on loopback.
#include "transport/security.h"
#include "transport/zap_server.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include <zmq.hpp>

#include "transport/zmq_frame.h"
#include "util/subprocess.h"

namespace rayx::transport {
namespace security_test {  // this file's own (unit tests compile in batches)

using namespace std::chrono_literals;
using rayx::testing::WaitUntil;

const JobId kJobA = JobId::FromHex("00000000000000aa").value();
const JobId kJobB = JobId::FromHex("00000000000000bb").value();

TEST(Credential, DerivesTheSameKeysFromTheSameSecret) {
  Credential a = Credential::Cluster("token-1");
  Credential b = Credential::Cluster("token-1");
  EXPECT_EQ(a.CurvePublicKey(), b.CurvePublicKey());
  EXPECT_EQ(a.CurveSecretKey(), b.CurveSecretKey());
  EXPECT_EQ(a.PlainPassword(), b.PlainPassword());
  EXPECT_EQ(a.CurvePublicKey().size(), 40u);
  EXPECT_NE(a.CurvePublicKey(), Credential::Cluster("token-2").CurvePublicKey());
}

TEST(Credential, NeverSendsTheTokenItself) {
  Credential c = Credential::Cluster("the-token");
  EXPECT_EQ(c.PlainUsername(), "cluster");
  EXPECT_EQ(c.PlainPassword().find("the-token"), std::string::npos);
  EXPECT_NE(c.PlainPassword(), "the-token");
}

TEST(Credential, JobSecretsDifferPerJobAndPerCluster) {
  std::string a = Credential::JobSecret("token-1", kJobA);
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a, Credential::JobSecret("token-1", kJobA));
  EXPECT_NE(a, Credential::JobSecret("token-1", kJobB));
  EXPECT_NE(a, Credential::JobSecret("token-2", kJobA));
}

TEST(Credential, TheClusterDerivesAnyJobAJobOnlyItself) {
  Credential cluster = Credential::Cluster("token-1");
  auto a = cluster.ForJob(kJobA);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->principal(), Principal::Job(kJobA));
  EXPECT_EQ(a->secret(), Credential::JobSecret("token-1", kJobA));
  auto same = a->ForJob(kJobA);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->CurvePublicKey(), a->CurvePublicKey());
  auto other = a->ForJob(kJobB);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(other.status().message().find(kJobB.Hex()), std::string::npos);
}

// A read grant: a job signs it for one of its own objects; the cluster (an
// object server) checks it; nobody else can make one that passes.
TEST(Credential, AReadGrantOpensOneObjectOfItsJob) {
  Credential cluster = Credential::Cluster("token-1");
  Credential a = *cluster.ForJob(kJobA);
  Credential b = *cluster.ForJob(kJobB);
  const std::string mine = kJobA.Hex() + "-5f3a9c0000000001";
  EXPECT_EQ(Credential::JobOfObject(mine), kJobA);
  EXPECT_EQ(Credential::JobOfObject("no-job-here"), std::nullopt);
  EXPECT_EQ(Credential::JobOfObject(kJobA.Hex() + "x1"), std::nullopt);
  std::string grant = a.GrantRead(mine);
  ASSERT_EQ(grant.size(), 64u);
  EXPECT_EQ(grant, cluster.GrantRead(mine));
  EXPECT_TRUE(cluster.IsReadGrant(mine, grant));
  EXPECT_FALSE(cluster.IsReadGrant(kJobA.Hex() + "-5f3a9c0000000002", grant)) << "one object only";
  EXPECT_EQ(b.GrantRead(mine), "") << "B cannot sign for A's objects";
  EXPECT_FALSE(cluster.IsReadGrant(mine, Credential::ReadGrant(b.secret(), mine)));
  EXPECT_FALSE(cluster.IsReadGrant(mine, ""));
  EXPECT_FALSE(Credential::Cluster("token-2").IsReadGrant(mine, grant)) << "another cluster's";
}

TEST(Principal, UserIdRoundTrips) {
  EXPECT_EQ(Principal::FromUserId(Principal::Cluster().UserId()), Principal::Cluster());
  EXPECT_EQ(Principal::FromUserId(Principal::Job(kJobA).UserId()), Principal::Job(kJobA));
  EXPECT_FALSE(Principal::FromUserId("").valid());
  EXPECT_FALSE(Principal::FromUserId("job:xyz").valid());
  EXPECT_FALSE(Principal::FromUserId("clusterx").valid());
  EXPECT_TRUE(Principal::Cluster().MayActFor(kJobA));
  EXPECT_TRUE(Principal::Job(kJobA).MayActFor(kJobA));
  EXPECT_FALSE(Principal::Job(kJobA).MayActFor(kJobB));
  EXPECT_FALSE(Principal().MayActFor(kJobA));
}

TEST(ClusterVerifier, AdmitsTheClusterAndAllowedJobsOnly) {
  ClusterVerifier v("token-1");
  Credential cluster = Credential::Cluster("token-1");
  Credential job_a = *cluster.ForJob(kJobA);
  ZapRequest plain{"rayx", "127.0.0.1", "PLAIN", cluster.PlainUsername(), cluster.PlainPassword(), ""};
  EXPECT_EQ(v.Verify(plain), Principal::Cluster());
  plain.password = "wrong";
  EXPECT_FALSE(v.Verify(plain));
  ZapRequest job_plain{"rayx", "127.0.0.1", "PLAIN", job_a.PlainUsername(), job_a.PlainPassword(), ""};
  EXPECT_FALSE(v.Verify(job_plain)) << "a job nobody said is live";
  v.AllowJob(kJobA);
  EXPECT_EQ(v.Verify(job_plain), Principal::Job(kJobA));
  // A job's password does not work under another job's name.
  ZapRequest forged = job_plain;
  forged.username = Principal::Job(kJobB).UserId();
  v.AllowJob(kJobB);
  EXPECT_FALSE(v.Verify(forged));
  ZapRequest curve{"rayx", "127.0.0.1", "CURVE", "", "", job_a.CurvePublicKey()};
  EXPECT_EQ(v.Verify(curve), Principal::Job(kJobA));
  v.ForgetJob(kJobA);
  EXPECT_FALSE(v.Verify(curve));
  EXPECT_FALSE(v.Verify(job_plain));
  curve.client_key = cluster.CurvePublicKey();
  EXPECT_EQ(v.Verify(curve), Principal::Cluster());
  ZapRequest null_mechanism{"rayx", "127.0.0.1", "NULL", "", "", ""};
  EXPECT_FALSE(v.Verify(null_mechanism));
}

TEST(JobVerifier, AdmitsItsOwnJobOnly) {
  Credential cluster = Credential::Cluster("token-1");
  JobVerifier v(*cluster.ForJob(kJobA));
  Credential a = *cluster.ForJob(kJobA);
  Credential b = *cluster.ForJob(kJobB);
  EXPECT_EQ(v.Verify({"rayx", "", "PLAIN", a.PlainUsername(), a.PlainPassword(), ""}),
            Principal::Job(kJobA));
  EXPECT_FALSE(v.Verify({"rayx", "", "PLAIN", b.PlainUsername(), b.PlainPassword(), ""}));
  EXPECT_FALSE(v.Verify({"rayx", "", "PLAIN", cluster.PlainUsername(), cluster.PlainPassword(), ""}));
  EXPECT_EQ(v.Verify({"rayx", "", "CURVE", "", "", a.CurvePublicKey()}), Principal::Job(kJobA));
  EXPECT_FALSE(v.Verify({"rayx", "", "CURVE", "", "", cluster.CurvePublicKey()}));
}

// A ROUTER server with ZAP in its own context, and clients in another.
class SecureSocketsTest : public ::testing::TestWithParam<WireSecurity> {
 protected:
  void SetUp() override {
    verifier_ = std::make_shared<ClusterVerifier>("token-1");
    zap_ = std::make_unique<ZapServer>(server_context_, verifier_, "test server");
    server_.set(zmq::sockopt::linger, 0);
    MakeServer(server_, GetParam(), Credential::Cluster("token-1"));
    server_.bind("tcp://127.0.0.1:*");
    endpoint_ = server_.get(zmq::sockopt::last_endpoint);
  }
  void TearDown() override {
    server_.close();
    zap_.reset();
  }

  std::unique_ptr<zmq::socket_t> Client(const Credential& mine,
                                        const std::string& server_key =
                                            Credential::Cluster("token-1").CurvePublicKey()) {
    auto s = std::make_unique<zmq::socket_t>(client_context_, zmq::socket_type::dealer);
    s->set(zmq::sockopt::linger, 0);
    if (!mine.empty()) MakeClient(*s, GetParam(), mine, server_key);
    s->connect(endpoint_);
    return s;
  }

  // Sends from `client` and returns who the server saw, or kNone when nothing
  // arrived within `wait`.
  Principal SendAndSee(zmq::socket_t& client, std::chrono::milliseconds wait = 3000ms) {
    client.send(zmq::str_buffer("hello"), zmq::send_flags::dontwait);
    zmq::pollitem_t item{server_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, wait) == 0) return Principal();
    Frames frames = ReceiveFrames(server_);
    EXPECT_EQ(frames.size(), 2u);
    if (frames.size() != 2) return Principal();
    EXPECT_EQ(frames[1].View(), "hello");
    return PeerPrincipal(frames[1]);
  }

  zmq::context_t server_context_{1};
  zmq::context_t client_context_{1};
  std::shared_ptr<ClusterVerifier> verifier_;
  std::unique_ptr<ZapServer> zap_;
  zmq::socket_t server_{server_context_, zmq::socket_type::router};
  std::string endpoint_;
};

TEST_P(SecureSocketsTest, TheClusterConnectsAndIsNamedOnEveryMessage) {
  auto client = Client(Credential::Cluster("token-1"));
  EXPECT_EQ(SendAndSee(*client), Principal::Cluster());
  EXPECT_EQ(SendAndSee(*client), Principal::Cluster());
  EXPECT_EQ(zap_->accepted_count(), 1u);
}

TEST_P(SecureSocketsTest, AnAllowedJobConnectsAsItself) {
  verifier_->AllowJob(kJobA);
  auto client = Client(*Credential::Cluster("token-1").ForJob(kJobA));
  EXPECT_EQ(SendAndSee(*client), Principal::Job(kJobA));
}

TEST_P(SecureSocketsTest, StrangersNeverReachTheSocket) {
  auto wrong_token = Client(Credential::Cluster("not-the-token"));
  auto unknown_job = Client(*Credential::Cluster("token-1").ForJob(kJobB));
  auto no_credential = Client(Credential());
  EXPECT_TRUE(WaitUntil([&] { return zap_->refused_count() >= 2; }, 5000));
  EXPECT_FALSE(SendAndSee(*wrong_token, 300ms).valid());
  EXPECT_FALSE(SendAndSee(*unknown_job, 300ms).valid());
  EXPECT_FALSE(SendAndSee(*no_credential, 300ms).valid());
  EXPECT_EQ(zap_->accepted_count(), 0u);
  // The server still serves the cluster meanwhile.
  auto good = Client(Credential::Cluster("token-1"));
  EXPECT_EQ(SendAndSee(*good), Principal::Cluster());
}

TEST_P(SecureSocketsTest, AHandWrittenNullMechanismPeerGetsNothingThrough) {
  // What a hand-written ZMTP 3.0 client sends: a greeting with the NULL
  // mechanism, READY as a DEALER, then a message.
  zmq::socket_t raw(client_context_, zmq::socket_type::stream);
  raw.set(zmq::sockopt::linger, 0);
  raw.connect(endpoint_);
  zmq::pollitem_t connected{raw.handle(), 0, ZMQ_POLLIN, 0};
  ASSERT_EQ(zmq::poll(&connected, 1, 3000ms), 1);
  zmq::message_t routing, empty;
  ASSERT_TRUE(raw.recv(routing));
  ASSERT_TRUE(raw.recv(empty));  // the connection notice
  std::string greeting("\xff\0\0\0\0\0\0\0\x01\x7f\x03\x00", 12);
  greeting += std::string("NULL") + std::string(16, '\0');  // mechanism
  greeting += std::string(1, '\0') + std::string(31, '\0');  // as-server, filler
  std::string ready_body = std::string("\x05READY") + "\x0bSocket-Type" +
                           std::string("\0\0\0\x06", 4) + "DEALER";
  std::string ready = std::string("\x04") + static_cast<char>(ready_body.size()) + ready_body;
  std::string message = std::string("\x00\x05", 2) + "hello";
  for (const std::string& bytes : {greeting, ready, message}) {
    raw.send(zmq::buffer(routing.to_string_view()), zmq::send_flags::sndmore);
    raw.send(zmq::buffer(bytes));
  }
  zmq::pollitem_t item{server_.handle(), 0, ZMQ_POLLIN, 0};
  EXPECT_EQ(zmq::poll(&item, 1, 500ms), 0);
  EXPECT_EQ(zap_->accepted_count(), 0u);
}

// A client's watch counts its successful handshakes when asked to: one more
// after the first is a new connection (the server came back on its port),
// which the CLI answers by heartbeating at once. A wrong credential's failure
// is still named; successes never read as one.
TEST_P(SecureSocketsTest, AHandshakeWatchCountsNewConnectionsWhenAsked) {
  zmq::socket_t client(client_context_, zmq::socket_type::dealer);
  client.set(zmq::sockopt::linger, 0);
  client.set(zmq::sockopt::reconnect_ivl, 20);
  MakeClient(client, GetParam(), Credential::Cluster("token-1"),
             Credential::Cluster("token-1").CurvePublicKey());
  HandshakeWatch counting(client_context_, client, /*successes=*/true);
  client.connect(endpoint_);
  EXPECT_TRUE(WaitUntil([&] { return counting.Succeeded() == 1; }, 5000));
  // The server goes and a new one binds the same port.
  server_.close();
  server_ = zmq::socket_t(server_context_, zmq::socket_type::router);
  server_.set(zmq::sockopt::linger, 0);
  MakeServer(server_, GetParam(), Credential::Cluster("token-1"));
  // (The old listener closes in libzmq's I/O thread, soon after close.)
  ASSERT_TRUE(WaitUntil(
      [&] {
        try {
          server_.bind(endpoint_);
          return true;
        } catch (const zmq::error_t&) {
          return false;
        }
      },
      5000));
  EXPECT_TRUE(WaitUntil([&] { return counting.Succeeded() == 2; }, 5000))
      << counting.Succeeded() << " handshakes";
  EXPECT_EQ(counting.Failure(), "");
  EXPECT_EQ(SendAndSee(client), Principal::Cluster());

  // Without `successes` nothing is counted; a refusal is named.
  zmq::socket_t stranger(client_context_, zmq::socket_type::dealer);
  stranger.set(zmq::sockopt::linger, 0);
  MakeClient(stranger, GetParam(), Credential::Cluster("not-the-token"),
             Credential::Cluster("token-1").CurvePublicKey());
  HandshakeWatch failing(client_context_, stranger);
  stranger.connect(endpoint_);
  EXPECT_TRUE(WaitUntil([&] { return !failing.Failure().empty(); }, 5000));
  EXPECT_EQ(failing.Succeeded(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, SecureSocketsTest,
                         ::testing::Values(WireSecurity::kAuthenticated, WireSecurity::kEncrypted),
                         [](const auto& param_info) {
                           return std::string(WireSecurityName(param_info.param));
                         });

TEST(SecureSockets, ACurveClientRefusesAServerWithoutTheKey) {
  zmq::context_t context(1);
  // The "server" holds another cluster's key: the client never talks to it.
  auto verifier = std::make_shared<ClusterVerifier>("impostor");
  ZapServer zap(context, verifier, "impostor");
  zmq::socket_t server(context, zmq::socket_type::router);
  server.set(zmq::sockopt::linger, 0);
  MakeServer(server, WireSecurity::kEncrypted, Credential::Cluster("impostor"));
  server.bind("tcp://127.0.0.1:*");
  zmq::socket_t client(context, zmq::socket_type::dealer);
  client.set(zmq::sockopt::linger, 0);
  Credential mine = Credential::Cluster("token-1");
  MakeClient(client, WireSecurity::kEncrypted, mine, mine.CurvePublicKey());
  client.connect(server.get(zmq::sockopt::last_endpoint));
  client.send(zmq::str_buffer("secret"), zmq::send_flags::dontwait);
  zmq::pollitem_t item{server.handle(), 0, ZMQ_POLLIN, 0};
  EXPECT_EQ(zmq::poll(&item, 1, 500ms), 0);
  server.close();
  client.close();
}

TEST(WireSecurity, NamesRoundTrip) {
  for (WireSecurity m : {WireSecurity::kAuthenticated, WireSecurity::kEncrypted}) {
    EXPECT_EQ(ParseWireSecurity(WireSecurityName(m)).value(), m);
  }
  EXPECT_FALSE(ParseWireSecurity("tls").ok());
}

}  // namespace
}  // namespace rayx::transport
