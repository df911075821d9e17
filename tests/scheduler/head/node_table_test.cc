// NodeTable: membership, liveness by heartbeat, and snapshots, with explicit times.
#include "head/node_table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

namespace rayx::scheduler {
namespace node_table_test {  // this file's own (unit tests compile in batches)

constexpr int64_t kTimeout = 1500;
constexpr int64_t kT0 = 10'000;

NodeInfo MakeNode(const std::string& address, double cpus, double tpus = 0) {
  NodeInfo info;
  info.address = address;
  info.hostname = "host-" + address;
  info.total = {{"CPU", cpus}};
  if (tpus > 0) info.total["tpu"] = tpus;
  return info;
}

class NodeTableTest : public ::testing::Test {
 protected:
  NodeTable table_{NodeTable::Options{kTimeout, 1000}};
};

TEST_F(NodeTableTest, RegisterGivesDistinctIdsAndAliveNodes) {
  NodeInfo info = MakeNode("10.0.0.1", 4);
  info.alive = false;  // overwritten by Register
  info.death_reason = "stale";
  NodeId a = table_.Register(info, kT0, 1'700'000'000'000);
  NodeId b = table_.Register(MakeNode("10.0.0.2", 2), kT0, 1'700'000'000'001);
  EXPECT_NE(a, b);
  EXPECT_FALSE(a.IsNil());
  EXPECT_EQ(a.Hex().size(), 32u);
  EXPECT_EQ(table_.alive_count(), 2u);
  EXPECT_EQ(table_.dead_count(), 0u);
  const NodeInfo* found = table_.FindAlive(a);
  ASSERT_NE(found, nullptr);
  EXPECT_TRUE(found->alive);
  EXPECT_EQ(found->death_reason, "");
  EXPECT_EQ(found->node_id, a);
  EXPECT_EQ(found->address, "10.0.0.1");
  EXPECT_EQ(found->registered_at_ms, 1'700'000'000'000);
  // With no availability given, everything is available.
  EXPECT_EQ(found->available, found->total);
}

TEST_F(NodeTableTest, ManyRegistrationsGetUniqueIds) {
  std::set<NodeId> ids;
  for (int i = 0; i < 500; ++i) ids.insert(table_.Register(MakeNode("n", 1), kT0, 0));
  EXPECT_EQ(ids.size(), 500u);
  EXPECT_EQ(table_.alive_count(), 500u);
}

TEST_F(NodeTableTest, HeartbeatOfUnknownIdReturnsFalse) {
  table_.Register(MakeNode("10.0.0.1", 4), kT0, 0);
  EXPECT_FALSE(table_.Heartbeat(NodeId::FromRandom(), kT0 + 1));
  EXPECT_FALSE(table_.Heartbeat(NodeId(), kT0 + 1));
}

TEST_F(NodeTableTest, ExpireDeclaresDeadOnlyNodesSilentLongerThanTimeout) {
  NodeId quiet = table_.Register(MakeNode("quiet", 1), kT0, 0);
  NodeId boundary = table_.Register(MakeNode("boundary", 1), kT0 + 1, 0);
  NodeId chatty = table_.Register(MakeNode("chatty", 1), kT0, 0);
  ASSERT_TRUE(table_.Heartbeat(chatty, kT0 + 1000));

  // At kT0 + timeout + 1: quiet has been silent timeout + 1 ms, boundary exactly timeout.
  auto expired = table_.ExpireSilentNodes(kT0 + kTimeout + 1);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0], quiet);
  EXPECT_EQ(table_.FindAlive(quiet), nullptr);
  EXPECT_NE(table_.FindAlive(boundary), nullptr);
  EXPECT_NE(table_.FindAlive(chatty), nullptr);
  EXPECT_EQ(table_.alive_count(), 2u);
  EXPECT_EQ(table_.dead_count(), 1u);

  // One more millisecond and boundary goes too; chatty heartbeated later.
  expired = table_.ExpireSilentNodes(kT0 + kTimeout + 2);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0], boundary);
  EXPECT_NE(table_.FindAlive(chatty), nullptr);
}

