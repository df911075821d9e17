// ZmqWorkerConnector: links to workers over real loopback sockets, and the
// loss it reports when the worker is gone (before or after connecting).
#include "runtime/zmq_worker_connector.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <zmq.hpp>

#include "transport/security.h"
#include "transport/zap_server.h"
#include "transport/zmq_frame.h"

namespace rayx::detail {
namespace zmq_worker_connector_test {  // this file's own (unit tests compile in batches)

const JobId kJob = JobId::FromHex("0000000000000001").value();
const JobId kOtherJob = JobId::FromHex("0000000000000002").value();
const transport::Credential kCluster = transport::Credential::Cluster("connector-test-token");

class ZmqWorkerConnectorTest : public ::testing::Test {
 protected:
  // Runs the I/O loop until `done` holds or `ms` pass; returns `done()`.
  bool RunUntil(const std::function<bool()>& done, int ms = 5000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.run_for(std::chrono::milliseconds(10));
      io_.restart();
    }
    return done();
  }

  // A ROUTER bound to a free loopback port, standing in for a worker of kJob:
  // it admits kJob's credential only, as a worker does.
  std::string BindWorker() {
    worker_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::router);
    worker_->set(zmq::sockopt::linger, 0);
    transport::MakeServer(*worker_, transport::WireSecurity::kAuthenticated, *kCluster.ForJob(kJob));
    worker_->bind("tcp://127.0.0.1:*");
    return worker_->get(zmq::sockopt::last_endpoint);
  }

  // A link to a worker bound here, connected (the worker received its first
  // message); `lost` is set when the link reports the worker's loss.
  std::unique_ptr<WorkerLink> ConnectedLink(bool* lost) {
    std::string address = BindWorker();
    auto link = connector_.Connect(
        address, kJob, std::nullopt, [](transport::Frames&) {}, [lost] { *lost = true; });
    transport::Frames out;
    out.emplace_back("hello");
    EXPECT_TRUE(link->Send(out));
    zmq::message_t identity, body;
    EXPECT_TRUE(worker_->recv(identity));  // connected
    EXPECT_TRUE(worker_->recv(body));
    return link;
  }

  // A driver's view: it may reach any job's workers (it holds the token), a
  // job's worker only its own (here: kJob's).
  static Result<transport::ClientSecurity> SecurityFor(
      const JobId& job, bool driver, const std::optional<transport::ActorKey>& key = std::nullopt) {
    auto credential = (driver ? kCluster : *kCluster.ForJob(kOtherJob)).ForJob(job);
    if (!credential.ok() && key) {
      return transport::ClientSecurity{transport::WireSecurity::kAuthenticated,
                                       transport::Credential::ActorCaller(*key), ""};
    }
    if (!credential.ok()) return credential.status();
    return transport::ClientSecurity{transport::WireSecurity::kAuthenticated, *credential, ""};
  }

  boost::asio::io_context io_;
  zmq::context_t context_{1};
  std::shared_ptr<transport::JobVerifier> verifier_ =
      std::make_shared<transport::JobVerifier>(*kCluster.ForJob(kJob));
  transport::ZapServer zap_{context_, verifier_, "worker"};
  std::unique_ptr<zmq::socket_t> worker_;
  ZmqWorkerConnector connector_{
      io_, context_, [](const JobId& job, const std::optional<transport::ActorKey>&) {
        return SecurityFor(job, true);
      }};
  // A worker of kOtherJob: it holds that job's credential only.
  ZmqWorkerConnector as_job_worker_{
      io_, context_, [](const JobId& job, const std::optional<transport::ActorKey>& key) {
        return SecurityFor(job, false, key);
      }};
};

TEST_F(ZmqWorkerConnectorTest, AMessageReachesTheWorkerAndItsReplyComesBack) {
  std::string address = BindWorker();
  std::string reply;
  bool lost = false;
  auto link = connector_.Connect(
      address, kJob, std::nullopt, [&](transport::Frames& frames) { reply = std::string(frames.back().View()); },
      [&] { lost = true; });
  transport::Frames out;
  out.emplace_back("ping");
  ASSERT_TRUE(link->Send(out));
  zmq::message_t identity, body;
  ASSERT_TRUE(worker_->recv(identity));
  ASSERT_TRUE(worker_->recv(body));
  EXPECT_EQ(body.to_string(), "ping");
  worker_->send(identity, zmq::send_flags::sndmore);
  worker_->send(zmq::str_buffer("pong"));
  ASSERT_TRUE(RunUntil([&] { return !reply.empty(); }));
  EXPECT_EQ(reply, "pong");
  EXPECT_FALSE(lost) << "a live worker was reported lost";
}

