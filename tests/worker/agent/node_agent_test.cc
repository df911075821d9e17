// NodeAgent stepped deterministically: a fake head, no processes, a manual clock.
#include "agent/node_agent.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/content_hash.h"
#include "common/directory_archive.h"
#include "protocol/codec.h"
#include "transport/message.h"

namespace rayx::worker {
namespace node_agent_test {  // this file's own (unit tests compile in batches)

using protocol::MessageType;

// A message the agent sent, decoded far enough to check it.
struct Sent {
  protocol::Envelope env;
  std::string body;
  template <typename T>
  T As() const {
    auto decoded = protocol::Decode<T>(body);
    EXPECT_TRUE(decoded.ok()) << decoded.status();
    return decoded.ok() ? *decoded : T{};
  }
  bool Is(MessageType type) const { return env.t == static_cast<uint16_t>(type); }
};

// Records what the agent sends; Deliver plays the head's answers.
class FakeHeadConnection final : public HeadConnection {
 public:
  struct State {
    MessageHandler on_message;
    std::deque<Sent> sent;
  };
  explicit FakeHeadConnection(State* state) : state_(state) {}
  void Start(MessageHandler on_message) override { state_->on_message = std::move(on_message); }
  bool Send(transport::Frames& frames) override {
    Sent sent;
    auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(frames[0]));
    EXPECT_TRUE(env.ok());
    if (env.ok()) sent.env = *env;
    sent.body = std::string(transport::FrameView(frames[1]));
    state_->sent.push_back(std::move(sent));
    return true;
  }

 private:
  State* state_;
};

// Runs nothing: records starts (answered by the test) and kills.
class FakeLeaseProcesses final : public LeaseProcesses {
 public:
  struct State {
    std::map<std::string, StartCallback> starting;  // by lease id
    std::vector<std::string> killed;
    int kill_all = 0;
    int reaps = 0;
    bool all_gone = true;            // what AllGone answers
    std::vector<int> held_devices;   // devices a killed process still holds
  };
  explicit FakeLeaseProcesses(State* state) : state_(state) {}
  void SetObjectAddress(const std::string&) override {}
  void Start(const protocol::StartWorkerRequest& request, StartCallback done) override {
    state_->starting[request.lease_id.Hex()] = std::move(done);
  }
  void Kill(const LeaseId& lease_id) override { state_->killed.push_back(lease_id.Hex()); }
  void KillAll() override { ++state_->kill_all; }
  void Reap() override { ++state_->reaps; }
  bool AllGone() override { return state_->all_gone; }
  bool DevicesReleased(const std::vector<int>& gpu_ids) override {
    for (int id : gpu_ids) {
      for (int held : state_->held_devices) {
        if (id == held) return false;
      }
    }
    return true;
  }
  bool IsLive(const LeaseId& lease_id) const override {
    return std::find(state_->killed.begin(), state_->killed.end(), lease_id.Hex()) ==
           state_->killed.end();
  }
  std::optional<ProcessRunner::LogInfo> FindLog(const LeaseId&, uint32_t) const override {
    return std::nullopt;
  }

