// Gloo collective groups across real processes: SIGKILL one rank while the
// others are inside an AllReduce; they fail promptly naming the dead rank.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "collective/gloo_group.h"
#include "collective/rendezvous_store.h"

namespace rayx::collective {
namespace collective_gloo_process_test {  // this file's own (unit tests compile in batches)

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// RendezvousStore in a directory, shared by forked processes: one file per
// key, written atomically by rename; Wait polls (every 2 ms) until a deadline.
class DirectoryStore : public RendezvousStore {
 public:
  explicit DirectoryStore(fs::path dir) : dir_(std::move(dir)) {}
  Status Set(const std::string& key, const std::string& value) override {
    fs::path tmp = dir_ / (FileName(key) + ".tmp" + std::to_string(getpid()));
    std::ofstream(tmp, std::ios::binary) << value;
    fs::rename(tmp, dir_ / FileName(key));
    return Status::OK();
  }
  std::optional<std::string> Get(const std::string& key) override {
    std::ifstream in(dir_ / FileName(key), std::ios::binary);
    if (!in) return std::nullopt;
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  Status Wait(const std::vector<std::string>& keys, Clock::time_point deadline) override {
    for (;;) {
      bool all = true;
      for (const auto& key : keys) all = all && fs::exists(dir_ / FileName(key));
      if (all) return Status::OK();
      if (Clock::now() >= deadline) return Status::TimedOut("keys not set in time");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

 private:
  static std::string FileName(std::string key) {
    for (char& c : key) {
      if (c == '/') c = '%';
    }
    return key;
  }
  fs::path dir_;
};

// Runs rank `rank` of 3 in a forked child: connects, then (ranks 0 and 1)
// runs an AllReduce and writes "<ms>\n<failed rank>\n<error>" to `result`,
// or (rank 2) waits to be killed. <ms> is when the AllReduce ended.
[[noreturn]] void RunRank(int rank, const fs::path& dir) {
  int code = 0;
  try {
    auto store = std::make_shared<DirectoryStore>(dir);
    GroupSpec spec;
    spec.options.name = "procs";
    spec.options.timeout_ms = 20000;
    spec.world_size = 3;
    spec.rank = rank;
    spec.attempt_id = "1";
    spec.node_ip = "127.0.0." + std::to_string(rank + 1);
    auto group = GlooGroup::Connect(spec, store);
    (void)store->Set("test/connected/" + std::to_string(rank), "");
    if (rank == 2) {
      for (;;) pause();
    }
    // Ranks 0 and 1 wait in the AllReduce for rank 2's header until it is
    // killed (the parent kills it once every rank is connected).
    std::vector<float> v(1 << 20, 1.0f);
    std::string error = "no error";
    int failed = -1;
    try {
      group->AllReduce(v.data(), v.size(), DataType::kFloat, ReduceOp::kSum, nullptr);
    } catch (const CollectiveError& e) {
      error = e.what();
      failed = e.failed_rank();
    }
    // steady_clock is CLOCK_MONOTONIC, shared by every process of the machine.
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  Clock::now().time_since_epoch())
                  .count();
    (void)store->Set("test/result/" + std::to_string(rank),
                     std::to_string(ms) + "\n" + std::to_string(failed) + "\n" + error);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    code = 1;
  }
  _exit(code);
}

TEST(GlooProcesses, SigkillOfOneRankMidAllReduceFailsTheOthersNamingIt) {
  char tmpl[] = "/tmp/rayx_collective_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const fs::path dir = tmpl;
  DirectoryStore store(dir);
  std::vector<pid_t> pids;
  for (int r = 0; r < 3; ++r) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) RunRank(r, dir);
    pids.push_back(pid);
  }
  ASSERT_TRUE(store.Wait({"test/connected/0", "test/connected/1", "test/connected/2"},
                         Clock::now() + std::chrono::seconds(30))
                  .ok());
  const auto killed_at = std::chrono::duration_cast<std::chrono::milliseconds>(
                             Clock::now().time_since_epoch())
                             .count();
  kill(pids[2], SIGKILL);
  ASSERT_TRUE(store.Wait({"test/result/0", "test/result/1"}, Clock::now() + std::chrono::seconds(30))
                  .ok());
  for (int r = 0; r < 2; ++r) {
    std::string result = *store.Get("test/result/" + std::to_string(r));
    std::istringstream in(result);
    int64_t ended_at = 0;
    int failed = -1;
    in >> ended_at >> failed;
    EXPECT_EQ(failed, 2) << result;
    EXPECT_NE(result.find("'procs' AllReduce on rank " + std::to_string(r) + " of 3"),
              std::string::npos)
        << result;
    EXPECT_NE(result.find("rank 2"), std::string::npos) << result;
    // Soon after the kill (a second when idle), against a 20 s timeout.
    EXPECT_LT(ended_at - killed_at, 5000) << result;
  }
  for (pid_t pid : pids) {
    int status = 0;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rayx::collective
