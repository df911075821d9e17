// A head SIGKILLed and started again (same port, same temp dir) on a real
// loopback cluster: the agents rejoin as the same nodes without stopping their
// workers, the driver reconnects by itself, and the detached actor, KV entries,
// placement group and a submitted job are all still there. This binary is also
// its workers' program (RAYX_WORKER_MODE).
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <string>
#include <vector>

#include "common/session_dir.h"
#include "rayx/kv.h"
#include "rayx/rayx.h"
#include "util/local_cluster.h"
#include "util/tcp_proxy.h"
#include "util/test_helpers.h"

namespace {

class Counter {
 public:
  static Counter* Create(int start) { return new Counter(start); }
  // A constructor that says it began, then waits for `key` in the head's KV.
  static Counter* CreateBlocked(std::string key) {
    rayx::kv::Put(key + "-began", "yes");
    rayx::kv::Wait(key, 60000);
    return new Counter(7);
  }
  int Add(int x) { return value_ += x; }
  int Pid() { return getpid(); }
  // Says it is about to wait, then waits for `key` in the head's KV.
  std::string WaitFor(std::string key) {
    rayx::kv::Put(key + "-waiting", "yes");
    return rayx::kv::Wait(key, 30000);
  }

 private:
  explicit Counter(int start) : value_(start) {}
  int value_;
};

int TaskPid() { return getpid(); }

RAYX_REMOTE(Counter::Create, Counter::CreateBlocked, &Counter::Add, &Counter::Pid, &Counter::WaitFor, TaskPid);

using rayx::testing::Contains;
using rayx::testing::LocalCluster;
using rayx::testing::MsSince;
using rayx::testing::NodeHandle;
using rayx::testing::PidAlive;
using rayx::testing::WaitUntil;

constexpr int64_t kHeartbeatMs = 100;
constexpr int64_t kNodeTimeoutMs = 1000;

class HeadRestart : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalCluster::Options options;
    options.head_node.num_cpus = 4;
    options.head_node.num_gpus = 0;
    options.heartbeat_period_ms = kHeartbeatMs;
    options.node_timeout_ms = kNodeTimeoutMs;
    auto cluster = LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    for (const char* ip : {"127.0.0.2", "127.0.0.3"}) {
      auto node = cluster_->AddNode(
          {.num_cpus = 2, .num_gpus = 1, .extra_args = {"--node-ip-address", ip}});
      ASSERT_TRUE(node.ok()) << node.status();
      nodes_.push_back(*node);
    }
    rayx::Options init;
    init.address = cluster_->address();
    init.token = cluster_->token();
    rayx::Init(init);
  }
  void TearDown() override {
    if (rayx::IsInitialized()) rayx::Shutdown();
    if (!cluster_) return;
    // Nothing is left running: the harness stops every recorded process
    // (head, agents) and checks they are gone, and the workers go with their
    // agents; the ones this test saw are checked by pid.
    auto stopped = cluster_->Stop();
    EXPECT_TRUE(stopped.ok()) << stopped;
    for (pid_t pid : worker_pids_) {
      EXPECT_TRUE(WaitUntil([&] { return !PidAlive(pid); }, 10000))
          << "worker pid " << pid << " outlived the cluster";
    }
  }

  // `rayx job submit` of a shell entrypoint, following it until it ends.
  rayx::testing::CommandResult Submit(const std::string& id, const std::string& script) {
    return cluster_->RunCli({"job", "submit", "--submission-id", id, "--temp-dir",
                             cluster_->temp_dir(), "--", "sh", "-c", script},
                            /*with_temp_dir=*/false, {}, 120000);
  }
  std::string JobStatus(const std::string& id) {
    return cluster_->RunCli({"job", "status", id}).out;
  }

  std::set<std::string> AliveNodeIds() {
    std::set<std::string> ids;
    auto status = cluster_->GetStatus();
    if (!status.ok()) return ids;
    for (const auto& node : status->nodes) {
      if (node.alive) ids.insert(node.node_id.Hex());
    }
    return ids;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::vector<NodeHandle> nodes_;
  std::vector<pid_t> worker_pids_;
};

