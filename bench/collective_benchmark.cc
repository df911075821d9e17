// Gloo allreduce on this machine: 4-byte latency (median, µs) and 64 MiB
// algorithm bandwidth (bytes / time, GB/s) for 2 and 4 ranks, each rank its own
// process (as torch.distributed runs them), over loopback.
// Usage: rayx_collective_benchmark [--compare-torch] [--rounds R]
//            [--python PYTHON] [--torch-script PATH] [iterations_4B] [iterations_64MiB]
// --compare-torch alternates rayx and bench/torch_allreduce.py R times (default
// 3) per rank count and prints both medians and the ratio rayx / torch.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "collective/gloo_group.h"
#include "collective/rendezvous_store.h"
#include "torch_allreduce_runner.h"

#ifndef RAYX_SOURCE_DIR
#define RAYX_SOURCE_DIR "."
#endif

namespace {

namespace fs = std::filesystem;
using rayx::Status;
using rayx::collective::DataType;
using rayx::collective::GlooGroup;
using rayx::collective::GroupSpec;
using rayx::collective::ReduceOp;
using rayx::collective::RendezvousStore;
using Clock = std::chrono::steady_clock;

// RendezvousStore in a directory shared by the rank processes of one benchmark
// run (one file per key, written by rename so readers never see half a value).
// Thread-safe (every call touches only the file system).
class FileRendezvousStore : public RendezvousStore {
 public:
  explicit FileRendezvousStore(fs::path dir) : dir_(std::move(dir)) {}

  Status Set(const std::string& key, const std::string& value) override {
    const fs::path tmp = dir_ / (".tmp." + std::to_string(getpid()));
    {
      std::ofstream out(tmp, std::ios::binary);
      out << value;
      if (!out) return Status::Unavailable("cannot write " + tmp.string());
    }
    fs::rename(tmp, PathOf(key));
    return Status::OK();
  }

  std::optional<std::string> Get(const std::string& key) override {
    std::ifstream in(PathOf(key), std::ios::binary);
    if (!in) return std::nullopt;
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
  }

