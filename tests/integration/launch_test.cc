// `rayx launch` on a real two-node loopback cluster, with real PyTorch (gloo).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "util/local_cluster.h"
#include "util/test_helpers.h"

namespace rayx::testing {
namespace {

namespace fs = std::filesystem;

std::string Script() { return std::string(RAYX_TEST_SOURCE_DIR) + "/integration/launch/ddp_train.py"; }

bool HaveTorch() {
  static const bool have = RunCommand({"/usr/bin/python3", "-c", "import torch.distributed"}, {},
                                      60000).exit_code == 0;
  return have;
}

// Waits until none of the pids written into `dir` runs.
::testing::AssertionResult AllPidsGone(const std::string& dir, size_t expected, int64_t timeout_ms) {
  std::vector<pid_t> pids;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    pid_t pid = 0;
    if (in >> pid && pid > 0) pids.push_back(pid);
  }
  if (pids.size() != expected) {
    return ::testing::AssertionFailure() << "expected " << expected << " pid files, found "
                                         << pids.size();
  }
  std::vector<pid_t> alive;
  auto none_alive = [&] {
    alive.clear();
    for (pid_t p : pids) {
      if (PidAlive(p)) alive.push_back(p);
    }
    return alive.empty();
  };
  if (WaitUntil(none_alive, timeout_ms)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << alive.size() << " rank processes still run, e.g. pid "
                                       << alive[0];
}

class Launch : public ::testing::Test {
 protected:
  // Two nodes (127.0.0.1 and 127.0.0.2) with 2 CPUs and `gpus` fake GPUs each;
  // the second one's `rayx start` runs with `second_env`.
  void StartTwoNodes(double gpus = 0, std::map<std::string, std::string> second_env = {}) {
    LocalCluster::Options options;
    options.head_node.num_cpus = 2;
    if (gpus > 0) options.head_node.num_gpus = gpus;
    auto cluster = LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    NodeOptions second{.num_cpus = 2,
                       .extra_args = {"--node-ip-address", "127.0.0.2"},
                       .env = std::move(second_env)};
    if (gpus > 0) second.num_gpus = gpus;
    auto node = cluster_->AddNode(second);
    ASSERT_TRUE(node.ok()) << node.status();
    second_ = *node;
    work_dir_ = cluster_->temp_dir() + "/launch-work";
    fs::create_directories(work_dir_ + "/pids");
  }

  void TearDown() override {
    if (!cluster_) return;
    // Nothing of any launch is left: no process leases, no placement groups,
    // every CPU free again.
    auto workers = cluster_->RunCli({"list", "workers"});
    EXPECT_EQ(workers.exit_code, 0) << workers.Describe();
    EXPECT_FALSE(Contains(workers.out, "process")) << workers.out;
    auto groups = cluster_->RunCli({"list", "placement-groups"});
    EXPECT_FALSE(Contains(groups.out, "rayx-launch")) << groups.out;
    Status free = cluster_->WaitFor(
        [](const ClusterStatus& s) {
          return s.AvailableResources()["CPU"] == s.TotalResources()["CPU"] &&
                 s.AvailableResources()["GPU"] == s.TotalResources()["GPU"];
        },
        10000);
    EXPECT_TRUE(free.ok()) << free;
  }

  std::vector<std::string> LaunchArgs(std::vector<std::string> flags,
                                      const std::vector<std::string>& command) {
    std::vector<std::string> args = {RayxCliPath(), "launch", "--temp-dir", cluster_->temp_dir()};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    return args;
  }

  CommandResult RunLaunch(std::vector<std::string> flags, const std::vector<std::string>& command,
                          int64_t timeout_ms = 180000) {
    return RunCommand(LaunchArgs(std::move(flags), command),
                      {{"RAYX_EXIT_WITH_PID", std::to_string(getpid())}}, timeout_ms);
  }