TEST_F(HeadRestart, SigkilledHeadRestartsWithItsClusterAndTheDataPathNeverStops) {
  // What the head must not forget.
  auto keeper = rayx::Actor(Counter::Create)
                    .SetName("keeper")
                    .SetLifetime(rayx::Detached)
                    .Remote(100);
  pid_t keeper_pid = *keeper.Task(&Counter::Pid).Remote().Get(30000);
  worker_pids_.push_back(keeper_pid);
  ASSERT_TRUE(rayx::kv::Put("model", "weights-v1", true, "restart-test"));
  ASSERT_TRUE(rayx::kv::Put("step", "41", true, "restart-test"));
  auto group = rayx::CreatePlacementGroup(
      {.name = "kept-group", .bundles = {{{"CPU", 1}}}, .detached = true});
  ASSERT_TRUE(group.Wait(30)) << group.Reason();
  // A running actor holding a GPU, called directly by this driver.
  auto busy = rayx::Actor(Counter::Create).SetResources({{"GPU", 1}}).Remote(0);
  EXPECT_EQ(*busy.Task(&Counter::Add).Remote(1).Get(30000), 1);
  pid_t busy_pid = *busy.Task(&Counter::Pid).Remote().Get(30000);
  worker_pids_.push_back(busy_pid);
  // A submitted job that is running when the head dies and ends after it is back.
  std::string release = cluster_->temp_dir() + "/release-job";
  // The submitting CLI follows it across the restart, as a user's terminal would.
  auto submitted = std::async(std::launch::async, [&] {
    return Submit("survivor", "echo job started; while [ ! -e '" + release +
                                  "' ]; do sleep 0.05; done; echo job done");
  });
  ASSERT_TRUE(WaitUntil([&] { return Contains(JobStatus("survivor"), "RUNNING"); }, 30000))
      << JobStatus("survivor");

  std::set<std::string> before = AliveNodeIds();
  ASSERT_EQ(before.size(), 3u);
  auto head = cluster_->head_process();
  ASSERT_GT(head.pid, 0);
  std::string port = cluster_->address().substr(cluster_->address().rfind(':') + 1);

  // SIGKILL the head.
  ASSERT_EQ(::kill(head.pid, SIGKILL), 0);
  ASSERT_TRUE(rayx::detail::WaitForExit({head}, 10000).empty()) << "the head survived SIGKILL";

  // New work needs a new lease: it waits for the head to come back.
  auto waiting = std::async(std::launch::async, [] {
    return *rayx::Task(TaskPid).SetResources({{"CPU", 1}}).Remote().Get(90000);
  });
  // The data path does not need the head: the actors answer while it is down,
  // for longer than the node timeout (the agents must not give up either).
  auto down_since = std::chrono::steady_clock::now();
  int busy_value = 1, calls = 0;
  while (MsSince(down_since) < 2 * kNodeTimeoutMs) {
    ASSERT_EQ(*busy.Task(&Counter::Add).Remote(1).Get(10000), ++busy_value);
    ++calls;
  }
  EXPECT_EQ(*keeper.Task(&Counter::Add).Remote(1).Get(10000), 101);
  EXPECT_EQ(waiting.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "a new lease was granted with no head";

  // The same `rayx start --head`, same port, same temp dir.
  auto restart_started = std::chrono::steady_clock::now();
  auto restarted = cluster_->RunCli({"start", "--head", "--port", port, "--node-ip-address",
                                     "127.0.0.1", "--heartbeat-period-ms",
                                     std::to_string(kHeartbeatMs), "--node-timeout-ms",
                                     std::to_string(kNodeTimeoutMs), "--num-cpus", "4",
                                     "--num-gpus", "0"});
  ASSERT_EQ(restarted.exit_code, 0) << restarted.Describe();
  EXPECT_TRUE(Contains(restarted.out, "Restarted the rayx")) << restarted.out;
  EXPECT_TRUE(Contains(restarted.out, "still runs and rejoins")) << restarted.out;
  int64_t head_up_ms = MsSince(restart_started);

  // Every node is back, under its own id, within a few seconds (the time it
  // took is printed; the bound is the wait's, roomy for a loaded machine).
  rayx::Status back = cluster_->WaitFor(
      [&](const rayx::ClusterStatus& s) {
        std::set<std::string> alive;
        for (const auto& node : s.nodes) {
          if (node.alive) alive.insert(node.node_id.Hex());
        }
        return alive == before;
      },
      10000);
  ASSERT_TRUE(back.ok()) << "the agents did not rejoin as the same nodes: " << back;
  int64_t rejoined_ms = MsSince(restart_started);
  std::cout << "[head restart] head ready " << head_up_ms << " ms after `rayx start --head`; "
            << "all " << before.size() << " agents rejoined " << rejoined_ms << " ms after it"
            << std::endl;

  // The lease requested while the head was down was granted once it was back.
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  int64_t granted_ms = MsSince(restart_started);
  pid_t task_pid = waiting.get();
  EXPECT_GT(task_pid, 0);
  int64_t down_ms = std::chrono::duration_cast<std::chrono::milliseconds>(restart_started -
                                                                         down_since)
                        .count();
  std::cout << "[head restart] " << calls << " actor calls answered in the " << down_ms
            << " ms without a head; the task that waited for a lease ran " << granted_ms
            << " ms after the restart" << std::endl;

  // The detached actor is found by name and answers: the same process.
  auto found = rayx::GetActor<Counter>("keeper");
  EXPECT_EQ(*found.Task(&Counter::Pid).Remote().Get(30000), keeper_pid)
      << "the detached actor was restarted";
  EXPECT_EQ(*found.Task(&Counter::Add).Remote(1).Get(30000), 102);
  // KV entries and the placement group are still there.
  EXPECT_EQ(rayx::kv::Get("model", "restart-test"), "weights-v1");
  EXPECT_EQ(rayx::kv::Get("step", "restart-test"), "41");
  auto groups = cluster_->RunCli({"list", "placement-groups"});
  EXPECT_TRUE(Contains(groups.out, "kept-group")) << groups.Describe();
  EXPECT_TRUE(Contains(groups.out, "CREATED")) << groups.out;
  // The busy actor was never restarted and still holds its GPU: a second
  // one-GPU actor goes to the other GPU node, never onto the same device.
  EXPECT_EQ(*busy.Task(&Counter::Pid).Remote().Get(30000), busy_pid);
  EXPECT_EQ(*busy.Task(&Counter::Add).Remote(1).Get(30000), ++busy_value);
  auto second = rayx::Actor(Counter::Create).SetResources({{"GPU", 1}}).Remote(0);
  pid_t second_pid = *second.Task(&Counter::Pid).Remote().Get(30000);
  worker_pids_.push_back(second_pid);
  EXPECT_NE(second_pid, busy_pid);
  // New tasks run.
  std::vector<rayx::ObjectRef<int>> refs;
  for (int i = 0; i < 10; ++i) refs.push_back(rayx::Task(TaskPid).Remote());
  for (auto& ref : refs) EXPECT_GT(*ref.Get(30000), 0);

  // The job submitted before the head died finishes now, and its state says so.
  std::ofstream(release) << "go";
  std::string final_status;
  EXPECT_TRUE(WaitUntil(
      [&] {
        final_status = JobStatus("survivor");
        return Contains(final_status, "SUCCEEDED");
      },
      30000))
      << final_status;
  ASSERT_EQ(submitted.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  auto followed = submitted.get();
  EXPECT_EQ(followed.exit_code, 0) << followed.Describe();
  EXPECT_TRUE(Contains(followed.out, "job started")) << followed.out;
  EXPECT_TRUE(Contains(followed.out, "job done")) << followed.out;
  EXPECT_TRUE(Contains(followed.out, "SUCCEEDED")) << followed.out;

  // Leave nothing behind.
  found.Kill();
  rayx::RemovePlacementGroup(group.GetID());
}

// Whether the head's state file holds KV key `key` of namespace `ns`, read by
// another connection (as a restarted head would read it).
bool KvKeyInFile(const std::string& path, const std::string& ns, const std::string& key) {
  sqlite3* db = nullptr;
  bool found = false;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 1000);
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM kv WHERE ns = ? AND key = ?", -1, &stmt,
                           nullptr) == SQLITE_OK) {
      sqlite3_bind_blob(stmt, 1, ns.data(), static_cast<int>(ns.size()), SQLITE_TRANSIENT);
      sqlite3_bind_blob(stmt, 2, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
      found = sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_int64(stmt, 0) == 1;
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return found;
}

// The head commits the writes of each pass over its socket together (group
// commit) and sends that pass's replies after the commit: a change it answered
// is in its file, also when many arrive at once from several threads.
TEST_F(HeadRestart, AChangeTheHeadAnsweredIsAlreadyInItsFile) {
  std::string file;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(cluster_->temp_dir())) {
    if (entry.path().filename() == "head_state.sqlite3") file = entry.path().string();
  }
  ASSERT_FALSE(file.empty()) << "no head_state.sqlite3 under " << cluster_->temp_dir();
  constexpr int kThreads = 8;
  constexpr int kPuts = 100;
  std::vector<std::future<std::string>> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.push_back(std::async(std::launch::async, [&file, t]() -> std::string {
      for (int i = 0; i < kPuts; ++i) {
        std::string key = "committed-" + std::to_string(t) + "-" + std::to_string(i);
        if (!rayx::kv::Put(key, "v", true, "commit-test")) return key + ": the put was refused";
        if (!KvKeyInFile(file, "commit-test", key)) {
          return key + ": answered before it was in the head's file";
        }
      }
      return "";
    }));
  }
  for (auto& w : writers) EXPECT_EQ(w.get(), "");
}