TEST_F(NodeTableTest, ExpiryReasonSaysHowLongItWasSilent) {
  NodeId id = table_.Register(MakeNode("n", 1), kT0, 0);
  table_.ExpireSilentNodes(kT0 + 2000);
  auto snap = table_.Snapshot(kT0 + 2000);
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].node_id, id);
  EXPECT_FALSE(snap[0].alive);
  EXPECT_NE(snap[0].death_reason.find("no heartbeat for 2000 ms (timeout 1500 ms)"),
            std::string::npos)
      << snap[0].death_reason;
  EXPECT_TRUE(snap[0].available.empty());
  EXPECT_EQ(snap[0].total.at("CPU"), 1);
}

TEST_F(NodeTableTest, ExpireWithNothingSilentReturnsNothing) {
  table_.Register(MakeNode("n", 1), kT0, 0);
  EXPECT_TRUE(table_.ExpireSilentNodes(kT0 + kTimeout).empty());
  EXPECT_EQ(table_.alive_count(), 1u);
}

TEST_F(NodeTableTest, DeadNodeHeartbeatReturnsFalseAndStaysDead) {
  NodeId id = table_.Register(MakeNode("n", 1), kT0, 0);
  table_.ExpireSilentNodes(kT0 + kTimeout + 1);
  EXPECT_FALSE(table_.Heartbeat(id, kT0 + kTimeout + 2));
  EXPECT_EQ(table_.FindAlive(id), nullptr);
  EXPECT_EQ(table_.alive_count(), 0u);
  EXPECT_EQ(table_.dead_count(), 1u);
}

TEST_F(NodeTableTest, MarkDeadRecordsReasonOnce) {
  NodeId id = table_.Register(MakeNode("n", 1), kT0, 0);
  EXPECT_TRUE(table_.MarkDead(id, "rayx stop"));
  EXPECT_FALSE(table_.MarkDead(id, "again"));
  EXPECT_FALSE(table_.MarkDead(NodeId::FromRandom(), "unknown"));
  EXPECT_FALSE(table_.Heartbeat(id, kT0 + 1));
  auto snap = table_.Snapshot(kT0 + 1);
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_FALSE(snap[0].alive);
  EXPECT_EQ(snap[0].death_reason, "rayx stop");
  EXPECT_EQ(table_.dead_count(), 1u);
}

TEST_F(NodeTableTest, SnapshotListsAliveByRegistrationThenDeadNewestFirst) {
  std::vector<NodeId> ids;
  for (int i = 0; i < 6; ++i) {
    ids.push_back(table_.Register(MakeNode("n" + std::to_string(i), 1), kT0 + i, 0));
  }
  ASSERT_TRUE(table_.MarkDead(ids[1], "first death"));
  ASSERT_TRUE(table_.MarkDead(ids[4], "second death"));
  auto snap = table_.Snapshot(kT0 + 100);
  ASSERT_EQ(snap.size(), 6u);
  std::vector<NodeId> order;
  for (const auto& n : snap) order.push_back(n.node_id);
  EXPECT_EQ(order, (std::vector<NodeId>{ids[0], ids[2], ids[3], ids[5], ids[4], ids[1]}));
  EXPECT_EQ(snap[4].death_reason, "second death");
  EXPECT_EQ(snap[5].death_reason, "first death");
}

TEST_F(NodeTableTest, SnapshotReportsHeartbeatAge) {
  NodeId a = table_.Register(MakeNode("a", 1), kT0, 0);
  NodeId b = table_.Register(MakeNode("b", 1), kT0, 0);
  ASSERT_TRUE(table_.Heartbeat(b, kT0 + 400));
  auto snap = table_.Snapshot(kT0 + 1000);
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].node_id, a);
  EXPECT_EQ(snap[0].last_heartbeat_age_ms, 1000);
  EXPECT_EQ(snap[1].node_id, b);
  EXPECT_EQ(snap[1].last_heartbeat_age_ms, 600);
}

TEST(NodeTable, DeadListIsBoundedKeepingNewest) {
  NodeTable table(NodeTable::Options{kTimeout, 3});
  std::vector<NodeId> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(table.Register(MakeNode("n", 1), kT0, 0));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(table.MarkDead(ids[i], "d" + std::to_string(i)));
  EXPECT_EQ(table.dead_count(), 3u);
  auto snap = table.Snapshot(kT0);
  ASSERT_EQ(snap.size(), 3u);
  EXPECT_EQ(snap[0].node_id, ids[4]);
  EXPECT_EQ(snap[1].node_id, ids[3]);
  EXPECT_EQ(snap[2].node_id, ids[2]);
}

