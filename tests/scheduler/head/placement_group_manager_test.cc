// PlacementGroupManager driven call by call with a real NodeTable and a recording outbox.
#include "head/placement_group_manager.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "head/node_table.h"
#include "policy/composite_bundle_policy.h"
#include "recording_outbox.h"

namespace rayx::scheduler {
namespace placement_group_manager_test {  // this file's own (unit tests compile in batches)

using Kind = RecordingOutbox::Kind;
using State = protocol::PlacementGroupState;
using Strategy = protocol::PlacementStrategy;
constexpr int64_t kT0 = 10'000;

class PlacementGroupManagerTest : public ::testing::Test {
 protected:
  // No wait is left unanswered when the test ends.
  void TearDown() override {
    groups_.ExpireWaits(kT0 + 1'000'000);
    for (const auto& r : outbox_.Take()) {
      ADD_FAILURE() << "a wait was still parked at the end: request " << r.request_id;
    }
  }

  NodeId AddNode(ResourceMap total) {
    NodeInfo info;
    info.address = "10.0.0." + std::to_string(++nodes_added_);
    info.total = std::move(total);
    return nodes_.Register(info, kT0, 0);
  }

  protocol::PlacementGroupInfo Create(std::vector<ResourceMap> bundles,
                                      Strategy strategy = Strategy::kPack) {
    protocol::CreatePlacementGroupRequest req;
    req.job_id = JobId::FromWire("job-1");
    req.strategy = strategy;
    req.bundles = std::move(bundles);
    auto group = groups_.Create(req);
    EXPECT_TRUE(group.ok()) << group.status();
    return group.ok() ? *group : protocol::PlacementGroupInfo{};
  }

  // Takes exactly one record, which must be a wait answer to `request_id`.
  protocol::PlacementGroupInfo TakeWaitAnswer(uint64_t request_id) {
    auto records = outbox_.Take();
    EXPECT_EQ(records.size(), 1u);
    if (records.size() != 1) return {};
    EXPECT_EQ(records[0].kind, Kind::kPlacementGroupWaitDone);
    EXPECT_EQ(records[0].peer, "driver");
    EXPECT_EQ(records[0].request_id, request_id);
    return records[0].group_wait.group;
  }

  NodeTable nodes_{NodeTable::Options{}};
  RecordingOutbox outbox_;
  PlacementGroupManager groups_{nodes_, outbox_};
  int nodes_added_ = 0;
};

TEST_F(PlacementGroupManagerTest, GroupThatFitsIsCreatedAndWaitIsAnsweredAtOnce) {
  NodeId node = AddNode({{"CPU", 4}});
  auto group = Create({{{"CPU", 1}}, {{"CPU", 2}}});
  EXPECT_EQ(group.state, State::kCreated);
  ASSERT_EQ(group.locations.size(), 2u);
  EXPECT_EQ(group.locations[0].node_id, node.Hex());
  groups_.Wait("driver", 5, group.placement_group_id, 1000, kT0);
  EXPECT_EQ(TakeWaitAnswer(5).state, State::kCreated);
}

TEST_F(PlacementGroupManagerTest, PendingGroupWaitIsAnsweredWhenResourcesFree) {
  NodeId node = AddNode({{"CPU", 2}});
  auto first = Create({{{"CPU", 2}}});
  ASSERT_EQ(first.state, State::kCreated);
  auto second = Create({{{"CPU", 2}}});
  EXPECT_EQ(second.state, State::kPending);
  groups_.Wait("driver", 6, second.placement_group_id, 5000, kT0);
  EXPECT_TRUE(outbox_.Take().empty());
  ASSERT_TRUE(groups_.Remove(first.placement_group_id));
  groups_.SchedulePending();
  auto answered = TakeWaitAnswer(6);
  EXPECT_EQ(answered.state, State::kCreated);
  EXPECT_EQ(answered.locations.at(0).node_id, node.Hex());
}

TEST_F(PlacementGroupManagerTest, PendingGroupWaitTimesOutWithTheReason) {
  AddNode({{"CPU", 1}});
  ASSERT_EQ(Create({{{"CPU", 1}}}).state, State::kCreated);
  auto waiting = Create({{{"CPU", 1}}});
  ASSERT_EQ(waiting.state, State::kPending);
  groups_.Wait("driver", 7, waiting.placement_group_id, 500, kT0);
  groups_.ExpireWaits(kT0 + 499);
  EXPECT_TRUE(outbox_.Take().empty());
  groups_.ExpireWaits(kT0 + 500);
  auto answered = TakeWaitAnswer(7);
  EXPECT_EQ(answered.state, State::kPending);
  EXPECT_FALSE(answered.reason.empty());
}

// A peer's "forever" (INT64_MAX) is a day, not an overflow into the past.
TEST_F(PlacementGroupManagerTest, AHugeWaitTimeoutWaitsADayRatherThanOverflowing) {
  AddNode({{"CPU", 1}});
  ASSERT_EQ(Create({{{"CPU", 1}}}).state, State::kCreated);
  auto waiting = Create({{{"CPU", 1}}});
  groups_.Wait("driver", 14, waiting.placement_group_id, INT64_MAX, kT0);
  groups_.ExpireWaits(kT0 + 3600 * 1000);
  EXPECT_TRUE(outbox_.Take().empty()) << "a wait without end expired at once";
  groups_.ExpireWaits(kT0 + 24 * 3600 * 1000);
  EXPECT_EQ(TakeWaitAnswer(14).state, State::kPending);
}

TEST_F(PlacementGroupManagerTest, InfeasibleGroupIsAnsweredAtOnceWithTheReason) {
  AddNode({{"CPU", 2}});
  auto group = Create({{{"CPU", 8}}});
  EXPECT_EQ(group.state, State::kInfeasible);
  groups_.Wait("driver", 8, group.placement_group_id, 5000, kT0);
  auto answered = TakeWaitAnswer(8);
  EXPECT_EQ(answered.state, State::kInfeasible);
  EXPECT_FALSE(answered.reason.empty());
}

TEST_F(PlacementGroupManagerTest, WaitForUnknownGroupFailsWithNotFound) {
  groups_.Wait("driver", 9, PlacementGroupId::FromWire("no-such-group"), 1000, kT0);
  auto records = outbox_.Take();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].kind, Kind::kFail);
  EXPECT_EQ(records[0].request_id, 9u);
  EXPECT_EQ(records[0].status.code(), StatusCode::kNotFound);
}