// A worker's runtime never heartbeats, so only its connection tells it that the
// head restarted: it registers again at once and sends its KV wait, which was
// parked in the dead head, to the new one. Without that, the wait would be
// lost and the call would run into its 30 s deadline.
TEST_F(HeadRestart, AWaitParkedInTheDeadHeadIsAnsweredByTheNewOne) {
  auto actor = rayx::Actor(Counter::Create).Remote(0);
  worker_pids_.push_back(*actor.Task(&Counter::Pid).Remote().Get(30000));
  auto waiting = actor.Task(&Counter::WaitFor).Remote(std::string("restart-key"));
  rayx::kv::Wait("restart-key-waiting", 30000);
  ASSERT_TRUE(cluster_->RestartHead(0).ok());
  auto start = std::chrono::steady_clock::now();
  rayx::kv::Put("restart-key", "after the restart");
  EXPECT_EQ(*waiting.Get(20000), "after the restart");
  EXPECT_LT(MsSince(start), 10000);
  actor.Kill();
}

// A restarted head keeps no name reservations: the owner of an actor whose
// constructor runs reserves its name again once it registered with the new
// head, so the name is not free (nor missing for waiting handles) meanwhile.
TEST_F(HeadRestart, ANameReservedBeforeTheRestartIsHeldAgainByItsOwner) {
  auto actor = rayx::Actor(Counter::CreateBlocked).SetName("building").Remote(std::string("go"));
  rayx::kv::Wait("go-began", 30000);
  ASSERT_TRUE(cluster_->RestartHead(0).ok());
  bool found = WaitUntil(
      [] {
        try {
          rayx::GetActor<Counter>("building");
          return true;
        } catch (const std::exception&) {
          return false;
        }
      },
      10000);
  EXPECT_TRUE(found) << "the name of the actor being constructed was lost with the old head";
  try {
    rayx::Actor(Counter::Create).SetName("building").Remote(0);
    ADD_FAILURE() << "another actor took the name while the first one's constructor ran";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "constructor is still running")) << e.what();
  }
  rayx::kv::Put("go", "now");
  EXPECT_EQ(*actor.Task(&Counter::Add).Remote(1).Get(30000), 8);
  worker_pids_.push_back(*actor.Task(&Counter::Pid).Remote().Get(30000));
  actor.Kill();
}

