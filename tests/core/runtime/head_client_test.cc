// The head client against a fake head (a ROUTER socket on loopback in this
// test's thread): replies find their calls, errors become Statuses, sync calls
// time out, heartbeats and lease returns carry the right ids.
#include "runtime/head_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <zmq.hpp>

#include "protocol/kv_messages.h"
#include "transport/message.h"
#include "transport/security.h"
#include "transport/zap_server.h"
#include "transport/zmq_frame.h"

namespace rayx::detail {
namespace head_client_test {  // this file's own (unit tests compile in batches)

using namespace std::chrono_literals;
using transport::FrameView;
using transport::Frames;

constexpr char kToken[] = "head-client-test";

// A head that receives requests and answers only when told to. It admits the
// cluster's credential (CURVE, as the real head).
class FakeHead {
 public:
  explicit FakeHead(zmq::context_t& context)
      : zap_(context, std::make_shared<transport::ClusterVerifier>(kToken), "fake head"),
        socket_(context, zmq::socket_type::router) {
    socket_.set(zmq::sockopt::linger, 0);
    transport::MakeServer(socket_, transport::WireSecurity::kEncrypted,
                          transport::Credential::Cluster(kToken));
    socket_.bind("tcp://127.0.0.1:*");
    std::string endpoint = socket_.get(zmq::sockopt::last_endpoint);
    address_.host = "127.0.0.1";
    address_.port = static_cast<uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
  }
  const HostPort& address() const { return address_; }

  struct Request {
    transport::Frame identity;
    protocol::Envelope envelope;
    std::string body;
  };
  // The next request, or nothing within `timeout`.
  std::optional<Request> Receive(std::chrono::milliseconds timeout) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, timeout) <= 0) return std::nullopt;
    Frames frames = transport::ReceiveFrames(socket_);
    if (frames.size() < 3) return std::nullopt;
    auto env = protocol::Decode<protocol::Envelope>(FrameView(frames[1]));
    if (!env.ok()) return std::nullopt;
    return Request{std::move(frames[0]), *env, std::string(FrameView(frames[2]))};
  }
  void Reply(Request& to, Frames frames) {
    frames.insert(frames.begin(), to.identity.Copy());
    (void)transport::SendFrames(socket_, frames);
  }

 private:
  transport::ZapServer zap_;
  zmq::socket_t socket_;
  HostPort address_;
};

class HeadClientTest : public ::testing::Test {
 protected:
  HeadClientTest()
      : head_(context_),
        client_(io_, context_, head_.address(), transport::ClientSecurity::ClusterToHead(kToken)) {
    client_.Start();
  }
  ~HeadClientTest() override { client_.Stop(); }

  // Runs the io_context until `done` holds or 10 s pass.
  template <typename Pred>
  bool StepUntil(Pred done) {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      io_.restart();
      io_.run_for(5ms);
    }
    return true;
  }
  // Steps the client until the fake head has a request.
  FakeHead::Request NextRequest() {
    std::optional<FakeHead::Request> request;
    EXPECT_TRUE(StepUntil([&] {
      request = head_.Receive(1ms);
      return request.has_value();
    }));
    return request ? std::move(*request) : FakeHead::Request{};
  }

  zmq::context_t context_{1};
  boost::asio::io_context io_;
  FakeHead head_;
  HeadClient client_;
};

TEST_F(HeadClientTest, ACallGetsTheReplyWithItsRequestId) {
  std::optional<Result<protocol::GetActorReply>> first, second;
  protocol::GetActorRequest a, b;
  a.name = "a";
  b.name = "b";
  client_.Call<protocol::GetActorReply>(a, [&](Result<protocol::GetActorReply> r) { first = std::move(r); });
  client_.Call<protocol::GetActorReply>(b, [&](Result<protocol::GetActorReply> r) { second = std::move(r); });
  FakeHead::Request ra = NextRequest();
  FakeHead::Request rb = NextRequest();
  ASSERT_EQ(ra.envelope.t, static_cast<uint16_t>(protocol::MessageType::kGetActorRequest));
  EXPECT_NE(ra.envelope.id, rb.envelope.id);
  // Answered out of order: each reply still finds its own call.
  protocol::GetActorReply reply;
  reply.actor.name = "answer-b";
  head_.Reply(rb, transport::MakeMessage(reply, rb.envelope.id));
  reply.actor.name = "answer-a";
  head_.Reply(ra, transport::MakeMessage(reply, ra.envelope.id));
  ASSERT_TRUE(StepUntil([&] { return first && second; }));
  ASSERT_TRUE(first->ok()) << first->status();
  EXPECT_EQ((*first)->actor.name, "answer-a");
  EXPECT_EQ((*second)->actor.name, "answer-b");
}