  // `rayx launch` of one rank per node on two nodes; each writes its pid into
  // `pids` and sleeps.
  std::vector<std::string> SleepingRanks(const std::string& pids) {
    return LaunchArgs({"--nnodes", "2", "--nproc-per-node", "1"},
                      {"sh", "-c", "echo $$ > " + pids + "/rank$RANK.pid; exec sleep 600"});
  }
  // True once `n` ranks wrote their pid files (within 60 s).
  static bool RanksStarted(const std::string& pids, long n) {
    return rayx::testing::WaitUntil(
        [&] { return std::distance(fs::directory_iterator(pids), fs::directory_iterator()) == n; },
        60000);
  }

  std::unique_ptr<LocalCluster> cluster_;
  rayx::testing::NodeHandle second_;  // the 127.0.0.2 node of StartTwoNodes
  std::string work_dir_;
};

TEST_F(Launch, TorchDdpTrainsOnTwoNodesWithTheTorchrunEnvironment) {
  if (!HaveTorch()) GTEST_SKIP() << "python3-torch is not installed (./scripts/install-deps.sh)";
  StartTwoNodes();
  auto r = RunLaunch({"--nnodes", "2", "--nproc-per-node", "2"}, {"/usr/bin/python3", Script()});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();

  std::map<int, std::string> node_of;  // rank -> the node its lines came from
  std::set<std::string> master;
  std::regex env_line(R"(\[rank (\d) ([0-9.]+)\] env RANK=(\d) LOCAL_RANK=(\d) WORLD_SIZE=(\d) )"
                      R"(LOCAL_WORLD_SIZE=(\d) NODE_RANK=(\d) GROUP_RANK=(\d) )"
                      R"(MASTER_ADDR=([0-9.]+) MASTER_PORT=(\d+))");
  std::istringstream lines(r.out);
  int env_lines = 0, allreduce = 0, trained = 0;
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, env_line)) {
      int rank = std::stoi(m[1]);
      EXPECT_EQ(std::stoi(m[3]), rank);
      EXPECT_EQ(std::stoi(m[4]), rank % 2) << line;        // LOCAL_RANK
      EXPECT_EQ(std::stoi(m[5]), 4) << line;               // WORLD_SIZE
      EXPECT_EQ(std::stoi(m[6]), 2) << line;               // LOCAL_WORLD_SIZE
      EXPECT_EQ(std::stoi(m[7]), rank / 2) << line;        // NODE_RANK
      EXPECT_EQ(std::stoi(m[8]), rank / 2) << line;        // GROUP_RANK
      node_of[rank] = m[2];
      master.insert(std::string(m[9]) + ":" + std::string(m[10]));
      ++env_lines;
    }
    if (Contains(line, "allreduce rank=")) {
      EXPECT_TRUE(Contains(line, "sum=10")) << line;  // 1+2+3+4
      ++allreduce;
    }
    std::smatch lm;
    if (std::regex_search(line, lm, std::regex(R"(loss rank=\d first=([0-9.]+) last=([0-9.]+) same_weights=(\w+))"))) {
      double first = std::stod(lm[1]), last = std::stod(lm[2]);
      EXPECT_LT(last, first * 0.1) << "the loss did not fall: " << line;
      EXPECT_EQ(lm[3], "True") << "DDP ranks diverged: " << line;
      ++trained;
    }
  }
  EXPECT_EQ(env_lines, 4) << r.out;
  EXPECT_EQ(allreduce, 4) << r.out;
  EXPECT_EQ(trained, 4) << r.out;
  // Two ranks per node, on two distinct nodes; MASTER_ADDR is rank 0's node.
  ASSERT_EQ(node_of.size(), 4u);
  EXPECT_EQ(node_of[0], node_of[1]);
  EXPECT_EQ(node_of[2], node_of[3]);
  EXPECT_NE(node_of[0], node_of[2]);
  ASSERT_EQ(master.size(), 1u);
  EXPECT_EQ(master.begin()->substr(0, master.begin()->find(':')), node_of[0]);
}

