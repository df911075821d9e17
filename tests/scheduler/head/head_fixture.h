// A test fixture that drives a real HeadService (with its state file) message
// by message: register agents and drivers, grant leases, and inspect what the
// head sends through its outbox.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "common/clock.h"
#include "head/head_service.h"
#include "head/head_store.h"
#include "protocol/codec.h"
#include "transport/message.h"

namespace rayx::scheduler {
namespace testing_fixture {

namespace fs = std::filesystem;
using protocol::MessageType;
using transport::Frames;

constexpr char kToken[] = "s3cret-token";
constexpr char kAgent[] = "agent-a";
constexpr char kDriver[] = "rayx-driver-1";

// A message the head sent through its outbox (not a direct reply).
struct Sent {
  std::string peer;
  uint16_t type = 0;
  uint64_t id = 0;
  std::string body;
};

// A HeadService on a SQLite state file in a temporary directory, driven
// message by message on a manual clock from named peers; what it sends through
// its outbox is kept in sent_.
class HeadFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "rayx-head-restart-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    StartHead();
  }
  void TearDown() override {
    head_.reset();
    store_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Starts (or restarts: the previous one is SIGKILLed, so to speak) a head
  // on the state file.
  void StartHead() {
    head_.reset();
    store_.reset();
    auto store = HeadStore::Open(dir_ + "/head_state.sqlite3");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    auto state = store_->Load();
    ASSERT_TRUE(state.ok()) << state.status();
    HeadServiceOptions o;
    o.token = kToken;
    o.cluster_id = "cluster-" + std::to_string(++starts_);
    o.heartbeat_period_ms = 100;
    o.nodes.node_timeout_ms = 700;
    o.nodes.rejoin_timeout_ms = 5000;
    o.leases.job_timeout_ms = job_timeout_ms_;
    o.store = store_.get();
    o.restored = std::move(*state);
    head_ = std::make_unique<HeadService>(std::move(o), clock_);
    head_->SetOutbox([this](const std::string& peer, Frames frames) {
      auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(frames[0]));
      ASSERT_TRUE(env.ok());
      // The test's own id, without what Send made unique.
      uint64_t id = env->id & ((uint64_t{1} << kUniqueShift) - 1);
      sent_.push_back({peer, env->t, id, std::string(transport::FrameView(frames[1]))});
    });
    sent_.clear();
  }

  // Sends `body` from `peer`; returns the reply's type and body: the
  // immediate one, or one the head sent through its outbox while handling it.
  // A registered runtime's request ids are unique (the head answers a repeat
  // from RequestDedup): the tests' fixed ids are made so, in the high bits.
  template <typename Req>
  std::pair<uint16_t, std::string> Send(const Req& body, const std::string& peer, uint64_t id) {
    uint64_t wire_id = id;
    if (id != 0 && head_->dedup().Tracks(peer)) wire_id |= ++unique_ids_ << kUniqueShift;
    Frames frames = transport::MakeMessage(body, wire_id);
    size_t before = sent_.size();
    auto reply = head_->Handle(frames, peer);
    if (!reply) {
      for (size_t i = before; i < sent_.size(); ++i) {
        if (sent_[i].peer != peer || sent_[i].id != id) continue;
        Sent answer = sent_[i];
        sent_.erase(sent_.begin() + static_cast<std::ptrdiff_t>(i));
        return {answer.type, answer.body};
      }
      return {0, ""};
    }
    auto env = protocol::Decode<protocol::Envelope>(transport::FrameView((*reply)[0]));
    EXPECT_TRUE(env.ok());
    return {env->t, std::string(transport::FrameView((*reply)[1]))};
  }
  template <typename Reply, typename Req>
  Reply Call(const Req& body, const std::string& peer, uint64_t id = 7) {
    auto [type, bytes] = Send(body, peer, id);
    if (type == static_cast<uint16_t>(MessageType::kErrorReply)) {
      auto error = protocol::Decode<protocol::ErrorReply>(bytes);
      ADD_FAILURE() << "error reply: " << (error.ok() ? error->message : "undecodable");
      return Reply{};
    }
    EXPECT_EQ(type, static_cast<uint16_t>(Reply::kType));
    auto reply = protocol::Decode<Reply>(bytes);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : Reply{};
  }
  template <typename Req>
  protocol::ErrorReply CallError(const Req& body, const std::string& peer, uint64_t id = 7) {
    auto [type, bytes] = Send(body, peer, id);
    EXPECT_EQ(type, static_cast<uint16_t>(MessageType::kErrorReply));
    auto error = protocol::Decode<protocol::ErrorReply>(bytes);
    return error.ok() ? *error : protocol::ErrorReply{};
  }
  // The oldest outbox message of `type`, removed; fails when there is none.
  template <typename T>
  std::pair<Sent, T> Take() {
    for (auto it = sent_.begin(); it != sent_.end(); ++it) {
      if (it->type != static_cast<uint16_t>(T::kType)) continue;
      Sent s = *it;
      sent_.erase(it);
      auto body = protocol::Decode<T>(s.body);
      EXPECT_TRUE(body.ok()) << body.status();
      return {s, body.ok() ? *body : T{}};
    }
    ADD_FAILURE() << "no " << protocol::MessageTypeName(static_cast<uint16_t>(T::kType))
                  << " was sent";
    return {};
  }

