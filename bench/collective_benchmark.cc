// Gloo allreduce on this machine: 4-byte latency (median, µs) and 64 MiB
// algorithm bandwidth (bytes / time, GB/s) for 2 and 4 ranks as threads over
// loopback. Usage: rayx_collective_benchmark [iterations_4B] [iterations_64MiB]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collective/gloo_group.h"
#include "collective/rendezvous_store.h"

namespace {

using rayx::collective::DataType;
using rayx::collective::GlooGroup;
using rayx::collective::GroupSpec;
using rayx::collective::InMemoryRendezvousStore;
using rayx::collective::ReduceOp;
using Clock = std::chrono::steady_clock;

std::vector<std::shared_ptr<GlooGroup>> Connect(int n, const std::string& name) {
  auto store = std::make_shared<InMemoryRendezvousStore>();
  std::vector<std::shared_ptr<GlooGroup>> groups(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      GroupSpec spec;
      spec.options.name = name;
      spec.world_size = n;
      spec.rank = r;
      spec.node_ip = "127.0.0.1";
      groups[r] = GlooGroup::Connect(spec, store);
    });
  }
  for (auto& t : threads) t.join();
  return groups;
}

// Runs `iterations` allreduces of `count` floats on every rank; returns rank
// 0's per-iteration seconds.
std::vector<double> Run(std::vector<std::shared_ptr<GlooGroup>>& groups, size_t count,
                        int iterations) {
  const int n = static_cast<int>(groups.size());
  std::vector<double> seconds;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> data(count, 1.0f);
      groups[r]->Barrier();
      for (int i = 0; i < iterations; ++i) {
        auto start = Clock::now();
        groups[r]->AllReduce(data.data(), count, DataType::kFloat, ReduceOp::kSum, nullptr);
        if (r == 0) {
          seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  return seconds;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int small_iterations = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int big_iterations = argc > 2 ? std::atoi(argv[2]) : 10;
  std::printf("%-28s %6s %12s\n", "metric", "ranks", "value");
  for (int n : {2, 4}) {
    auto groups = Connect(n, "bench" + std::to_string(n));
    Run(groups, 1, 100);  // warm up
    double latency_us = Median(Run(groups, 1, small_iterations)) * 1e6;
    std::printf("%-28s %6d %12.1f\n", "allreduce_4B_latency_us", n, latency_us);
    const size_t big = 64ull * 1024 * 1024 / sizeof(float);
    Run(groups, big, 1);  // warm up
    double gbps = 64.0 * 1024 * 1024 / Median(Run(groups, big, big_iterations)) / 1e9;
    std::printf("%-28s %6d %12.2f\n", "allreduce_64MiB_GBps", n, gbps);
  }
  return 0;
}
