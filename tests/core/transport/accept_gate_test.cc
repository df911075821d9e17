// AcceptGate's policy on a stepped clock, its kernel filter on real sockets,
// and a ZapServer shutting out a real flood of strangers.
#include "transport/accept_gate.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "transport/zap_server.h"
#include "transport/zmq_frame.h"
#include "util/subprocess.h"
#include "util/test_helpers.h"

namespace rayx::transport {
namespace accept_gate_test {  // this file's own (unit tests compile in batches)

using namespace std::chrono_literals;
using Clock = AcceptGate::Clock;
using rayx::testing::WaitUntil;

constexpr char kServer[] = "10.0.0.1";

uint32_t Ipv4(const char* text) {
  in_addr a{};
  inet_pton(AF_INET, text, &a);
  return a.s_addr;
}

AcceptGateOptions Small() {
  AcceptGateOptions o;
  o.max_unproved = 3;
  o.window = 10s;
  o.ban = 60s;
  o.trusted_for = 1h;
  return o;
}

TEST(AcceptGate, BansAnAddressThatKeepsConnectingWithoutProof) {
  AcceptGate gate(Small());
  Clock::time_point t0{};
  EXPECT_FALSE(gate.Connected("10.0.0.9", kServer, t0));
  EXPECT_FALSE(gate.Connected("10.0.0.9", kServer, t0 + 1s));
  EXPECT_FALSE(gate.IsBanned("10.0.0.9"));
  EXPECT_TRUE(gate.Connected("10.0.0.9", kServer, t0 + 2s));
  EXPECT_TRUE(gate.IsBanned("10.0.0.9"));
  EXPECT_EQ(gate.BannedIpv4(), std::vector<uint32_t>{Ipv4("10.0.0.9")});
  EXPECT_EQ(gate.bans_total(), 1u);
  // Stragglers from a banned address change nothing.
  EXPECT_FALSE(gate.Connected("10.0.0.9", kServer, t0 + 3s));
  EXPECT_EQ(gate.NextExpiry(), t0 + 2s + 60s);
}

TEST(AcceptGate, CountsOnlyWithinTheWindow) {
  AcceptGate gate(Small());
  Clock::time_point t0{};
  EXPECT_FALSE(gate.Connected("10.0.0.9", kServer, t0));
  EXPECT_FALSE(gate.Connected("10.0.0.9", kServer, t0 + 1s));
  // The window ended: counting starts again.
  EXPECT_FALSE(gate.Connected("10.0.0.9", kServer, t0 + 11s));
  EXPECT_FALSE(gate.Connected("10.0.0.9", kServer, t0 + 12s));
  EXPECT_EQ(gate.banned(), 0u);
  EXPECT_TRUE(gate.Connected("10.0.0.9", kServer, t0 + 13s));
}

TEST(AcceptGate, NeverBansAnAddressThatProvedItselfRecently) {
  AcceptGate gate(Small());
  Clock::time_point t0{};
  EXPECT_FALSE(gate.Proved("10.0.0.7", t0));
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(gate.Connected("10.0.0.7", kServer, t0 + 1s));
  EXPECT_EQ(gate.banned(), 0u);
  // An hour later the proof is stale: counted again.
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(gate.Connected("10.0.0.7", kServer, t0 + 2h));
  EXPECT_TRUE(gate.Connected("10.0.0.7", kServer, t0 + 2h));
}

TEST(AcceptGate, NeverCountsTheServersOwnMachine) {
  AcceptGate gate(Small());
  Clock::time_point t0{};
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(gate.Connected(kServer, kServer, t0));
    EXPECT_FALSE(gate.Connected("127.0.0.1", "127.0.0.2", t0));
    EXPECT_FALSE(gate.Connected("::1", "::1", t0));
    EXPECT_FALSE(gate.Connected("::ffff:10.0.0.1", kServer, t0));  // the same address
  }
  EXPECT_EQ(gate.banned(), 0u);
}

TEST(AcceptGate, AProofFromABannedAddressLiftsItsBan) {
  AcceptGate gate(Small());
  Clock::time_point t0{};
  for (int i = 0; i < 3; ++i) gate.Connected("10.0.0.9", kServer, t0);
  ASSERT_TRUE(gate.IsBanned("10.0.0.9"));
  // A connection accepted before the ban proves the cluster's credential.
  EXPECT_TRUE(gate.Proved("10.0.0.9", t0 + 1s));
  EXPECT_FALSE(gate.IsBanned("10.0.0.9"));
}

TEST(AcceptGate, BansEnd) {
  AcceptGate gate(Small());
  Clock::time_point t0{};
  for (int i = 0; i < 3; ++i) gate.Connected("10.0.0.9", kServer, t0);
  EXPECT_FALSE(gate.Expire(t0 + 59s));
  EXPECT_TRUE(gate.IsBanned("10.0.0.9"));
  EXPECT_TRUE(gate.Expire(t0 + 60s));
  EXPECT_FALSE(gate.IsBanned("10.0.0.9"));
  EXPECT_EQ(gate.NextExpiry(), std::nullopt);
  EXPECT_EQ(gate.bans_total(), 1u);
}

TEST(AcceptGate, IsBounded) {
  AcceptGateOptions o = Small();
  o.max_banned = 2;
  o.max_tracked = 2;
  AcceptGate gate(o);
  Clock::time_point t0{};
  for (int a = 1; a <= 3; ++a) {
    for (int i = 0; i < 3; ++i) gate.Connected("10.0.1." + std::to_string(a), kServer, t0 + a * 1s);
  }
  // Full: the ban that would end first made room.
  EXPECT_EQ(gate.banned(), 2u);
  EXPECT_FALSE(gate.IsBanned("10.0.1.1"));
  EXPECT_TRUE(gate.IsBanned("10.0.1.3"));
  // Two addresses counted inside the window fill the table: a third is not
  // counted until their windows end.
  gate.Connected("10.0.2.1", kServer, t0 + 10s);
  gate.Connected("10.0.2.2", kServer, t0 + 10s);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(gate.Connected("10.0.2.3", kServer, t0 + 11s));
  EXPECT_FALSE(gate.IsBanned("10.0.2.3"));
  gate.Connected("10.0.2.3", kServer, t0 + 21s);
  gate.Connected("10.0.2.3", kServer, t0 + 21s);
  EXPECT_TRUE(gate.Connected("10.0.2.3", kServer, t0 + 21s));
}

TEST(AcceptGate, CountsIpv6ButFiltersOnlyIpv4) {
  AcceptGate gate(Small());
  Clock::time_point t0{};
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(gate.Connected("2001:db8::9", kServer, t0));
  EXPECT_EQ(gate.banned(), 0u);
  // An IPv4-mapped address is its IPv4 address.
  for (int i = 0; i < 2; ++i) gate.Connected("::ffff:10.0.0.9", kServer, t0);
  EXPECT_TRUE(gate.Connected("10.0.0.9", kServer, t0));
  EXPECT_EQ(AcceptGate::Canonical("[::ffff:10.0.0.9]"), "10.0.0.9");
  EXPECT_EQ(AcceptGate::Canonical("not an address"), "");
  EXPECT_FALSE(gate.Connected("not an address", kServer, t0));
}

// --- The kernel filter, on real sockets -------------------------------------------

bool ConnectsFrom(const char* source, uint16_t port, std::chrono::milliseconds wait) {
  return rayx::testing::TcpConnectsFrom(source, "127.0.0.1", port, wait);
}

TEST(AcceptGateFilter, TheKernelDropsBannedAddressesOnly) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 16), 0);
  socklen_t len = sizeof addr;
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const uint16_t port = ntohs(addr.sin_port);

  ASSERT_TRUE(AcceptGate::Apply(listener, {Ipv4("127.0.0.9"), Ipv4("127.0.0.11")}).ok());
  EXPECT_FALSE(ConnectsFrom("127.0.0.9", port, 300ms));
  EXPECT_FALSE(ConnectsFrom("127.0.0.11", port, 300ms));
  EXPECT_TRUE(ConnectsFrom("127.0.0.10", port, 3000ms));
  EXPECT_TRUE(ConnectsFrom("127.0.0.1", port, 3000ms));
  // An empty list lifts the filter.
  ASSERT_TRUE(AcceptGate::Apply(listener, {}).ok());
  EXPECT_TRUE(ConnectsFrom("127.0.0.9", port, 3000ms));
  EXPECT_FALSE(AcceptGate::Apply(listener, std::vector<uint32_t>(201, Ipv4("10.0.0.1"))).ok());
  ::close(listener);
}