// A head started again after `rayx stop` is a new, empty cluster.
TEST_F(HeadRestart, AStoppedClusterStartsAgainEmpty) {
  auto before = cluster_->GetStatus();
  ASSERT_TRUE(before.ok()) << before.status();
  rayx::Shutdown();
  std::string port = cluster_->address().substr(cluster_->address().rfind(':') + 1);
  auto stopped = cluster_->RunCli({"stop", "--grace-period", "5"});
  ASSERT_EQ(stopped.exit_code, 0) << stopped.Describe();
  auto started = cluster_->RunCli({"start", "--head", "--port", port, "--node-ip-address",
                                   "127.0.0.1", "--num-cpus", "2"});
  ASSERT_EQ(started.exit_code, 0) << started.Describe();
  EXPECT_TRUE(Contains(started.out, "Started the rayx")) << started.out;
  auto local = rayx::detail::FindLocalCluster(cluster_->temp_dir());
  ASSERT_TRUE(local.ok()) << local.status();
  auto after = rayx::QueryClusterStatus(local->address, local->token, 5000);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_NE(after->cluster_id, before->cluster_id);
  EXPECT_EQ(after->nodes.size(), 1u) << "no node of the stopped cluster is waited for";
  auto again = cluster_->RunCli({"stop", "--grace-period", "5"});
  EXPECT_EQ(again.exit_code, 0) << again.Describe();
}

}  // namespace