 private:
  State* state_;
};

constexpr int64_t kPeriodMs = 100;

class NodeAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "rayx-node-agent-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    NodeAgentOptions options;
    options.head = HostPort{"127.0.0.1", 6380};
    options.token = "token-1";
    options.node_ip = "127.0.0.1";
    options.hostname = "node-a";
    options.resources = {{"CPU", 4}};
    options.connect_timeout_ms = 15000;
    options.head_lost_timeout_ms = 60000;
    options.log_dir = dir_;
    options.store_dir = dir_ + "/store";
    options.package_dir = dir_ + "/packages";
    NodeAgent::Deps deps;
    deps.head = std::make_unique<FakeHeadConnection>(&head_);
    deps.processes = std::make_unique<FakeLeaseProcesses>(&processes_);
    agent_ = std::make_unique<NodeAgent>(
        io_, options, clock_,
        NodeAgent::Callbacks{
            .on_joined = [this](const protocol::RegisterNodeReply&) { ++joined_; },
            .on_fatal = [this](const Status& status) { fatal_.push_back(status); },
            .on_cluster_stopped = [this](const std::string& why) { stopped_.push_back(why); }},
        std::move(deps));
    ASSERT_TRUE(agent_->Start().ok());
  }

  void TearDown() override {
    agent_.reset();
    std::filesystem::remove_all(dir_);
  }

  // The oldest message the agent sent that the test has not looked at.
  Sent Next() {
    EXPECT_FALSE(head_.sent.empty());
    if (head_.sent.empty()) return Sent{};
    Sent sent = std::move(head_.sent.front());
    head_.sent.pop_front();
    return sent;
  }

  // Joins, then asks to start lease `lease` (request `id`) on device 1,
  // which a killed worker still holds: the start waits for it.
  void StartOnHeldDevice(const std::string& lease, uint64_t id) {
    Join();
    head_.sent.clear();
    processes_.held_devices = {1};
    protocol::StartWorkerRequest req;
    req.lease_id = LeaseId::FromWire(lease);
    req.gpu_ids = {1};
    Deliver(req, id);
  }

  template <typename T>
  void Deliver(const T& body, uint64_t id) {
    transport::Frames frames = transport::MakeMessage(body, id);
    head_.on_message(frames);
  }

  // Stamps `frames`' envelope with another protocol version (a head of
  // another rayx).
  static void FromAnotherVersion(transport::Frames& frames) {
    protocol::Envelope env =
        protocol::Decode<protocol::Envelope>(transport::FrameView(frames[0])).value();
    env.v = rayx::kProtocolVersion + 1;
    frames[0] = transport::Frame(protocol::Encode(env));
  }

  void DeliverError(const Status& status, uint64_t id) {
    transport::Frames frames = transport::MakeErrorMessage(status, "head", id);
    head_.on_message(frames);
  }

  void Advance(int64_t ms) {
    clock_.Advance(ms);
    agent_->RunDueTimers();
  }

  // Answers the pending registration; returns the node id given.
  NodeId Join() {
    Sent reg = Next();
    EXPECT_TRUE(reg.Is(MessageType::kRegisterNodeRequest));
    protocol::RegisterNodeReply reply;
    reply.node_id = NodeId::FromRandom();
    reply.cluster_id = "cluster-1";
    reply.heartbeat_period_ms = kPeriodMs;
    Deliver(reply, reg.env.id);
    return reply.node_id;
  }

  std::string dir_;
  boost::asio::io_context io_;
  ManualClock clock_;
  FakeHeadConnection::State head_;
  FakeLeaseProcesses::State processes_;
  std::unique_ptr<NodeAgent> agent_;
  int joined_ = 0;
  std::vector<Status> fatal_;
  std::vector<std::string> stopped_;  // on_cluster_stopped's reasons
};

TEST_F(NodeAgentTest, RegistersWithItsTokenAddressAndResourcesOnStart) {
  Sent reg = Next();
  ASSERT_TRUE(reg.Is(MessageType::kRegisterNodeRequest));
  auto req = reg.As<protocol::RegisterNodeRequest>();
  EXPECT_EQ(req.token, "token-1");
  EXPECT_EQ(req.address, "127.0.0.1");
  EXPECT_EQ(req.hostname, "node-a");
  EXPECT_EQ(req.resources.at("CPU"), 4);
  EXPECT_FALSE(req.object_address.empty());
  EXPECT_TRUE(head_.sent.empty());
}

TEST_F(NodeAgentTest, JoinsThenHeartbeatsEveryPeriodOnTheClock) {
  NodeId id = Join();
  EXPECT_EQ(joined_, 1);
  EXPECT_EQ(agent_->node_id(), id);
  Sent first = Next();  // at once
  ASSERT_TRUE(first.Is(MessageType::kHeartbeatRequest));
  EXPECT_EQ(first.As<protocol::HeartbeatRequest>().node_id, id);
  EXPECT_EQ(first.As<protocol::HeartbeatRequest>().seq, 1u);
  Advance(kPeriodMs - 1);
  EXPECT_TRUE(head_.sent.empty());
  Advance(1);
  Sent second = Next();
  ASSERT_TRUE(second.Is(MessageType::kHeartbeatRequest));
  EXPECT_EQ(second.As<protocol::HeartbeatRequest>().seq, 2u);
  EXPECT_TRUE(fatal_.empty());
}

