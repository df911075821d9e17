// ClusterResourceView: nodes, acquire/release with GPU devices, group commits,
// and a randomized check that no sequence over-commits a node or a device.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "policy/cluster_resource_view.h"
#include "policy_fixture.h"

namespace rayx::scheduler::policy {
namespace policy_cluster_resource_view_test {  // this file's own (unit tests compile in batches)

using testing::PolicyTest;
using testing::ScheduledOf;
using testing::TestNodeId;

class ClusterResourceViewTest : public PolicyTest {};

TEST_F(ClusterResourceViewTest, AddedNodeIsEntirelyFree) {
  NodeId a = MakeNode(8, 2, {{"zone", "a"}}, {{"memory", 1e9}, {"tpu", 4}});
  ASSERT_EQ(view_.node_count(), 1u);
  auto node = view_.Find(a);
  ASSERT_TRUE(node.has_value());
  EXPECT_EQ(node->id, a);
  ResourceMap total{{"CPU", 8}, {"GPU", 2}, {"memory", 1e9}, {"tpu", 4}};
  EXPECT_EQ(node->total, total);
  EXPECT_EQ(node->available, total);
  EXPECT_EQ(node->labels, (LabelMap{{"zone", "a"}}));
  EXPECT_EQ(node->gpu_free, (std::vector<double>{1, 1}));
  EXPECT_EQ(node->utilization, 0);
}

TEST_F(ClusterResourceViewTest, RemovedNodeIsGoneAndIgnoresRelease) {
  NodeId a = MakeNode(4);
  NodeId b = MakeNode(4);
  view_.RemoveNode(a);
  view_.RemoveNode(TestNodeId(99));  // unknown: no-op
  EXPECT_EQ(view_.node_count(), 1u);
  EXPECT_FALSE(view_.Find(a).has_value());
  EXPECT_TRUE(view_.Find(b).has_value());
  EXPECT_FALSE(view_.Acquire(a, {{"CPU", 1}}, {}));
  view_.Release(a, {{"CPU", 1}}, {});
  EXPECT_EQ(view_.node_count(), 1u);
}

TEST_F(ClusterResourceViewTest, ReAddingAnIdReplacesTheNode) {
  NodeId a = MakeNode(4);
  ASSERT_TRUE(view_.Acquire(a, {{"CPU", 3}}, {}));
  view_.AddNode(a, {{"CPU", 16}}, {{"k", "v"}});
  EXPECT_EQ(view_.node_count(), 1u);
  EXPECT_EQ(Available(a, "CPU"), 16);
  EXPECT_EQ(view_.Find(a)->labels, (LabelMap{{"k", "v"}}));
}

TEST_F(ClusterResourceViewTest, BadTotalsAreClampedAndFractionalGpusRoundDown) {
  NodeId a = TestNodeId(1);
  view_.AddNode(a, {{"CPU", -4}, {"GPU", 2.7}, {"bad", std::nan("")}}, {});
  auto node = view_.Find(a);
  ASSERT_TRUE(node.has_value());
  EXPECT_EQ(node->total.at("CPU"), 0);
  EXPECT_EQ(node->total.at("GPU"), 2);
  EXPECT_EQ(node->total.at("bad"), 0);
  EXPECT_EQ(node->gpu_free.size(), 2u);
}

TEST_F(ClusterResourceViewTest, AcquireTakesAndReleaseGivesBack) {
  NodeId a = MakeNode(8, 0, {}, {{"memory", 4e9}});
  ASSERT_TRUE(view_.Acquire(a, {{"CPU", 2.5}, {"memory", 1e9}}, {}));
  EXPECT_EQ(Available(a, "CPU"), 5.5);
  EXPECT_EQ(Available(a, "memory"), 3e9);
  EXPECT_DOUBLE_EQ(view_.Find(a)->utilization, 2.5 / 8);
  view_.Release(a, {{"CPU", 2.5}, {"memory", 1e9}}, {});
  EXPECT_EQ(Available(a, "CPU"), 8);
  EXPECT_EQ(Available(a, "memory"), 4e9);
  EXPECT_EQ(view_.Find(a)->utilization, 0);
}

TEST_F(ClusterResourceViewTest, AcquireThatDoesNotFitChangesNothing) {
  NodeId a = MakeNode(4);
  ASSERT_TRUE(view_.Acquire(a, {{"CPU", 3}}, {}));
  EXPECT_FALSE(view_.Acquire(a, {{"CPU", 2}}, {}));
  EXPECT_FALSE(view_.Acquire(a, {{"tpu", 1}}, {})) << "a resource the node lacks";
  EXPECT_FALSE(view_.Acquire(a, {{"CPU", -1}}, {})) << "malformed";
  EXPECT_EQ(Available(a, "CPU"), 1);
}

TEST_F(ClusterResourceViewTest, ReleaseIsCappedAtTheTotal) {
  NodeId a = MakeNode(4, 1);
  ASSERT_TRUE(view_.Acquire(a, {{"CPU", 1}, {"GPU", 1}}, {0}));
  view_.Release(a, {{"CPU", 1}, {"GPU", 1}}, {0});
  view_.Release(a, {{"CPU", 1}, {"GPU", 1}}, {0});  // a double release creates nothing
  EXPECT_EQ(Available(a, "CPU"), 4);
  EXPECT_EQ(Available(a, "GPU"), 1);
  EXPECT_EQ(GpuFree(a), std::vector<double>{1});
}

TEST_F(ClusterResourceViewTest, SharesAreExactAfterManyTakesAndReleases) {
  NodeId a = MakeNode(1, 1);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(view_.Acquire(a, {{"GPU", 0.1}}, {0})) << i;
  EXPECT_EQ(GpuFree(a), std::vector<double>{0});
  EXPECT_FALSE(view_.Acquire(a, {{"GPU", 0.1}}, {0}));
  for (int i = 0; i < 10; ++i) view_.Release(a, {{"GPU", 0.1}}, {0});
  EXPECT_EQ(GpuFree(a), std::vector<double>{1}) << "fixed point: no drift";
  EXPECT_TRUE(view_.Acquire(a, {{"GPU", 1}}, {0}));
}

// GPU device rules, through Acquire with the ids a decision would carry.

TEST_F(ClusterResourceViewTest, WholeGpusNeedThatManyDistinctEntirelyFreeDevices) {
  NodeId a = MakeNode(8, 4);
  EXPECT_FALSE(view_.Acquire(a, {{"GPU", 2}}, {1, 1})) << "the same device twice";
  EXPECT_FALSE(view_.Acquire(a, {{"GPU", 2}}, {1})) << "too few ids";
  EXPECT_FALSE(view_.Acquire(a, {{"GPU", 1}}, {1, 2})) << "too many ids";
  EXPECT_FALSE(view_.Acquire(a, {{"GPU", 1}}, {4})) << "no device 4";
  EXPECT_FALSE(view_.Acquire(a, {{"GPU", 1}}, {})) << "no id";
  ASSERT_TRUE(view_.Acquire(a, {{"GPU", 0.5}}, {0}));
  EXPECT_FALSE(view_.Acquire(a, {{"GPU", 1}}, {0})) << "device 0 is partly used";
  ASSERT_TRUE(view_.Acquire(a, {{"GPU", 2}}, {1, 3}));
  EXPECT_EQ(GpuFree(a), (std::vector<double>{0.5, 0, 1, 0}));
  EXPECT_EQ(Available(a, "GPU"), 1.5);
}

TEST_F(ClusterResourceViewTest, AShareNeedsOneDeviceWithRoom) {
  NodeId a = MakeNode(8, 2);
  ASSERT_TRUE(view_.Acquire(a, {{"GPU", 0.75}}, {0}));
  EXPECT_FALSE(view_.Acquire(a, {{"GPU", 0.5}}, {0})) << "0.25 left on device 0";
  EXPECT_FALSE(view_.Acquire(a, {{"GPU", 0.5}}, {0, 1})) << "a share never spans devices";
  EXPECT_TRUE(view_.Acquire(a, {{"GPU", 0.25}}, {0}));
  EXPECT_TRUE(view_.Acquire(a, {{"GPU", 0.5}}, {1}));
  EXPECT_EQ(GpuFree(a), (std::vector<double>{0, 0.5}));
}

TEST_F(ClusterResourceViewTest, GpuAmountAboveOneMustBeWhole) {
  NodeId a = MakeNode(8, 4);
  EXPECT_FALSE(view_.Acquire(a, {{"GPU", 1.5}}, {0, 1}));
  EXPECT_FALSE(view_.Acquire(a, {{"GPU", 1.5}}, {0}));
  EXPECT_EQ(Available(a, "GPU"), 4);
}

TEST_F(ClusterResourceViewTest, CpuOnlyDemandTakesNoDevice) {
  NodeId a = MakeNode(8, 2);
  EXPECT_FALSE(view_.Acquire(a, {{"CPU", 1}}, {0})) << "ids without a GPU demand";
  EXPECT_TRUE(view_.Acquire(a, {{"CPU", 1}}, {}));
  EXPECT_EQ(GpuFree(a), (std::vector<double>{1, 1}));
}

// Group commits.

GroupScheduled TwoBundles(const NodeId& a, const NodeId& b) {
  GroupScheduled g;
  g.bundles = {Scheduled{a, {0}}, Scheduled{b, {1}}};
  g.demands = {{{"CPU", 2}, {"GPU", 1}}, {{"CPU", 2}, {"GPU", 1}}};
  return g;
}

TEST_F(ClusterResourceViewTest, AcquireGroupTakesEveryBundle) {
  NodeId a = MakeNode(4, 2);
  NodeId b = MakeNode(4, 2);
  GroupScheduled g = TwoBundles(a, b);
  ASSERT_OK(view_.AcquireGroup(g));
  EXPECT_EQ(GpuFree(a), (std::vector<double>{0, 1}));
  EXPECT_EQ(GpuFree(b), (std::vector<double>{1, 0}));
  EXPECT_EQ(Available(a, "CPU"), 2);
  view_.ReleaseGroup(g);
  EXPECT_EQ(GpuFree(a), (std::vector<double>{1, 1}));
  EXPECT_EQ(GpuFree(b), (std::vector<double>{1, 1}));
  EXPECT_EQ(Available(b, "CPU"), 4);
}

TEST_F(ClusterResourceViewTest, FailedGroupCommitLeavesTheViewUnchanged) {
  NodeId a = MakeNode(4, 2);
  NodeId b = MakeNode(4, 2);
  ASSERT_TRUE(view_.Acquire(b, {{"GPU", 0.5}}, {1}));  // the second bundle's device is taken
  auto before_a = view_.Find(a);
  auto before_b = view_.Find(b);
  Status st = view_.AcquireGroup(TwoBundles(a, b));
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("bundle 1 of 2"), std::string::npos) << st;
  EXPECT_NE(st.message().find("nothing was reserved"), std::string::npos) << st;
  EXPECT_EQ(view_.Find(a)->available, before_a->available) << "bundle 0 was rolled back";
  EXPECT_EQ(view_.Find(a)->gpu_free, before_a->gpu_free);
  EXPECT_EQ(view_.Find(a)->utilization, before_a->utilization);
  EXPECT_EQ(view_.Find(b)->gpu_free, before_b->gpu_free);
}

TEST_F(ClusterResourceViewTest, GroupCommitOnAGoneNodeRollsBack) {
  NodeId a = MakeNode(4, 2);
  NodeId b = MakeNode(4, 2);
  GroupScheduled g = TwoBundles(a, b);
  view_.RemoveNode(b);
  Status st = view_.AcquireGroup(g);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("the node is gone"), std::string::npos) << st;
  EXPECT_EQ(GpuFree(a), (std::vector<double>{1, 1}));
}

