// The indexes are exact: on random clusters, random loads and churn, the
// policies decide exactly what a linear scan over every node decides, and every
// group decision commits.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "policy/bundle_strict_spread_policy.h"
#include "policy/hybrid_policy.h"
#include "policy/spread_policy.h"
#include "policy_fixture.h"

namespace rayx::scheduler::policy {
namespace policy_index_test {  // this file's own (unit tests compile in batches)

using testing::TestNodeId;

// The reference: plain loops over public snapshots, in registration order.
struct RefNode {
  NodeResources r;
  uint64_t order;
};

double Get(const ResourceMap& m, const std::string& k) { return m.count(k) ? m.at(k) : 0; }

bool RefMatches(const RefNode& n, const LabelMap& selector) {
  for (const auto& [k, v] : selector) {
    if (!n.r.labels.count(k) || n.r.labels.at(k) != v) return false;
  }
  return true;
}

std::optional<std::vector<int>> RefPickGpus(const std::vector<double>& free, double gpu) {
  std::vector<int> ids;
  if (gpu <= 0) return ids;
  if (gpu < 1) {
    int best = -1;
    for (size_t d = 0; d < free.size(); ++d) {
      if (free[d] >= gpu && (best < 0 || free[d] < free[static_cast<size_t>(best)])) {
        best = static_cast<int>(d);
      }
    }
    if (best < 0) return std::nullopt;
    return std::vector<int>{best};
  }
  for (size_t d = 0; d < free.size() && ids.size() < static_cast<size_t>(gpu); ++d) {
    if (free[d] == 1) ids.push_back(static_cast<int>(d));
  }
  if (ids.size() < static_cast<size_t>(gpu)) return std::nullopt;
  return ids;
}

bool RefFitsNow(const RefNode& n, const ResourceMap& demand) {
  for (const auto& [k, v] : demand) {
    if (v > 0 && Get(n.r.available, k) < v) return false;
  }
  return RefPickGpus(n.r.gpu_free, Get(demand, "GPU")).has_value();
}

bool RefFitsTotal(const RefNode& n, const ResourceMap& demand) {
  for (const auto& [k, v] : demand) {
    if (v > 0 && Get(n.r.total, k) < v) return false;
  }
  return true;
}

class Cluster {
 public:
  explicit Cluster(uint64_t seed) : rng_(seed) {}

  void AddRandomNode() {
    NodeId id = TestNodeId(next_id_++);
    ResourceMap total{{"CPU", static_cast<double>(1 + rng_() % 16)},
                      {"memory", static_cast<double>(rng_() % 5) * 4}};
    static const double kGpus[] = {0, 0, 0, 2, 4, 8};
    double gpus = kGpus[rng_() % 6];
    if (gpus > 0) total["GPU"] = gpus;
    if (rng_() % 5 == 0) total["tpu"] = static_cast<double>(1 + rng_() % 4);
    LabelMap labels;
    static const char* kZones[] = {"a", "b", "c"};
    if (rng_() % 4) labels["zone"] = kZones[rng_() % 3];
    if (gpus > 0 && rng_() % 2) labels["acc"] = rng_() % 2 ? "H100" : "A100";
    view.AddNode(id, total, labels);
    order_[id] = next_order_++;
    live_.push_back(id);
  }

  void RemoveRandomNode() {
    if (live_.empty()) return;
    size_t k = rng_() % live_.size();
    view.RemoveNode(live_[k]);
    std::erase_if(held_, [&](const auto& h) { return h.node == live_[k]; });
    live_.erase(live_.begin() + static_cast<long>(k));
  }

  ResourceMap RandomDemand() {
    ResourceMap d;
    d["CPU"] = static_cast<double>(rng_() % 9) * 0.5;
    static const double kGpu[] = {0, 0, 0, 0.25, 0.5, 0.75, 1, 2, 4};
    double gpu = kGpu[rng_() % 9];
    if (gpu > 0) d["GPU"] = gpu;
    if (rng_() % 3 == 0) d["memory"] = static_cast<double>(rng_() % 6) * 2;
    if (rng_() % 10 == 0) d["tpu"] = 1;
    return d;
  }
  LabelMap RandomSelector() {
    switch (rng_() % 6) {
      case 0:
        return {{"zone", "a"}};
      case 1:
        return {{"acc", "H100"}};
      case 2:
        return {{"zone", "b"}, {"acc", "A100"}};
      case 3:
        return {{"zone", "nowhere"}};
      default:
        return {};
    }
  }