TEST_F(PlacementGroupManagerTest, UnknownStrategyIsInvalidArgument) {
  AddNode({{"CPU", 2}});
  protocol::CreatePlacementGroupRequest req;
  req.job_id = JobId::FromWire("job-1");
  req.strategy = static_cast<Strategy>(9);  // what decoding would refuse
  req.bundles = {{{"CPU", 1}}};
  EXPECT_EQ(groups_.Create(req).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(groups_.size(), 0u);
}

// ---- Why a group waits: the policy's decision, word for word -------------------------------

TEST_F(PlacementGroupManagerTest, ABundleNoNodeCouldHoldIsInfeasibleWithThePolicysReason) {
  AddNode({{"CPU", 2}});
  AddNode({{"CPU", 4}});
  auto group = Create({{{"CPU", 1}}, {{"CPU", 8}}});
  EXPECT_EQ(group.state, State::kInfeasible);
  EXPECT_EQ(
      group.reason,
      "bundle 1 needs {CPU: 8} on one node; the largest alive node has CPU 4 (2 alive nodes)");
  std::map<std::string, int> pending;
  std::map<std::string, std::string> infeasible;
  groups_.AddDemands(&pending, &infeasible);
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(infeasible, (std::map<std::string, std::string>{
                            {"placement group PACK [{CPU: 1}, {CPU: 8}]", group.reason}}));
}

TEST_F(PlacementGroupManagerTest, AStrictPackGroupLargerThanEveryNodeIsInfeasible) {
  AddNode({{"CPU", 4}});
  auto group = Create({{{"CPU", 3}}, {{"CPU", 3}}}, Strategy::kStrictPack);
  EXPECT_EQ(group.state, State::kInfeasible);
  EXPECT_EQ(group.reason,
            "STRICT_PACK needs {CPU: 6} on one node; the largest alive node has CPU 4 (1 alive "
            "node)");
}

TEST_F(PlacementGroupManagerTest, AGroupWithoutNodesIsInfeasible) {
  auto group = Create({{{"CPU", 1}}});
  EXPECT_EQ(group.state, State::kInfeasible);
  EXPECT_EQ(group.reason, "bundle 0 needs {CPU: 1} on one node; the cluster has no alive nodes");
}

// Ray keeps a group that needs more nodes than the cluster has pending: a node
// may join. Only a bundle no node could hold makes a group infeasible.
TEST_F(PlacementGroupManagerTest, StrictSpreadWithTooFewNodesWaitsForANodeToJoin) {
  AddNode({{"CPU", 2}});
  AddNode({{"CPU", 2}});
  auto group = Create({{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}}, Strategy::kStrictSpread);
  EXPECT_EQ(group.state, State::kPending);
  EXPECT_EQ(group.reason,
            "STRICT_SPREAD needs 3 distinct nodes that can each hold {CPU: 1}; the cluster has 2: "
            "waiting for more nodes to join");
  groups_.Wait("driver", 11, group.placement_group_id, 5000, kT0);
  EXPECT_TRUE(outbox_.Take().empty()) << "a pending group's wait is parked";
  AddNode({{"CPU", 2}});
  groups_.SchedulePending();
  EXPECT_EQ(TakeWaitAnswer(11).state, State::kCreated);
}

TEST_F(PlacementGroupManagerTest, PackNeedingMoreThanTheClusterHasInAllWaitsForNodes) {
  AddNode({{"CPU", 8}, {"GPU", 4}});
  auto group = Create({{{"GPU", 4}}, {{"GPU", 4}}});
  EXPECT_EQ(group.state, State::kPending);
  EXPECT_EQ(group.reason,
            "needs {GPU: 8} in all; the alive nodes have GPU 4 in all (1 alive node): waiting for "
            "more nodes to join");
}

TEST_F(PlacementGroupManagerTest, ABusyGroupIsPendingWithThePolicysReason) {
  NodeId node = AddNode({{"CPU", 2}});
  ASSERT_EQ(Create({{{"CPU", 2}}}).state, State::kCreated);
  auto waiting = Create({{{"CPU", 2}}});
  EXPECT_EQ(waiting.state, State::kPending);
  const std::string named = "node 10.0.0.1 (" + node.Short() + ")";
  const std::string busy =
      "bundle 0 {CPU: 2} finds no node with room beside the bundles placed before it; " + named +
      " has none of it free; the group waits until resources are released or a node joins";
  EXPECT_EQ(waiting.reason, busy);
  groups_.Wait("driver", 12, waiting.placement_group_id, 0, kT0);
  auto answered = TakeWaitAnswer(12);
  EXPECT_EQ(answered.state, State::kPending);
  EXPECT_EQ(answered.reason, busy);
  auto strict = Create({{{"CPU", 1}}, {{"CPU", 1}}}, Strategy::kStrictPack);
  EXPECT_EQ(strict.state, State::kPending);
  EXPECT_EQ(strict.reason, "STRICT_PACK needs {CPU: 2} free on one node; " + named +
                               " has none of it free; the group waits until resources are "
                               "released or a node joins");
  std::map<std::string, int> pending;
  std::map<std::string, std::string> infeasible;
  groups_.AddDemands(&pending, &infeasible);
  EXPECT_EQ(pending,
            (std::map<std::string, int>{{"placement group PACK [{CPU: 2} x 1]", 1},
                                        {"placement group STRICT_PACK [{CPU: 1} x 2]", 1}}));
  EXPECT_TRUE(infeasible.empty());
}

// One source of truth: whatever the group, its state and reason are exactly
// what the policy library decides on the same view.
TEST_F(PlacementGroupManagerTest, StateAndReasonAreThePolicysDecision) {
  AddNode({{"CPU", 4}, {"GPU", 2}});
  AddNode({{"CPU", 2}});
  ASSERT_EQ(Create({{{"CPU", 3}}}).state, State::kCreated);
  using PolicyStrategy = policy::PlacementStrategy;
  struct Case {
    std::vector<ResourceMap> bundles;
    Strategy strategy;
    PolicyStrategy same;
  };
  const std::vector<Case> cases = {
      {{{{"GPU", 4}}}, Strategy::kPack, PolicyStrategy::kPack},
      {{{{"CPU", 2}}, {{"CPU", 2}}}, Strategy::kPack, PolicyStrategy::kPack},
      {{{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}}, Strategy::kStrictSpread,
       PolicyStrategy::kStrictSpread},
      {{{{"GPU", 0.6}}, {{"GPU", 0.6}}, {{"GPU", 0.6}}}, Strategy::kStrictPack,
       PolicyStrategy::kStrictPack},
      {{{{"tpu", 1}}}, Strategy::kSpread, PolicyStrategy::kSpread},
  };
  for (const auto& [bundles, strategy, same] : cases) {
    policy::PlacementGroupRequest request;
    request.bundles = bundles;
    request.strategy = same;
    policy::CompositeBundlePolicy policy;
    policy::GroupDecision decision = policy.Schedule(nodes_.view(), request);
    ASSERT_FALSE(std::holds_alternative<policy::GroupScheduled>(decision));
    auto group = Create(bundles, strategy);
    if (const auto* infeasible = std::get_if<policy::Infeasible>(&decision)) {
      EXPECT_EQ(group.state, State::kInfeasible) << infeasible->reason;
      EXPECT_EQ(group.reason, infeasible->reason);
    } else {
      EXPECT_EQ(group.state, State::kPending);
      EXPECT_EQ(group.reason, std::get<policy::Pending>(decision).reason);
    }
  }
}

// The classification is asked again when a wait is answered: the only node
// that could hold the group died.
TEST_F(PlacementGroupManagerTest, AWaitAnswersWithTheClassificationOfNow) {
  NodeId big = AddNode({{"CPU", 8}});
  AddNode({{"CPU", 2}});
  ASSERT_EQ(Create({{{"CPU", 8}}}).state, State::kCreated);
  auto waiting = Create({{{"CPU", 4}}});
  ASSERT_EQ(waiting.state, State::kPending);
  groups_.Wait("driver", 13, waiting.placement_group_id, 500, kT0);
  ASSERT_TRUE(nodes_.MarkDead(big, "test"));
  groups_.OnNodeDead(big);
  groups_.ExpireWaits(kT0 + 500);
  auto answered = TakeWaitAnswer(13);
  EXPECT_EQ(answered.state, State::kInfeasible);
  EXPECT_EQ(answered.reason,
            "bundle 0 needs {CPU: 4} on one node; the largest alive node has CPU 2 (1 alive node)");
}

TEST_F(PlacementGroupManagerTest, ALeaseLargerThanItsBundleIsInfeasible) {
  AddNode({{"CPU", 4}});
  auto group = Create({{{"CPU", 1}}, {{"CPU", 2}}});
  ASSERT_EQ(group.state, State::kCreated);
  auto too_big = groups_.TryAcquire(group.placement_group_id, 0, {{"CPU", 2}});
  EXPECT_EQ(too_big.status().code(), StatusCode::kInfeasible) << too_big.status();
  auto nowhere = groups_.TryAcquire(group.placement_group_id, -1, {{"CPU", 3}});
  EXPECT_EQ(nowhere.status().code(), StatusCode::kInfeasible) << nowhere.status();
  EXPECT_EQ(groups_.TryAcquire(group.placement_group_id, 2, {{"CPU", 1}}).status().code(),
            StatusCode::kInvalidArgument)
      << "no bundle 2";
  auto fits = groups_.TryAcquire(group.placement_group_id, -1, {{"CPU", 2}});
  ASSERT_TRUE(fits.ok() && fits->has_value());
  EXPECT_EQ((*fits)->bundle_index, 1);
  groups_.Release(group.placement_group_id, 1, {{"CPU", 2}}, {});
  EXPECT_TRUE(groups_.Remove(group.placement_group_id));
}

// ---- A node dies ------------------------------------------------------------------------

// Only the lost bundles are placed again: the bundles on surviving nodes keep
// their reservations, their devices and the leases running in them.
TEST_F(PlacementGroupManagerTest, ANodeDeathReplacesOnlyTheBundlesItHeld) {
  NodeId a = AddNode({{"CPU", 4}, {"GPU", 2}});
  NodeId b = AddNode({{"CPU", 4}, {"GPU", 2}});
  auto group = Create({{{"GPU", 1}}, {{"GPU", 1}}, {{"GPU", 1}}}, Strategy::kSpread);
  ASSERT_EQ(group.state, State::kCreated);
  const PlacementGroupId id = group.placement_group_id;
  // A lease runs in every bundle.
  std::vector<PlacementGroupManager::BundleGrant> leases;
  for (int32_t i = 0; i < 3; ++i) {
    auto grant = groups_.TryAcquire(id, i, {{"GPU", 1}});
    ASSERT_TRUE(grant.ok() && grant->has_value());
    leases.push_back(**grant);
  }
  // The node holding fewer bundles dies (SPREAD: one node has two, one has one).
  size_t on_a = 0;
  for (const auto& l : leases) on_a += l.node == a;
  NodeId dying = on_a == 1 ? a : b;
  NodeId surviving = dying == a ? b : a;
  std::vector<PlacementGroupManager::BundleGrant> kept;
  for (const auto& l : leases) {
    if (l.node == surviving) kept.push_back(l);
  }
  ASSERT_EQ(kept.size(), 2u);
  double free_before = nodes_.FindAlive(surviving)->available.at("GPU");
  ASSERT_TRUE(nodes_.MarkDead(dying, "test"));
  groups_.OnNodeDead(dying);
  const auto* info = groups_.Find(id);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->state, State::kPending);
  EXPECT_NE(info->reason.find("the other bundles keep theirs"), std::string::npos) << info->reason;
  // The survivors' reservations were not given back to the node.
  EXPECT_EQ(nodes_.FindAlive(surviving)->available.at("GPU"), free_before);
  // Their leases still hold their bundles: no second lease fits in them.
  for (const auto& l : kept) {
    auto again = groups_.TryAcquire(id, l.bundle_index, {{"GPU", 1}});
    ASSERT_TRUE(again.ok());
    EXPECT_FALSE(again->has_value()) << "bundle " << l.bundle_index << " was freed";
  }
  // A new node: only the lost bundle goes there; the others stay where they were.
  NodeId c = AddNode({{"CPU", 4}, {"GPU", 2}});
  groups_.SchedulePending();
  info = groups_.Find(id);
  ASSERT_EQ(info->state, State::kCreated);
  for (const auto& l : kept) {
    EXPECT_EQ(info->locations[static_cast<size_t>(l.bundle_index)].node_id, surviving.Hex());
    EXPECT_EQ(info->locations[static_cast<size_t>(l.bundle_index)].gpu_ids, l.gpu_ids);
  }
  size_t on_c = 0;
  for (const auto& loc : info->locations) on_c += loc.node_id == c.Hex();
  EXPECT_EQ(on_c, 1u);
  EXPECT_EQ(nodes_.FindAlive(c)->available.at("GPU"), 1);
  // The surviving leases end normally into their bundles.
  for (const auto& l : kept) groups_.Release(id, l.bundle_index, {{"GPU", 1}}, l.gpu_ids);
  EXPECT_TRUE(groups_.Remove(id));
  EXPECT_EQ(nodes_.FindAlive(surviving)->available.at("GPU"), 2);
  EXPECT_EQ(nodes_.FindAlive(c)->available.at("GPU"), 2);
}