  protocol::RegisterNodeRequest Hello() const {
    protocol::RegisterNodeRequest req;
    req.token = kToken;
    req.rayx_version = kRayxVersion;
    req.address = "10.0.0.7";
    req.hostname = "node-a";
    req.agent_pid = 777;
    req.resources = {{"CPU", 4}, {"GPU", 2}};
    return req;
  }
  protocol::RegisterDriverRequest Driver(const JobId& job_id = JobId()) const {
    protocol::RegisterDriverRequest req;
    req.token = kToken;
    req.rayx_version = kRayxVersion;
    req.job_id = job_id;
    return req;
  }
  // A lease granted by the head and started by the agent: its grant.
  protocol::RequestLeaseReply Lease(const JobId& job_id, ResourceMap resources,
                                    const std::string& group = "",
                                    const std::string& owner = kDriver, bool detached = false,
                                    const ActorId& actor_id = ActorId()) {
    protocol::RequestLeaseRequest req;
    req.job_id = job_id;
    req.resources = std::move(resources);
    req.for_actor = true;
    req.detached = detached;
    req.actor_id = actor_id;
    req.placement_group_id = PlacementGroupId::FromWire(group);
    req.bundle_index = group.empty() ? -1 : 0;
    auto [type, bytes] = Send(req, owner, 50);
    EXPECT_EQ(type, 0) << "a lease request is answered through the outbox";
    StartTheWorker();
    auto [to_driver, grant] = Take<protocol::RequestLeaseReply>();
    EXPECT_EQ(to_driver.peer, owner);
    return grant;
  }
  // The agent starts the worker of the oldest StartWorkerRequest and says so.
  void StartTheWorker() {
    auto [to_agent, start] = Take<protocol::StartWorkerRequest>();
    EXPECT_EQ(to_agent.peer, kAgent);
    protocol::StartWorkerReply started;
    started.lease_id = start.lease_id;
    started.worker_address = "tcp://10.0.0.7:4000";
    started.worker_pid = 4242;
    started.epoch = start.epoch;
    Send(started, kAgent, to_agent.id);
  }
  ClusterStatus Status() {
    return Call<protocol::GetClusterStatusReply>(protocol::GetClusterStatusRequest{kToken},
                                                 "cli", 99)
        .status;
  }

  std::string dir_;
  ManualClock clock_;
  std::unique_ptr<HeadStore> store_;
  std::unique_ptr<HeadService> head_;
  std::deque<Sent> sent_;
  static constexpr int kUniqueShift = 40;
  uint64_t unique_ids_ = 0;
  int starts_ = 0;
  int64_t job_timeout_ms_ = 3000;
};

}  // namespace testing_fixture
}  // namespace rayx::scheduler