TEST_F(HeadClientTest, AnErrorReplyBecomesItsStatus) {
  std::optional<Result<protocol::GetActorReply>> got;
  client_.Call<protocol::GetActorReply>(protocol::GetActorRequest{},
                                        [&](Result<protocol::GetActorReply> r) { got = std::move(r); });
  FakeHead::Request request = NextRequest();
  head_.Reply(request, transport::MakeErrorMessage(Status::NotFound("no actor named x"), "head",
                                                   request.envelope.id));
  ASSERT_TRUE(StepUntil([&] { return got.has_value(); }));
  EXPECT_EQ(got->status().code(), StatusCode::kNotFound);
  EXPECT_NE(got->status().message().find("no actor named x"), std::string::npos);
}

TEST_F(HeadClientTest, AReplyOfAnotherTypeIsAnInternalError) {
  std::optional<Result<protocol::GetActorReply>> got;
  client_.Call<protocol::GetActorReply>(protocol::GetActorRequest{},
                                        [&](Result<protocol::GetActorReply> r) { got = std::move(r); });
  FakeHead::Request request = NextRequest();
  head_.Reply(request, transport::MakeMessage(protocol::ReturnLeaseReply{}, request.envelope.id));
  ASSERT_TRUE(StepUntil([&] { return got.has_value(); }));
  EXPECT_EQ(got->status().code(), StatusCode::kInternal);
}

TEST_F(HeadClientTest, ReturnLeaseSendsTheLeaseId) {
  client_.ReturnLease(LeaseId::FromWire("lease-7"));
  FakeHead::Request request = NextRequest();
  ASSERT_EQ(request.envelope.t, static_cast<uint16_t>(protocol::MessageType::kReturnLeaseRequest));
  auto body = protocol::Decode<protocol::ReturnLeaseRequest>(request.body);
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(body->lease_id.Hex(), "lease-7");
}

TEST_F(HeadClientTest, HeartbeatsCarryTheJobUntilStopped) {
  client_.StartHeartbeats(JobId::FromWire("job-1"), 1);
  for (int i = 0; i < 2; ++i) {  // the first now, the next after the period
    FakeHead::Request request = NextRequest();
    ASSERT_EQ(request.envelope.t,
              static_cast<uint16_t>(protocol::MessageType::kDriverHeartbeatRequest));
    auto body = protocol::Decode<protocol::DriverHeartbeatRequest>(request.body);
    ASSERT_TRUE(body.ok());
    EXPECT_EQ(body->job_id.Hex(), "job-1");
  }
  client_.StopHeartbeats();
  client_.Stop();
  // Stopped: the timer is cancelled, so the context runs out of work.
  io_.restart();
  io_.run_for(10s);
  EXPECT_TRUE(io_.stopped());
}

TEST_F(HeadClientTest, ASyncCallTimesOutWhenTheHeadIsSilent) {
  auto work = boost::asio::make_work_guard(io_);
  std::thread io_thread([this] { io_.run(); });
  protocol::GetActorRequest request;
  auto reply = client_.CallSync<protocol::GetActorReply>(request, 50);
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(reply.status().message().find("did not answer"), std::string::npos);
  boost::asio::post(io_, [this, &work] {
    client_.Stop();
    work.reset();
  });
  io_thread.join();
}

TEST_F(HeadClientTest, ASyncCallReturnsTheReply) {
  auto work = boost::asio::make_work_guard(io_);
  std::thread io_thread([this] { io_.run(); });
  std::thread head_thread([this] {
    auto request = head_.Receive(10s);
    if (!request) return;
    protocol::GetActorReply reply;
    reply.actor.name = "found";
    head_.Reply(*request, transport::MakeMessage(reply, request->envelope.id));
  });
  auto reply = client_.CallSync<protocol::GetActorReply>(protocol::GetActorRequest{}, 10000);
  head_thread.join();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->actor.name, "found");
  boost::asio::post(io_, [this, &work] {
    client_.Stop();
    work.reset();
  });
  io_thread.join();
}

