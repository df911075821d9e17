// ZmqHeadConnection over real loopback sockets: the head knows the agent by
// one routing id, which a reconnect keeps.
#include "agent/head_connection.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "transport/security.h"
#include "transport/zap_server.h"
#include "transport/zmq_frame.h"

namespace rayx::worker {
namespace head_connection_test {  // this file's own (unit tests compile in batches)

constexpr char kToken[] = "head-connection-test";

class ZmqHeadConnectionTest : public ::testing::Test {
 protected:
  // A ROUTER standing in for the head, on `port` (0: a free one).
  void BindHead(uint16_t port) {
    head_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::router);
    head_->set(zmq::sockopt::linger, 0);
    head_->set(zmq::sockopt::rcvtimeo, 10);
    transport::MakeServer(*head_, transport::WireSecurity::kEncrypted,
                          transport::Credential::Cluster(kToken));
    std::string endpoint = "tcp://127.0.0.1:" + (port ? std::to_string(port) : std::string("*"));
    // The old socket's port is released by ZeroMQ's I/O thread, soon after close.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (true) {
      try {
        head_->bind(endpoint);
        break;
      } catch (const zmq::error_t& e) {
        if (e.num() != EADDRINUSE || std::chrono::steady_clock::now() > deadline) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    endpoint = head_->get(zmq::sockopt::last_endpoint);
    port_ = static_cast<uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
  }

  // Sends `tag` from `connection` until the head receives it (a reconnecting
  // DEALER drops what it queued for the old connection); returns the routing
  // id the head saw it from, or "" after 10 s. Earlier messages are skipped.
  std::string SeenByHead(HeadConnection& connection, const std::string& tag) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      transport::Frames hello;
      hello.emplace_back(tag);
      (void)connection.Send(hello);
      io_.restart();
      io_.run_for(std::chrono::milliseconds(10));
      zmq::message_t identity;
      while (head_->recv(identity)) {
        zmq::message_t body;
        EXPECT_TRUE(head_->recv(body));
        if (body.to_string() == tag) return identity.to_string();
      }
    }
    return "";
  }

  static transport::ClientSecurity Security() {
    return transport::ClientSecurity::ClusterToHead(kToken);
  }

  boost::asio::io_context io_;
  zmq::context_t context_{1};
  transport::ZapServer zap_{context_, std::make_shared<transport::ClusterVerifier>(kToken), "head"};
  std::unique_ptr<zmq::socket_t> head_;
  uint16_t port_ = 0;
  std::unique_ptr<ZmqHeadConnection> connection_;
};

TEST_F(ZmqHeadConnectionTest, TheAgentKeepsItsRoutingIdAcrossAReconnect) {
  BindHead(0);
  connection_ = std::make_unique<ZmqHeadConnection>(io_, HostPort{"127.0.0.1", port_},
                                                    Security());
  connection_->Start([](transport::Frames&) {});
  std::string first = SeenByHead(*connection_, "first");
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first.rfind("rayx-agent-", 0), 0u) << first;
  // The head's socket goes away and comes back on the same port (a dropped
  // connection, a restarted head): the agent reconnects as itself.
  head_.reset();
  BindHead(port_);
  std::string second = SeenByHead(*connection_, "second");
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(second, first);
  // Another agent is another peer.
  ZmqHeadConnection other(io_, HostPort{"127.0.0.1", port_}, Security());
  other.Start([](transport::Frames&) {});
  std::string third = SeenByHead(other, "third");
  ASSERT_FALSE(third.empty());
  EXPECT_NE(third, first);
}

// An agent with another cluster's token never reaches the head: nothing it
// sends arrives (the head also proves it holds the cluster's key).
TEST_F(ZmqHeadConnectionTest, AnAgentWithAnotherTokenReachesNothing) {
  BindHead(0);
  ZmqHeadConnection stranger(io_, HostPort{"127.0.0.1", port_},
                             transport::ClientSecurity::ClusterToHead("another-token"));
  stranger.Start([](transport::Frames&) {});
  transport::Frames hello;
  hello.emplace_back("let me in");
  (void)stranger.Send(hello);
  io_.restart();
  io_.run_for(std::chrono::milliseconds(300));
  zmq::message_t identity;
  EXPECT_FALSE(head_->recv(identity));
}

}  // namespace
}  // namespace rayx::worker
