// PullObject against real ZeroMQ servers on loopback: one that never answers
// (the connect deadline, then the idle timeout end the pull, as Unavailable),
// one that serves an object (chunks placed by id), and ones that lie about
// it; and the checks made before any connection (known servers, size bound).
#include "object_store/object_pull.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "common/clock.h"
#include "protocol/codec.h"
#include "transport/message.h"
#include "transport/zap_server.h"
#include "transport/zmq_frame.h"

namespace rayx {
namespace object_pull_test {  // this file's own (unit tests compile in batches)

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
  const std::string& endpoint() const { return endpoint_; }

 private:
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string endpoint_;
};

// Serves `content` in answer to pulls, on its own thread, saying the object
// has `claimed_size` bytes; `repeat_first` sends chunk 1 twice.
class FakeObjectServer {
 public:
  FakeObjectServer(std::string content, uint64_t claimed_size, bool repeat_first = false)
      : content_(std::move(content)),
        claimed_size_(claimed_size),
        repeat_first_(repeat_first),
        socket_(context_, zmq::socket_type::router) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeObjectServer() {
    stop_ = true;
    thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }
  int requests() const { return requests_; }

 private:
  void Serve() {
    while (!stop_) {
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(20));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      transport::Frames frames = transport::ReceiveFrames(socket_);
      auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(frames[1]));
      auto req = protocol::Decode<protocol::PullObjectRequest>(transport::FrameView(frames[2]));
      if (!env.ok() || !req.ok()) continue;
      ++requests_;
      protocol::PullObjectReply reply;
      reply.size = claimed_size_;
      uint64_t offset = std::min<uint64_t>(req->offset, content_.size());
      uint64_t length = std::min<uint64_t>(req->length, content_.size() - offset);
      int copies = repeat_first_ && env->id == 1 ? 2 : 1;
      for (int i = 0; i < copies; ++i) {
        transport::Frames out;
        out.push_back(transport::MakeFrame(transport::FrameView(frames[0])));
        for (auto& f : transport::MakeMessage(reply, env->id)) out.push_back(std::move(f));
        out.push_back(transport::MakeFrame(std::string_view(content_).substr(offset, length)));
        transport::SendFrames(socket_, out);
      }
    }
  }

  const std::string content_;
  const uint64_t claimed_size_;
  const bool repeat_first_;
  zmq::context_t context_{1};
  zmq::socket_t socket_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

int64_t MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

// A directory that knows exactly `servers` (and asks nobody).
class Directory {
 public:
  explicit Directory(std::vector<std::string> servers)
      : directory_([servers]() -> Result<std::vector<std::string>> { return servers; }, clock_,
                   ObjectServerDirectory::Options{}) {}
  ObjectServerDirectory& get() { return directory_; }

 private:
  ManualClock clock_;
  ObjectServerDirectory directory_;
};

protocol::ObjectLocation At(const std::string& endpoint, uint64_t size) {
  protocol::ObjectLocation location;
  location.node_address = "127.0.0.9";
  location.object_address = endpoint;
  location.path = "/store/x";
  location.size = size;
  return location;
}

TEST(PullObject, TheIdleTimeoutEndsAPullThatGetsNoAnswer) {
  SilentServer server;
  Directory servers({server.endpoint()});
  PullOptions options;
  options.idle_timeout_ms = 300;
  auto start = std::chrono::steady_clock::now();
  auto pulled = PullObject(server.context(), transport::ClientSecurity{}, server.Location(), servers.get(), options);
  ASSERT_FALSE(pulled.ok());
  EXPECT_EQ(pulled.status().code(), StatusCode::kUnavailable) << pulled.status();
  EXPECT_LT(MsSince(start), 5000);
}

// An address that takes the connection and says nothing holds the puller for
// the connect deadline, not the (long) idle timeout.
TEST(PullObject, TheFirstAnswerMustComeWithinTheConnectDeadline) {
  SilentServer server;
  Directory servers({server.endpoint()});
  PullOptions options;
  options.idle_timeout_ms = 60000;
  options.connect_timeout_ms = 300;
  auto start = std::chrono::steady_clock::now();
  auto pulled = PullObject(server.context(), transport::ClientSecurity{}, server.Location(), servers.get(), options);
  ASSERT_FALSE(pulled.ok());
  EXPECT_EQ(pulled.status().code(), StatusCode::kUnavailable) << pulled.status();
  EXPECT_NE(pulled.status().message().find("within 300 ms"), std::string::npos) << pulled.status();
  EXPECT_LT(MsSince(start), 5000);
}

