// The CLI's cluster client against an in-process fake head (a real ZeroMQ
// ROUTER): a call to a node agent that does not answer (a stopped node) keeps
// the job's heartbeats going, so `rayx launch` never loses its job to a slow
// agent.
#include "cluster_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "protocol/codec.h"
#include "protocol/messages.h"
#include "protocol/process_messages.h"
#include "transport/message.h"
#include "transport/security.h"
#include "transport/zap_server.h"
#include "transport/zmq_frame.h"

namespace rayx::cli {
namespace cluster_client_test {  // this file's own (unit tests compile in batches)

using protocol::MessageType;
using transport::FrameView;
using transport::Frames;

// A head that registers one driver (heartbeat period 50 ms) and counts its
// heartbeats, on its own thread. It admits the cluster "token" (CURVE, as the
// real head).
class FakeHead {
 public:
  FakeHead()
      : zap_(context_, std::make_shared<transport::ClusterVerifier>("token"), "fake head"),
        router_(context_, zmq::socket_type::router) {
    router_.set(zmq::sockopt::linger, 0);
    transport::MakeServer(router_, transport::WireSecurity::kEncrypted,
                          transport::Credential::Cluster("token"));
    router_.bind("tcp://127.0.0.1:0");
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { Run(); });
  }
  ~FakeHead() {
    stop_ = true;
    thread_.join();
  }
  std::string address() const { return endpoint_.substr(std::string("tcp://").size()); }
  int heartbeats() const { return heartbeats_; }

 private:
  void Run() {
    while (!stop_) {
      zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(20));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      Frames in = transport::ReceiveFrames(router_);
      if (in.size() < 3) continue;
      auto env = protocol::Decode<protocol::Envelope>(FrameView(in[1]));
      if (!env.ok()) continue;
      Frames out;
      if (env->t == static_cast<uint16_t>(MessageType::kRegisterDriverRequest)) {
        protocol::RegisterDriverReply reply;
        reply.job_id = JobId::FromWire("job-1");
        reply.heartbeat_period_ms = 50;
        out = transport::MakeMessage(reply, env->id);
      } else if (env->t == static_cast<uint16_t>(MessageType::kDriverHeartbeatRequest)) {
        ++heartbeats_;
        out = transport::MakeMessage(protocol::DriverHeartbeatReply{}, env->id);
      } else {
        continue;
      }
      out.insert(out.begin(), std::move(in[0]));
      transport::SendFrames(router_, out);
    }
  }

  zmq::context_t context_{1};
  transport::ZapServer zap_;
  zmq::socket_t router_;
  std::string endpoint_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> heartbeats_{0};
};

TEST(ClusterClientTest, ASilentAgentDoesNotHoldUpTheJobsHeartbeats) {
  FakeHead head;
  auto client = ClusterClient::Connect(head.address(), "token", 5000);
  ASSERT_TRUE(client.ok()) << client.status();
  // An agent's object server that never answers: bound, silent.
  zmq::context_t context(1);
  zmq::socket_t silent(context, zmq::socket_type::router);
  silent.set(zmq::sockopt::linger, 0);
  silent.bind("tcp://127.0.0.1:0");
  std::string agent = silent.get(zmq::sockopt::last_endpoint);

  int before = head.heartbeats();
  protocol::ReadLogRequest req;
  req.lease_id = LeaseId::FromWire("lease-1");
  auto reply = (*client)->CallAgent(agent, req, 1000);
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable) << reply.status();
  EXPECT_NE(reply.status().message().find("did not answer within 1000 ms"), std::string::npos)
      << reply.status();
  // 1 s at a 50 ms period: about 20 heartbeats went out while it waited
  // (before the fix: none). The fake head counts those it received.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (head.heartbeats() - before < 5 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(head.heartbeats() - before, 5) << "heartbeats stopped while an agent was slow";
}

}  // namespace
}  // namespace rayx::cli