  // Takes `demand` on a random node that has it, on the devices the rule picks.
  void LoadRandomly() {
    for (int tries = 0; tries < 4 && !live_.empty(); ++tries) {
      const NodeId& id = live_[rng_() % live_.size()];
      ResourceMap demand = RandomDemand();
      RefNode n{*view.Find(id), 0};
      if (!RefFitsNow(n, demand)) continue;
      std::vector<int> gpus = *RefPickGpus(n.r.gpu_free, Get(demand, "GPU"));
      ASSERT_TRUE(view.Acquire(id, demand, gpus));
      held_.push_back({id, demand, gpus});
      return;
    }
  }
  void ReleaseRandomly() {
    if (held_.empty()) return;
    size_t k = rng_() % held_.size();
    view.Release(held_[k].node, held_[k].demand, held_[k].gpus);
    held_.erase(held_.begin() + static_cast<long>(k));
  }
  void Hold(const NodeId& node, const ResourceMap& demand, const std::vector<int>& gpus) {
    held_.push_back({node, demand, gpus});
  }

  std::vector<RefNode> Snapshot() const {
    std::vector<RefNode> out;
    for (const NodeId& id : live_) out.push_back(RefNode{*view.Find(id), order_.at(id)});
    return out;
  }
  std::mt19937_64& rng() { return rng_; }
  size_t size() const { return live_.size(); }

  ClusterResourceView view;

