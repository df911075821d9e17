// NodeAffinityPolicy: hard affinity runs only on the named node; soft falls back
// to the hybrid policy.
#include <gtest/gtest.h>

#include "policy/node_affinity_policy.h"
#include "policy_fixture.h"

namespace rayx::scheduler::policy {
namespace policy_node_affinity_test {  // this file's own (unit tests compile in batches)

using testing::InfeasibleReason;
using testing::PendingReason;
using testing::PolicyTest;
using testing::ScheduledOf;
using testing::TestNodeId;

class NodeAffinityPolicyTest : public PolicyTest {
 protected:
  static SchedulingRequest On(const NodeId& node, bool soft, ResourceMap demand,
                              LabelMap selector = {}) {
    return MakeRequest(std::move(demand), NodeAffinityStrategy{node, soft}, std::move(selector));
  }
};

TEST_F(NodeAffinityPolicyTest, HardAffinityRunsOnThatNodeEvenWhenOthersComeFirst) {
  MakeNode(8);
  NodeId b = MakeNode(8, 2);
  Scheduled s = Place(On(b, false, {{"CPU", 1}, {"GPU", 1}}));
  EXPECT_EQ(s.node, b);
  EXPECT_EQ(s.gpu_ids, std::vector<int>{0});
  EXPECT_EQ(Place(On(b, false, {{"CPU", 1}})).node, b) << "CPU work too, despite GPU avoidance";
}

TEST_F(NodeAffinityPolicyTest, HardAffinityWaitsForItsNodeWhenItIsBusy) {
  MakeNode(8);
  NodeId b = MakeNode(2);
  ASSERT_TRUE(view_.Acquire(b, {{"CPU", 2}}, {}));
  EXPECT_EQ(PendingReason(Decide(On(b, false, {{"CPU", 1}}))),
            "node affinity to 00000001: node 00000001 does not have {CPU: 1} free now; it waits "
            "for that node");
}

TEST_F(NodeAffinityPolicyTest, HardAffinityToAGoneNodeIsInfeasible) {
  MakeNode(8);
  NodeId b = MakeNode(8);
  view_.RemoveNode(b);
  EXPECT_EQ(InfeasibleReason(Decide(On(b, false, {{"CPU", 1}}))),
            "node affinity to 00000001: node 00000001 is not in the cluster (it died or never "
            "joined; a node that rejoins gets a new id)");
  EXPECT_NE(InfeasibleReason(Decide(On(TestNodeId(42), false, {{"CPU", 1}})))
                .find("is not in the cluster"),
            std::string::npos);
}

TEST_F(NodeAffinityPolicyTest, HardAffinityToATooSmallNodeIsInfeasible) {
  NodeId a = MakeNode(8, 2);
  MakeNode(64, 8);
  EXPECT_EQ(InfeasibleReason(Decide(On(a, false, {{"CPU", 4}, {"GPU", 4}}))),
            "node affinity to 00000000: needs {CPU: 4, GPU: 4} on node 00000000, which has GPU 2");
}

TEST_F(NodeAffinityPolicyTest, HardAffinityHonoursTheLabelSelector) {
  NodeId a = MakeNode(8, 0, {{"zone", "a"}});
  EXPECT_EQ(InfeasibleReason(Decide(On(a, false, {{"CPU", 1}}, {{"zone", "b"}}))),
            "node affinity to 00000000: node 00000000 does not have the labels {zone=b}");
  EXPECT_EQ(ScheduledOf(Decide(On(a, false, {{"CPU", 1}}, {{"zone", "a"}}))).node, a);
}

TEST_F(NodeAffinityPolicyTest, SoftAffinityUsesItsNodeWhenItFits) {
  MakeNode(8);
  NodeId b = MakeNode(8);
  EXPECT_EQ(Place(On(b, true, {{"CPU", 4}})).node, b);
}

TEST_F(NodeAffinityPolicyTest, SoftAffinityFallsBackWhenItsNodeIsBusyGoneOrTooSmall) {
  NodeId a = MakeNode(8);
  NodeId b = MakeNode(2);
  NodeId gone = MakeNode(8);
  view_.RemoveNode(gone);
  ASSERT_TRUE(view_.Acquire(b, {{"CPU", 2}}, {}));
  EXPECT_EQ(ScheduledOf(Decide(On(b, true, {{"CPU", 1}}))).node, a) << "busy";
  EXPECT_EQ(ScheduledOf(Decide(On(gone, true, {{"CPU", 1}}))).node, a) << "gone";
  EXPECT_EQ(ScheduledOf(Decide(On(b, true, {{"CPU", 4}}))).node, a) << "too small";
}

TEST_F(NodeAffinityPolicyTest, SoftAffinityFallbackKeepsTheLabelSelector) {
  NodeId a = MakeNode(8, 0, {{"zone", "a"}});
  NodeId b = MakeNode(8, 0, {{"zone", "b"}});
  EXPECT_EQ(ScheduledOf(Decide(On(a, true, {{"CPU", 1}}, {{"zone", "b"}}))).node, b);
}

TEST_F(NodeAffinityPolicyTest, SoftAffinityFallbackCanStillBePendingOrInfeasible) {
  NodeId a = MakeNode(2);
  ASSERT_TRUE(view_.Acquire(a, {{"CPU", 2}}, {}));
  EXPECT_EQ(PendingReason(Decide(On(a, true, {{"CPU", 1}}))),
            "no node has {CPU: 1} free now; it waits until resources are released or a node joins");
  EXPECT_EQ(InfeasibleReason(Decide(On(a, true, {{"CPU", 16}}))),
            "needs {CPU: 16} on one node; the largest alive node has CPU 2 (1 alive node)");
}

TEST_F(NodeAffinityPolicyTest, MalformedDemandIsInfeasible) {
  NodeId a = MakeNode(8, 4);
  EXPECT_NE(
      InfeasibleReason(Decide(On(a, false, {{"GPU", 2.5}}))).find("invalid amount 2.5 of GPU"),
      std::string::npos);
}

}  // namespace
}  // namespace rayx::scheduler::policy
