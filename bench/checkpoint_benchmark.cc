// A checkpoint shard kept by the nodes, on a loopback cluster of two nodes
// (127.0.0.1 and 127.0.0.2): the rank's Report of one shard with 2 copies
// (into its node's checkpoint directory, hashed, then pulled and hashed by the
// other node) and its restore in the driver (pulled from a copy, hashed),
// against the floor on the same machine: the same bytes written to a file of
// the same disk and copied over loopback TCP into another (write), and the TCP
// copy alone (restore), without fsync (as rayx writes) and with it (as `dd
// conv=fsync` measures the disk). Medians of the rounds, GB/s.
// This binary is also its workers' program.
//
//   ./build/bin/rayx_checkpoint_benchmark [--size-mib N] [--rounds R]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/flags.h"
#include "rayx/kv.h"
#include "rayx/rayx.h"
#include "rayx/train.h"
#include "train/train_session.h"
#include "util/local_cluster.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct BenchConfig {
  int64_t bytes = 0;
  int rounds = 0;
  MSGPACK_DEFINE_MAP(bytes, rounds)
};

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void WriteFile(const fs::path& path, const std::string& bytes, bool sync = false) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  if (sync) ::fsync(fd);
  ::close(fd);
}

// A process's peak resident memory (VmHWM), in bytes.
int64_t PeakRss(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  }
  return -1;
}

// The rank: one shard of `bytes` per round (written 4 MiB at a time, so the
// rank's own memory is what Report takes), Report timed.
void ShardLoop(BenchConfig c) {
  const std::string chunk(4 << 20, 'c');
  for (int r = 0; r < c.rounds; ++r) {
    const fs::path dir = fs::temp_directory_path() / ("ckpt-bench-" + std::to_string(getpid()));
    fs::create_directories(dir);
    {
      std::ofstream out(dir / "shard", std::ios::binary | std::ios::trunc);
      for (int64_t done = 0; done < c.bytes; done += static_cast<int64_t>(chunk.size())) {
        out.write(chunk.data(), static_cast<std::streamsize>(
                                    std::min<int64_t>(c.bytes - done, chunk.size())));
      }
    }
    auto start = Clock::now();
    rayx::train::Report({{"round", r}}, rayx::train::Checkpoint::FromDirectory(dir.string()));
    rayx::kv::Put("ckpt-bench/write/" + std::to_string(r), std::to_string(Seconds(start)));
    fs::remove_all(dir);
  }
  rayx::kv::Put("ckpt-bench/rank-rss", std::to_string(PeakRss(getpid())));
}
RAYX_REMOTE(ShardLoop);