  Status Wait(const std::vector<std::string>& keys, Clock::time_point deadline) override {
    for (;;) {
      std::string missing;
      for (const auto& key : keys) {
        if (!fs::exists(PathOf(key))) missing += key + " ";
      }
      if (missing.empty()) return Status::OK();
      if (Clock::now() >= deadline) return Status::TimedOut("keys not set in time: " + missing);
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  }

 private:
  fs::path PathOf(std::string key) const {
    std::replace(key.begin(), key.end(), '/', '%');
    return dir_ / key;
  }

  fs::path dir_;
};

// Runs `iterations` allreduces of `count` floats; returns the per-iteration
// seconds.
std::vector<double> Run(GlooGroup& group, size_t count, int iterations) {
  std::vector<float> data(count, 1.0f);
  std::vector<double> seconds;
  group.Barrier();
  for (int i = 0; i < iterations; ++i) {
    auto start = Clock::now();
    group.AllReduce(data.data(), count, DataType::kFloat, ReduceOp::kSum, nullptr);
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return seconds;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Figures {
  double latency_us = 0;
  double gbps = 0;
};

constexpr size_t kBigBytes = 64ull * 1024 * 1024;

// One rank process: connects, measures, and (rank 0) writes its figures to `fd`.
[[noreturn]] void RankMain(int n, int rank, const fs::path& dir, int small, int big, int fd) {
  int code = 0;
  try {
    auto store = std::make_shared<FileRendezvousStore>(dir);
    GroupSpec spec;
    spec.options.name = "bench";
    spec.world_size = n;
    spec.rank = rank;
    spec.node_ip = "127.0.0.1";
    auto group = GlooGroup::Connect(spec, store);
    Run(*group, 1, 100);  // warm up
    Figures f;
    f.latency_us = Median(Run(*group, 1, small)) * 1e6;
    Run(*group, kBigBytes / sizeof(float), 1);  // warm up
    f.gbps = kBigBytes / Median(Run(*group, kBigBytes / sizeof(float), big)) / 1e9;
    group->Barrier();
    if (rank == 0 && write(fd, &f, sizeof(f)) != sizeof(f)) code = 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    code = 1;
  }
  _exit(code);
}

// Forks `n` rank processes and returns rank 0's figures.
Figures MeasureRayx(int n, int small, int big) {
  static int run = 0;
  const fs::path dir = fs::temp_directory_path() /
                       ("rayx_collective_benchmark." + std::to_string(getpid()) + "." +
                        std::to_string(run++));
  fs::create_directories(dir);
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      RankMain(n, r, dir, small, big, fds[1]);
    }
    pids.push_back(pid);
  }
  close(fds[1]);
  Figures f;
  const bool got = read(fds[0], &f, sizeof(f)) == sizeof(f);
  close(fds[0]);
  bool ok = got;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  fs::remove_all(dir);
  if (!ok) {
    std::fprintf(stderr, "rayx ranks failed (%d ranks)\n", n);
    std::exit(1);
  }
  return f;
}

// Runs bench/torch_allreduce.py for `n` ranks; exits when it fails.
Figures MeasureTorch(const std::string& python, const std::string& script, int n, int small,
                     int big) {
  auto f = rayx::bench::MeasureTorchAllReduce(python, script, n, small, big);
  if (!f.ok()) {
    std::fprintf(stderr, "%s\n", f.status().message().c_str());
    std::exit(1);
  }
  return Figures{f->latency_us, f->gbps};
}

}  // namespace

int main(int argc, char** argv) {
  bool compare = false;
  int rounds = 3;
  std::string script = std::string(RAYX_SOURCE_DIR) + "/bench/torch_allreduce.py";
  std::string python = "python3";  // one with torch: Debian's python3-torch
  std::vector<int> counts;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--compare-torch") {
      compare = true;
    } else if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else if (arg == "--python" && i + 1 < argc) {
      python = argv[++i];
    } else if (arg == "--torch-script" && i + 1 < argc) {
      script = argv[++i];
    } else {
      counts.push_back(std::atoi(arg.c_str()));
    }
  }
  const int small = counts.size() > 0 ? counts[0] : 2000;
  const int big = counts.size() > 1 ? counts[1] : 10;
  if (!compare) {
    std::printf("%-28s %6s %12s\n", "metric", "ranks", "value");
    for (int n : {2, 4}) {
      Figures f = MeasureRayx(n, small, big);
      std::printf("%-28s %6d %12.1f\n", "allreduce_4B_latency_us", n, f.latency_us);
      std::printf("%-28s %6d %12.2f\n", "allreduce_64MiB_GBps", n, f.gbps);
    }
    return 0;
  }
  // Alternates rayx and torch so that both see the same machine load.
  std::printf("%-28s %6s %10s %10s %8s\n", "metric", "ranks", "rayx", "torch", "ratio");
  for (int n : {2, 4}) {
    std::vector<double> rl, rg, tl, tg;
    for (int round = 0; round < rounds; ++round) {
      Figures r = MeasureRayx(n, small, big);
      Figures t = MeasureTorch(python, script, n, small, big);
      std::fprintf(stderr, "round %d, %d ranks: rayx %.1f us %.3f GB/s, torch %.1f us %.3f GB/s\n",
                   round, n, r.latency_us, r.gbps, t.latency_us, t.gbps);
      rl.push_back(r.latency_us);
      rg.push_back(r.gbps);
      tl.push_back(t.latency_us);
      tg.push_back(t.gbps);
    }
    const double l = Median(rl), lt = Median(tl), g = Median(rg), gt = Median(tg);
    std::printf("%-28s %6d %10.1f %10.1f %8.2f\n", "allreduce_4B_latency_us", n, l, lt, l / lt);
    std::printf("%-28s %6d %10.3f %10.3f %8.2f\n", "allreduce_64MiB_GBps", n, g, gt, g / gt);
    std::fflush(stdout);
  }
  return 0;
}