// A head that does not restart, and a driver whose TCP connection to it drops
// (a reset, a network blip) while its actor's lease request is parked there:
// the grant the head sends meanwhile is lost with the connection. The driver
// sees ZeroMQ reconnect, finds the same head (its probe is answered) and sends
// its unanswered calls again; the head answers the repeated lease request with
// the grant it already made (RequestDedup), so the actor runs, once. Before,
// the call waited for ever while the head kept answering heartbeats.
TEST(HeadConnectionDrop, AGrantSentWhileTheDriversConnectionWasDownReachesIt) {
  LocalCluster::Options options;
  options.head_node.num_cpus = 2;
  options.head_node.num_gpus = 1;
  options.heartbeat_period_ms = kHeartbeatMs;
  options.node_timeout_ms = kNodeTimeoutMs;
  auto cluster = LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string& address = (*cluster)->address();
  auto colon = address.rfind(':');
  auto proxy = rayx::testing::TcpProxy::Start(
      address.substr(0, colon), static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  rayx::Options init;
  init.address = "127.0.0.1:" + std::to_string((*proxy)->port());
  init.token = (*cluster)->token();
  rayx::Init(init);
  {
    // The one GPU is held: the second actor's lease request is parked in the head.
    auto holder = rayx::Actor(Counter::Create).SetResources({{"GPU", 1}}).Remote(0);
    pid_t holder_pid = *holder.Task(&Counter::Pid).Remote().Get(30000);
    auto actor = rayx::Actor(Counter::Create).SetResources({{"GPU", 1}}).Remote(5);
    ASSERT_TRUE(
        (*cluster)
            ->WaitFor([](const rayx::ClusterStatus& s) { return !s.pending_demands.empty(); },
                      10000)
            .ok());
    (*proxy)->Cut();
    // The holder's worker dies; the head grants the GPU to the parked request
    // and sends the grant into the dead connection.
    ASSERT_EQ(::kill(holder_pid, SIGKILL), 0);
    auto granted = [&] {
      std::string workers = (*cluster)->RunCli({"list", "workers"}).out;
      return Contains(workers, "RUNNING") &&
             !Contains(workers, " " + std::to_string(holder_pid) + " ");
    };
    ASSERT_TRUE(WaitUntil(granted, 30000)) << (*cluster)->RunCli({"list", "workers"}).out;
    ASSERT_TRUE((*proxy)->Resume().ok());
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(*actor.Task(&Counter::Add).Remote(1).Get(30000), 6);
    EXPECT_LT(MsSince(start), 10000);
    EXPECT_GE((*proxy)->accepted(), 2) << "the driver connected again through the proxy";
    // Granted once: one actor worker, holding the one GPU.
    std::string workers = (*cluster)->RunCli({"list", "workers"}).out;
    size_t running = 0;
    for (size_t at = workers.find("RUNNING"); at != std::string::npos;
         at = workers.find("RUNNING", at + 1)) {
      ++running;
    }
    EXPECT_EQ(running, 1u) << workers;
    actor.Kill();
  }
  rayx::Shutdown();
  EXPECT_TRUE((*cluster)->Stop().ok());
}

int main(int argc, char** argv) {
  if (std::getenv("RAYX_WORKER_MODE")) rayx::Init(argc, argv);  // serves tasks, never returns
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