TEST_F(Launch, AFailingRankStopsEveryRankOnEveryNode) {
  if (!HaveTorch()) GTEST_SKIP() << "python3-torch is not installed (./scripts/install-deps.sh)";
  StartTwoNodes();
  auto r = RunLaunch({"--nnodes", "2", "--nproc-per-node", "2", "--env", "FAIL_RANK=3", "--env",
                      "PID_DIR=" + work_dir_ + "/pids"},
                     {"/usr/bin/python3", Script()});
  EXPECT_EQ(r.exit_code, 3) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "rank 3 (local rank 1 on node 1, 127.0.0.")) << r.err;
  EXPECT_TRUE(Contains(r.err, "exited with status 3")) << r.err;
  EXPECT_TRUE(Contains(r.err, "| rank 3 failing at step 5")) << r.err;  // its last lines
  EXPECT_TRUE(AllPidsGone(work_dir_ + "/pids", 4, 10000));
}

TEST_F(Launch, MaxRestartsRestartsTheWholeGroupAfterAFailure) {
  if (!HaveTorch()) GTEST_SKIP() << "python3-torch is not installed (./scripts/install-deps.sh)";
  StartTwoNodes();
  auto r = RunLaunch({"--nnodes", "2", "--nproc-per-node", "1", "--max-restarts", "1", "--env",
                      "FAIL_RANK=1", "--env", "FAIL_FIRST_TRY_ONLY=1"},
                     {"/usr/bin/python3", Script()});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "rank 1 (local rank 0 on node 1")) << r.err;
  EXPECT_TRUE(Contains(r.err, "restarting the group (restart 1 of 1)")) << r.err;
  // The second try trained on both ranks.
  EXPECT_TRUE(Contains(r.out, "loss rank=0")) << r.out;
  EXPECT_TRUE(Contains(r.out, "loss rank=1")) << r.out;
}

TEST_F(Launch, SigtermStopsEveryRankOnEveryNode) {
  if (!HaveTorch()) GTEST_SKIP() << "python3-torch is not installed (./scripts/install-deps.sh)";
  StartTwoNodes();
  auto bg = BackgroundCommand::Start(
      LaunchArgs({"--nnodes", "2", "--nproc-per-node", "2", "--env", "SLEEP_FOREVER=1", "--env",
                  "PID_DIR=" + work_dir_ + "/pids"},
                 {"/usr/bin/python3", Script()}),
      work_dir_);
  // Every rank got through init and all_reduce: they are all running.
  int sleeping = 0;
  WaitUntil(
      [&] {
        std::string out = bg.Out();
        sleeping = 0;
        for (size_t p = out.find("sleeping"); p != std::string::npos;
             p = out.find("sleeping", p + 1)) {
          ++sleeping;
        }
        return sleeping == 4;
      },
      120000);
  ASSERT_EQ(sleeping, 4) << bg.Out() << bg.Err();
  ::kill(bg.pid(), SIGTERM);
  EXPECT_EQ(bg.Wait(30000), 128 + SIGTERM) << bg.Err();
  EXPECT_TRUE(Contains(bg.Err(), "stopped all 4 ranks")) << bg.Err();
  EXPECT_TRUE(AllPidsGone(work_dir_ + "/pids", 4, 10000));
}

TEST_F(Launch, ALaunchKilledOutrightTakesItsRanksWithIt) {
  StartTwoNodes();
  std::string pids = work_dir_ + "/pids";
  auto bg = BackgroundCommand::Start(SleepingRanks(pids), work_dir_);
  (void)RanksStarted(pids, 2);
  // SIGKILL: no chance to clean up. The head ends the job when its
  // heartbeats stop, and with it every rank.
  ::kill(bg.pid(), SIGKILL);
  EXPECT_EQ(bg.Wait(10000), 128 + SIGKILL);
  EXPECT_TRUE(AllPidsGone(pids, 2, 20000));
}