// The head asks the agent to watch a driver on this machine: its exit is
// reported at the next heartbeat (a real child process stands in for it), and
// a driver already gone is reported at once.
TEST_F(NodeAgentTest, ReportsAWatchedDriversExitAtTheNextHeartbeat) {
  Join();
  ASSERT_TRUE(Next().Is(MessageType::kHeartbeatRequest));
  pid_t driver = fork();
  ASSERT_GE(driver, 0);
  if (driver == 0) {
    execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  protocol::WatchDriverRequest watch;
  watch.job_id = JobId::FromWire("job-7");
  watch.pid = driver;
  Deliver(watch, 5);
  Advance(kPeriodMs);
  ASSERT_TRUE(Next().Is(MessageType::kHeartbeatRequest));
  EXPECT_TRUE(head_.sent.empty()) << "a live driver was reported";
  ::kill(driver, SIGKILL);
  waitpid(driver, nullptr, 0);
  Advance(kPeriodMs);
  Sent exited = Next();
  ASSERT_TRUE(exited.Is(MessageType::kDriverExitedNotice));
  EXPECT_EQ(exited.As<protocol::DriverExitedNotice>().job_id.Hex(), "job-7");
  EXPECT_EQ(exited.As<protocol::DriverExitedNotice>().pid, driver);
  ASSERT_TRUE(Next().Is(MessageType::kHeartbeatRequest));
  Advance(kPeriodMs);
  ASSERT_TRUE(Next().Is(MessageType::kHeartbeatRequest));
  EXPECT_TRUE(head_.sent.empty()) << "an exit was reported twice";
  // Already gone when the watch arrives: reported at once.
  watch.job_id = JobId::FromWire("job-8");
  Deliver(watch, 6);
  Sent gone = Next();
  ASSERT_TRUE(gone.Is(MessageType::kDriverExitedNotice));
  EXPECT_EQ(gone.As<protocol::DriverExitedNotice>().job_id.Hex(), "job-8");
}

TEST_F(NodeAgentTest, GivesUpWhenTheHeadNeverAnswersTheRegistration) {
  Next();  // the registration, unanswered
  Advance(15000 - 1);
  EXPECT_TRUE(fatal_.empty());
  Advance(1);
  ASSERT_EQ(fatal_.size(), 1u);
  EXPECT_EQ(fatal_[0].code(), StatusCode::kUnavailable);
  EXPECT_NE(fatal_[0].message().find("no answer from the head"), std::string::npos);
  EXPECT_EQ(joined_, 0);
}

TEST_F(NodeAgentTest, ARefusedRegistrationIsFatalWithTheHeadsReason) {
  Sent reg = Next();
  DeliverError(Status::InvalidArgument("wrong cluster token"), reg.env.id);
  ASSERT_EQ(fatal_.size(), 1u);
  EXPECT_EQ(fatal_[0].code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fatal_[0].message().find("refused this node: wrong cluster token"), std::string::npos);
  // No join deadline fires later.
  Advance(20000);
  EXPECT_EQ(fatal_.size(), 1u);
}

TEST_F(NodeAgentTest, RegistersAgainAfterTheHeadDeclaredItDead) {
  NodeId first_id = Join();
  Sent hb = Next();
  Deliver(protocol::HeartbeatReply{.known = false}, hb.env.id);
  Sent again = Next();
  ASSERT_TRUE(again.Is(MessageType::kRegisterNodeRequest));
  // No heartbeats while registering again.
  Advance(kPeriodMs);
  EXPECT_TRUE(head_.sent.empty());
  // A second "unknown" answer does not start a third registration.
  Deliver(protocol::HeartbeatReply{.known = false}, hb.env.id);
  EXPECT_TRUE(head_.sent.empty());

  protocol::RegisterNodeReply reply;
  reply.node_id = NodeId::FromRandom();
  reply.heartbeat_period_ms = kPeriodMs;
  Deliver(reply, again.env.id);
  EXPECT_NE(agent_->node_id(), first_id);
  EXPECT_EQ(agent_->node_id(), reply.node_id);
  EXPECT_EQ(joined_, 1);  // on_joined only once
  Advance(kPeriodMs);
  Sent next = Next();
  ASSERT_TRUE(next.Is(MessageType::kHeartbeatRequest));
  EXPECT_EQ(next.As<protocol::HeartbeatRequest>().node_id, reply.node_id);
}

// Fencing: declared dead, the agent kills everything and joins again only
// once every process is gone, naming the node it was.
TEST_F(NodeAgentTest, DeclaredDeadItJoinsAgainOnlyOnceEveryProcessIsGone) {
  NodeId first_id = Join();
  Sent hb = Next();
  processes_.all_gone = false;
  Deliver(protocol::HeartbeatReply{.known = false}, hb.env.id);
  EXPECT_EQ(processes_.kill_all, 1);
  for (int i = 0; i < 50; ++i) Advance(10);
  EXPECT_TRUE(head_.sent.empty()) << "no registration, no heartbeat while a process lives";
  processes_.all_gone = true;
  Advance(10);
  Sent again = Next();
  ASSERT_TRUE(again.Is(MessageType::kRegisterNodeRequest));
  EXPECT_EQ(again.As<protocol::RegisterNodeRequest>().previous_node_id, first_id);
  EXPECT_EQ(processes_.kill_all, 1);
}

TEST_F(NodeAgentTest, StampsItsEpochAndRefusesStartsForAnotherEpoch) {
  Sent reg = Next();
  protocol::RegisterNodeReply joined;
  joined.node_id = NodeId::FromRandom();
  joined.heartbeat_period_ms = kPeriodMs;
  joined.epoch = 7;
  Deliver(joined, reg.env.id);
  Sent hb = Next();
  EXPECT_EQ(hb.As<protocol::HeartbeatRequest>().epoch, 7u);
  protocol::StartWorkerRequest req;
  req.lease_id = LeaseId::FromWire("old");
  req.epoch = 6;
  Deliver(req, 40);
  EXPECT_EQ(processes_.starting.count("old"), 0u);
  req.lease_id = LeaseId::FromWire("current");
  req.epoch = 7;
  Deliver(req, 41);
  ASSERT_EQ(processes_.starting.count("current"), 1u);
  processes_.starting["current"](
      protocol::StartWorkerReply{.lease_id = LeaseId::FromWire("current")});
  Sent reply = Next();
  ASSERT_TRUE(reply.Is(MessageType::kStartWorkerReply));
  EXPECT_EQ(reply.As<protocol::StartWorkerReply>().epoch, 7u);
}

TEST_F(NodeAgentTest, AWorkerOfAFencedIncarnationIsNeverReported) {
  Join();
  Sent hb = Next();
  protocol::StartWorkerRequest req;
  req.lease_id = LeaseId::FromWire("starting");
  Deliver(req, 50);
  ASSERT_EQ(processes_.starting.count("starting"), 1u);
  Deliver(protocol::HeartbeatReply{.known = false}, hb.env.id);
  Sent again = Next();
  ASSERT_TRUE(again.Is(MessageType::kRegisterNodeRequest));
  processes_.starting["starting"](
      protocol::StartWorkerReply{.lease_id = LeaseId::FromWire("starting")});
  EXPECT_TRUE(head_.sent.empty());
  // A start request that arrives while it joins again waits for the reply:
  // the old epoch's is refused, the new epoch's (the head grants leases to a
  // node as it registers, before the reply leaves) starts.
  req.lease_id = LeaseId::FromWire("old-epoch");
  req.epoch = 0;
  Deliver(req, 51);
  req.lease_id = LeaseId::FromWire("new-epoch");
  req.epoch = 2;
  Deliver(req, 52);
  EXPECT_TRUE(processes_.starting.count("new-epoch") == 0);
  protocol::RegisterNodeReply joined;
  joined.node_id = NodeId::FromRandom();
  joined.heartbeat_period_ms = kPeriodMs;
  joined.epoch = 2;
  Deliver(joined, again.env.id);
  EXPECT_EQ(processes_.starting.count("old-epoch"), 0u);
  EXPECT_EQ(processes_.starting.count("new-epoch"), 1u);
}

TEST_F(NodeAgentTest, AStaleUnknownReplyAfterJoiningAgainDoesNotFenceTheNewNode) {
  Join();
  Sent hb = Next();
  Deliver(protocol::HeartbeatReply{.known = false}, hb.env.id);
  Sent again = Next();
  protocol::RegisterNodeReply reply;
  reply.node_id = NodeId::FromRandom();
  reply.heartbeat_period_ms = kPeriodMs;
  Deliver(reply, again.env.id);
  EXPECT_EQ(processes_.kill_all, 1);
  // The answer to a heartbeat of the old node, late: ignored.
  Deliver(protocol::HeartbeatReply{.known = false}, hb.env.id);
  EXPECT_EQ(processes_.kill_all, 1);
  EXPECT_TRUE(head_.sent.empty());
}

TEST_F(NodeAgentTest, AWorkerWaitsUntilAKilledWorkerReleasedItsDevices) {
  StartOnHeldDevice("gpu-1", 60);
  protocol::StartWorkerRequest other;
  other.lease_id = LeaseId::FromWire("gpu-0");
  other.gpu_ids = {0};
  Deliver(other, 61);
  EXPECT_EQ(processes_.starting.count("gpu-0"), 1u) << "a free device starts at once";
  for (int i = 0; i < 20; ++i) Advance(10);
  EXPECT_EQ(processes_.starting.count("gpu-1"), 0u);
  processes_.held_devices.clear();
  Advance(10);
  EXPECT_EQ(processes_.starting.count("gpu-1"), 1u);
}

// A killed worker that never lets go of its GPU (a hung CUDA context) does not
// hold the next lease's start forever: after a minute it is an error for the
// head's request, naming the device.
TEST_F(NodeAgentTest, AStartWhoseDevicesAreNeverReleasedFailsAfterAMinute) {
  StartOnHeldDevice("gpu-1", 60);
  std::vector<Sent> others;  // what the agent sent besides heartbeats (answered)
  auto run_for = [&](int64_t ms) {
    for (int64_t t = 0; t < ms; t += kPeriodMs) {
      Advance(kPeriodMs);
      while (!head_.sent.empty()) {
        Sent sent = Next();
        if (sent.Is(MessageType::kHeartbeatRequest)) {
          Deliver(protocol::HeartbeatReply{}, sent.env.id);
        } else {
          others.push_back(std::move(sent));
        }
      }
    }
  };
  run_for(59000);
  EXPECT_TRUE(others.empty()) << "answered before the limit";
  run_for(1000 + kPeriodMs);
  ASSERT_EQ(others.size(), 1u);
  Sent& reply = others[0];
  ASSERT_TRUE(reply.Is(MessageType::kErrorReply));
  EXPECT_EQ(reply.env.id, 60u);
  auto error = reply.As<protocol::ErrorReply>();
  EXPECT_EQ(error.code, static_cast<uint8_t>(StatusCode::kUnavailable));
  EXPECT_NE(error.message.find("GPU(s) 1 of node"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("still held by a killed worker's processes"), std::string::npos)
      << error.message;
  processes_.held_devices.clear();
  run_for(kPeriodMs);
  EXPECT_EQ(processes_.starting.count("gpu-1"), 0u) << "a failed start never starts later";
  EXPECT_TRUE(fatal_.empty());
}

TEST_F(NodeAgentTest, LeavesWhenTheHeadStaysSilentPastTheTimeout) {
  Join();
  Next();
  for (int64_t t = 0; t < 60000; t += kPeriodMs) Advance(kPeriodMs);
  EXPECT_TRUE(fatal_.empty());  // silent for exactly the timeout: not yet
  head_.sent.clear();
  Advance(kPeriodMs);
  ASSERT_EQ(fatal_.size(), 1u);
  EXPECT_NE(fatal_[0].message().find("has not answered"), std::string::npos);
  // No more heartbeats after giving up.
  Advance(10 * kPeriodMs);
  EXPECT_TRUE(head_.sent.empty());
}

TEST_F(NodeAgentTest, AnyAnswerFromTheHeadKeepsItAlive) {
  Join();
  for (int i = 0; i < 1000; ++i) {
    Sent hb = Next();
    ASSERT_TRUE(hb.Is(MessageType::kHeartbeatRequest));
    Deliver(protocol::HeartbeatReply{}, hb.env.id);
    Advance(kPeriodMs);
  }
  EXPECT_TRUE(fatal_.empty());
}

TEST_F(NodeAgentTest, AStartedWorkerIsReportedToTheRequestOfTheHead) {
  Join();
  head_.sent.clear();
  protocol::StartWorkerRequest req;
  req.lease_id = LeaseId::FromWire("lease-1");
  req.executable = "/bin/true";
  Deliver(req, 77);
  ASSERT_EQ(processes_.starting.count("lease-1"), 1u);
  EXPECT_TRUE(head_.sent.empty());  // not before the worker is up
  protocol::StartWorkerReply started;
  started.lease_id = LeaseId::FromWire("lease-1");
  started.worker_address = "tcp://127.0.0.1:5000";
  processes_.starting["lease-1"](started);
  Sent reply = Next();
  ASSERT_TRUE(reply.Is(MessageType::kStartWorkerReply));
  EXPECT_EQ(reply.env.id, 77u);
  EXPECT_EQ(reply.As<protocol::StartWorkerReply>().worker_address, "tcp://127.0.0.1:5000");
}

TEST_F(NodeAgentTest, AWorkerThatCannotStartIsAnErrorForTheRequest) {
  Join();
  head_.sent.clear();
  protocol::StartWorkerRequest req;
  req.lease_id = LeaseId::FromWire("lease-2");
  Deliver(req, 78);
  processes_.starting["lease-2"](Status::NotFound("cannot run ''"));
  Sent reply = Next();
  ASSERT_TRUE(reply.Is(MessageType::kErrorReply));
  EXPECT_EQ(reply.env.id, 78u);
  auto error = reply.As<protocol::ErrorReply>();
  EXPECT_EQ(error.code, static_cast<uint8_t>(StatusCode::kNotFound));
  EXPECT_NE(error.where.find("127.0.0.1"), std::string::npos);
}

TEST_F(NodeAgentTest, KillWorkersKillsEveryNamedLease) {
  Join();
  Deliver(
      protocol::KillWorkersRequest{.lease_ids = {LeaseId::FromWire("a"), LeaseId::FromWire("b")}},
      5);
  EXPECT_EQ(processes_.killed, (std::vector<std::string>{"a", "b"}));
  agent_->ReapWorkers();
  EXPECT_EQ(processes_.reaps, 1);
}

TEST_F(NodeAgentTest, AMessageOfAnotherProtocolVersionOrMalformedIsDropped) {
  Join();
  // Another version's envelope (a head of another rayx): not acted on.
  transport::Frames frames = transport::MakeMessage(
      protocol::KillWorkersRequest{.lease_ids = {LeaseId::FromWire("a")}}, 5);
  FromAnotherVersion(frames);
  head_.on_message(frames);
  // A body that is not the message its type says.
  frames = transport::MakeMessage(protocol::KillWorkersRequest{}, 6);
  frames[1] = transport::Frame(std::string_view("\xc1", 1));
  head_.on_message(frames);
  EXPECT_TRUE(processes_.killed.empty());
  // The agent works on.
  Deliver(protocol::KillWorkersRequest{.lease_ids = {LeaseId::FromWire("b")}}, 7);
  EXPECT_EQ(processes_.killed, (std::vector<std::string>{"b"}));
}

TEST_F(NodeAgentTest, AnotherVersionsRefusalStillSaysWhy) {
  // The error reply's form is frozen: a head of another version refusing
  // this node is heard, not dropped.
  Sent reg = Next();
  transport::Frames frames =
      transport::MakeErrorMessage(Status::InvalidArgument("protocol version mismatch"), "head",
                                  reg.env.id);
  FromAnotherVersion(frames);
  head_.on_message(frames);
  ASSERT_EQ(fatal_.size(), 1u);
  EXPECT_NE(fatal_[0].message().find("protocol version mismatch"), std::string::npos);
}

// A start killed before it started (its job was stopped, say) never starts,
// and its request is answered, so the head forgets it.
TEST_F(NodeAgentTest, AStartKilledWhileWaitingForDevicesNeverStartsAndIsAnswered) {
  StartOnHeldDevice("waiting", 60);
  Deliver(protocol::KillWorkersRequest{.lease_ids = {LeaseId::FromWire("waiting")}}, 61);
  Sent reply = Next();
  ASSERT_TRUE(reply.Is(MessageType::kErrorReply));
  EXPECT_EQ(reply.env.id, 60u);
  EXPECT_EQ(reply.As<protocol::ErrorReply>().code, static_cast<uint8_t>(StatusCode::kCancelled));
  processes_.held_devices.clear();
  Advance(10);
  EXPECT_EQ(processes_.starting.count("waiting"), 0u);
}

TEST_F(NodeAgentTest, AStartKilledWhileItsPackageComesNeverStartsAndIsAnswered) {
  namespace fs = std::filesystem;
  fs::create_directories(dir_ + "/src");
  std::ofstream(dir_ + "/src/train.py") << "print(1)";
  auto archive = PackDirectory(dir_ + "/src", {}, 1 << 20);
  ASSERT_TRUE(archive.ok()) << archive.status();
  std::string hash = ContentHashHex(*archive);
  Join();
  head_.sent.clear();
  auto start = [&](const std::string& lease, uint64_t id) {
    protocol::StartWorkerRequest req;
    req.lease_id = LeaseId::FromWire(lease);
    req.package_hash = hash;
    Deliver(req, id);
  };
  start("killed", 70);
  start("kept", 71);  // a second lease in the same package shares the fetch
  Sent fetch = Next();
  ASSERT_TRUE(fetch.Is(MessageType::kGetPackageRequest));
  EXPECT_TRUE(head_.sent.empty()) << "one fetch for both";
  Deliver(protocol::KillWorkersRequest{.lease_ids = {LeaseId::FromWire("killed")}}, 72);
  Sent cancelled = Next();
  ASSERT_TRUE(cancelled.Is(MessageType::kErrorReply));
  EXPECT_EQ(cancelled.env.id, 70u);
  EXPECT_EQ(cancelled.As<protocol::ErrorReply>().code,
            static_cast<uint8_t>(StatusCode::kCancelled));

  protocol::GetPackageReply reply;
  reply.hash = hash;
  reply.offset = 0;
  reply.total_size = archive->size();
  transport::Frames frames = transport::MakeMessage(reply, fetch.env.id);
  frames.push_back(transport::Frame(*archive));
  head_.on_message(frames);
  // Written, checked and unpacked on the cache's thread, then back on the loop.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (processes_.starting.count("kept") == 0 && std::chrono::steady_clock::now() < deadline) {
    io_.restart();
    io_.run_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(processes_.starting.count("kept"), 1u);
  EXPECT_EQ(processes_.starting.count("killed"), 0u);
}

TEST_F(NodeAgentTest, AStoppedClusterIsReportedOnceAndIsNotAFailure) {
  Join();
  Sent hb = Next();
  Deliver(protocol::HeartbeatReply{}, hb.env.id);
  EXPECT_TRUE(stopped_.empty());
  Advance(kPeriodMs);
  hb = Next();
  Deliver(protocol::HeartbeatReply{.stop = "the job ended"}, hb.env.id);
  EXPECT_EQ(stopped_, std::vector<std::string>{"the job ended"});
  Advance(kPeriodMs);
  hb = Next();
  Deliver(protocol::HeartbeatReply{.stop = "the job ended"}, hb.env.id);
  EXPECT_EQ(stopped_.size(), 1u) << "told once; the caller leaves";
  EXPECT_TRUE(fatal_.empty());
}

TEST_F(NodeAgentTest, LeavingKillsEverythingAndWaitsForTheHeadsAcknowledgement) {
  NodeId id = Join();
  head_.sent.clear();
  bool done = false;
  agent_->Leave("rayx stop", 1000, [&] { done = true; });
  EXPECT_EQ(processes_.kill_all, 1);
  Sent leave = Next();
  ASSERT_TRUE(leave.Is(MessageType::kUnregisterNodeRequest));
  EXPECT_EQ(leave.As<protocol::UnregisterNodeRequest>().node_id, id);
  EXPECT_EQ(leave.As<protocol::UnregisterNodeRequest>().reason, "rayx stop");
  EXPECT_FALSE(done);
  Advance(kPeriodMs * 3);  // no heartbeats while leaving
  EXPECT_TRUE(head_.sent.empty());
  Deliver(protocol::UnregisterNodeReply{}, leave.env.id);
  EXPECT_TRUE(done);
}

TEST_F(NodeAgentTest, LeavingFinishesAtTheDeadlineWithoutAnAcknowledgement) {
  Join();
  head_.sent.clear();
  bool done = false;
  agent_->Leave("rayx stop", 1000, [&] { done = true; });
  Advance(999);
  EXPECT_FALSE(done);
  Advance(1);
  EXPECT_TRUE(done);
  EXPECT_TRUE(fatal_.empty());
}

TEST_F(NodeAgentTest, ANodeThatNeverJoinedLeavesAtOnce) {
  bool done = false;
  agent_->Leave("rayx stop", 1000, [&] { done = true; });
  EXPECT_TRUE(done);
}

TEST_F(NodeAgentTest, AWorkerStartingWhileTheNodeLeavesIsNotReported) {
  Join();
  protocol::StartWorkerRequest req;
  req.lease_id = LeaseId::FromWire("lease-3");
  Deliver(req, 79);
  agent_->Leave("rayx stop", 1000, [] {});
  head_.sent.clear();
  processes_.starting["lease-3"](
      protocol::StartWorkerReply{.lease_id = LeaseId::FromWire("lease-3")});
  EXPECT_TRUE(head_.sent.empty());
}

// A restarted head that knew this node asks it to rejoin: the agent keeps its
// workers and registers as the same node, reporting what it runs.
TEST_F(NodeAgentTest, ARestartedHeadIsRejoinedAsTheSameNodeWithoutKillingAnything) {
  Sent reg = Next();
  protocol::RegisterNodeReply joined;
  joined.node_id = NodeId::FromRandom();
  joined.heartbeat_period_ms = kPeriodMs;
  joined.epoch = 5;
  Deliver(joined, reg.env.id);
  Sent hb = Next();
  protocol::StartWorkerRequest req;
  req.lease_id = LeaseId::FromWire("live");
  req.job_id = JobId::FromWire("job-1");
  req.resources = {{"GPU", 1}};
  req.gpu_ids = {0};
  req.epoch = 5;
  Deliver(req, 60);
  processes_.starting["live"](
      protocol::StartWorkerReply{.lease_id = LeaseId::FromWire("live"), .worker_pid = 99});
  ASSERT_TRUE(Next().Is(MessageType::kStartWorkerReply));

  Deliver(protocol::HeartbeatReply{.known = false, .rejoin = true}, hb.env.id);
  EXPECT_EQ(processes_.kill_all, 0) << "a head restart is not a node death";
  EXPECT_TRUE(processes_.killed.empty());
  Sent rejoin = Next();
  ASSERT_TRUE(rejoin.Is(MessageType::kRegisterNodeRequest));
  auto sent = rejoin.As<protocol::RegisterNodeRequest>();
  EXPECT_TRUE(sent.rejoin);
  EXPECT_EQ(sent.previous_node_id, joined.node_id);
  EXPECT_EQ(sent.previous_epoch, 5u);
  ASSERT_EQ(sent.live_leases.size(), 1u);
  EXPECT_EQ(sent.live_leases[0].lease_id.Hex(), "live");
  EXPECT_EQ(sent.live_leases[0].job_id.Hex(), "job-1");
  EXPECT_EQ(sent.live_leases[0].worker_pid, 99);
  EXPECT_EQ(sent.live_leases[0].gpu_ids, std::vector<int>{0});
  Advance(kPeriodMs);
  EXPECT_TRUE(head_.sent.empty()) << "no heartbeat while rejoining";
  // Unanswered (the head died again): the rejoin is sent again.
  Advance(2000);
  Sent retry = Next();
  ASSERT_TRUE(retry.Is(MessageType::kRegisterNodeRequest));
  EXPECT_TRUE(retry.As<protocol::RegisterNodeRequest>().rejoin);
  Deliver(joined, retry.env.id);
  EXPECT_EQ(agent_->node_id(), joined.node_id);
  EXPECT_EQ(joined_, 1);
  Advance(kPeriodMs);
  Sent next = Next();
  ASSERT_TRUE(next.Is(MessageType::kHeartbeatRequest));
  EXPECT_EQ(next.As<protocol::HeartbeatRequest>().epoch, 5u);
  EXPECT_TRUE(fatal_.empty());
}

TEST_F(NodeAgentTest, ARefusedRejoinFencesLikeADeath) {
  NodeId first_id = Join();
  Sent hb = Next();
  Deliver(protocol::HeartbeatReply{.known = false, .rejoin = true}, hb.env.id);
  Sent rejoin = Next();
  ASSERT_TRUE(rejoin.Is(MessageType::kRegisterNodeRequest));
  DeliverError(Status::NotFound("this head does not know it"), rejoin.env.id);
  EXPECT_TRUE(fatal_.empty());
  EXPECT_EQ(processes_.kill_all, 1);
  Sent again = Next();
  ASSERT_TRUE(again.Is(MessageType::kRegisterNodeRequest));
  auto req = again.As<protocol::RegisterNodeRequest>();
  EXPECT_FALSE(req.rejoin);
  EXPECT_EQ(req.previous_node_id, first_id);
}

}  // namespace
}  // namespace rayx::worker