// A restarted head refuses a connection it does not know ("register first"):
// the client registers again with the same job, then sends the refused call
// again under its own id, and its caller never sees the refusal.
TEST_F(HeadClientTest, RegistersAgainAndResendsWhenARestartedHeadRefusesIt) {
  protocol::RegisterDriverRequest registration;
  registration.token = "t";
  registration.job_id = JobId::FromWire("job-1");
  client_.SetRegistration(registration);
  std::optional<Result<protocol::KvGetReply>> got;
  protocol::KvGetRequest get;
  get.key = "model";
  client_.Call<protocol::KvGetReply>(get, [&](Result<protocol::KvGetReply> r) { got = r; });
  FakeHead::Request first = NextRequest();
  std::string identity(first.identity.View());
  EXPECT_EQ(identity.rfind("rayx-", 0), 0u) << "a fixed routing id survives a head restart";
  head_.Reply(first, transport::MakeErrorMessage(
                         Status::Unauthenticated("register first (RegisterDriverRequest with "
                                                 "the cluster token)"),
                         "head", first.envelope.id));
  FakeHead::Request again = NextRequest();
  ASSERT_EQ(again.envelope.t,
            static_cast<uint16_t>(protocol::MessageType::kRegisterDriverRequest));
  auto sent = protocol::Decode<protocol::RegisterDriverRequest>(again.body);
  ASSERT_TRUE(sent.ok());
  EXPECT_EQ(sent->job_id.Hex(), "job-1");
  EXPECT_FALSE(got.has_value()) << "the refusal is not the caller's answer";
  protocol::RegisterDriverReply registered;
  registered.job_id = JobId::FromWire("job-1");
  head_.Reply(again, transport::MakeMessage(registered, again.envelope.id));
  FakeHead::Request resent = NextRequest();
  ASSERT_EQ(resent.envelope.t, static_cast<uint16_t>(protocol::MessageType::kKvGetRequest));
  EXPECT_EQ(resent.envelope.id, first.envelope.id);
  protocol::KvGetReply value;
  value.found = true;
  value.value = "weights";
  head_.Reply(resent, transport::MakeMessage(value, resent.envelope.id));
  ASSERT_TRUE(StepUntil([&] { return got.has_value(); }));
  ASSERT_TRUE(got->ok()) << got->status();
  EXPECT_EQ((*got)->value, "weights");
}

// A program that is ending (heartbeats stopped, its FinishJob sent) takes a
// "register first" refusal of a late call as the end it is, not as a head
// restart: the call fails and nothing registers again.
TEST_F(HeadClientTest, AnEndingProgramDoesNotRegisterAgainWhenRefused) {
  protocol::RegisterDriverRequest registration;
  registration.token = "t";
  registration.job_id = JobId::FromWire("job-1");
  client_.SetRegistration(registration);
  client_.StopHeartbeats();
  std::optional<Result<protocol::KvGetReply>> got;
  client_.Call<protocol::KvGetReply>(protocol::KvGetRequest{},
                                     [&](Result<protocol::KvGetReply> r) { got = r; });
  FakeHead::Request late = NextRequest();
  head_.Reply(late, transport::MakeErrorMessage(
                        Status::Unauthenticated("register first (RegisterDriverRequest with "
                                                "the cluster token)"),
                        "head", late.envelope.id));
  ASSERT_TRUE(StepUntil([&] { return got.has_value(); }));
  EXPECT_EQ(got->status().code(), StatusCode::kUnauthenticated);
  io_.restart();
  io_.run_for(50ms);
  EXPECT_FALSE(head_.Receive(50ms).has_value()) << "registered again while ending";
}

// While the head is down, calls wait; past the timeout (on the client's
// clock, stepped here) they fail saying so.
TEST_F(HeadClientTest, CallsFailWithAClearMessageWhenTheHeadStaysSilent) {
  ManualClock clock;
  HeadClient quick(io_, context_, head_.address(), transport::ClientSecurity::ClusterToHead(kToken),
                   HeadClient::Options{300, &clock});
  quick.Start();
  quick.StartHeartbeats(JobId::FromWire("job-1"), 10);
  std::optional<Result<protocol::RequestLeaseReply>> got;
  quick.RequestLease(protocol::RequestLeaseRequest{},
                     [&](Result<protocol::RequestLeaseReply> r) { got = r; });
  clock.Advance(300);  // silent for exactly the timeout: the call still waits
  for (int i = 0; i < 5; ++i) {  // heartbeats check the silence each period
    io_.restart();
    io_.run_for(20ms);
  }
  EXPECT_FALSE(got.has_value()) << "failed before the head was silent for longer than 300 ms";
  clock.Advance(1);
  ASSERT_TRUE(StepUntil([&] { return got.has_value(); }));
  EXPECT_EQ(got->status().code(), StatusCode::kUnavailable);
  EXPECT_NE(got->status().message().find("has not answered"), std::string::npos)
      << got->status();
  EXPECT_NE(got->status().message().find("restarting"), std::string::npos) << got->status();
  quick.Stop();
}