// The head is SIGKILLed and started again while a launch runs: the ranks keep
// running, and their exits still reach the launch (the restored leases name
// its fixed routing id), which ends with status 0 and every rank's output.
TEST_F(Launch, ALaunchOutlivesAHeadRestart) {
  StartTwoNodes();
  std::string go = work_dir_ + "/go";
  auto bg =
      BackgroundCommand::Start(LaunchArgs({"--nnodes", "2", "--nproc-per-node", "1"},
                                          {"sh", "-c",
                                           "echo started-$RANK; while [ ! -f " + go +
                                               " ]; do sleep 0.05; done; echo finished-$RANK"}),
                               work_dir_);
  ASSERT_TRUE(rayx::testing::WaitUntil(
      [&] { return Contains(bg.Out(), "started-0") && Contains(bg.Out(), "started-1"); }, 60000))
      << bg.Out() << bg.Err();
  ASSERT_TRUE(cluster_->RestartHead(300).ok());
  ASSERT_TRUE(cluster_->WaitForNodes(2, 20000).ok());
  std::ofstream(go) << "go";
  const auto told = std::chrono::steady_clock::now();
  EXPECT_EQ(bg.Wait(60000), 0) << bg.Out() << bg.Err();
  // The launch heard its ranks' exits soon: it registered again with the new
  // head when it reconnected, not at its next heartbeat (12 s apart: a minute
  // of job timeout / 5), which held the exits until then.
  EXPECT_LT(rayx::testing::MsSince(told), 6000) << bg.Out() << bg.Err();
  EXPECT_TRUE(Contains(bg.Out(), "finished-0")) << bg.Out();
  EXPECT_TRUE(Contains(bg.Out(), "finished-1")) << bg.Out();
}

// A node of the group dies (its agent SIGKILLed): the launch hears it from the
// head at once (no exit will ever be reported for its ranks), stops the other
// ranks and fails naming the lost node.
TEST_F(Launch, ANodeDeathFailsTheLaunchNamingTheNode) {
  StartTwoNodes();
  std::string pids = work_dir_ + "/pids";
  auto bg = BackgroundCommand::Start(SleepingRanks(pids), work_dir_);
  ASSERT_TRUE(RanksStarted(pids, 2)) << bg.Err();
  // Once the launch has every grant (it says so): a node dying before that
  // fails the start instead ("could not start the ranks"), another test's case.
  ASSERT_TRUE(rayx::testing::WaitUntil([&] { return Contains(bg.Out(), "2 ranks on 2 node(s)"); },
                                       30000))
      << bg.Out() << bg.Err();
  ASSERT_TRUE(cluster_->KillNode(second_).ok());
  EXPECT_EQ(bg.Wait(30000), 1) << bg.Out() << bg.Err();
  EXPECT_TRUE(Contains(bg.Err(), "was lost: node 127.0.0.2")) << bg.Err();
  EXPECT_TRUE(Contains(bg.Err(), "was declared dead")) << bg.Err();
  EXPECT_TRUE(AllPidsGone(pids, 2, 10000));
}

TEST_F(Launch, SaysWhatIsMissingWhenTheRanksCannotFit) {
  StartTwoNodes();
  // Three nodes asked, two exist.
  auto r = RunLaunch({"--nnodes", "3"}, {"true"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "needs 3 distinct nodes")) << r.err;
  EXPECT_TRUE(Contains(r.err, "the cluster has 2")) << r.err;
  // Three CPUs per node asked, nodes have two.
  r = RunLaunch({"--nnodes", "2", "--nproc-per-node", "3"}, {"true"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "needs {CPU: 3} on one node; the largest alive node has CPU 2"))
      << r.err;
  // No command.
  r = RunLaunch({"--nnodes", "2"}, {});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "no command")) << r.err;
  // A command that no node has.
  r = RunLaunch({"--nnodes", "2"}, {"no-such-program-rayx"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "cannot start 'no-such-program-rayx'")) << r.err;
}