TEST_F(PlacementGroupManagerTest, LostStrictSpreadBundlesAvoidTheSurvivorsNodes) {
  NodeId a = AddNode({{"CPU", 2}});
  NodeId b = AddNode({{"CPU", 2}});
  auto group = Create({{{"CPU", 1}}, {{"CPU", 1}}}, Strategy::kStrictSpread);
  ASSERT_EQ(group.state, State::kCreated);
  ASSERT_TRUE(nodes_.MarkDead(b, "test"));
  groups_.OnNodeDead(b);
  // a has room, but already holds a bundle of the group.
  groups_.SchedulePending();
  EXPECT_EQ(groups_.Find(group.placement_group_id)->state, State::kPending);
  NodeId c = AddNode({{"CPU", 2}});
  groups_.SchedulePending();
  const auto* info = groups_.Find(group.placement_group_id);
  ASSERT_EQ(info->state, State::kCreated);
  std::set<std::string> where = {info->locations[0].node_id, info->locations[1].node_id};
  EXPECT_EQ(where, (std::set<std::string>{a.Hex(), c.Hex()}));
  EXPECT_TRUE(groups_.Remove(group.placement_group_id));
}

TEST_F(PlacementGroupManagerTest, AGroupThatLostEveryBundleIsPlacedAgainWhole) {
  NodeId a = AddNode({{"CPU", 2}});
  auto group = Create({{{"CPU", 1}}, {{"CPU", 1}}}, Strategy::kStrictPack);
  ASSERT_EQ(group.state, State::kCreated);
  groups_.Wait("driver", 9, group.placement_group_id, 100000, kT0);
  EXPECT_EQ(TakeWaitAnswer(9).state, State::kCreated);
  ASSERT_TRUE(nodes_.MarkDead(a, "test"));
  groups_.OnNodeDead(a);
  groups_.Wait("driver", 10, group.placement_group_id, 100000, kT0);
  EXPECT_TRUE(outbox_.Take().empty()) << "a group being placed again waits";
  NodeId b = AddNode({{"CPU", 2}});
  groups_.SchedulePending();
  auto placed = TakeWaitAnswer(10);
  EXPECT_EQ(placed.state, State::kCreated);
  EXPECT_EQ(placed.locations[0].node_id, b.Hex());
  EXPECT_EQ(placed.locations[1].node_id, b.Hex());
  EXPECT_TRUE(groups_.Remove(group.placement_group_id));
}

}  // namespace
}  // namespace rayx::scheduler
