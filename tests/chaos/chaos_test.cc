// The chaos suite: a driver runs 10,000 retriable tasks and 4 restartable
// actors holding fake GPUs on a 4-node loopback cluster while a seeded chaos
// thread SIGKILLs random workers, SIGKILLs and restarts agents, SIGSTOPs an
// agent past the node timeout and resumes it, and SIGKILLs the head and starts
// it again (it reloads its state; agents and the driver rejoin). Afterwards every result is
// correct, no GPU was ever visible to two live workers of one node at once
// (sampled from outside, from each live worker's CUDA_VISIBLE_DEVICES, and
// checked by the head's own device account), and no process is left.
//
// RAYX_CHAOS_SEED=<n> replays a run; the seed is printed either way.
// This binary is also its workers' program (RAYX_WORKER_MODE).
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rayx/rayx.h"
#include "util/local_cluster.h"

namespace {

using rayx::testing::LocalCluster;
using rayx::testing::NodeHandle;
using rayx::testing::NodeOptions;

int64_t Square(int64_t x) { return x * x; }

// A stateless actor holding one (fake) GPU.
class Holder {
 public:
  static Holder* Create(int id) { return new Holder(id); }
  explicit Holder(int id) : id_(id) {}
  int64_t Echo(int64_t x) { return x * 3 + id_; }

 private:
  int id_;
};

RAYX_REMOTE(Square, Holder::Create, &Holder::Echo);

constexpr int kTasks = 10000;
constexpr int kBatch = 500;
constexpr int kActors = 4;
constexpr int64_t kNodeTimeoutMs = 1000;
const std::vector<std::string> kWorkerIps = {"127.0.0.2", "127.0.0.3", "127.0.0.4"};

// The variables of a live process, or empty when it is gone or a zombie.
std::map<std::string, std::string> EnvironOf(const std::string& pid) {
  std::map<std::string, std::string> out;
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return out;
  size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size() || line[close + 2] == 'Z') return out;
  std::ifstream in("/proc/" + pid + "/environ", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream vars(all);
  std::string var;
  while (std::getline(vars, var, '\0')) {
    size_t eq = var.find('=');
    if (eq != std::string::npos) out[var.substr(0, eq)] = var.substr(eq + 1);
  }
  return out;
}

// Every live process started for the cluster at `address` (workers carry it
// in RAYX_ADDRESS), by pid. Found by their environment, never by name.
std::map<pid_t, std::map<std::string, std::string>> ClusterWorkers(const std::string& address) {
  std::map<pid_t, std::map<std::string, std::string>> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* entry = readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == getpid()) continue;
    auto env = EnvironOf(entry->d_name);
    auto it = env.find("RAYX_ADDRESS");
    if (it != env.end() && it->second == address && env.count("RAYX_WORKER_MODE")) {
      out[static_cast<pid_t>(pid)] = std::move(env);
    }
  }
  closedir(proc);
  return out;
}

// The head's invariant violations logged in `log`: a policy decision the node
// table refused (LeaseManager::TryGrant; they decide on one book).
std::vector<std::string> InvariantViolations(const std::string& log) {
  std::vector<std::string> out;
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("invariant violated") != std::string::npos) out.push_back(line);
  }
  return out;
}

