// PullObject against a real ZeroMQ server that takes requests and never
// answers: the idle timeout ends the pull, as Unavailable (the node is taken
// for gone, so lineage may compute the object again).
#include "object_store/object_pull.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <zmq.hpp>

namespace rayx {
namespace {

class SilentServer {
 public:
  SilentServer() : socket_(context_, zmq::socket_type::router) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  }
  protocol::ObjectLocation Location() const {
    protocol::ObjectLocation location;
    location.object_address = endpoint_;
    location.path = "/store/slow";
    location.size = 1 << 20;
    return location;
  }
  zmq::context_t& context() { return context_; }

 private:
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string endpoint_;
};

int64_t MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

TEST(PullObject, TheIdleTimeoutEndsAPullThatGetsNoAnswer) {
  SilentServer server;
  auto start = std::chrono::steady_clock::now();
  auto pulled = PullObject(server.context(), transport::ClientSecurity{}, server.Location(),
                           /*timeout_ms=*/300);
  ASSERT_FALSE(pulled.ok());
  EXPECT_EQ(pulled.status().code(), StatusCode::kUnavailable) << pulled.status();
  EXPECT_LT(MsSince(start), 5000);
}

// An object server that refuses this process's credential: the pull says so
// at once (Unauthenticated), instead of waiting out its idle timeout.
TEST(PullObject, ARefusedCredentialIsReportedNotWaitedOut) {
  zmq::context_t context;
  transport::ZapServer zap(context, std::make_shared<transport::ClusterVerifier>("the-token"),
                           "object server");
  zmq::socket_t server(context, zmq::socket_type::router);
  server.set(zmq::sockopt::linger, 0);
  transport::MakeServer(server, transport::WireSecurity::kAuthenticated,
                        transport::Credential::Cluster("the-token"));
  server.bind("tcp://127.0.0.1:*");
  protocol::ObjectLocation location;
  location.object_address = server.get(zmq::sockopt::last_endpoint);
  location.path = "/store/x";
  location.size = 10;
  auto start = std::chrono::steady_clock::now();
  auto pulled = PullObject(context,
                           transport::ClientSecurity::ObjectServer(
                               transport::WireSecurity::kAuthenticated,
                               transport::Credential::Cluster("another-token"), ""),
                           location, /*timeout_ms=*/60000);
  ASSERT_FALSE(pulled.ok());
  EXPECT_EQ(pulled.status().code(), StatusCode::kUnauthenticated) << pulled.status();
  EXPECT_NE(pulled.status().message().find("credential"), std::string::npos) << pulled.status();
  EXPECT_LT(MsSince(start), 30000) << "the refusal was waited out";
  server.close();
}

}  // namespace
}  // namespace rayx
