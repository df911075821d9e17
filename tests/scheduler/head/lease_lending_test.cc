// Blocked leases lending their CPU (LeaseManager, lease_manager_lending.cc),
// driven call by call with a real NodeTable: what is lent and taken back, and
// that every way a blocked lease ends gives back what it holds exactly once.
// Every test checks the books (LeaseManager::CheckAccounting) after each step.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "head/frame_outbox.h"
#include "head/lease_manager.h"
#include "protocol/codec.h"
#include "transport/message.h"

namespace rayx::scheduler {
namespace lease_lending_test {

using protocol::MessageType;

constexpr int64_t kT0 = 50'000;

class LeaseLendingTest : public ::testing::Test {
 protected:
  LeaseLendingTest()
      : leases_(LeaseManager::Options{1000, "10.0.0.1:6380"}, nodes_, groups_, outbox_) {
    outbox_.SetSend([this](const std::string& peer, transport::Frames frames) {
      auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(frames[0]));
      ASSERT_TRUE(env.ok()) << env.status();
      sent_.push_back({peer, *env, std::string(transport::FrameView(frames[1]))});
    });
  }
  void TearDown() override {
    Status books = leases_.CheckAccounting();
    EXPECT_TRUE(books.ok()) << books;
    EXPECT_EQ(leases_.invariant_violations(), 0u);
  }

  struct Sent {
    std::string peer;
    protocol::Envelope env;
    std::string body;
  };

  NodeId AddNode(const std::string& address, ResourceMap total) {
    NodeInfo info;
    info.address = address;
    info.total = std::move(total);
    NodeId id = nodes_.Register(info, kT0, 0);
    leases_.OnNodeRegistered(id, "agent-" + address);
    return id;
  }
  JobId NewJob() {
    return leases_.RegisterDriver(protocol::RegisterDriverRequest{}, kT0, "cluster-1").job_id;
  }
  static protocol::RequestLeaseRequest Shape(const JobId& job, ResourceMap resources,
                                             const PlacementGroupId& group = PlacementGroupId(),
                                             int32_t bundle = -1) {
    protocol::RequestLeaseRequest req;
    req.job_id = job;
    req.resources = std::move(resources);
    req.executable = "/bin/driver";
    req.placement_group_id = group;
    req.bundle_index = bundle;
    return req;
  }
  // The head request ids of the StartWorkerRequests sent since last asked.
  std::vector<uint64_t> Starts() {
    std::vector<uint64_t> out;
    for (const Sent& s : sent_) {
      if (s.env.t == static_cast<uint16_t>(MessageType::kStartWorkerRequest)) out.push_back(s.env.id);
    }
    sent_.clear();
    return out;
  }
  // The agent started the worker of head request `start_id`: the owner's lease.
  LeaseId Started(uint64_t start_id) {
    protocol::StartWorkerReply reply;
    reply.worker_address = "tcp://10.0.0.2:7000";
    reply.worker_pid = 4242;
    leases_.OnStartWorkerReply(start_id, reply);
    LeaseId lease;
    for (const Sent& s : sent_) {
      if (s.env.t != static_cast<uint16_t>(MessageType::kRequestLeaseReply)) continue;
      auto grant = protocol::Decode<protocol::RequestLeaseReply>(s.body);
      EXPECT_TRUE(grant.ok());
      if (grant.ok()) lease = grant->lease_id;
    }
    sent_.clear();
    EXPECT_FALSE(lease.IsNil()) << "no grant for start request " << start_id;
    return lease;
  }
  // A lease of `resources` granted now to `owner` and running; nil when it
  // had to wait.
  LeaseId Grant(const JobId& job, ResourceMap resources, const std::string& owner = "driver",
                const PlacementGroupId& group = PlacementGroupId(), int32_t bundle = -1) {
    leases_.RequestLease(owner, ++request_id_, Shape(job, std::move(resources), group, bundle));
    auto starts = Starts();
    if (starts.empty()) return LeaseId();
    EXPECT_EQ(starts.size(), 1u);
    return Started(starts[0]);
  }
  // The runtime at `peer` runs inside `lease`'s worker (its calls submit work).
  void RuntimeInside(const JobId& job, const LeaseId& lease, const std::string& peer) {
    protocol::RegisterDriverRequest runtime;
    runtime.job_id = job;
    runtime.host_lease_id = lease;
    leases_.RegisterDriver(runtime, kT0, "cluster-1", peer);
  }
  void Blocked(const std::string& peer, const LeaseId& lease, bool blocked) {
    Status status = leases_.SetLeaseBlocked(peer, lease, blocked);
    ASSERT_TRUE(status.ok()) << status;
    ExpectBooksAgree();
  }
  void ExpectBooksAgree() {
    Status books = leases_.CheckAccounting();
    EXPECT_TRUE(books.ok()) << books;
  }
  double Available(const NodeId& node, const std::string& name) {
    const NodeInfo* info = nodes_.FindAlive(node);
    if (info == nullptr) return -1;
    auto it = info->available.find(name);
    return it == info->available.end() ? 0 : it->second;
  }
  double Overcommitted(const NodeId& node) {
    const NodeInfo* info = nodes_.FindAlive(node);
    return info == nullptr ? -1 : info->cpu_overcommitted;
  }
  std::string StateOf(const LeaseId& lease) {
    for (const auto& e : leases_.ListLeases()) {
      if (e.lease_id == lease) return std::string(protocol::Name(e.state));
    }
    return "(none)";
  }