// Samples the cluster's live workers every few ms: two live workers of one
// node that both see a device are a violation.
class GpuMonitor {
 public:
  explicit GpuMonitor(std::string address) : address_(std::move(address)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~GpuMonitor() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int samples() const { return samples_; }
  std::vector<std::string> violations() {
    std::lock_guard<std::mutex> lock(mu_);
    return violations_;
  }

 private:
  void Run() {
    while (!stop_) {
      std::map<std::string, pid_t> holders;  // "ip/device" -> pid
      for (const auto& [pid, env] : ClusterWorkers(address_)) {
        auto visible = env.find("CUDA_VISIBLE_DEVICES");
        auto ip = env.find("RAYX_NODE_IP");
        if (visible == env.end() || visible->second.empty() || ip == env.end()) continue;
        std::stringstream devices(visible->second);
        std::string device;
        while (std::getline(devices, device, ',')) {
          auto [it, inserted] = holders.emplace(ip->second + "/" + device, pid);
          // Both still alive now (not one exiting as the other started)?
          if (!inserted && ::kill(it->second, 0) == 0 && ::kill(pid, 0) == 0 &&
              !EnvironOf(std::to_string(it->second)).empty() &&
              !EnvironOf(std::to_string(pid)).empty()) {
            std::lock_guard<std::mutex> lock(mu_);
            violations_.push_back("device " + it->first + " visible to live workers " +
                                  std::to_string(it->second) + " and " + std::to_string(pid));
          }
        }
      }
      ++samples_;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the sampling period
    }
  }

  std::string address_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> samples_{0};
  std::mutex mu_;
  std::vector<std::string> violations_;
};

// The monitor itself: two live processes that look like one cluster's workers
// on one node and both see device 0 are caught.
TEST(GpuMonitorTest, CatchesTwoLiveWorkersOfOneNodeSharingADevice) {
  const std::string address = "127.0.0.1:" + std::to_string(40000 + getpid() % 20000);
  std::vector<pid_t> fakes;
  for (int i = 0; i < 2; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::string a = "RAYX_ADDRESS=" + address;
      char* env[] = {a.data(), const_cast<char*>("RAYX_WORKER_MODE=1"),
                     const_cast<char*>("RAYX_NODE_IP=127.0.0.2"),
                     const_cast<char*>("CUDA_VISIBLE_DEVICES=0"), nullptr};
      char* argv[] = {const_cast<char*>("sleep"), const_cast<char*>("30"), nullptr};
      execve("/bin/sleep", argv, env);
      _exit(127);
    }
    fakes.push_back(pid);
  }
  GpuMonitor monitor(address);
  bool caught = rayx::testing::WaitUntil([&] { return !monitor.violations().empty(); }, 10000);
  monitor.Stop();
  for (pid_t pid : fakes) {
    ::kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  ASSERT_TRUE(caught) << "the monitor missed two live workers sharing 127.0.0.2/0";
  EXPECT_NE(monitor.violations().front().find("127.0.0.2/0"), std::string::npos);
}

class Chaos : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* fixed = std::getenv("RAYX_CHAOS_SEED");
    seed_ = fixed ? std::strtoull(fixed, nullptr, 10)
                  : static_cast<uint64_t>(
                        std::chrono::steady_clock::now().time_since_epoch().count());
    std::cout << "chaos seed " << seed_ << " (replay: RAYX_CHAOS_SEED=" << seed_ << ")\n";
    RecordProperty("seed", std::to_string(seed_));
    LocalCluster::Options options;
    options.head_node.num_cpus = 2;
    options.head_node.num_gpus = 0;
    options.heartbeat_period_ms = 100;
    options.node_timeout_ms = kNodeTimeoutMs;
    auto cluster = LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    for (const auto& ip : kWorkerIps) {
      auto node = cluster_->AddNode(NodeFor(ip));
      ASSERT_TRUE(node.ok()) << node.status();
      nodes_[ip] = *node;
    }
    rayx::Options init;
    init.address = cluster_->address();
    init.token = cluster_->token();
    rayx::Init(init);
  }
  void TearDown() override {
    for (const auto& [ip, node] : nodes_) ::kill(node.agent.pid, SIGCONT);
    if (rayx::IsInitialized()) rayx::Shutdown();
  }
  static NodeOptions NodeFor(const std::string& ip) {
    return {.num_cpus = 4, .num_gpus = 2, .extra_args = {"--node-ip-address", ip}};
  }

  uint64_t seed_ = 0;
  std::unique_ptr<LocalCluster> cluster_;
  std::map<std::string, NodeHandle> nodes_;  // by IP; the chaos thread replaces restarted ones
};