TEST_F(ClusterResourceViewTest, MalformedGroupIsRefused) {
  NodeId a = MakeNode(4, 2);
  GroupScheduled g;
  g.bundles = {Scheduled{a, {}}};
  EXPECT_EQ(view_.AcquireGroup(g).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Available(a, "CPU"), 4);
}

TEST_F(ClusterResourceViewTest, ManyNodesAndRemovalsKeepIndexesConsistent) {
  std::vector<NodeId> ids;
  for (int i = 0; i < 300; ++i) ids.push_back(MakeNode(4));  // one group
  for (int i = 0; i < 60; ++i) MakeNode(4, i % 3, {{"rack", std::to_string(i % 4)}});
  // Removing two thirds of a group makes its tree rebuild without the holes.
  for (int i = 0; i < 300; ++i) {
    if (i % 3 != 0) view_.RemoveNode(ids[i]);
  }
  ASSERT_OK(view_.TEST_CheckInvariants());
  EXPECT_EQ(view_.node_count(), 160u);
  for (int i = 0; i < 300; i += 3) ASSERT_TRUE(view_.Acquire(ids[i], {{"CPU", 1}}, {})) << i;
  // Decisions still find the survivors: 100 nodes with 3 CPUs free.
  for (int i = 0; i < 100; ++i) {
    Scheduled s = ScheduledOf(Decide(MakeRequest({{"CPU", 3}}, DefaultStrategy{}, {})));
    ASSERT_TRUE(view_.Acquire(s.node, {{"CPU", 3}}, {}));
  }
  // A new resource name widens every node's dimensions.
  view_.AddNode(TestNodeId(1000),
                {{"CPU", 1}, {"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}, {"e", 1}, {"f", 1}}, {});
  ASSERT_OK(view_.TEST_CheckInvariants());
  EXPECT_EQ(Available(ids[0], "CPU"), 0);
  EXPECT_EQ(Available(ids[1 * 3 + 0], "CPU"), 0);
}

// Randomized: any sequence of acquires and releases keeps every node and device
// within bounds, and the view agrees with a model that adds up what is held.
TEST(ClusterResourceViewRandomized, NeverOverCommitsANodeOrADevice) {
  std::mt19937_64 rng(20261123);
  ClusterResourceView view;
  const int kNodes = 12;
  std::vector<NodeId> ids;
  std::map<NodeId, ResourceMap> totals;
  for (int i = 0; i < kNodes; ++i) {
    ids.push_back(TestNodeId(i));
    ResourceMap total{{"CPU", static_cast<double>(1 + rng() % 8)},
                      {"GPU", static_cast<double>(rng() % 5)},
                      {"memory", static_cast<double>(rng() % 4) * 1e9}};
    totals[ids.back()] = total;
    view.AddNode(ids.back(), total, {});
  }
  struct Held {
    NodeId node;
    ResourceMap demand;
    std::vector<int> gpus;
  };
  std::vector<Held> held;
  const std::vector<double> gpu_amounts = {0, 0, 0.25, 0.5, 0.75, 1, 2, 3};
  int acquired = 0, refused = 0;
  for (int step = 0; step < 20000; ++step) {
    if (!held.empty() && rng() % 3 == 0) {
      size_t k = rng() % held.size();
      view.Release(held[k].node, held[k].demand, held[k].gpus);
      held.erase(held.begin() + static_cast<long>(k));
    } else {
      const NodeId& node = ids[rng() % kNodes];
      ResourceMap demand{{"CPU", static_cast<double>(rng() % 4) * 0.5}};
      double gpu = gpu_amounts[rng() % gpu_amounts.size()];
      if (gpu > 0) demand["GPU"] = gpu;
      if (rng() % 2) demand["memory"] = static_cast<double>(rng() % 3) * 5e8;
      // Random device ids, valid or not: the view must refuse what does not fit.
      std::vector<int> gpus;
      size_t n = gpu == 0 ? rng() % 2 : gpu < 1 ? 1 : static_cast<size_t>(gpu);
      for (size_t i = 0; i < n; ++i) gpus.push_back(static_cast<int>(rng() % 5));
      if (view.Acquire(node, demand, gpus)) {
        held.push_back({node, demand, gpus});
        ++acquired;
      } else {
        ++refused;
      }
    }
    if (step % 97 == 0) ASSERT_OK(view.TEST_CheckInvariants());
    // The model: per node, total - held == available; per device, 1 - held >= 0.
    if (step % 13 == 0) {
      std::map<NodeId, ResourceMap> used;
      std::map<NodeId, std::map<int, double>> device_used;
      for (const Held& h : held) {
        for (const auto& [name, amount] : h.demand) used[h.node][name] += amount;
        double gpu = h.demand.count("GPU") ? h.demand.at("GPU") : 0;
        for (int d : h.gpus) device_used[h.node][d] += gpu < 1 ? gpu : 1;
      }
      for (const NodeId& id : ids) {
        auto node = view.Find(id);
        ASSERT_TRUE(node.has_value());
        for (const auto& [name, total] : totals[id]) {
          double u = used[id].count(name) ? used[id][name] : 0;
          ASSERT_LE(u, total + 1e-9) << "over-committed " << name << " at step " << step;
          ASSERT_NEAR(node->available.at(name), total - u, 1e-6) << name << " step " << step;
        }
        for (size_t d = 0; d < node->gpu_free.size(); ++d) {
          double u =
              device_used[id].count(static_cast<int>(d)) ? device_used[id][static_cast<int>(d)] : 0;
          ASSERT_LE(u, 1 + 1e-9) << "device " << d << " over-committed at step " << step;
          ASSERT_NEAR(node->gpu_free[d], 1 - u, 1e-6) << "device " << d << " step " << step;
        }
      }
    }
  }
  EXPECT_GT(acquired, 1000);
  EXPECT_GT(refused, 1000);
  for (const Held& h : held) view.Release(h.node, h.demand, h.gpus);
  for (const NodeId& id : ids) {
    EXPECT_EQ(view.Find(id)->available, totals[id]) << "everything given back";
  }
}

}  // namespace
}  // namespace rayx::scheduler::policy