// --- A ZapServer guarding a real server socket ------------------------------------

TEST(AcceptGateZap, AFloodOfStrangersIsShutOutAndMembersStillConnect) {
  zmq::context_t server_context(1), client_context(1);
  auto verifier = std::make_shared<ClusterVerifier>("token-1");
  AcceptGateOptions o;
  o.max_unproved = 5;
  auto zap = std::make_unique<ZapServer>(server_context, verifier, "test server", o);
  zmq::socket_t server(server_context, zmq::socket_type::router);
  server.set(zmq::sockopt::linger, 0);
  const Credential cluster = Credential::Cluster("token-1");
  MakeServer(server, WireSecurity::kEncrypted, cluster);
  zap->Guard(server);
  server.bind("tcp://127.0.0.1:*");
  const std::string endpoint = server.get(zmq::sockopt::last_endpoint);
  const std::string port = endpoint.substr(endpoint.rfind(':') + 1);
  const uint16_t port_number = static_cast<uint16_t>(std::stoi(port));

  // Strangers from 127.0.0.9 (another machine, for this test) with the
  // server's key but a wrong token: each connection costs a CURVE handshake.
  const Credential stranger = Credential::Cluster("not-the-token");
  std::vector<std::unique_ptr<zmq::socket_t>> flood;
  for (int i = 0; i < 5; ++i) {
    auto s = std::make_unique<zmq::socket_t>(client_context, zmq::socket_type::dealer);
    s->set(zmq::sockopt::linger, 0);
    s->set(zmq::sockopt::reconnect_ivl, -1);
    MakeClient(*s, WireSecurity::kEncrypted, stranger, cluster.CurvePublicKey());
    s->connect("tcp://127.0.0.9:0;127.0.0.1:" + port);
    flood.push_back(std::move(s));
  }
  ASSERT_TRUE(WaitUntil([&] { return zap->bans_total() == 1; }, 5000))
      << "bans: " << zap->bans_total() << ", refused: " << zap->refused_count();
  EXPECT_EQ(zap->banned_now(), 1u);
  EXPECT_EQ(zap->accepted_count(), 0u);
  // The next connection from there never completes its TCP handshake.
  EXPECT_FALSE(ConnectsFrom("127.0.0.9", port_number, 300ms));
  // A member from another address still connects and is served.
  zmq::socket_t member(client_context, zmq::socket_type::dealer);
  member.set(zmq::sockopt::linger, 0);
  MakeClient(member, WireSecurity::kEncrypted, cluster, cluster.CurvePublicKey());
  member.connect("tcp://127.0.0.10:0;127.0.0.1:" + port);
  member.send(zmq::str_buffer("hello"), zmq::send_flags::dontwait);
  zmq::pollitem_t item{server.handle(), 0, ZMQ_POLLIN, 0};
  ASSERT_EQ(zmq::poll(&item, 1, 5000ms), 1);
  Frames frames = ReceiveFrames(server);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[1].View(), "hello");
  EXPECT_EQ(zap->accepted_count(), 1u);

  flood.clear();
  member.close();
  server.close();
  zap.reset();
}

}  // namespace accept_gate_test
}  // namespace rayx::transport