TEST_F(Chaos, EveryResultIsRightAndNoGpuIsSharedWhileWorkersAgentsAndNodesFail) {
  std::mt19937_64 rng(seed_);
  std::vector<rayx::ActorHandle<Holder>> actors;
  for (int i = 0; i < kActors; ++i) {
    actors.push_back(rayx::Actor(Holder::Create)
                         .SetResources({{"GPU", 1}})
                         .SetMaxRestarts(-1)
                         .SetMaxTaskRetries(-1)
                         .Remote(i));
  }
  for (int i = 0; i < kActors; ++i) {
    ASSERT_EQ(*actors[i].Task(&Holder::Echo).Remote(1).Get(60000), 3 + i);
  }
  GpuMonitor monitor(cluster_->address());

  // The chaos script: each kind of failure several times, in a seeded order,
  // with seeded pauses between them.
  enum Action { kKillWorker, kRestartAgent, kStopAgent, kRestartHead };
  std::vector<Action> script;
  for (int i = 0; i < 8; ++i) script.push_back(kKillWorker);
  for (int i = 0; i < 3; ++i) script.push_back(kRestartAgent);
  for (int i = 0; i < 2; ++i) script.push_back(kStopAgent);
  for (int i = 0; i < 2; ++i) script.push_back(kRestartHead);
  std::vector<std::string> head_violations;
  std::shuffle(script.begin(), script.end(), rng);
  std::map<std::string, int> done;
  std::vector<std::string> chaos_errors;
  std::atomic<bool> chaos_finished{false};
  std::atomic<size_t> actions_done{0};
  std::mutex nodes_mu;
  std::thread chaos([&] {
    std::mt19937_64 r(seed_ + 1);
    for (Action action : script) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200 + r() % 400));  // a pause
      std::string ip = kWorkerIps[r() % kWorkerIps.size()];
      std::lock_guard<std::mutex> lock(nodes_mu);
      NodeHandle& node = nodes_[ip];
      switch (action) {
        case kKillWorker: {
          auto workers = ClusterWorkers(cluster_->address());
          if (workers.empty()) break;
          auto it = workers.begin();
          std::advance(it, static_cast<long>(r() % workers.size()));
          ::kill(it->first, SIGKILL);
          ++done["worker SIGKILLed"];
          break;
        }
        case kRestartAgent: {
          rayx::Status killed = cluster_->KillNode(node);
          if (!killed.ok()) chaos_errors.push_back("kill agent " + ip + ": " + killed.ToString());
          auto again = cluster_->AddNode(NodeFor(ip));
          if (!again.ok()) {
            chaos_errors.push_back("restart agent " + ip + ": " + again.status().ToString());
            break;
          }
          node = *again;
          ++done["agent SIGKILLed and restarted"];
          break;
        }
        case kStopAgent: {
          ::kill(node.agent.pid, SIGSTOP);
          // Past the node timeout: the head declares the node dead.
          std::this_thread::sleep_for(std::chrono::milliseconds(kNodeTimeoutMs + 500));
          ::kill(node.agent.pid, SIGCONT);
          ++done["agent SIGSTOPped past the node timeout, resumed"];
          break;
        }
        case kRestartHead: {
          // Its log so far: a restarted head may start the file anew.
          for (auto& v : InvariantViolations(cluster_->head_log_path())) {
            head_violations.push_back(v);
          }
          rayx::Status restarted = cluster_->RestartHead(static_cast<int64_t>(100 + r() % 700));
          if (!restarted.ok()) {
            chaos_errors.push_back("restart the head: " + restarted.ToString());
            break;
          }
          ++done["head SIGKILLed and started again"];
          break;
        }
      }
      ++actions_done;
    }
    chaos_finished = true;
  });

  // The workload runs until the chaos is over and every task is done; batch b
  // of the tasks waits for its share of the chaos (b / batches of the script),
  // so failures hit tasks all along.
  int tasks_right = 0, tasks_done = 0, actor_calls = 0, actor_right = 0;
  std::vector<std::string> failures;
  const size_t batches = kTasks / kBatch;
  for (int next = 0; next < kTasks || !chaos_finished;) {
    size_t due = static_cast<size_t>(next / kBatch) * script.size() / batches;
    (void)rayx::testing::WaitUntil([&] { return actions_done >= due || chaos_finished; }, 60000);
    std::vector<std::pair<int64_t, rayx::ObjectRef<int64_t>>> batch;
    for (int i = 0; i < kBatch && next < kTasks; ++i, ++next) {
      batch.emplace_back(next, rayx::Task(Square).SetMaxRetries(100).Remote(int64_t{next}));
    }
    std::vector<std::pair<int64_t, rayx::ObjectRef<int64_t>>> calls;
    for (int a = 0; a < kActors; ++a) {
      int64_t x = actor_calls++;
      calls.emplace_back(x * 3 + a, actors[a].Task(&Holder::Echo).Remote(x));
    }
    for (auto& [x, ref] : batch) {
      try {
        tasks_right += *ref.Get(120000) == x * x;
      } catch (const std::exception& e) {
        if (failures.size() < 5) failures.push_back(std::string("task: ") + e.what());
      }
      ++tasks_done;
    }
    for (auto& [want, ref] : calls) {
      try {
        actor_right += *ref.Get(120000) == want;
      } catch (const std::exception& e) {
        if (failures.size() < 5) failures.push_back(std::string("actor call: ") + e.what());
      }
    }
  }
  chaos.join();
  // The cluster settles: every actor answers once more.
  for (int a = 0; a < kActors; ++a) {
    ++actor_calls;
    try {
      actor_right += *actors[a].Task(&Holder::Echo).Remote(7).Get(60000) == 21 + a;
    } catch (const std::exception& e) {
      failures.push_back(std::string("final actor call: ") + e.what());
    }
  }
  monitor.Stop();

  std::cout << "chaos seed " << seed_ << ":";
  for (const auto& [what, n] : done) std::cout << " " << what << " x" << n << ";";
  std::cout << "\n  tasks " << tasks_right << "/" << kTasks << " right, actor calls "
            << actor_right << "/" << actor_calls << " right, " << monitor.samples()
            << " GPU samples, " << monitor.violations().size() << " GPU violations\n";
  EXPECT_TRUE(chaos_errors.empty()) << chaos_errors.front();
  EXPECT_EQ(tasks_done, kTasks);
  EXPECT_EQ(tasks_right, kTasks) << (failures.empty() ? "" : failures.front());
  EXPECT_EQ(actor_right, actor_calls) << (failures.empty() ? "" : failures.front());
  auto violations = monitor.violations();
  EXPECT_TRUE(violations.empty()) << violations.size() << " times, first: " << violations.front();
  // The head's own account of device use never went over.
  for (auto& v : InvariantViolations(cluster_->head_log_path())) head_violations.push_back(v);
  EXPECT_TRUE(head_violations.empty()) << head_violations.front();
  for (auto& actor : actors) actor.Kill();
  rayx::Shutdown();
  ASSERT_TRUE(cluster_->Stop().ok());
  // Nothing the cluster started runs any more (by its recorded pids and by
  // the workers' own environment).
  EXPECT_TRUE(rayx::testing::WaitUntil(
      [&] { return ClusterWorkers(cluster_->address()).empty(); }, 10000))
      << ClusterWorkers(cluster_->address()).size() << " workers left";
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("RAYX_WORKER_MODE")) rayx::Init(argc, argv);  // serves tasks, never returns
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