TEST(PullObject, ChunksArePlacedByTheirIds) {
  std::string content(1000, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>('a' + i % 26);
  FakeObjectServer server(content, content.size());
  Directory servers({server.endpoint()});
  zmq::context_t context;
  PullOptions options;
  options.chunk = 64;  // 16 chunks, 4 in flight
  auto pulled = PullObject(context, transport::ClientSecurity{}, At(server.endpoint(), content.size()), servers.get(), options);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(*pulled, content);
}

// Nothing the location declares sizes anything before the server confirms it.
TEST(PullObject, ADeclaredSizeTheServerDoesNotConfirmIsRefused) {
  FakeObjectServer server(std::string(100, 'x'), 100);
  Directory servers({server.endpoint()});
  zmq::context_t context;
  auto pulled = PullObject(context, transport::ClientSecurity{}, At(server.endpoint(), uint64_t{1} << 30), servers.get());
  ASSERT_FALSE(pulled.ok());
  EXPECT_EQ(pulled.status().code(), StatusCode::kInvalidArgument) << pulled.status();
  EXPECT_NE(pulled.status().message().find("is 100 bytes"), std::string::npos) << pulled.status();
  EXPECT_NE(pulled.status().message().find("declares 1073741824"), std::string::npos)
      << pulled.status();
}

TEST(PullObject, AChunkThatComesTwiceFailsThePull) {
  FakeObjectServer server(std::string(200, 'x'), 200, /*repeat_first=*/true);
  Directory servers({server.endpoint()});
  zmq::context_t context;
  PullOptions options;
  options.chunk = 100;
  options.window = 1;  // the repeat arrives before chunk 2 is asked for
  auto pulled = PullObject(context, transport::ClientSecurity{}, At(server.endpoint(), 200), servers.get(), options);
  ASSERT_FALSE(pulled.ok());
  EXPECT_NE(pulled.status().message().find("came twice"), std::string::npos) << pulled.status();
}

TEST(PullObject, AnUnknownServerOrAnOversizedObjectIsRefusedBeforeConnecting) {
  FakeObjectServer server(std::string(100, 'x'), 100);
  zmq::context_t context;
  Directory nobody({});
  auto unknown = PullObject(context, transport::ClientSecurity{}, At(server.endpoint(), 100), nobody.get());
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument) << unknown.status();
  EXPECT_NE(unknown.status().message().find(server.endpoint()), std::string::npos);

  Directory servers({server.endpoint()});
  PullOptions options;
  options.max_object_bytes = 50;
  auto big = PullObject(context, transport::ClientSecurity{}, At(server.endpoint(), 100), servers.get(), options);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument) << big.status();
  EXPECT_NE(big.status().message().find("over the limit of 50 bytes"), std::string::npos)
      << big.status();
  EXPECT_EQ(server.requests(), 0);
}

TEST(PullObject, TheDefaultBoundIsHalfThePhysicalMemoryAndAtLeastOneGiB) {
  uint64_t memory = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                    static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(DefaultMaxPullBytes(), std::max<uint64_t>(memory / 2, uint64_t{1} << 30));
}

// An object server that refuses this process's credential: the pull says so
// at once (Unauthenticated), instead of waiting out its timeouts.
TEST(PullObject, ARefusedCredentialIsReportedNotWaitedOut) {
  zmq::context_t context;
  transport::ZapServer zap(context, std::make_shared<transport::ClusterVerifier>("the-token"),
                           "object server");
  zmq::socket_t server(context, zmq::socket_type::router);
  server.set(zmq::sockopt::linger, 0);
  transport::MakeServer(server, transport::WireSecurity::kAuthenticated,
                        transport::Credential::Cluster("the-token"));
  server.bind("tcp://127.0.0.1:*");
  std::string endpoint = server.get(zmq::sockopt::last_endpoint);
  Directory servers({endpoint});
  PullOptions options;
  options.idle_timeout_ms = 60000;
  options.connect_timeout_ms = 60000;
  auto start = std::chrono::steady_clock::now();
  auto pulled = PullObject(context,
                           transport::ClientSecurity::ObjectServer(
                               transport::WireSecurity::kAuthenticated,
                               transport::Credential::Cluster("another-token"), ""),
                           At(endpoint, 10), servers.get(), options);
  ASSERT_FALSE(pulled.ok());
  EXPECT_EQ(pulled.status().code(), StatusCode::kUnauthenticated) << pulled.status();
  EXPECT_NE(pulled.status().message().find("credential"), std::string::npos) << pulled.status();
  EXPECT_LT(MsSince(start), 30000) << "the refusal was waited out";
  server.close();
}

}  // namespace
}  // namespace rayx