  NodeTable nodes_{NodeTable::Options{1500, 100}};
  FrameOutbox outbox_{"head"};
  PlacementGroupManager groups_{nodes_, outbox_};
  LeaseManager leases_;
  std::vector<Sent> sent_;
  uint64_t request_id_ = 0;
};

TEST_F(LeaseLendingTest, ABlockedLeaseLendsItsCpuSoAWaitingRequestRuns) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 1}});
  JobId job = NewJob();
  LeaseId parent = Grant(job, {{"CPU", 1}});
  RuntimeInside(job, parent, "rt-parent");
  // The parent's child waits: the node's one CPU is the parent's.
  leases_.RequestLease("rt-parent", 50, Shape(job, {{"CPU", 1}}));
  EXPECT_TRUE(Starts().empty());
  EXPECT_EQ(leases_.pending_count(), 1u);

  Blocked("rt-parent", parent, true);
  auto starts = Starts();
  ASSERT_EQ(starts.size(), 1u) << "the lent CPU runs the child";
  LeaseId child = Started(starts[0]);
  EXPECT_EQ(StateOf(parent), "BLOCKED");
  EXPECT_EQ(StateOf(child), "RUNNING");
  EXPECT_EQ(leases_.blocked_count(), 1u);
  EXPECT_DOUBLE_EQ(leases_.lent_cpu(), 1);
  EXPECT_DOUBLE_EQ(Available(node, "CPU"), 0);
  ExpectBooksAgree();
}

TEST_F(LeaseLendingTest, GpusMemoryAndCustomResourcesStayHeldWhileBlocked) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 2}, {"GPU", 1}, {"memory", 1000}, {"tpu", 1}});
  JobId job = NewJob();
  LeaseId holder = Grant(job, {{"CPU", 1}, {"GPU", 1}, {"memory", 600}, {"tpu", 1}});
  RuntimeInside(job, holder, "rt-holder");
  Blocked("rt-holder", holder, true);
  EXPECT_DOUBLE_EQ(Available(node, "CPU"), 2);
  EXPECT_DOUBLE_EQ(Available(node, "GPU"), 0);
  EXPECT_DOUBLE_EQ(Available(node, "memory"), 400);
  EXPECT_DOUBLE_EQ(Available(node, "tpu"), 0);
  // Another GPU task, or one that needs more memory, waits; a CPU task runs.
  EXPECT_TRUE(Grant(job, {{"CPU", 1}, {"GPU", 1}}).IsNil());
  EXPECT_TRUE(Grant(job, {{"CPU", 1}, {"memory", 500}}).IsNil());
  EXPECT_TRUE(Grant(job, {{"CPU", 1}, {"tpu", 1}}).IsNil());
  EXPECT_FALSE(Grant(job, {{"CPU", 2}}).IsNil());
  EXPECT_EQ(leases_.pending_count(), 3u);
  ExpectBooksAgree();
}