// A link this test drives (head_link.h): what the client sends is kept, and
// the test delivers the head's messages and the connection's events itself,
// on this thread (the client's I/O thread), with no socket and no timing.
class FakeLink final : public HeadLink {
 public:
  struct Seen {
    protocol::Envelope envelope;
    std::string body;
  };
  void Start(std::function<void(Frames&)> on_message, std::function<void(Event)> on_event) override {
    on_message_ = std::move(on_message);
    on_event_ = std::move(on_event);
  }
  bool Send(Frames& frames) override {
    if (!on_message_ || stopped_ || frames.size() < 2) return false;
    auto env = protocol::Decode<protocol::Envelope>(FrameView(frames[0]));
    EXPECT_TRUE(env.ok());
    sent.push_back({env.ok() ? *env : protocol::Envelope{}, std::string(FrameView(frames[1]))});
    return true;
  }
  void Stop() override { stopped_ = true; }
  void Deliver(Frames frames) { on_message_(frames); }
  void Event(HeadLink::Event event) { on_event_(event); }

  std::vector<Seen> sent;

 private:
  std::function<void(Frames&)> on_message_;
  std::function<void(HeadLink::Event)> on_event_;
  bool stopped_ = false;
};

// A connection that dropped and came back to the same head: the client asks
// the head whether it still knows it, and on its yes sends the calls still
// waiting again under their own ids (the head answers repeats from what it
// answered), then tells the runtime to restore what notices said.
TEST(HeadClientOverALink, AfterAReconnectTheWaitingCallsAreSentAgainUnderTheirIds) {
  boost::asio::io_context io;
  auto owned = std::make_unique<FakeLink>();
  FakeLink& link = *owned;
  ManualClock clock;
  HeadClient client(io, std::move(owned), HostPort{"127.0.0.1", 6380},
                    HeadClient::Options{60000, &clock});
  client.Start();
  protocol::RegisterDriverRequest registration;
  registration.job_id = JobId::FromWire("job-1");
  client.SetRegistration(registration);
  int restored = 0;
  client.OnRestored([&] { ++restored; });
  std::optional<Result<protocol::GetActorReply>> got;
  protocol::GetActorRequest lookup;
  lookup.name = "counter";
  client.Call<protocol::GetActorReply>(lookup,
                                       [&](Result<protocol::GetActorReply> r) { got = r; });
  io.poll();
  ASSERT_EQ(link.sent.size(), 1u);
  const uint64_t call_id = link.sent[0].envelope.id;

  link.Event(HeadLink::Event::kConnected);  // connected from the start: nothing to do
  EXPECT_EQ(link.sent.size(), 1u);
  link.Event(HeadLink::Event::kDisconnected);
  link.Event(HeadLink::Event::kConnected);
  io.poll();
  ASSERT_EQ(link.sent.size(), 2u);
  EXPECT_EQ(link.sent[1].envelope.t,
            static_cast<uint16_t>(protocol::MessageType::kDriverHeartbeatRequest));
  link.Deliver(transport::MakeMessage(protocol::DriverHeartbeatReply{}, link.sent[1].envelope.id));
  io.poll();
  ASSERT_EQ(link.sent.size(), 3u) << "the waiting call was not sent again";
  EXPECT_EQ(link.sent[2].envelope.id, call_id);
  EXPECT_EQ(link.sent[2].body, link.sent[0].body);
  EXPECT_EQ(restored, 1);
  EXPECT_FALSE(got.has_value());

  protocol::GetActorReply reply;
  reply.actor.name = "counter";
  link.Deliver(transport::MakeMessage(reply, call_id));
  io.poll();
  ASSERT_TRUE(got.has_value() && got->ok());
  EXPECT_EQ((*got)->actor.name, "counter");
  // The head's repeat answer finds no call and changes nothing.
  link.Deliver(transport::MakeMessage(reply, call_id));
  io.poll();
  client.Stop();
  // A stopped link sends nothing: a later call fails at once.
  std::optional<Result<protocol::GetActorReply>> late;
  client.Call<protocol::GetActorReply>(lookup,
                                       [&](Result<protocol::GetActorReply> r) { late = r; });
  io.poll();
  ASSERT_TRUE(late.has_value());
  EXPECT_EQ(late->status().code(), StatusCode::kUnavailable) << late->status();
  EXPECT_EQ(link.sent.size(), 3u);
}

}  // namespace
}  // namespace rayx::detail