TEST(NodeTable, ExpiryAlsoRespectsTheDeadBound) {
  NodeTable table(NodeTable::Options{kTimeout, 2});
  for (int i = 0; i < 10; ++i) table.Register(MakeNode("n", 1), kT0, 0);
  EXPECT_EQ(table.ExpireSilentNodes(kT0 + kTimeout + 1).size(), 10u);
  EXPECT_EQ(table.alive_count(), 0u);
  EXPECT_EQ(table.dead_count(), 2u);
}

// One book: what the node's leases use is the table's own account; a
// heartbeat (which carries no availability) leaves it as it was.
TEST_F(NodeTableTest, AHeartbeatLeavesTheHeadsAccountOfANodeAsItWas) {
  NodeId id = table_.Register(MakeNode("n", 4, 2), kT0, 0);
  std::vector<int> devices;
  ASSERT_TRUE(table_.TryAcquire(id, {{"CPU", 3}}, &devices));
  ASSERT_TRUE(table_.Heartbeat(id, kT0 + 1));
  const NodeInfo* n = table_.FindAlive(id);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->available.at("CPU"), 1);
  EXPECT_EQ(n->available.at("tpu"), 2);
  EXPECT_EQ(n->total, (ResourceMap{{"CPU", 4}, {"tpu", 2}}));
}

TEST_F(NodeTableTest, HeartbeatRefreshesLiveness) {
  NodeId id = table_.Register(MakeNode("n", 1), kT0, 0);
  for (int64_t t = kT0 + 1000; t <= kT0 + 10'000; t += 1000) {
    ASSERT_TRUE(table_.Heartbeat(id, t));
    EXPECT_TRUE(table_.ExpireSilentNodes(t + kTimeout).empty()) << t;
  }
  EXPECT_NE(table_.FindAlive(id), nullptr);
}

}  // namespace node_table_test
}  // namespace rayx::scheduler

