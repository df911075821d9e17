// Decisions per second of the scheduling policy library on clusters of 10,
// 1,000 and 10,000 nodes (Google Benchmark). The cost per decision must not
// grow linearly with the node count.
//
// Every cluster has the same make-up at every size: nodes of 16 CPUs and
// 64 GiB; every fourth node also has 8 GPUs; labels zone=z0..z2 (so 6 node
// groups); a seeded random load (0-12 CPUs and 0-4 GPUs taken per node) so
// searches meet nodes that do not fit. Every timed iteration changes state the
// way the head would and undoes it: single requests are decided and acquired,
// and the placement made kWindow iterations earlier is released; placement
// groups are decided, committed with AcquireGroup and released with
// ReleaseGroup. Counters: the fraction of decisions that were Pending or
// Infeasible, which must be 0 for the figures to mean "placed" (1 pending for
// BM_Default_Pending, which measures the waiting path on purpose).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <random>
#include <vector>

#include "head/node_table.h"
#include "policy/cluster_resource_view.h"
#include "policy/composite_bundle_policy.h"
#include "policy/composite_policy.h"

namespace rayx::scheduler::policy {
namespace {

constexpr size_t kWindow = 4;  // placements outstanding in the single-request loops
constexpr uint64_t kSeed = 20261123;

NodeId BenchNodeId(uint64_t n) {
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(n), 0ULL);
  return *NodeId::FromHex(hex);
}

ResourceMap NodeTotal(size_t i) {
  ResourceMap total{{"CPU", 16}, {"memory", 64.0 * (1 << 30)}};
  if (i % 4 == 3) total["GPU"] = 8;
  return total;
}

// A view of `n` nodes with the seeded random load described above.
ClusterResourceView MakeCluster(size_t n) {
  ClusterResourceView view;
  std::mt19937_64 rng(kSeed);
  for (size_t i = 0; i < n; ++i) {
    ResourceMap total = NodeTotal(i);
    NodeId id = BenchNodeId(i);
    view.AddNode(id, total, {{"zone", "z" + std::to_string((i / 4) % 3)}});
    double cpus = static_cast<double>(rng() % 13);
    if (cpus > 0 && !view.Acquire(id, {{"CPU", cpus}}, {})) std::abort();
    if (total.count("GPU")) {
      int gpus = static_cast<int>(rng() % 5);
      std::vector<int> ids;
      for (int d = 0; d < gpus; ++d) ids.push_back(d);
      if (gpus > 0 && !view.Acquire(id, {{"GPU", static_cast<double>(gpus)}}, ids)) std::abort();
    }
  }
  return view;
}

// Decisions per second, and the fraction of them that were Pending or Infeasible.
void Count(benchmark::State& state, int64_t pending, int64_t infeasible) {
  state.SetItemsProcessed(state.iterations());
  double n = std::max<double>(1, static_cast<double>(state.iterations()));
  state.counters["pending"] = static_cast<double>(pending) / n;
  state.counters["infeasible"] = static_cast<double>(infeasible) / n;
}

void SingleRequest(benchmark::State& state, SchedulingRequest request) {
  ClusterResourceView view = MakeCluster(static_cast<size_t>(state.range(0)));
  CompositePolicy policy;
  std::deque<Scheduled> outstanding;
  int64_t pending = 0, infeasible = 0;
  for (auto _ : state) {
    SchedulingDecision d = policy.Schedule(view, request);
    if (auto* s = std::get_if<Scheduled>(&d)) {
      if (!view.Acquire(s->node, request.demand, s->gpu_ids)) std::abort();
      outstanding.push_back(std::move(*s));
      if (outstanding.size() > kWindow) {
        view.Release(outstanding.front().node, request.demand, outstanding.front().gpu_ids);
        outstanding.pop_front();
      }
    } else if (std::holds_alternative<Pending>(d)) {
      ++pending;
    } else {
      ++infeasible;
    }
  }
  Count(state, pending, infeasible);
}

void BM_Default_Cpu(benchmark::State& state) {
  SingleRequest(state, {{{"CPU", 1}}, DefaultStrategy{}, {}});
}
void BM_Default_Gpu(benchmark::State& state) {
  SingleRequest(state, {{{"CPU", 1}, {"GPU", 1}}, DefaultStrategy{}, {}});
}
void BM_Spread_Cpu(benchmark::State& state) {
  SingleRequest(state, {{{"CPU", 1}}, SpreadStrategy{}, {}});
}
void BM_Spread_Gpu(benchmark::State& state) {
  SingleRequest(state, {{{"CPU", 1}, {"GPU", 1}}, SpreadStrategy{}, {}});
}
void BM_Default_CpuWithLabelSelector(benchmark::State& state) {
  SingleRequest(state, {{{"CPU", 1}}, DefaultStrategy{}, {{"zone", "z1"}}});
}

// A request that fits every node's totals but no node now: the path pending
// work takes each time the head re-examines it.
void BM_Default_Pending(benchmark::State& state) {
  ClusterResourceView view = MakeCluster(static_cast<size_t>(state.range(0)));
  CompositePolicy policy;
  // 13 CPUs fit every node's 16; take CPUs until no node has 13 free.
  SchedulingRequest request{{{"CPU", 13}}, DefaultStrategy{}, {}};
  for (size_t i = 0; i < static_cast<size_t>(state.range(0)); ++i) {
    auto node = view.Find(BenchNodeId(i));
    double free = node->available.at("CPU");
    if (free >= 13 && !view.Acquire(node->id, {{"CPU", free - 12}}, {})) std::abort();
  }
  int64_t pending = 0, infeasible = 0;
  for (auto _ : state) {
    SchedulingDecision d = policy.Schedule(view, request);
    if (std::holds_alternative<Pending>(d))
      ++pending;
    else if (std::holds_alternative<Infeasible>(d))
      ++infeasible;
    benchmark::DoNotOptimize(d);
  }
  Count(state, pending, infeasible);  // pending must be 1: every decision Pending
}

void Group(benchmark::State& state, PlacementStrategy strategy, ResourceMap bundle) {
  ClusterResourceView view = MakeCluster(static_cast<size_t>(state.range(0)));
  CompositeBundlePolicy policy;
  PlacementGroupRequest request{std::vector<ResourceMap>(8, bundle), strategy, {}};
  int64_t pending = 0, infeasible = 0;
  for (auto _ : state) {
    GroupDecision d = policy.Schedule(view, request);
    if (auto* g = std::get_if<GroupScheduled>(&d)) {
      if (!view.AcquireGroup(*g).ok()) std::abort();
      view.ReleaseGroup(*g);
    } else if (std::holds_alternative<Pending>(d)) {
      ++pending;
    } else {
      ++infeasible;
    }
  }
  Count(state, pending, infeasible);
}

void BM_Group8_Pack_Cpu(benchmark::State& state) {
  Group(state, PlacementStrategy::kPack, {{"CPU", 2}});
}
void BM_Group8_Pack_Gpu(benchmark::State& state) {
  Group(state, PlacementStrategy::kPack, {{"CPU", 1}, {"GPU", 1}});
}
void BM_Group8_StrictSpread_Cpu(benchmark::State& state) {
  Group(state, PlacementStrategy::kStrictSpread, {{"CPU", 2}});
}
void BM_Group8_StrictSpread_Gpu(benchmark::State& state) {
  Group(state, PlacementStrategy::kStrictSpread, {{"CPU", 1}, {"GPU", 1}});
}

// Baseline: the head's current NodeTable first fit (O(nodes) per grant) on the
// same cluster, same loop as SingleRequest.
void BM_Baseline_NodeTableFirstFit_Cpu(benchmark::State& state) {
  NodeTable table({});
  std::mt19937_64 rng(kSeed);
  std::vector<NodeId> ids;
  for (size_t i = 0; i < static_cast<size_t>(state.range(0)); ++i) {
    NodeInfo info;
    info.total = NodeTotal(i);
    ids.push_back(table.Register(info, 0, 0));
    double cpus = static_cast<double>(rng() % 13);
    if (cpus > 0 && !table.TryAcquire(ids.back(), {{"CPU", cpus}})) std::abort();
    if (info.total.count("GPU")) {
      double gpus = static_cast<double>(rng() % 5);
      if (gpus > 0 && !table.TryAcquire(ids.back(), {{"GPU", gpus}})) std::abort();
    }
  }
  ResourceMap demand{{"CPU", 1}};
  std::deque<NodeId> outstanding;
  int64_t pending = 0;
  for (auto _ : state) {
    std::optional<NodeId> node = table.FindNodeWithAvailable(demand);
    if (!node) {
      ++pending;
      continue;
    }
    if (!table.TryAcquire(*node, demand)) std::abort();
    outstanding.push_back(*node);
    if (outstanding.size() > kWindow) {
      table.Release(outstanding.front(), demand);
      outstanding.pop_front();
    }
  }
  Count(state, pending, 0);
}

void Sizes(benchmark::internal::Benchmark* b) {
  b->Arg(10)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Default_Cpu)->Apply(Sizes);
BENCHMARK(BM_Default_Gpu)->Apply(Sizes);
BENCHMARK(BM_Spread_Cpu)->Apply(Sizes);
BENCHMARK(BM_Spread_Gpu)->Apply(Sizes);
BENCHMARK(BM_Default_CpuWithLabelSelector)->Apply(Sizes);
BENCHMARK(BM_Default_Pending)->Apply(Sizes);
BENCHMARK(BM_Group8_Pack_Cpu)->Apply(Sizes);
BENCHMARK(BM_Group8_Pack_Gpu)->Apply(Sizes);
BENCHMARK(BM_Group8_StrictSpread_Cpu)->Apply(Sizes);
// 10 nodes have only two GPU nodes: eight GPU bundles on distinct nodes never fit.
BENCHMARK(BM_Group8_StrictSpread_Gpu)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Baseline_NodeTableFirstFit_Cpu)->Apply(Sizes);

}  // namespace
}  // namespace rayx::scheduler::policy

BENCHMARK_MAIN();