// While it waits for nodes (--wait), launch says what for: the head's reason,
// naming what each node has free; when the wait ends, why it cannot place.
TEST_F(Launch, SaysWhatItWaitsForWhileItWaits) {
  StartTwoNodes();
  std::string pids = work_dir_ + "/pids";
  auto holder = BackgroundCommand::Start(SleepingRanks(pids), work_dir_);
  ASSERT_TRUE(RanksStarted(pids, 2));  // one CPU of each node's two is taken
  auto r = RunLaunch({"--nnodes", "2", "--nproc-per-node", "2", "--wait", "2"}, {"true"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "rayx launch: waiting for 2 bundle(s) of {CPU: 2} (")) << r.out;
  EXPECT_TRUE(Contains(r.out, "has {CPU: 1} free")) << r.out;
  EXPECT_TRUE(Contains(r.err, "cannot place 4 processes")) << r.err;
  ::kill(holder.pid(), SIGTERM);
  EXPECT_EQ(holder.Wait(30000), 128 + SIGTERM) << holder.Err();
  EXPECT_TRUE(AllPidsGone(pids, 2, 10000));
}

TEST_F(Launch, GivesEachNodeItsOwnGpusInLocalRankOrderAndNeverShares) {
  StartTwoNodes(/*gpus=*/4);
  auto plan = RunLaunch({"--nnodes", "2", "--nproc-per-node", "2", "--gpus-per-proc", "1",
                         "--dry-run"},
                        {"true"});
  ASSERT_EQ(plan.exit_code, 0) << plan.Describe();
  EXPECT_TRUE(Contains(plan.out, "4 ranks")) << plan.out;
  EXPECT_TRUE(Contains(plan.out, "rank 3: node 1 127.0.0.")) << plan.out;
  EXPECT_TRUE(Contains(plan.out, "CUDA_VISIBLE_DEVICES=0,1")) << plan.out;

  // A first launch holds two GPUs on each node while a second one runs.
  auto holder = BackgroundCommand::Start(
      LaunchArgs({"--nnodes", "2", "--nproc-per-node", "2", "--gpus-per-proc", "1",
                  "--cpus-per-proc", "0.5"},
                 {"sh", "-c", "echo held=$CUDA_VISIBLE_DEVICES; exec sleep 600"}),
      work_dir_);
  WaitUntil([&] { return Contains(holder.Out(), "held="); }, 60000);
  ASSERT_TRUE(Contains(holder.Out(), "held=0,1")) << holder.Out() << holder.Err();
  auto r = RunLaunch({"--nnodes", "2", "--nproc-per-node", "2", "--gpus-per-proc", "1",
                      "--cpus-per-proc", "0.5"},
                     {"sh", "-c",
                      "echo devices=$CUDA_VISIBLE_DEVICES local=$LOCAL_RANK "
                      "order=$CUDA_DEVICE_ORDER"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(Contains(r.out, "devices=2,3 local=" + std::to_string(rank % 2) +
                                    " order=PCI_BUS_ID"))
        << r.out;
  }
  EXPECT_FALSE(Contains(r.out, "devices=0")) << r.out;
  // A third launch cannot fit while both run... and says which GPUs are free.
  auto none = RunLaunch({"--nnodes", "2", "--gpus-per-proc", "3", "--cpus-per-proc", "0.5"},
                        {"true"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_TRUE(Contains(none.err, "has {CPU: 1, GPU: 2} free")) << none.err;
  // The head's one GPU rule, said before anything is asked of the cluster.
  auto half = RunLaunch({"--nnodes", "1", "--gpus-per-proc", "1.5"}, {"true"});
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_TRUE(Contains(half.err, "invalid amount 1.5 of GPU: an amount above 1 must be a whole "
                                 "number of devices"))
      << half.err;
  ::kill(holder.pid(), SIGTERM);
  EXPECT_EQ(holder.Wait(30000), 128 + SIGTERM) << holder.Err();
}

// Nodes started by `rayx start --from-env` carry the platform's node rank
// (rayx.io/node-rank): a launch numbers them by it, so node rank 0 and
// MASTER_ADDR are the platform's node 0 (SLURM's first node), whatever the
// placement order: checked with the head as platform node 0 and as node 1.
class LaunchNodeRanks : public Launch, public ::testing::WithParamInterface<bool> {};

TEST_P(LaunchNodeRanks, FollowThePlatformsNodeRankLabels) {
  const bool head_first = GetParam();
  const std::string first = head_first ? "127.0.0.1" : "127.0.0.2";
  const std::string second = head_first ? "127.0.0.2" : "127.0.0.1";
  LocalCluster::Options options;
  options.head_node.num_cpus = 2;
  options.head_node.labels = head_first ? "rayx.io/node-rank=0" : "rayx.io/node-rank=1";
  auto cluster = LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  cluster_ = std::move(*cluster);
  ASSERT_TRUE(cluster_
                  ->AddNode({.num_cpus = 2,
                             .labels = head_first ? "rayx.io/node-rank=1" : "rayx.io/node-rank=0",
                             .extra_args = {"--node-ip-address", "127.0.0.2"}})
                  .ok());
  work_dir_ = cluster_->temp_dir() + "/launch-work";
  fs::create_directories(work_dir_);
  auto plan = RunLaunch({"--nnodes", "2", "--dry-run"}, {"true"});
  ASSERT_EQ(plan.exit_code, 0) << plan.Describe();
  EXPECT_TRUE(Contains(plan.out, "MASTER_ADDR=" + first)) << plan.out;
  EXPECT_TRUE(Contains(plan.out, "rank 0: node 0 " + first)) << plan.out;
  EXPECT_TRUE(Contains(plan.out, "rank 1: node 1 " + second)) << plan.out;
  auto r = RunLaunch({"--nnodes", "2"},
                     {"sh", "-c", "echo node=$NODE_RANK master=$MASTER_ADDR ip=$RAYX_NODE_IP"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "node=0 master=" + first + " ip=" + first)) << r.out;
  EXPECT_TRUE(Contains(r.out, "node=1 master=" + first + " ip=" + second)) << r.out;
}

INSTANTIATE_TEST_SUITE_P(HeadFirstOrSecond, LaunchNodeRanks, ::testing::Bool());

// A node whose agent was started with CUDA_VISIBLE_DEVICES (part of a machine)
// gives its ranks those devices, and the plan says so.
TEST_F(Launch, ANodeLimitedByCudaVisibleDevicesGivesItsRanksThoseDevices) {
  StartTwoNodes(/*gpus=*/2, {{"CUDA_VISIBLE_DEVICES", "3,6"}});
  std::vector<std::string> flags = {"--nnodes",        "2", "--nproc-per-node", "2",
                                    "--gpus-per-proc", "1", "--cpus-per-proc",  "0.5"};
  std::vector<std::string> dry = flags;
  dry.push_back("--dry-run");
  auto plan = RunLaunch(dry, {"true"});
  ASSERT_EQ(plan.exit_code, 0) << plan.Describe();
  EXPECT_TRUE(Contains(plan.out, "127.0.0.2 (")) << plan.out;
  EXPECT_TRUE(Contains(plan.out, "CUDA_VISIBLE_DEVICES=3,6")) << plan.out;
  EXPECT_TRUE(Contains(plan.out, "CUDA_VISIBLE_DEVICES=0,1")) << plan.out;
  auto r = RunLaunch(flags, {"sh", "-c",
                             "echo node=$RAYX_NODE_IP devices=$CUDA_VISIBLE_DEVICES "
                             "local=$LOCAL_RANK gpu=$RAYX_GPU_IDS"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "node=127.0.0.2 devices=3,6 local=0 gpu=3,6")) << r.out;
  EXPECT_TRUE(Contains(r.out, "node=127.0.0.2 devices=3,6 local=1 gpu=3,6")) << r.out;
  EXPECT_TRUE(Contains(r.out, "node=127.0.0.1 devices=0,1 local=0")) << r.out;
  auto nodes = cluster_->RunCli({"list", "nodes"});
  EXPECT_TRUE(Contains(nodes.out, "(GPU devices 3,6)")) << nodes.out;
}

}  // namespace
}  // namespace rayx::testing
