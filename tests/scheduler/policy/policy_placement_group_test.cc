// Placement group policies: STRICT_PACK, STRICT_SPREAD, PACK and SPREAD, their
// GPU device planning across bundles, reasons, and all-or-nothing commits.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "policy/composite_bundle_policy.h"
#include "policy_fixture.h"

namespace rayx::scheduler::policy {
namespace policy_placement_group_test {  // this file's own (unit tests compile in batches)

using testing::InfeasibleReason;
using testing::PendingReason;
using testing::PolicyTest;
using testing::ScheduledOf;

class PlacementGroupTest : public PolicyTest {
 protected:
  static std::vector<ResourceMap> Bundles(int n, const ResourceMap& each) {
    return std::vector<ResourceMap>(static_cast<size_t>(n), each);
  }
  static std::vector<NodeId> NodesOf(const GroupScheduled& g) {
    std::vector<NodeId> out;
    for (const Scheduled& s : g.bundles) out.push_back(s.node);
    return out;
  }
  static std::set<NodeId> DistinctNodes(const GroupScheduled& g) {
    std::vector<NodeId> nodes = NodesOf(g);
    return std::set<NodeId>(nodes.begin(), nodes.end());
  }
};

// Lost bundles of a group whose other bundles survive a node's death: the
// policy places them with the survivors as constraints.

TEST_F(PlacementGroupTest, LostStrictPackBundlesGoOnlyToTheSurvivorsNode) {
  NodeId roomy = MakeNode(16);
  NodeId survivors = MakeNode(4, 2);
  auto request = MakeGroup(Bundles(2, {{"CPU", 1}, {"GPU", 1}}), PlacementStrategy::kStrictPack);
  request.only_node = survivors;
  GroupScheduled g = PlaceGroup(request);
  EXPECT_EQ(NodesOf(g), (std::vector<NodeId>(2, survivors)));
  EXPECT_EQ(g.bundles[0].gpu_ids.size() + g.bundles[1].gpu_ids.size(), 2u);
  EXPECT_NE(g.bundles[0].gpu_ids, g.bundles[1].gpu_ids);
  // 2 CPUs left there: 3 more wait for that node, though another has room.
  auto anywhere = DecideGroup(MakeGroup(Bundles(1, {{"CPU", 3}}), PlacementStrategy::kStrictPack));
  ASSERT_TRUE(std::holds_alternative<GroupScheduled>(anywhere));
  EXPECT_EQ(std::get<GroupScheduled>(anywhere).bundles[0].node, roomy);
  auto held = MakeGroup(Bundles(1, {{"CPU", 3}}), PlacementStrategy::kStrictPack);
  held.only_node = survivors;
  EXPECT_NE(PendingReason(DecideGroup(held)).find("free on the node its other bundles are on"),
            std::string::npos);
}

TEST_F(PlacementGroupTest, LostStrictSpreadBundlesAvoidTheSurvivorsNodes) {
  NodeId a = MakeNode(4);
  NodeId b = MakeNode(4);
  NodeId c = MakeNode(4);
  auto request = MakeGroup(Bundles(2, {{"CPU", 1}}), PlacementStrategy::kStrictSpread);
  request.avoid_nodes = {a};
  GroupScheduled g = PlaceGroup(request);
  EXPECT_EQ(DistinctNodes(g), (std::set<NodeId>{b, c}));
  // Only two nodes left once two are avoided: one bundle has nowhere to go.
  auto more = MakeGroup(Bundles(2, {{"CPU", 1}}), PlacementStrategy::kStrictSpread);
  more.avoid_nodes = {a, b};
  EXPECT_FALSE(std::holds_alternative<GroupScheduled>(DecideGroup(more)));
}

// STRICT_PACK

TEST_F(PlacementGroupTest, StrictPackPutsEveryBundleOnOneNode) {
  MakeNode(4);
  NodeId big = MakeNode(16);
  GroupScheduled g =
      PlaceGroup(MakeGroup(Bundles(4, {{"CPU", 2}}), PlacementStrategy::kStrictPack));
  EXPECT_EQ(NodesOf(g), (std::vector<NodeId>(4, big)));
  EXPECT_EQ(g.demands, Bundles(4, {{"CPU", 2}}));
  EXPECT_EQ(Available(big, "CPU"), 8);
}

TEST_F(PlacementGroupTest, StrictPackGivesEachBundleItsOwnDevices) {
  NodeId a = MakeNode(8, 4);
  GroupScheduled g =
      PlaceGroup(MakeGroup({{{"GPU", 1}}, {{"GPU", 2}}, {{"GPU", 0.5}}, {{"GPU", 0.25}}},
                           PlacementStrategy::kStrictPack));
  ASSERT_EQ(g.bundles.size(), 4u);
  // Largest first: 2 GPUs on devices 0,1; 1 GPU on 2; the shares pack on 3.
  EXPECT_EQ(g.bundles[1].gpu_ids, (std::vector<int>{0, 1}));
  EXPECT_EQ(g.bundles[0].gpu_ids, std::vector<int>{2});
  EXPECT_EQ(g.bundles[2].gpu_ids, std::vector<int>{3});
  EXPECT_EQ(g.bundles[3].gpu_ids, std::vector<int>{3});
  EXPECT_EQ(GpuFree(a), (std::vector<double>{0, 0, 0, 0.25}));
}

TEST_F(PlacementGroupTest, StrictPackIsPendingWhileNoNodeHasRoomForAll) {
  NodeId a = MakeNode(8);
  NodeId b = MakeNode(8);
  ASSERT_TRUE(view_.Acquire(a, {{"CPU", 4}}, {}));
  ASSERT_TRUE(view_.Acquire(b, {{"CPU", 4}}, {}));
  auto group = MakeGroup(Bundles(3, {{"CPU", 2}}), PlacementStrategy::kStrictPack);
  EXPECT_EQ(PendingReason(DecideGroup(group)),
            "STRICT_PACK needs {CPU: 6} free on one node; node 00000000 has {CPU: 4} free; node "
            "00000001 has {CPU: 4} free; the group waits until resources are released or a node "
            "joins");
  view_.Release(b, {{"CPU", 4}}, {});
  EXPECT_EQ(NodesOf(ScheduledOf(DecideGroup(group))), (std::vector<NodeId>(3, b)));
}

TEST_F(PlacementGroupTest, StrictPackIsInfeasibleWhenNoNodeIsBigEnough) {
  MakeNode(8, 4);
  MakeNode(8, 4);
  EXPECT_EQ(InfeasibleReason(DecideGroup(
                MakeGroup(Bundles(2, {{"CPU", 1}, {"GPU", 4}}), PlacementStrategy::kStrictPack))),
            "STRICT_PACK needs {GPU: 8} on one node; the largest alive node has GPU 4 (2 alive "
            "nodes)");
}

TEST_F(PlacementGroupTest, StrictPackIsInfeasibleWhenSharesCannotShareDevices) {
  MakeNode(8, 2);
  // 1.8 GPU in all fits the total of 2, but each 0.6 share needs its own device.
  EXPECT_EQ(InfeasibleReason(
                DecideGroup(MakeGroup(Bundles(3, {{"GPU", 0.6}}), PlacementStrategy::kStrictPack))),
            "STRICT_PACK needs {GPU: 1.8} on one node, with each bundle's GPUs on its own "
            "devices; no node's GPU devices can hold the bundles' GPU requests together (a share "
            "never spans two devices) (1 alive node)");
  EXPECT_TRUE(std::holds_alternative<GroupScheduled>(
      DecideGroup(MakeGroup(Bundles(3, {{"GPU", 0.5}}), PlacementStrategy::kStrictPack))));
}

// STRICT_SPREAD

TEST_F(PlacementGroupTest, StrictSpreadPutsEveryBundleOnADifferentNode) {
  for (int i = 0; i < 4; ++i) MakeNode(8, 1);
  GroupScheduled g =
      PlaceGroup(MakeGroup(Bundles(4, {{"CPU", 1}, {"GPU", 1}}), PlacementStrategy::kStrictSpread));
  EXPECT_EQ(DistinctNodes(g).size(), 4u);
  for (const Scheduled& s : g.bundles) EXPECT_EQ(s.gpu_ids, std::vector<int>{0});
}

// Ray keeps such a group pending: a node may join.
TEST_F(PlacementGroupTest, StrictSpreadWaitsForNodesWithFewerNodesThanBundles) {
  MakeNode(8);
  MakeNode(8);
  MakeNode(1);
  EXPECT_EQ(PendingReason(
                DecideGroup(MakeGroup(Bundles(3, {{"CPU", 2}}), PlacementStrategy::kStrictSpread))),
            "STRICT_SPREAD needs 3 distinct nodes that can each hold {CPU: 2}; the cluster has 2: "
            "waiting for more nodes to join");
  EXPECT_EQ(PendingReason(
                DecideGroup(MakeGroup(Bundles(4, {{"CPU", 1}}), PlacementStrategy::kStrictSpread))),
            "STRICT_SPREAD needs 4 distinct nodes that can each hold {CPU: 1}; the cluster has 3: "
            "waiting for more nodes to join");
  EXPECT_EQ(
      PendingReason(DecideGroup(MakeGroup({{{"CPU", 2}}, {{"CPU", 2}}, {{"CPU", 1}}, {{"CPU", 1}}},
                                          PlacementStrategy::kStrictSpread))),
      "STRICT_SPREAD needs 4 distinct nodes that can each hold its bundle; the cluster has 3: "
      "waiting for more nodes to join");
}

TEST_F(PlacementGroupTest, StrictSpreadIsInfeasibleWhenABundleFitsNoNode) {
  MakeNode(8);
  MakeNode(8);
  EXPECT_EQ(InfeasibleReason(DecideGroup(MakeGroup({{{"CPU", 1}}, {{"CPU", 1}, {"GPU", 1}}},
                                                   PlacementStrategy::kStrictSpread))),
            "bundle 1 needs {GPU: 1} on one node; the largest alive node has GPU 0 (2 alive "
            "nodes)");
}

TEST_F(PlacementGroupTest, StrictSpreadIsPendingWhenTheNodesExistButAreBusy) {
  NodeId a = MakeNode(4);
  NodeId b = MakeNode(4);
  MakeNode(4);
  ASSERT_TRUE(view_.Acquire(a, {{"CPU", 4}}, {}));
  auto group = MakeGroup(Bundles(3, {{"CPU", 2}}), PlacementStrategy::kStrictSpread);
  EXPECT_EQ(PendingReason(DecideGroup(group)),
            "STRICT_SPREAD needs 3 distinct nodes, each with its bundle's resources free; only 2 "
            "bundles can be placed on distinct nodes now; node 00000000 has none of it free; node "
            "00000001 has {CPU: 4} free; node 00000002 has {CPU: 4} free; the group waits until "
            "resources are released or a node joins");
  view_.Release(a, {{"CPU", 4}}, {});
  EXPECT_EQ(DistinctNodes(PlaceGroup(group)).size(), 3u);
  EXPECT_EQ(Available(b, "CPU"), 2);
}

TEST_F(PlacementGroupTest, StrictSpreadFindsAnAssignmentAGreedyPassWouldMiss) {
  // Bundle 0 (2 CPUs, placed first as the larger) fits a and b and prefers a,
  // the first registered; bundle 1 needs `tag`, which only a has. A greedy pass
  // strands bundle 1; the matching moves bundle 0 to b.
  NodeId a = MakeNode(4, 0, {}, {{"tag", 1}});
  NodeId b = MakeNode(2);
  GroupScheduled g = PlaceGroup(
      MakeGroup({{{"CPU", 2}}, {{"CPU", 1}, {"tag", 1}}}, PlacementStrategy::kStrictSpread));
  EXPECT_EQ(NodesOf(g), (std::vector<NodeId>{b, a}));
}

TEST_F(PlacementGroupTest, StrictSpreadHonoursTheLabelSelector) {
  MakeNode(8, 0, {{"zone", "a"}});
  MakeNode(8, 0, {{"zone", "b"}});
  MakeNode(8, 0, {{"zone", "a"}});
  auto group =
      MakeGroup(Bundles(2, {{"CPU", 1}}), PlacementStrategy::kStrictSpread, {{"zone", "a"}});
  GroupScheduled g = PlaceGroup(group);
  for (const Scheduled& s : g.bundles) EXPECT_EQ(view_.Find(s.node)->labels.at("zone"), "a");
  EXPECT_EQ(DistinctNodes(g).size(), 2u);
  EXPECT_EQ(PendingReason(DecideGroup(MakeGroup(
                Bundles(3, {{"CPU", 1}}), PlacementStrategy::kStrictSpread, {{"zone", "a"}}))),
            "STRICT_SPREAD needs 3 distinct nodes with labels {zone=a} that can each hold {CPU: "
            "1}; the cluster has 2: waiting for more nodes to join");
}

// PACK

TEST_F(PlacementGroupTest, PackUsesOneNodeWhenOneCanHoldEverything) {
  NodeId a = MakeNode(8, 4);
  MakeNode(8, 4);
  GroupScheduled g =
      PlaceGroup(MakeGroup(Bundles(4, {{"CPU", 2}, {"GPU", 1}}), PlacementStrategy::kPack));
  EXPECT_EQ(NodesOf(g), (std::vector<NodeId>(4, a)));
  std::set<int> devices;
  for (const Scheduled& s : g.bundles) devices.insert(s.gpu_ids.at(0));
  EXPECT_EQ(devices, (std::set<int>{0, 1, 2, 3})) << "four bundles, four devices";
}

TEST_F(PlacementGroupTest, PackFillsAUsedNodeBeforeTakingAnother) {
  NodeId a = MakeNode(4);
  NodeId b = MakeNode(4);
  MakeNode(4);
  GroupScheduled g = PlaceGroup(MakeGroup(Bundles(6, {{"CPU", 1}}), PlacementStrategy::kPack));
  EXPECT_EQ(NodesOf(g), (std::vector<NodeId>{a, a, a, a, b, b}));
}

TEST_F(PlacementGroupTest, PackTwoGpuBundlesOnOneNodeGetDistinctDevices) {
  NodeId a = MakeNode(8, 2);
  NodeId b = MakeNode(8, 2);
  ASSERT_TRUE(view_.Acquire(a, {{"GPU", 1}}, {0}));
  // Three 1-GPU bundles: a has one free device, b two; none holds all three.
  GroupScheduled g = PlaceGroup(MakeGroup(Bundles(3, {{"GPU", 1}}), PlacementStrategy::kPack));
  std::set<std::pair<NodeId, int>> devices;
  for (const Scheduled& s : g.bundles) devices.insert({s.node, s.gpu_ids.at(0)});
  EXPECT_EQ(devices.size(), 3u) << "no device used twice";
  EXPECT_EQ(GpuFree(a), (std::vector<double>{0, 0}));
  EXPECT_EQ(GpuFree(b), (std::vector<double>{0, 0}));
}

TEST_F(PlacementGroupTest, PackIsPendingWhenTheBundlesDoNotFitNow) {
  NodeId a = MakeNode(4);
  ASSERT_TRUE(view_.Acquire(a, {{"CPU", 3}}, {}));
  EXPECT_EQ(
      PendingReason(DecideGroup(MakeGroup(Bundles(2, {{"CPU", 1}}), PlacementStrategy::kPack))),
      "bundle 1 {CPU: 1} finds no node with room beside the bundles placed before it; node "
      "00000000 has {CPU: 1} free; the group waits until resources are released or a node joins");
}

TEST_F(PlacementGroupTest, PackIsInfeasibleWhenABundleFitsNoNode) {
  MakeNode(4);
  EXPECT_EQ(InfeasibleReason(
                DecideGroup(MakeGroup({{{"CPU", 1}}, {{"CPU", 8}}}, PlacementStrategy::kPack))),
            "bundle 1 needs {CPU: 8} on one node; the largest alive node has "
            "CPU 4 (1 alive node)");
}

// Not infeasible: each bundle fits some node, and a node may join.
TEST_F(PlacementGroupTest, PackWaitsForNodesWhenTheClusterHasTooLittleInAll) {
  MakeNode(8, 4);
  MakeNode(8);
  EXPECT_EQ(
      PendingReason(
          DecideGroup(MakeGroup(Bundles(2, {{"CPU", 1}, {"GPU", 4}}), PlacementStrategy::kPack))),
      "needs {GPU: 8} in all; the alive nodes have GPU 4 in all (2 alive nodes): waiting for more "
      "nodes to join");
}

// SPREAD

TEST_F(PlacementGroupTest, SpreadUsesDistinctNodesWherePossible) {
  NodeId a = MakeNode(8);
  NodeId b = MakeNode(8);
  NodeId c = MakeNode(8);
  GroupScheduled g = PlaceGroup(MakeGroup(Bundles(3, {{"CPU", 1}}), PlacementStrategy::kSpread));
  EXPECT_EQ(NodesOf(g), (std::vector<NodeId>{a, b, c}));
}

TEST_F(PlacementGroupTest, SpreadSharesNodesWhenThereAreTooFew) {
  NodeId a = MakeNode(8, 2);
  NodeId b = MakeNode(8, 2);
  GroupScheduled g = PlaceGroup(MakeGroup(Bundles(4, {{"GPU", 1}}), PlacementStrategy::kSpread));
  std::vector<NodeId> nodes = NodesOf(g);
  EXPECT_EQ(std::count(nodes.begin(), nodes.end(), a), 2);
  EXPECT_EQ(std::count(nodes.begin(), nodes.end(), b), 2);
  EXPECT_EQ(GpuFree(a), (std::vector<double>{0, 0})) << "two bundles, two devices";
  EXPECT_EQ(GpuFree(b), (std::vector<double>{0, 0}));
}

TEST_F(PlacementGroupTest, SpreadPrefersLessLoadedNodes) {
  NodeId a = MakeNode(8);
  NodeId b = MakeNode(8);
  NodeId c = MakeNode(8);
  ASSERT_TRUE(view_.Acquire(a, {{"CPU", 6}}, {}));
  GroupScheduled g = PlaceGroup(MakeGroup(Bundles(2, {{"CPU", 1}}), PlacementStrategy::kSpread));
  EXPECT_EQ(NodesOf(g), (std::vector<NodeId>{b, c}));
}

TEST_F(PlacementGroupTest, SpreadReasons) {
  NodeId a = MakeNode(2);
  ASSERT_TRUE(view_.Acquire(a, {{"CPU", 2}}, {}));
  EXPECT_NE(
      PendingReason(DecideGroup(MakeGroup(Bundles(2, {{"CPU", 1}}), PlacementStrategy::kSpread)))
          .find("bundle 0 {CPU: 1} finds no node"),
      std::string::npos);
  EXPECT_EQ(InfeasibleReason(DecideGroup(
                MakeGroup(Bundles(3, {{"CPU", 1}}), PlacementStrategy::kSpread, {{"zone", "z"}}))),
            "bundle 0 needs {CPU: 1} on one node with labels {zone=z}; no node has label zone=z (1 "
            "alive node)");
}

TEST_F(PlacementGroupTest, BusyReasonsListWhatTheFirstFiveMatchingNodesHaveFree) {
  std::vector<NodeId> nodes;
  for (int i = 0; i < 7; ++i) {
    nodes.push_back(MakeNode(2, 0, {{"zone", i == 0 ? "b" : "a"}}));
    ASSERT_TRUE(view_.Acquire(nodes.back(), {{"CPU", 1.5}}, {}));
  }
  EXPECT_EQ(PendingReason(DecideGroup(
                MakeGroup(Bundles(2, {{"CPU", 1}}), PlacementStrategy::kSpread, {{"zone", "a"}}))),
            "bundle 0 {CPU: 1} finds no node with room beside the bundles placed before "
            "it; node 00000001 has {CPU: 0.5} free; node 00000002 has {CPU: 0.5} free; node "
            "00000003 has {CPU: 0.5} free; node 00000004 has {CPU: 0.5} free; node 00000005 has "
            "{CPU: 0.5} free; ...; the group waits until resources are released or a node joins");
}

// Every strategy

TEST_F(PlacementGroupTest, MalformedGroupsAreInfeasible) {
  MakeNode(8, 4);
  for (PlacementStrategy strategy :
       {PlacementStrategy::kPack, PlacementStrategy::kSpread, PlacementStrategy::kStrictPack,
        PlacementStrategy::kStrictSpread}) {
    EXPECT_EQ(InfeasibleReason(DecideGroup(MakeGroup({}, strategy))),
              "a placement group needs at least one bundle");
    EXPECT_EQ(InfeasibleReason(DecideGroup(MakeGroup({{{"CPU", 1}}, {{"GPU", 1.5}}}, strategy))),
              "bundle 1: invalid amount 1.5 of GPU: an amount above 1 must be a whole number of "
              "devices (a share never spans two devices)");
  }
}

TEST_F(PlacementGroupTest, ACommittedGroupIsFreedByReleaseGroup) {
  NodeId a = MakeNode(8, 2);
  NodeId b = MakeNode(8, 2);
  for (PlacementStrategy strategy :
       {PlacementStrategy::kPack, PlacementStrategy::kSpread, PlacementStrategy::kStrictPack,
        PlacementStrategy::kStrictSpread}) {
    GroupScheduled g = PlaceGroup(MakeGroup(Bundles(2, {{"CPU", 2}, {"GPU", 1}}), strategy));
    ASSERT_EQ(g.bundles.size(), 2u);
    view_.ReleaseGroup(g);
    for (const NodeId& id : {a, b}) {
      EXPECT_EQ(Available(id, "CPU"), 8);
      EXPECT_EQ(GpuFree(id), (std::vector<double>{1, 1}));
    }
  }
}

TEST_F(PlacementGroupTest, StaleGroupDecisionCommitsNothing) {
  NodeId a = MakeNode(4, 2);
  NodeId b = MakeNode(4, 2);
  GroupScheduled g = ScheduledOf(
      DecideGroup(MakeGroup(Bundles(2, {{"GPU", 1}}), PlacementStrategy::kStrictSpread)));
  ASSERT_EQ(g.bundles.size(), 2u);
  // Something else takes the second bundle's device before the commit.
  const Scheduled& second = g.bundles[1];
  ASSERT_TRUE(view_.Acquire(second.node, {{"GPU", 1}}, second.gpu_ids));
  auto before_a = view_.Find(a), before_b = view_.Find(b);
  EXPECT_EQ(view_.AcquireGroup(g).code(), StatusCode::kUnavailable);
  EXPECT_EQ(view_.Find(a)->gpu_free, before_a->gpu_free);
  EXPECT_EQ(view_.Find(b)->gpu_free, before_b->gpu_free);
  EXPECT_EQ(view_.Find(a)->available, before_a->available);
  EXPECT_EQ(view_.Find(b)->available, before_b->available);
}

}  // namespace
}  // namespace rayx::scheduler::policy