TEST_F(LeaseLendingTest, ResumingTakesTheCpuBackOvercommittingTheNodeUntilLeasesEnd) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 1}});
  JobId job = NewJob();
  LeaseId parent = Grant(job, {{"CPU", 1}});
  RuntimeInside(job, parent, "rt-parent");
  Blocked("rt-parent", parent, true);
  LeaseId child = Grant(job, {{"CPU", 1}});
  ASSERT_FALSE(child.IsNil());

  Blocked("rt-parent", parent, false);  // it never waits for its CPU
  EXPECT_EQ(StateOf(parent), "RUNNING");
  EXPECT_DOUBLE_EQ(Available(node, "CPU"), 0);
  EXPECT_DOUBLE_EQ(Overcommitted(node), 1);
  EXPECT_EQ(leases_.blocked_count(), 0u);
  // Nothing is granted while the node is overdrawn...
  EXPECT_TRUE(Grant(job, {{"CPU", 1}}).IsNil());
  // ...and a lease that ends pays the overdraft back first.
  ASSERT_TRUE(leases_.ReturnLease(child).ok());
  ExpectBooksAgree();
  EXPECT_DOUBLE_EQ(Overcommitted(node), 0);
  EXPECT_DOUBLE_EQ(Available(node, "CPU"), 0);
  EXPECT_TRUE(Starts().empty()) << "the paid-back CPU was never free";
  ASSERT_TRUE(leases_.ReturnLease(parent).ok());
  ExpectBooksAgree();
  EXPECT_EQ(Starts().size(), 1u) << "the waiting request runs once the CPU is free";
}

TEST_F(LeaseLendingTest, SayingTheSameStateAgainChangesNothing) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 2}});
  JobId job = NewJob();
  LeaseId lease = Grant(job, {{"CPU", 1}});
  RuntimeInside(job, lease, "rt");
  Blocked("rt", lease, true);
  Blocked("rt", lease, true);  // a resync after a reconnect
  EXPECT_DOUBLE_EQ(Available(node, "CPU"), 2);
  EXPECT_DOUBLE_EQ(leases_.lent_cpu(), 1);
  Blocked("rt", lease, false);
  Blocked("rt", lease, false);
  EXPECT_DOUBLE_EQ(Available(node, "CPU"), 1);
  EXPECT_DOUBLE_EQ(Overcommitted(node), 0);
}

TEST_F(LeaseLendingTest, ALeaseWithoutCpuShowsBlockedAndLendsNothing) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 1}, {"GPU", 1}});
  JobId job = NewJob();
  LeaseId actor = Grant(job, {{"GPU", 1}});
  RuntimeInside(job, actor, "rt");
  Blocked("rt", actor, true);
  EXPECT_EQ(StateOf(actor), "BLOCKED");
  EXPECT_EQ(leases_.blocked_count(), 1u);
  EXPECT_DOUBLE_EQ(leases_.lent_cpu(), 0);
  EXPECT_DOUBLE_EQ(Available(node, "CPU"), 1);
  Blocked("rt", actor, false);
  EXPECT_DOUBLE_EQ(Available(node, "CPU"), 1);
}