// Loopback TCP: `bytes` sent from memory, received into `file`. The listener
// lives for one copy and takes only its own sender's connection (the peer's
// port is the sender socket's, bound first), at most `bytes` of it: another
// process of the machine that connects first gets nothing written.
double TcpCopy(const std::string& bytes, const fs::path& file, bool sync = false) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  ::listen(listener, 1);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ::bind(s, reinterpret_cast<sockaddr*>(&from), sizeof from);
  len = sizeof from;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&from), &len);
  auto start = Clock::now();
  std::thread sender([&] {
    ::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::send(s, bytes.data() + done, std::min<size_t>(bytes.size() - done, 4 << 20), 0);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::close(s);
  });
  int conn = -1;
  for (int tries = 0; conn < 0 && tries < 16; ++tries) {
    sockaddr_in peer{};
    socklen_t peer_len = sizeof peer;
    conn = ::accept4(listener, reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_CLOEXEC);
    if (conn >= 0 && peer.sin_port != from.sin_port) {
      ::close(conn);  // not ours
      conn = -1;
    }
  }
  int out = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  std::vector<char> buffer(4 << 20);
  size_t received = 0;
  ssize_t n;
  while (conn >= 0 && received < bytes.size() &&
         (n = ::recv(conn, buffer.data(), std::min(buffer.size(), bytes.size() - received), 0)) > 0) {
    if (::write(out, buffer.data(), static_cast<size_t>(n)) != n) break;
    received += static_cast<size_t>(n);
  }
  sender.join();
  if (sync) ::fsync(out);
  ::close(out);
  if (conn >= 0) ::close(conn);
  ::close(listener);
  return Seconds(start);
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("RAYX_WORKER_MODE")) rayx::Init(argc, argv);  // serves tasks, never returns
  int64_t size_mib = 256, rounds = 3;
  rayx::FlagParser flags("rayx_checkpoint_benchmark");
  flags.AddInt("size-mib", &size_mib, 1, 1 << 20, "shard size in MiB (default 256)");
  flags.AddInt("rounds", &rounds, 1, 100, "rounds (default 3)");
  std::vector<std::string> args(argv + 1, argv + argc);
  if (rayx::Status parsed = flags.Parse(args, nullptr); !parsed.ok()) {
    std::fprintf(stderr, "%s\n", parsed.message().c_str());
    return 2;
  }
  const int64_t size = size_mib << 20;
  rayx::testing::LocalCluster::Options options;
  options.head_node.num_cpus = 0;  // the rank goes to the other node
  auto cluster = rayx::testing::LocalCluster::Start(options);
  if (!cluster.ok()) return std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str()), 1;
  auto node = (*cluster)->AddNode({.num_cpus = 1, .extra_args = {"--node-ip-address", "127.0.0.2"}});
  if (!node.ok()) return std::fprintf(stderr, "%s\n", node.status().ToString().c_str()), 1;
  rayx::Options init;
  init.address = (*cluster)->address();
  init.token = (*cluster)->token();
  rayx::Init(init);

  // rayx: the rank's Reports, then restores of the last checkpoint.
  rayx::train::RunConfig run{.name = "bench", .num_to_keep = 1, .num_replicas = 2};
  rayx::train::DataParallelTrainer trainer(ShardLoop, BenchConfig{size, static_cast<int>(rounds)},
                                           {.num_workers = 1}, run);
  rayx::train::Result result = trainer.Fit();
  if (!result.error.empty() || !result.checkpoint) {
    return std::fprintf(stderr, "the run failed: %s\n", result.error.c_str()), 1;
  }
  std::vector<double> write, restore, floor_write, floor_restore, synced_write, synced_restore;
  for (int r = 0; r < rounds; ++r) {
    auto seconds = rayx::kv::Get("ckpt-bench/write/" + std::to_string(r));
    write.push_back(static_cast<double>(size) / std::stod(seconds.value_or("1e9")) / 1e9);
  }
  const std::string bytes(static_cast<size_t>(size), 'c');
  const fs::path scratch = fs::temp_directory_path() / ("ckpt-bench-floor-" + std::to_string(getpid()));
  fs::create_directories(scratch);
  for (int r = 0; r < rounds; ++r) {
    // The driver has no copy: each restore pulls the shard from a node.
    for (const auto& entry : fs::directory_iterator(rayx::train::detail::ProcessFetchDir())) {
      fs::remove_all(entry.path());
    }
    auto start = Clock::now();
    std::string dir = rayx::train::detail::FetchCheckpoint(result.checkpoint->id(), "bench", "", 0);
    restore.push_back(static_cast<double>(size) / Seconds(start) / 1e9);
    if (fs::file_size(fs::path(dir) / "shard") != static_cast<uint64_t>(size)) {
      return std::fprintf(stderr, "the restored shard has the wrong size\n"), 1;
    }
    start = Clock::now();
    WriteFile(scratch / "local", bytes);
    double local = Seconds(start);
    double tcp = TcpCopy(bytes, scratch / "remote");
    floor_write.push_back(static_cast<double>(size) / (local + tcp) / 1e9);
    floor_restore.push_back(static_cast<double>(size) / TcpCopy(bytes, scratch / "restored") / 1e9);
    // dd with fsync, as the disk itself takes it.
    start = Clock::now();
    WriteFile(scratch / "local-synced", bytes, true);
    local = Seconds(start);
    tcp = TcpCopy(bytes, scratch / "remote-synced", true);
    synced_write.push_back(static_cast<double>(size) / (local + tcp) / 1e9);
    synced_restore.push_back(static_cast<double>(size) /
                             TcpCopy(bytes, scratch / "restored-synced", true) / 1e9);
    fs::remove_all(scratch);
    fs::create_directories(scratch);
  }
  fs::remove_all(scratch);
  fs::remove_all(fs::temp_directory_path() / "rayx-checkpoints");
  const int64_t rank_rss = std::atoll(rayx::kv::Get("ckpt-bench/rank-rss").value_or("-1").c_str());
  const int64_t source_rss = PeakRss((*node).agent.pid);
  const int64_t copy_rss = PeakRss((*cluster)->head_node().agent.pid);
  rayx::Shutdown();
  std::printf("shard %lld MiB, %lld rounds, 2 copies (medians, GB/s of shard)\n",
              static_cast<long long>(size_mib), static_cast<long long>(rounds));
  std::printf("  write   rayx %6.2f   floor (file + loopback TCP copy) %6.2f   ratio %.2fx\n",
              Median(write), Median(floor_write), Median(write) / Median(floor_write));
  std::printf("  restore rayx %6.2f   floor (loopback TCP copy)        %6.2f   ratio %.2fx\n",
              Median(restore), Median(floor_restore), Median(restore) / Median(floor_restore));
  std::printf("  peak RSS: the rank %.0f MiB, its node's agent %.0f MiB, the agent that "
              "copied it %.0f MiB\n",
              rank_rss / 1048576.0, source_rss / 1048576.0, copy_rss / 1048576.0);
  std::printf("  with fsync on the floor's files: write %6.2f (ratio %.2fx), restore %6.2f "
              "(ratio %.2fx)\n",
              Median(synced_write), Median(write) / Median(synced_write), Median(synced_restore),
              Median(restore) / Median(synced_restore));
  return 0;
}