TEST_F(ZmqWorkerConnectorTest, AWorkerThatDiesAfterConnectingIsReportedLost) {
  bool lost = false;
  auto link = ConnectedLink(&lost);
  worker_.reset();  // the worker dies
  EXPECT_TRUE(RunUntil([&] { return lost; })) << "the disconnect was not reported";
}

// A worker that answers and exits at once (an actor's __ray_terminate__ after
// the calls before it): its process ends right after its socket closed, with
// a linger, as rayx::detail::ExitWorker closes it. Every answer reaches the
// caller before the loss does, though the two arrive on different sockets.
// (libzmq 4.3 drops such answers when the link does not reconnect.)
TEST_F(ZmqWorkerConnectorTest, AnswersSentJustBeforeTheWorkerExitsArriveBeforeItsLoss) {
  constexpr int kExits = 20;
  constexpr int kAnswers = 3;
  for (int round = 0; round < kExits; ++round) {
    // The worker's own context, terminated as the exiting process does.
    auto context = std::make_unique<zmq::context_t>(1);
    auto zap = std::make_unique<transport::ZapServer>(*context, verifier_, "exiting worker");
    zmq::socket_t worker(*context, zmq::socket_type::router);
    worker.set(zmq::sockopt::linger, 0);
    transport::MakeServer(worker, transport::WireSecurity::kAuthenticated, *kCluster.ForJob(kJob));
    worker.bind("tcp://127.0.0.1:*");
    std::string address = worker.get(zmq::sockopt::last_endpoint);

    int answers = 0;
    int answers_at_loss = -1;
    auto link = connector_.Connect(
        address, kJob, std::nullopt, [&](transport::Frames&) { ++answers; },
        [&] {
          if (answers_at_loss < 0) answers_at_loss = answers;
        });
    transport::Frames out;
    out.emplace_back("calls");
    ASSERT_TRUE(link->Send(out));
    zmq::message_t identity, body;
    ASSERT_TRUE(worker.recv(identity));
    ASSERT_TRUE(worker.recv(body));
    for (int i = 0; i < kAnswers; ++i) {
      zmq::message_t to(identity.data(), identity.size());
      worker.send(to, zmq::send_flags::sndmore);
      worker.send(zmq::str_buffer("answer"));
    }
    worker.set(zmq::sockopt::linger, 2000);
    worker.close();
    zap.reset();
    context->close();

    ASSERT_TRUE(RunUntil([&] { return answers_at_loss >= 0; }))
        << "exit " << round << ": the worker's exit was not reported";
    ASSERT_EQ(answers_at_loss, kAnswers)
        << "exit " << round << ": answers sent before the exit were lost";
  }
}

// Told by someone else that the worker is gone (its node's notice through the
// head) while its connection stays up (a node cut off): the link reports the
// loss itself once the wait for the disconnect runs out.
TEST_F(ZmqWorkerConnectorTest, AWaitForADisconnectThatNeverComesEndsInALoss) {
  bool lost_by_disconnect = false;
  bool lost_by_wait = false;
  auto link = ConnectedLink(&lost_by_disconnect);  // and it stays connected
  ASSERT_TRUE(link->AwaitDisconnect(50, [&] { lost_by_wait = true; }));
  EXPECT_TRUE(RunUntil([&] { return lost_by_wait; })) << "the wait never ended";
  EXPECT_FALSE(lost_by_disconnect) << "a live connection was reported disconnected";
}

// ... and when the disconnect does come, the link's own loss handler says so
// (the connection treats whichever comes first as the loss).
TEST_F(ZmqWorkerConnectorTest, ADisconnectDuringTheWaitIsReportedAsTheLoss) {
  bool lost_by_disconnect = false;
  auto link = ConnectedLink(&lost_by_disconnect);
  ASSERT_TRUE(link->AwaitDisconnect(60000, [] {}));
  worker_.reset();  // the worker dies
  EXPECT_TRUE(RunUntil([&] { return lost_by_disconnect; })) << "the disconnect was not reported";
}

