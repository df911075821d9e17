// Allreduce rounds for `rayx microbenchmark` (see microbenchmark_allreduce.h).
#include "microbenchmark_allreduce.h"

#include <rayx/collective.h>
#include <rayx/rayx.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>

#include "rayx/ids.h"

namespace {

constexpr size_t kBigBytes = 64ull << 20;
constexpr int64_t kCallTimeoutMs = 120000;

double UpperMedian(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per allreduce of `count` floats, `iterations` times, after a barrier.
std::vector<double> Time(const std::string& group, size_t count, int64_t iterations) {
  std::vector<float> data(count, 1.0f);
  std::vector<double> seconds;
  seconds.reserve(static_cast<size_t>(iterations));
  rayx::collective::Barrier(group);
  for (int64_t i = 0; i < iterations; ++i) {
    auto start = std::chrono::steady_clock::now();
    rayx::collective::AllReduce(data, rayx::collective::ReduceOp::kSum, group);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  // One more from ones (the timed ones compound in place): every rank's ones
  // were added, so a skipped or partial allreduce shows here.
  std::fill(data.begin(), data.end(), 1.0f);
  rayx::collective::AllReduce(data, rayx::collective::ReduceOp::kSum, group);
  const float world = static_cast<float>(rayx::collective::GetWorldSize(group));
  if (data.front() != world || data.back() != world) {
    throw std::runtime_error("allreduce result " + std::to_string(data.front()) + ", expected " +
                             std::to_string(world));
  }
  return seconds;
}

}  // namespace

// A rank of the benchmark's group: both figures as torch_allreduce.py takes
// them (medians on this rank, algorithm bandwidth = bytes / time).
class BenchRank {
 public:
  static BenchRank* Create() { return new BenchRank(); }
  std::vector<double> Figures(std::string group, int64_t small, int64_t big) {
    Time(group, 1, 100);  // warm up
    double latency_us = UpperMedian(Time(group, 1, small)) * 1e6;
    Time(group, kBigBytes / sizeof(float), 1);  // warm up
    double gbps = static_cast<double>(kBigBytes) /
                  UpperMedian(Time(group, kBigBytes / sizeof(float), big)) / 1e9;
    return {latency_us, gbps};
  }
};
RAYX_REMOTE(BenchRank::Create, &BenchRank::Figures);

namespace rayx::bench {

std::vector<AllReduceRound> MeasureAllReduce(int ranks, int rounds, int small, int big,
                                             const TorchBaseline& torch) {
  std::vector<rayx::ActorHandle<BenchRank>> actors;
  for (int r = 0; r < ranks; ++r) {
    actors.push_back(rayx::Actor(BenchRank::Create).SetResources({{"CPU", 0.01}}).Remote());
  }
  const std::string group = "bench-allreduce-" + rayx::detail::RandomHex(6);
  std::vector<AllReduceRound> out;
  try {
    rayx::collective::CreateCollectiveGroup(actors, {.name = group, .timeout_ms = 60000});
    for (int round = -1; round < rounds; ++round) {  // round -1 warms up
      std::vector<rayx::ObjectRef<std::vector<double>>> figures;
      for (auto& actor : actors) {
        figures.push_back(actor.Task(&BenchRank::Figures).Remote(group, small, big));
      }
      std::vector<double> rank0 = *figures[0].Get(kCallTimeoutMs);
      for (size_t r = 1; r < figures.size(); ++r) figures[r].Get(kCallTimeoutMs);
      if (round < 0) continue;
      AllReduceRound result;
      result.rayx = {rank0.at(0), rank0.at(1)};
      if (!torch.script.empty()) {
        auto t = MeasureTorchAllReduce(torch.python, torch.script, ranks, small, big);
        if (t.ok()) {
          result.baseline = *t;
        } else {
          result.baseline_error = t.status().message();
        }
      }
      out.push_back(std::move(result));
    }
    rayx::collective::DestroyCollectiveGroup(group);
  } catch (...) {
    for (auto& actor : actors) actor.Kill();
    throw;
  }
  for (auto& actor : actors) actor.Kill();
  return out;
}

}  // namespace rayx::bench