TEST_F(LeaseLendingTest, OnlyTheRuntimeInsideTheLeaseMayLendItsCpu) {
  NodeId node = AddNode("10.0.0.2", {{"CPU", 2}});
  JobId job = NewJob();
  LeaseId a = Grant(job, {{"CPU", 1}});
  LeaseId b = Grant(job, {{"CPU", 1}});
  RuntimeInside(job, a, "rt-a");
  RuntimeInside(job, b, "rt-b");
  EXPECT_EQ(leases_.SetLeaseBlocked("driver", a, true).code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(leases_.SetLeaseBlocked("rt-b", a, true).code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(leases_.SetLeaseBlocked("rt-a", LeaseId::FromWire("gone"), true).code(),
            StatusCode::kNotFound);
  EXPECT_DOUBLE_EQ(Available(node, "CPU"), 0) << "nothing was lent";
  EXPECT_EQ(leases_.blocked_count(), 0u);
}

// A blocked parent and a child running on the CPU it lent (owned by the
// driver, so it outlives the parent). The parent ends, blocked or after it
// resumed (the node overdrawn), in each way a lease can end: what it held is
// given back once, its lent CPU never.
enum class End { kReturned, kWorkerExited, kJobFinished, kNodeDied, kOwnerEnded };
struct EndCase {
  End end;
  bool resumed_first;
};

class BlockedLeaseEnds : public LeaseLendingTest, public ::testing::WithParamInterface<EndCase> {};

TEST_P(BlockedLeaseEnds, WhatItHoldsIsGivenBackOnceAndItsLentCpuNever) {
  const EndCase c = GetParam();
  NodeId node = AddNode("10.0.0.2", {{"CPU", 1}, {"GPU", 1}});
  JobId job = NewJob();
  // The parent's owner: the driver, or (kOwnerEnded) a runtime inside another
  // lease, whose end ends the leases it owns.
  std::string owner = "driver";
  NodeId other;
  LeaseId grandparent;
  if (c.end == End::kOwnerEnded) {
    other = AddNode("10.0.0.3", {{"CPU", 1}, {"spare", 1}});
    grandparent = Grant(job, {{"CPU", 1}, {"spare", 1}});  // on the other node
    RuntimeInside(job, grandparent, "rt-grandparent");
    owner = "rt-grandparent";
  }
  LeaseId parent = Grant(job, {{"CPU", 1}, {"GPU", 1}}, owner);
  ASSERT_FALSE(parent.IsNil());
  RuntimeInside(job, parent, "rt-parent");
  Blocked("rt-parent", parent, true);
  LeaseId child = Grant(job, {{"CPU", 1}});
  ASSERT_FALSE(child.IsNil()) << "the child runs on the lent CPU";
  if (c.resumed_first) {
    Blocked("rt-parent", parent, false);
    EXPECT_DOUBLE_EQ(Overcommitted(node), 1);
  }

  switch (c.end) {
    case End::kReturned:
      ASSERT_TRUE(leases_.ReturnLease(parent).ok());
      break;
    case End::kWorkerExited: {
      protocol::ProcessExitedNotice exited;
      exited.lease_id = parent;
      exited.pid = 4242;
      exited.signal = 9;
      exited.all_exited = true;
      leases_.OnProcessExited(exited);
      break;
    }
    case End::kJobFinished:
      leases_.FinishJob(job, "its driver finished");
      break;
    case End::kNodeDied:
      ASSERT_TRUE(nodes_.MarkDead(node, "killed"));
      leases_.OnNodeDead(node, "killed");
      break;
    case End::kOwnerEnded:
      ASSERT_TRUE(leases_.ReturnLease(grandparent).ok());
      break;
  }
  ExpectBooksAgree();
  EXPECT_EQ(leases_.blocked_count(), 0u);
  EXPECT_DOUBLE_EQ(leases_.lent_cpu(), 0);
  EXPECT_EQ(StateOf(parent), "(none)");
  EXPECT_EQ(leases_.SetLeaseBlocked("rt-parent", parent, false).code(), StatusCode::kNotFound)
      << "a late notice finds nothing to take back";
  if (c.end == End::kNodeDied) return;  // its books went with it
  EXPECT_DOUBLE_EQ(Available(node, "GPU"), 1);
  EXPECT_DOUBLE_EQ(Overcommitted(node), 0);
  if (c.end == End::kJobFinished) {
    EXPECT_DOUBLE_EQ(Available(node, "CPU"), 1) << "the child ended with the job";
    return;
  }
  EXPECT_DOUBLE_EQ(Available(node, "CPU"), 0) << "the child still holds the node's CPU";
  ASSERT_TRUE(leases_.ReturnLease(child).ok());
  ExpectBooksAgree();
  EXPECT_DOUBLE_EQ(Available(node, "CPU"), 1);
}

std::string EndCaseName(const ::testing::TestParamInfo<EndCase>& p) {
  static const char* const kNames[] = {"Returned", "WorkerExited", "JobFinished", "NodeDied",
                                       "OwnerEnded"};
  return std::string(kNames[static_cast<int>(p.param.end)]) +
         (p.param.resumed_first ? "AfterResuming" : "WhileBlocked");
}

INSTANTIATE_TEST_SUITE_P(EveryEnd, BlockedLeaseEnds,
                         ::testing::Values(EndCase{End::kReturned, false},
                                           EndCase{End::kReturned, true},
                                           EndCase{End::kWorkerExited, false},
                                           EndCase{End::kWorkerExited, true},
                                           EndCase{End::kJobFinished, false},
                                           EndCase{End::kJobFinished, true},
                                           EndCase{End::kNodeDied, false},
                                           EndCase{End::kNodeDied, true},
                                           EndCase{End::kOwnerEnded, false},
                                           EndCase{End::kOwnerEnded, true}),
                         EndCaseName);

}  // namespace lease_lending_test
}  // namespace rayx::scheduler