// An address whose worker is already gone (a handle given a dead actor's
// address): the link must say so, not wait for a reply for ever.
TEST_F(ZmqWorkerConnectorTest, AnAddressNobodyListensOnIsReportedLost) {
  std::string address = BindWorker();
  worker_.reset();  // the port is free again: nobody listens
  bool lost = false;
  auto link = connector_.Connect(
      address, kJob, std::nullopt, [](transport::Frames&) {}, [&] { lost = true; });
  transport::Frames out;
  out.emplace_back("call");
  link->Send(out);
  EXPECT_TRUE(RunUntil([&] { return lost; })) << "a refused connection was not reported";
}

// A job's worker may not reach another job's: the link is lost at once, and
// nothing reaches the other job's worker.
TEST_F(ZmqWorkerConnectorTest, AnotherJobsWorkerIsNotReachedFromAJobsWorker) {
  std::string address = BindWorker();
  bool lost = false;
  auto link = as_job_worker_.Connect(address, kJob, std::nullopt, [](transport::Frames&) {},
                                     [&] { lost = true; });
  transport::Frames out;
  out.emplace_back("call");
  EXPECT_FALSE(link->Send(out));
  EXPECT_TRUE(RunUntil([&] { return lost; }));
  zmq::pollitem_t item{worker_->handle(), 0, ZMQ_POLLIN, 0};
  EXPECT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(200)), 0);
}

// A driver of another job proves kJob's credential (derived from the token)
// and reaches kJob's worker; the worker sees it as kJob.
TEST_F(ZmqWorkerConnectorTest, ADriverReachesAnyJobsWorkerWithThatJobsCredential) {
  std::string address = BindWorker();
  auto link = connector_.Connect(address, kJob, std::nullopt, [](transport::Frames&) {}, [] {});
  transport::Frames out;
  out.emplace_back("call");
  ASSERT_TRUE(link->Send(out));
  zmq::pollitem_t item{worker_->handle(), 0, ZMQ_POLLIN, 0};
  ASSERT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(5000)), 1);
  transport::Frames got = transport::ReceiveFrames(*worker_);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(transport::PeerPrincipal(got[1]), transport::Principal::Job(kJob));
}

// Another job's member holding an actor's key (from the head) reaches the
// worker once it hosts that actor, and the worker sees a caller of that actor
// only; a key for another actor, or before the worker hosts one, opens nothing.
TEST_F(ZmqWorkerConnectorTest, AnActorsKeyOpensTheWorkerThatHostsIt) {
  const ActorId actor = ActorId::FromHex("00000000000000000000000000000a11").value();
  const ActorId other = ActorId::FromHex("00000000000000000000000000000b22").value();
  transport::ActorKey key = *kCluster.KeyFor(kJob, actor);
  transport::ActorKey wrong = *kCluster.KeyFor(kJob, other);
  std::string address = BindWorker();
  auto refused = [&](const transport::ActorKey& k) {
    bool lost = false;
    auto link = as_job_worker_.Connect(address, kJob, k, [](transport::Frames&) {},
                                       [&] { lost = true; });
    transport::Frames out;
    out.emplace_back("call");
    link->Send(out);
    zmq::pollitem_t item{worker_->handle(), 0, ZMQ_POLLIN, 0};
    io_.run_for(std::chrono::milliseconds(300));
    io_.restart();
    return zmq::poll(&item, 1, std::chrono::milliseconds(200)) == 0;
  };
  EXPECT_TRUE(refused(key)) << "reached a worker that hosts no actor yet";
  verifier_->AllowActorCallers(actor);
  EXPECT_TRUE(refused(wrong)) << "another actor's key opened the worker";
  auto link = as_job_worker_.Connect(address, kJob, key, [](transport::Frames&) {}, [] {});
  transport::Frames out;
  out.emplace_back("call");
  ASSERT_TRUE(link->Send(out));
  zmq::pollitem_t item{worker_->handle(), 0, ZMQ_POLLIN, 0};
  ASSERT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(5000)), 1);
  transport::Frames got = transport::ReceiveFrames(*worker_);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(transport::PeerPrincipal(got[1]), transport::Principal::ActorCaller(actor));
}

}  // namespace
}  // namespace rayx::detail
