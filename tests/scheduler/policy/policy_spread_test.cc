// SpreadPolicy (SPREAD): least loaded first, round robin among equals.
#include <gtest/gtest.h>

#include <set>

#include "policy/spread_policy.h"
#include "policy_fixture.h"

namespace rayx::scheduler::policy {
namespace policy_spread_test {  // this file's own (unit tests compile in batches)

using testing::InfeasibleReason;
using testing::PendingReason;
using testing::PolicyTest;
using testing::ScheduledOf;

class SpreadPolicyTest : public PolicyTest {
 protected:
  std::vector<NodeId> PlaceMany(const ResourceMap& demand, int n, LabelMap selector = {}) {
    std::vector<NodeId> where;
    for (int i = 0; i < n; ++i) {
      where.push_back(Place(MakeRequest(demand, SpreadStrategy{}, selector)).node);
    }
    return where;
  }
};

TEST_F(SpreadPolicyTest, ConsecutiveRequestsLandOnDifferentNodes) {
  NodeId a = MakeNode(8);
  NodeId b = MakeNode(8);
  NodeId c = MakeNode(8);
  EXPECT_EQ(PlaceMany({{"CPU", 1}}, 6), (std::vector<NodeId>{a, b, c, a, b, c}));
}

TEST_F(SpreadPolicyTest, PrefersTheLeastLoadedNode) {
  NodeId a = MakeNode(8);
  NodeId b = MakeNode(8);
  NodeId c = MakeNode(8);
  ASSERT_TRUE(view_.Acquire(a, {{"CPU", 4}}, {}));
  ASSERT_TRUE(view_.Acquire(c, {{"CPU", 2}}, {}));
  // Loads a 0.5, b 0, c 0.25.
  EXPECT_EQ(PlaceMany({{"CPU", 2}}, 3), (std::vector<NodeId>{b, c, b}));
}

TEST_F(SpreadPolicyTest, RoundRobinWhenRequestsDoNotChangeTheLoad) {
  // Every GPU is busy, so each node's load is 1 whatever CPUs are used: the
  // round robin still sends consecutive requests to different nodes.
  std::vector<NodeId> nodes;
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(MakeNode(8, 1));
    ASSERT_TRUE(view_.Acquire(nodes.back(), {{"GPU", 1}}, {0}));
  }
  EXPECT_EQ(PlaceMany({{"CPU", 1}}, 6),
            (std::vector<NodeId>{nodes[0], nodes[1], nodes[2], nodes[0], nodes[1], nodes[2]}));
}

TEST_F(SpreadPolicyTest, DoesNotKeepCpuWorkOffGpuNodes) {
  NodeId gpu = MakeNode(4, 1);
  NodeId cpu = MakeNode(4);
  EXPECT_EQ(PlaceMany({{"CPU", 1}}, 2), (std::vector<NodeId>{gpu, cpu}));
}

TEST_F(SpreadPolicyTest, SkipsNodesThatCannotHoldTheRequest) {
  NodeId small = MakeNode(1);
  NodeId big1 = MakeNode(8);
  NodeId big2 = MakeNode(8);
  std::vector<NodeId> where = PlaceMany({{"CPU", 2}}, 4);
  EXPECT_EQ(std::set<NodeId>(where.begin(), where.end()), (std::set<NodeId>{big1, big2}));
  EXPECT_EQ(Available(small, "CPU"), 1);
}

TEST_F(SpreadPolicyTest, GpuSharesStillPackOntoDevicesWithinANode) {
  NodeId a = MakeNode(8, 2);
  Scheduled first = Place(MakeRequest({{"GPU", 0.5}}, SpreadStrategy{}));
  Scheduled second = Place(MakeRequest({{"GPU", 0.25}}, SpreadStrategy{}));
  EXPECT_EQ(first.node, a);
  EXPECT_EQ(first.gpu_ids, std::vector<int>{0});
  EXPECT_EQ(second.gpu_ids, std::vector<int>{0});
}

TEST_F(SpreadPolicyTest, LabelSelectorRestrictsTheSpread) {
  NodeId a = MakeNode(8, 0, {{"zone", "a"}});
  MakeNode(8, 0, {{"zone", "b"}});
  NodeId c = MakeNode(8, 0, {{"zone", "a"}});
  EXPECT_EQ(PlaceMany({{"CPU", 1}}, 4, {{"zone", "a"}}), (std::vector<NodeId>{a, c, a, c}));
  EXPECT_EQ(
      InfeasibleReason(Decide(MakeRequest({{"CPU", 1}}, SpreadStrategy{}, {{"zone", "x"}}))),
      "needs {CPU: 1} on one node with labels {zone=x}; no node has label zone=x (3 alive nodes)");
}

TEST_F(SpreadPolicyTest, PendingAndInfeasibleReasons) {
  NodeId a = MakeNode(2);
  ASSERT_TRUE(view_.Acquire(a, {{"CPU", 2}}, {}));
  EXPECT_EQ(PendingReason(Decide(MakeRequest({{"CPU", 1}}, SpreadStrategy{}))),
            "no node has {CPU: 1} free now; it waits until resources are released or a node joins");
  EXPECT_EQ(InfeasibleReason(Decide(MakeRequest({{"CPU", 4}}, SpreadStrategy{}))),
            "needs {CPU: 4} on one node; the largest alive node has CPU 2 (1 alive node)");
}

TEST_F(SpreadPolicyTest, CursorSurvivesTheChosenNodeLeaving) {
  NodeId a = MakeNode(8);
  NodeId b = MakeNode(8);
  NodeId c = MakeNode(8);
  EXPECT_EQ(PlaceMany({{"CPU", 1}}, 2), (std::vector<NodeId>{a, b}));
  view_.RemoveNode(b);
  EXPECT_EQ(PlaceMany({{"CPU", 1}}, 3), (std::vector<NodeId>{c, a, c}));
}

}  // namespace
}  // namespace rayx::scheduler::policy
