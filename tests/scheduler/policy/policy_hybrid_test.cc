// HybridPolicy (the default strategy): packing below the threshold, then least
// loaded; GPU devices and GPU-node avoidance; label selectors; every Pending and
// Infeasible reason.
#include <gtest/gtest.h>

#include "policy/hybrid_policy.h"
#include "policy_fixture.h"

namespace rayx::scheduler::policy {
namespace policy_hybrid_test {  // this file's own (unit tests compile in batches)

using testing::InfeasibleReason;
using testing::PendingReason;
using testing::PolicyTest;
using testing::ScheduledOf;

class HybridPolicyTest : public PolicyTest {
 protected:
  std::vector<NodeId> PlaceMany(const ResourceMap& demand, int n) {
    std::vector<NodeId> where;
    for (int i = 0; i < n; ++i) where.push_back(Place(MakeRequest(demand)).node);
    return where;
  }
};

TEST_F(HybridPolicyTest, PacksTheFirstNodeWhileItIsBelowHalfUsed) {
  NodeId a = MakeNode(8);
  NodeId b = MakeNode(8);
  MakeNode(8);
  // Utilization before each request: 0, 1/8, 2/8, 3/8 (< 0.5) on a; then a is
  // at 0.5 and b, the next in order, is below the threshold.
  EXPECT_EQ(PlaceMany({{"CPU", 1}}, 4), (std::vector<NodeId>{a, a, a, a}));
  EXPECT_EQ(PlaceMany({{"CPU", 1}}, 4), (std::vector<NodeId>{b, b, b, b}));
}

TEST_F(HybridPolicyTest, PrefersTheLeastLoadedOnceEveryNodeIsAboveTheThreshold) {
  NodeId a = MakeNode(4);
  NodeId b = MakeNode(4);
  EXPECT_EQ(PlaceMany({{"CPU", 1}}, 4), (std::vector<NodeId>{a, a, b, b}));
  // Both at 0.5: the earliest registered of the least loaded, then the other.
  EXPECT_EQ(PlaceMany({{"CPU", 1}}, 4), (std::vector<NodeId>{a, b, a, b}));
  EXPECT_TRUE(std::holds_alternative<Pending>(Decide(MakeRequest({{"CPU", 1}}))));
}

TEST_F(HybridPolicyTest, LeastLoadedIsMeasuredOnTheMostUsedResource) {
  NodeId a = MakeNode(4, 0, {}, {{"memory", 100}});
  NodeId b = MakeNode(4, 0, {}, {{"memory", 100}});
  ASSERT_TRUE(view_.Acquire(a, {{"CPU", 2}}, {}));      // a: CPU 0.5, memory 0
  ASSERT_TRUE(view_.Acquire(b, {{"memory", 60}}, {}));  // b: CPU 0, memory 0.6
  EXPECT_EQ(Place(MakeRequest({{"CPU", 1}})).node, a) << "a at 0.5 is below b at 0.6";
}

TEST_F(HybridPolicyTest, ThresholdZeroAlwaysSpreadsAndAboveOneAlwaysPacks) {
  NodeId a = MakeNode(4);
  NodeId b = MakeNode(4);
  HybridPolicy spread_always(HybridPolicy::Options{0.0, true});
  HybridPolicy pack_always(HybridPolicy::Options{1.01, true});
  SchedulingRequest one = MakeRequest({{"CPU", 1}});
  for (NodeId expected : {a, b, a, b}) {
    Scheduled s = ScheduledOf(spread_always.Schedule(view_, one));
    EXPECT_EQ(s.node, expected);
    ASSERT_TRUE(view_.Acquire(s.node, one.demand, s.gpu_ids));
  }
  for (NodeId expected : {a, a, b, b}) {
    Scheduled s = ScheduledOf(pack_always.Schedule(view_, one));
    EXPECT_EQ(s.node, expected);
    ASSERT_TRUE(view_.Acquire(s.node, one.demand, s.gpu_ids));
  }
}

TEST_F(HybridPolicyTest, SkipsNodesThatCannotHoldTheRequest) {
  MakeNode(2);
  NodeId big = MakeNode(16);
  EXPECT_EQ(Place(MakeRequest({{"CPU", 4}})).node, big);
}

TEST_F(HybridPolicyTest, DecidingDoesNotChangeTheView) {
  NodeId a = MakeNode(4, 2);
  SchedulingRequest r = MakeRequest({{"CPU", 1}, {"GPU", 1}});
  auto before = view_.Find(a);
  SchedulingDecision first = Decide(r);
  SchedulingDecision second = Decide(r);
  EXPECT_EQ(ScheduledOf(first), ScheduledOf(second));
  EXPECT_EQ(view_.Find(a)->available, before->available);
  EXPECT_EQ(view_.Find(a)->gpu_free, before->gpu_free);
}

TEST_F(HybridPolicyTest, EmptyDemandFitsAFullNodeButGoesBelowTheThreshold) {
  NodeId a = MakeNode(1);
  MakeNode(1);
  ASSERT_TRUE(view_.Acquire(a, {{"CPU", 1}}, {}));
  // a is full but the request needs nothing; a is at 1.0 and b at 0, so b wins.
  EXPECT_EQ(ScheduledOf(Decide(MakeRequest({}))).node, testing::TestNodeId(1));
}

// GPU nodes and devices.

TEST_F(HybridPolicyTest, KeepsCpuWorkOffGpuNodesWhileOthersCanTakeIt) {
  NodeId gpu = MakeNode(4, 2);
  NodeId cpu = MakeNode(2);
  EXPECT_EQ(PlaceMany({{"CPU", 1}}, 2), (std::vector<NodeId>{cpu, cpu}));
  EXPECT_EQ(Place(MakeRequest({{"CPU", 1}})).node, gpu) << "the CPU node is full";
  EXPECT_EQ(Place(MakeRequest({{"GPU", 1}})).node, gpu);

  HybridPolicy no_avoidance(HybridPolicy::Options{0.5, false});
  ClusterResourceView fresh;
  fresh.AddNode(gpu, {{"CPU", 4}, {"GPU", 2}}, {});
  fresh.AddNode(cpu, {{"CPU", 2}}, {});
  EXPECT_EQ(ScheduledOf(no_avoidance.Schedule(fresh, MakeRequest({{"CPU", 1}}))).node, gpu);
}

TEST_F(HybridPolicyTest, WholeGpuRequestsGetDistinctDevices) {
  NodeId a = MakeNode(8, 4);
  EXPECT_EQ(Place(MakeRequest({{"GPU", 1}})).gpu_ids, std::vector<int>{0});
  EXPECT_EQ(Place(MakeRequest({{"GPU", 2}})).gpu_ids, (std::vector<int>{1, 2}));
  EXPECT_EQ(Place(MakeRequest({{"GPU", 1}})).gpu_ids, std::vector<int>{3});
  EXPECT_EQ(GpuFree(a), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_TRUE(std::holds_alternative<Pending>(Decide(MakeRequest({{"GPU", 1}}))));
}

TEST_F(HybridPolicyTest, SharesPackOntoTheFullestDeviceWithRoom) {
  NodeId a = MakeNode(8, 3);
  EXPECT_EQ(Place(MakeRequest({{"GPU", 0.5}})).gpu_ids, std::vector<int>{0});
  EXPECT_EQ(Place(MakeRequest({{"GPU", 0.25}})).gpu_ids, std::vector<int>{0}) << "packs";
  EXPECT_EQ(Place(MakeRequest({{"GPU", 0.5}})).gpu_ids, std::vector<int>{1})
      << "0.25 left on device 0: never spans, takes a fresh device";
  EXPECT_EQ(Place(MakeRequest({{"GPU", 0.25}})).gpu_ids, std::vector<int>{0})
      << "device 0 (0.25 free) is fuller than device 1 (0.5 free)";
  EXPECT_EQ(Place(MakeRequest({{"GPU", 1}})).gpu_ids, std::vector<int>{2});
  EXPECT_EQ(GpuFree(a), (std::vector<double>{0, 0.5, 0}));
}

TEST_F(HybridPolicyTest, AShareNeverSpansTwoDevices) {
  NodeId a = MakeNode(8, 2);
  ASSERT_TRUE(view_.Acquire(a, {{"GPU", 0.6}}, {0}));
  ASSERT_TRUE(view_.Acquire(a, {{"GPU", 0.6}}, {1}));
  // 0.8 GPU free in all, but 0.4 per device.
  std::string reason = PendingReason(Decide(MakeRequest({{"GPU", 0.5}})));
  EXPECT_EQ(reason,
            "no node has {GPU: 0.5} free now; it waits until resources are released or "
            "a node joins");
  EXPECT_EQ(ScheduledOf(Decide(MakeRequest({{"GPU", 0.4}}))).gpu_ids, std::vector<int>{0});
}

TEST_F(HybridPolicyTest, AWholeGpuWaitsForAnEntirelyFreeDevice) {
  NodeId a = MakeNode(8, 2);
  ASSERT_TRUE(view_.Acquire(a, {{"GPU", 0.25}}, {0}));
  ASSERT_TRUE(view_.Acquire(a, {{"GPU", 0.25}}, {1}));
  EXPECT_EQ(PendingReason(Decide(MakeRequest({{"GPU", 1}}))),
            "no node has {GPU: 1} free now (a whole GPU needs an entirely free device); it waits "
            "until resources are released or a node joins");
  view_.Release(a, {{"GPU", 0.25}}, {1});
  EXPECT_EQ(ScheduledOf(Decide(MakeRequest({{"GPU", 1}}))).gpu_ids, std::vector<int>{1});
}

TEST_F(HybridPolicyTest, PendingWorkIsPlacedOnceResourcesFreeUpOrANodeJoins) {
  NodeId a = MakeNode(2);
  SchedulingRequest two = MakeRequest({{"CPU", 2}});
  Scheduled first = Place(two);
  EXPECT_EQ(PendingReason(Decide(two)),
            "no node has {CPU: 2} free now; it waits until resources are released or a node joins");
  view_.Release(a, two.demand, first.gpu_ids);
  EXPECT_EQ(ScheduledOf(Decide(two)).node, a);
  Place(two);
  NodeId b = MakeNode(2);
  EXPECT_EQ(ScheduledOf(Decide(two)).node, b);
}

// Infeasible reasons.

TEST_F(HybridPolicyTest, InfeasibleSaysWhatTheLargestNodeHas) {
  MakeNode(8, 4);
  MakeNode(16, 2);
  EXPECT_EQ(InfeasibleReason(Decide(MakeRequest({{"CPU", 1}, {"GPU", 8}}))),
            "needs {GPU: 8} on one node; the largest alive node has GPU 4 (2 alive nodes)");
  EXPECT_EQ(InfeasibleReason(Decide(MakeRequest({{"CPU", 32}, {"GPU", 8}}))),
            "needs {CPU: 32, GPU: 8} on one node; the largest alive node has CPU 16, GPU 4 (2 "
            "alive nodes)");
}

TEST_F(HybridPolicyTest, InfeasibleWhenEachResourceExistsButNotTogether) {
  MakeNode(8);
  MakeNode(2, 1);
  EXPECT_EQ(InfeasibleReason(Decide(MakeRequest({{"CPU", 4}, {"GPU", 1}}))),
            "needs {CPU: 4, GPU: 1} on one node; each exists on some alive node, but no single "
            "alive node has "
            "all of it (2 alive nodes)");
}

TEST_F(HybridPolicyTest, InfeasibleForAResourceNoNodeHas) {
  MakeNode(8);
  EXPECT_EQ(InfeasibleReason(Decide(MakeRequest({{"CPU", 1}, {"tpu", 2}}))),
            "needs {tpu: 2} on one node; the largest alive node has tpu 0 (1 alive node)");
}

TEST_F(HybridPolicyTest, InfeasibleOnAnEmptyCluster) {
  EXPECT_EQ(InfeasibleReason(Decide(MakeRequest({{"CPU", 1}}))),
            "needs {CPU: 1} on one node; the cluster has no alive nodes");
}

TEST_F(HybridPolicyTest, InfeasibleAfterTheOnlyBigNodeLeaves) {
  MakeNode(4);
  NodeId big = MakeNode(64);
  SchedulingRequest r = MakeRequest({{"CPU", 32}});
  EXPECT_EQ(ScheduledOf(Decide(r)).node, big);
  view_.RemoveNode(big);
  EXPECT_EQ(InfeasibleReason(Decide(r)),
            "needs {CPU: 32} on one node; the largest alive node has CPU 4 (1 alive node)");
}

TEST_F(HybridPolicyTest, MalformedDemandsAreInfeasibleWithTheReason) {
  MakeNode(8, 4);
  EXPECT_EQ(InfeasibleReason(Decide(MakeRequest({{"GPU", 1.5}}))),
            "invalid amount 1.5 of GPU: an amount above 1 must be a whole number of devices (a "
            "share never spans two devices)");
  EXPECT_EQ(InfeasibleReason(Decide(MakeRequest({{"CPU", -1}}))),
            "invalid amount -1 of CPU: amounts must be finite, non-negative and at most "
            "100000000000000");
  EXPECT_NE(InfeasibleReason(Decide(MakeRequest({{"CPU", std::nan("")}}))).find("invalid amount"),
            std::string::npos);
}

// Label selectors.

TEST_F(HybridPolicyTest, LabelSelectorOnlyAdmitsNodesWithThoseLabels) {
  MakeNode(8, 0, {{"accelerator", "A100"}});
  NodeId h100 = MakeNode(8, 0, {{"accelerator", "H100"}, {"zone", "a"}});
  MakeNode(8);
  SchedulingRequest r = MakeRequest({{"CPU", 1}}, DefaultStrategy{}, {{"accelerator", "H100"}});
  for (int i = 0; i < 8; ++i) EXPECT_EQ(Place(r).node, h100) << i;
  EXPECT_EQ(PendingReason(Decide(r)),
            "no node with labels {accelerator=H100} has {CPU: 1} free now; it waits until "
            "resources are released or a node joins");
}

TEST_F(HybridPolicyTest, InfeasibleNamesTheLabelsNoNodeHas) {
  MakeNode(8, 0, {{"accelerator", "A100"}, {"zone", "a"}});
  MakeNode(8, 0, {{"zone", "b"}});
  EXPECT_EQ(InfeasibleReason(
                Decide(MakeRequest({{"CPU", 1}}, DefaultStrategy{}, {{"accelerator", "H100"}}))),
            "needs {CPU: 1} on one node with labels {accelerator=H100}; no node has label "
            "accelerator=H100 (2 alive nodes)");
  EXPECT_EQ(InfeasibleReason(Decide(MakeRequest({{"CPU", 1}}, DefaultStrategy{},
                                                {{"accelerator", "H100"}, {"zone", "c"}}))),
            "needs {CPU: 1} on one node with labels {accelerator=H100, zone=c}; no node has any "
            "of the labels accelerator=H100, zone=c (2 alive nodes)");
  EXPECT_EQ(
      InfeasibleReason(Decide(
          MakeRequest({{"CPU", 1}}, DefaultStrategy{}, {{"accelerator", "A100"}, {"zone", "b"}}))),
      "needs {CPU: 1} on one node with labels {accelerator=A100, zone=b}; no single node "
      "has all of the labels {accelerator=A100, zone=b}; each is on some node (2 alive nodes)");
}

TEST_F(HybridPolicyTest, InfeasibleSaysWhatTheLargestMatchingNodeHas) {
  MakeNode(8, 4, {{"accelerator", "H100"}});
  MakeNode(8, 8, {{"accelerator", "A100"}});
  MakeNode(8);
  EXPECT_EQ(InfeasibleReason(
                Decide(MakeRequest({{"GPU", 8}}, DefaultStrategy{}, {{"accelerator", "H100"}}))),
            "needs {GPU: 8} on one node with labels {accelerator=H100}; the largest such node "
            "has GPU 4 (1 of 3 alive nodes have those labels)");
}

}  // namespace
}  // namespace rayx::scheduler::policy