 private:
  struct Held {
    NodeId node;
    ResourceMap demand;
    std::vector<int> gpus;
  };
  std::mt19937_64 rng_;
  int next_id_ = 0;
  uint64_t next_order_ = 0;
  std::map<NodeId, uint64_t> order_;
  std::vector<NodeId> live_;  // registration order
  std::vector<Held> held_;
};

enum class Kind { kScheduled, kPending, kInfeasible };

Kind RefNotNow(const std::vector<RefNode>& nodes, const ResourceMap& demand,
               const LabelMap& selector) {
  for (const RefNode& n : nodes) {
    if (RefMatches(n, selector) && RefFitsTotal(n, demand)) return Kind::kPending;
  }
  return Kind::kInfeasible;
}

// Ray's hybrid rule by brute force.
std::optional<NodeId> RefHybrid(const std::vector<RefNode>& nodes, const ResourceMap& demand,
                                const LabelMap& selector) {
  bool needs_gpu = Get(demand, "GPU") > 0;
  bool with = false, without = false;
  for (const RefNode& n : nodes) {
    if (!RefMatches(n, selector)) continue;
    (n.r.gpu_free.empty() ? without : with) = true;
  }
  std::vector<int> tiers =
      (!needs_gpu && with && without) ? std::vector<int>{0, 1} : std::vector<int>{2};
  for (int tier : tiers) {
    const RefNode* best = nullptr;
    for (const RefNode& n : nodes) {
      if (!RefMatches(n, selector) || !RefFitsNow(n, demand)) continue;
      bool has_gpu = !n.r.gpu_free.empty();
      if ((tier == 0 && has_gpu) || (tier == 1 && !has_gpu)) continue;
      if (n.r.utilization < 0.5) return n.r.id;  // first below the threshold
      if (!best || n.r.utilization < best->r.utilization) best = &n;
    }
    if (best) return best->r.id;
  }
  return std::nullopt;
}

// SPREAD by brute force: least loaded, ties round robin after `cursor`.
std::optional<RefNode> RefSpread(const std::vector<RefNode>& nodes, const ResourceMap& demand,
                                 const LabelMap& selector, std::optional<uint64_t> cursor) {
  std::vector<const RefNode*> fits;
  for (const RefNode& n : nodes) {
    if (RefMatches(n, selector) && RefFitsNow(n, demand)) fits.push_back(&n);
  }
  if (fits.empty()) return std::nullopt;
  double least = 2;
  for (const RefNode* n : fits) least = std::min(least, n->r.utilization);
  const RefNode* first = nullptr;
  for (const RefNode* n : fits) {
    if (n->r.utilization != least) continue;
    if (!first) first = n;
    if (cursor && n->order > *cursor) return *n;
  }
  return *first;
}

TEST(PolicyIndex, HybridAndSpreadDecideExactlyWhatALinearScanDecides) {
  for (uint64_t seed : {1u, 2u, 3u, 4u}) {
    Cluster cluster(seed * 7919);
    for (int i = 0; i < 150; ++i) cluster.AddRandomNode();
    HybridPolicy hybrid;
    SpreadPolicy spread;
    std::optional<uint64_t> cursor;
    int placed = 0, pending = 0, infeasible = 0;
    for (int step = 0; step < 1500; ++step) {
      auto& rng = cluster.rng();
      switch (rng() % 10) {
        case 0:
          cluster.AddRandomNode();
          break;
        case 1:
          cluster.RemoveRandomNode();
          break;
        case 2:
        case 3:
          cluster.ReleaseRandomly();
          break;
        case 4:
          cluster.LoadRandomly();
          break;
        default:
          break;
      }
      SchedulingRequest request{cluster.RandomDemand(), DefaultStrategy{},
                                cluster.RandomSelector()};
      std::vector<RefNode> nodes = cluster.Snapshot();
      bool use_spread = rng() % 2;
      SchedulingDecision d = use_spread ? spread.Schedule(cluster.view, request)
                                        : hybrid.Schedule(cluster.view, request);
      std::optional<NodeId> expected;
      std::optional<RefNode> spread_pick;
      if (use_spread) {
        spread_pick = RefSpread(nodes, request.demand, request.label_selector, cursor);
        if (spread_pick) expected = spread_pick->r.id;
      } else {
        expected = RefHybrid(nodes, request.demand, request.label_selector);
      }
      std::string context = "seed " + std::to_string(seed) + " step " + std::to_string(step) +
                            (use_spread ? " SPREAD " : " hybrid ") + Describe(d);
      if (!expected) {
        Kind kind = RefNotNow(nodes, request.demand, request.label_selector);
        ASSERT_TRUE(kind == Kind::kPending ? std::holds_alternative<Pending>(d)
                                           : std::holds_alternative<Infeasible>(d))
            << context;
        (kind == Kind::kPending ? pending : infeasible)++;
        continue;
      }
      const Scheduled* s = std::get_if<Scheduled>(&d);
      ASSERT_NE(s, nullptr) << context;
      ASSERT_EQ(s->node, *expected) << context;
      RefNode chosen{*cluster.view.Find(s->node), 0};
      ASSERT_EQ(s->gpu_ids, *RefPickGpus(chosen.r.gpu_free, Get(request.demand, "GPU"))) << context;
      if (use_spread) cursor = spread_pick->order;
      ASSERT_TRUE(cluster.view.Acquire(s->node, request.demand, s->gpu_ids)) << context;
      cluster.Hold(s->node, request.demand, s->gpu_ids);
      ++placed;
      if (step % 50 == 0) ASSERT_OK(cluster.view.TEST_CheckInvariants());
    }
    // The random mix exercises every outcome.
    EXPECT_GT(placed, 300) << seed;
    EXPECT_GT(pending, 20) << seed;
    EXPECT_GT(infeasible, 20) << seed;
  }
}

// Maximum bipartite matching of bundles to distinct nodes, over every node.
size_t RefMatching(const std::vector<std::vector<size_t>>& edges, size_t nodes) {
  std::vector<int> owner(nodes, -1);
  size_t matched = 0;
  for (size_t b = 0; b < edges.size(); ++b) {
    std::vector<bool> seen(nodes, false);
    std::function<bool(size_t)> augment = [&](size_t bundle) {
      for (size_t n : edges[bundle]) {
        if (seen[n]) continue;
        seen[n] = true;
        if (owner[n] < 0 || augment(static_cast<size_t>(owner[n]))) {
          owner[n] = static_cast<int>(bundle);
          return true;
        }
      }
      return false;
    };
    if (augment(b)) ++matched;
  }
  return matched;
}

// Infeasible only when a bundle fits no matching node's totals; a group that
// only lacks distinct nodes waits for more to join.
TEST(PolicyIndex, StrictSpreadIsPendingOrInfeasibleOnlyWhenNoAssignmentExists) {
  int outcomes[3] = {0, 0, 0};
  int waiting_for_nodes = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    Cluster cluster(seed);
    int n = 3 + static_cast<int>(cluster.rng()() % 8);
    for (int i = 0; i < n; ++i) cluster.AddRandomNode();
    for (int i = 0; i < n; ++i) cluster.LoadRandomly();
    PlacementGroupRequest request;
    request.strategy = PlacementStrategy::kStrictSpread;
    size_t bundles = 2 + cluster.rng()() % 4;
    for (size_t b = 0; b < bundles; ++b) request.bundles.push_back(cluster.RandomDemand());
    if (cluster.rng()() % 4 == 0) request.label_selector = {{"zone", "a"}};

    std::vector<RefNode> nodes = cluster.Snapshot();
    std::vector<std::vector<size_t>> now(bundles), ever(bundles);
    for (size_t b = 0; b < bundles; ++b) {
      for (size_t k = 0; k < nodes.size(); ++k) {
        if (!RefMatches(nodes[k], request.label_selector)) continue;
        if (RefFitsNow(nodes[k], request.bundles[b])) now[b].push_back(k);
        if (RefFitsTotal(nodes[k], request.bundles[b])) ever[b].push_back(k);
      }
    }
    bool hopeless = std::any_of(ever.begin(), ever.end(),
                                [](const std::vector<size_t>& c) { return c.empty(); });
    bool too_few_nodes = RefMatching(ever, nodes.size()) < bundles;
    Kind expected = RefMatching(now, nodes.size()) == bundles ? Kind::kScheduled
                    : hopeless                                ? Kind::kInfeasible
                                                              : Kind::kPending;
    BundleStrictSpreadPolicy policy;
    GroupDecision d = policy.Schedule(cluster.view, request);
    std::string context = "seed " + std::to_string(seed) + " " + Describe(d);
    switch (expected) {
      case Kind::kScheduled: {
        const GroupScheduled* g = std::get_if<GroupScheduled>(&d);
        ASSERT_NE(g, nullptr) << context;
        std::set<NodeId> distinct;
        for (const Scheduled& s : g->bundles) distinct.insert(s.node);
        ASSERT_EQ(distinct.size(), bundles) << context;
        ASSERT_OK(cluster.view.AcquireGroup(*g));
        break;
      }
      case Kind::kPending: {
        const Pending* p = std::get_if<Pending>(&d);
        ASSERT_NE(p, nullptr) << context;
        const std::string more = "waiting for more nodes to join";
        bool says_more = p->reason.size() >= more.size() &&
                         p->reason.compare(p->reason.size() - more.size(), more.size(), more) == 0;
        ASSERT_EQ(says_more, too_few_nodes) << context;
        waiting_for_nodes += too_few_nodes;
        break;
      }
      case Kind::kInfeasible:
        ASSERT_TRUE(std::holds_alternative<Infeasible>(d)) << context;
        break;
    }
    ++outcomes[static_cast<int>(expected)];
  }
  EXPECT_GT(outcomes[0], 20);
  EXPECT_GT(outcomes[1], 20);
  EXPECT_GT(outcomes[2], 20);
  EXPECT_GT(waiting_for_nodes, 5);
}

TEST(PolicyIndex, EveryPlacedGroupCommitsAndRespectsItsStrategy) {
  CompositeBundlePolicy policy;
  int placed = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Cluster cluster(seed * 31);
    for (int i = 0; i < 12; ++i) cluster.AddRandomNode();
    for (int i = 0; i < 8; ++i) cluster.LoadRandomly();
    for (PlacementStrategy strategy :
         {PlacementStrategy::kPack, PlacementStrategy::kSpread, PlacementStrategy::kStrictPack,
          PlacementStrategy::kStrictSpread}) {
      PlacementGroupRequest request;
      request.strategy = strategy;
      size_t bundles = 1 + cluster.rng()() % 6;
      for (size_t b = 0; b < bundles; ++b) request.bundles.push_back(cluster.RandomDemand());
      GroupDecision d = policy.Schedule(cluster.view, request);
      const GroupScheduled* g = std::get_if<GroupScheduled>(&d);
      if (!g) continue;
      std::string context = "seed " + std::to_string(seed) + " " + std::string(protocol::Name(strategy));
      ASSERT_EQ(g->bundles.size(), bundles) << context;
      std::set<NodeId> distinct;
      for (const Scheduled& s : g->bundles) distinct.insert(s.node);
      if (strategy == PlacementStrategy::kStrictPack) {
        ASSERT_EQ(distinct.size(), 1u) << context;
      }
      if (strategy == PlacementStrategy::kStrictSpread) {
        ASSERT_EQ(distinct.size(), bundles) << context;
      }
      // Bundles planned onto one node must commit one after the other.
      ASSERT_OK(cluster.view.AcquireGroup(*g));
      ASSERT_OK(cluster.view.TEST_CheckInvariants());
      ++placed;
    }
  }
  EXPECT_GT(placed, 300);
}

}  // namespace
}  // namespace rayx::scheduler::policy