namespace rayx::scheduler {
namespace node_table_test {  // this file's own (unit tests compile in batches)

NodeId AddGpuNode(NodeTable& table, double gpus) {
  NodeInfo info;
  info.total = {{"CPU", 8}, {"GPU", gpus}};
  return table.Register(info, 0, 0);
}

TEST(NodeTableGpus, WholeGpusGetDistinctDevices) {
  NodeTable table({});
  NodeId node = AddGpuNode(table, 4);
  std::vector<int> a, b, c;
  ASSERT_TRUE(table.TryAcquire(node, {{"GPU", 1}}, &a));
  ASSERT_TRUE(table.TryAcquire(node, {{"GPU", 2}}, &b));
  EXPECT_EQ(a, std::vector<int>{0});
  EXPECT_EQ(b, (std::vector<int>{1, 2}));
  EXPECT_FALSE(table.TryAcquire(node, {{"GPU", 2}}, &c)) << "only device 3 is free";
  table.Release(node, {{"GPU", 1}}, a);
  ASSERT_TRUE(table.TryAcquire(node, {{"GPU", 2}}, &c));
  EXPECT_EQ(c, (std::vector<int>{0, 3}));
}

TEST(NodeTableGpus, SharesPackOntoTheFullestDeviceThatFits) {
  NodeTable table({});
  NodeId node = AddGpuNode(table, 2);
  std::vector<int> a, b, c, d;
  ASSERT_TRUE(table.TryAcquire(node, {{"GPU", 0.25}}, &a));
  ASSERT_TRUE(table.TryAcquire(node, {{"GPU", 0.5}}, &b));
  ASSERT_TRUE(table.TryAcquire(node, {{"GPU", 0.5}}, &c));
  EXPECT_EQ(a, std::vector<int>{0});
  EXPECT_EQ(b, std::vector<int>{0});  // 0.75 used on device 0
  EXPECT_EQ(c, std::vector<int>{1});  // does not fit on 0: never spans devices
  EXPECT_FALSE(table.TryAcquire(node, {{"GPU", 1}}, &d)) << "no device is entirely free";
  EXPECT_FALSE(table.FindNodeWithAvailable({{"GPU", 1}}).has_value());
  EXPECT_TRUE(table.FindNodeWithAvailable({{"GPU", 0.25}}).has_value());
}

TEST(NodeTableGpus, AGpuAmountAboveOneMustBeWhole) {
  NodeTable table({});
  NodeId node = AddGpuNode(table, 4);
  std::vector<int> ids;
  EXPECT_FALSE(table.TryAcquire(node, {{"GPU", 1.5}}, &ids));
}


// Blocked leases: CPU lent and taken back, overdrawn rather than waited for.
// The policy view sees the same free CPU as the table at every step.
class NodeTableLending : public NodeTableTest {
 protected:
  double FreeCpu(const NodeId& id) { return table_.FindAlive(id)->available.at("CPU"); }
  double Overdrawn(const NodeId& id) { return table_.FindAlive(id)->cpu_overcommitted; }
  void ExpectViewAgrees(const NodeId& id) {
    auto view = table_.view().Find(id);
    ASSERT_TRUE(view.has_value());
    EXPECT_NEAR(view->available.at("CPU"), FreeCpu(id), 1e-3);
    EXPECT_TRUE(table_.view().TEST_CheckInvariants().ok());
  }
};

TEST_F(NodeTableLending, ReclaimBeyondWhatIsFreeOverdrawsAndReleasesPayItBackFirst) {
  NodeId id = table_.Register(MakeNode("10.0.0.1", 2), kT0, 0);
  ASSERT_TRUE(table_.TryAcquire(id, {{"CPU", 2}}));  // a lease holds both CPUs
  table_.LendCpu(id, 2);                             // it blocks
  EXPECT_EQ(FreeCpu(id), 2);
  ASSERT_TRUE(table_.TryAcquire(id, {{"CPU", 1.5}}));  // its children use them
  ExpectViewAgrees(id);
  table_.ReclaimCpu(id, 2);  // it resumes: 0.5 free, 1.5 overdrawn
  EXPECT_EQ(FreeCpu(id), 0);
  EXPECT_DOUBLE_EQ(Overdrawn(id), 1.5);
  ExpectViewAgrees(id);
  EXPECT_FALSE(table_.TryAcquire(id, {{"CPU", 0.5}}));
  table_.Release(id, {{"CPU", 1}});  // a child ends: pays back 1 of 1.5
  EXPECT_EQ(FreeCpu(id), 0);
  EXPECT_DOUBLE_EQ(Overdrawn(id), 0.5);
  table_.Release(id, {{"CPU", 0.5}});
  EXPECT_EQ(FreeCpu(id), 0);
  EXPECT_EQ(Overdrawn(id), 0);
  table_.Release(id, {{"CPU", 2}});
  EXPECT_EQ(FreeCpu(id), 2);
  ExpectViewAgrees(id);
  EXPECT_EQ(table_.Snapshot(kT0)[0].cpu_overcommitted, 0);
}

TEST_F(NodeTableLending, OnlyCpuIsEverOverdrawn) {
  NodeInfo info = MakeNode("10.0.0.1", 1);
  info.total["GPU"] = 1;
  NodeId id = table_.Register(info, kT0, 0);
  ASSERT_TRUE(table_.TryAcquire(id, {{"CPU", 1}, {"GPU", 1}}));
  // A rejoining node's live worker: its CPU may be overdrawn, its GPU never.
  EXPECT_FALSE(table_.AcquireExact(id, {{"CPU", 1}, {"GPU", 1}}, {0}, /*overdraw_cpu=*/true));
  EXPECT_EQ(Overdrawn(id), 0) << "a refused acquisition takes nothing";
  EXPECT_TRUE(table_.AcquireExact(id, {{"CPU", 1}}, {}, /*overdraw_cpu=*/true));
  EXPECT_EQ(Overdrawn(id), 1);
  EXPECT_FALSE(table_.AcquireExact(id, {{"CPU", 1}}, {}));
  ExpectViewAgrees(id);
}

TEST_F(NodeTableLending, ADeadNodesBooksGoWithIt) {
  NodeId id = table_.Register(MakeNode("10.0.0.1", 1), kT0, 0);
  ASSERT_TRUE(table_.TryAcquire(id, {{"CPU", 1}}));
  table_.ReclaimCpu(id, 1);
  ASSERT_TRUE(table_.MarkDead(id, "gone"));
  table_.Release(id, {{"CPU", 1}});  // no-ops now
  table_.LendCpu(id, 1);
  table_.ReclaimCpu(id, 1);
  EXPECT_EQ(table_.FindAlive(id), nullptr);
  EXPECT_TRUE(table_.view().TEST_CheckInvariants().ok());
}

}  // namespace node_table_test
}  // namespace rayx::scheduler
