// `rayx start --from-env` as a container platform or SLURM runs it: the same
// command on every "node" (here: processes with their own temp dir and
// loopback address), node rank 0 starting the head and running the job's
// command, every node exiting when it ends, and nothing left running.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/address.h"
#include "common/process_control.h"
#include "common/session_dir.h"
#include "rayx/cluster_status.h"
#include "util/local_cluster.h"
#include "util/test_helpers.h"

namespace rayx::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kToken[] = "platform-test-token";

// A port nobody listens on now. (Tests only: the platform, not rayx, picks
// MASTER_PORT, and every node must know it before node 0 binds it.)
uint16_t UnusedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

class PlatformStart : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rayx-platform-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    port_ = UnusedPort();
    address_ = "127.0.0.1:" + std::to_string(port_);
  }

  void TearDown() override {
    // Whatever a failed test left: stopped by the records, then the dirs go.
    for (int rank = 0; rank < 8; ++rank) {
      std::string temp = TempDir(rank);
      if (!fs::exists(temp)) continue;
      RunCommand({RayxCliPath(), "stop", "--force", "--temp-dir", temp}, {}, 30000);
    }
    if (!HasFailure())
      fs::remove_all(dir_);
    else
      std::cerr << "kept " << dir_ << " (logs of the failed test)\n";
  }

  std::string TempDir(int rank) const { return dir_ + "/node" + std::to_string(rank); }

  // The platform's per-node variables for node `rank` of `world`.
  std::map<std::string, std::string> TorchEnv(int rank, int world) const {
    return {{"RANK", std::to_string(rank)},
            {"WORLD_SIZE", std::to_string(world)},
            {"MASTER_ADDR", "127.0.0.1"},
            {"MASTER_PORT", std::to_string(port_)},
            {"RAYX_TOKEN", kToken}};
  }

  // `rayx start --from-env` as node `rank` runs it, in the background.
  BackgroundCommand StartNode(int rank, const std::map<std::string, std::string>& env,
                              std::vector<std::string> extra = {},
                              const std::vector<std::string>& command = {}) {
    std::vector<std::string> argv = {RayxCliPath(), "start",      "--from-env", "--num-cpus",
                                     "1",           "--temp-dir", TempDir(rank)};
    argv.insert(argv.end(), {"--node-ip-address", "127.0.0." + std::to_string(rank + 1)});
    argv.insert(argv.end(), extra.begin(), extra.end());
    if (!command.empty()) {
      argv.push_back("--");
      argv.insert(argv.end(), command.begin(), command.end());
    }
    return BackgroundCommand::Start(argv, dir_, env, "node" + std::to_string(rank));
  }

  // The daemons node `rank`'s `rayx start` recorded (head, agent).
  std::vector<detail::ProcessRecord> Daemons(int rank) const {
    std::vector<detail::ProcessRecord> out;
    for (const auto& session : detail::Session::List(TempDir(rank))) {
      for (const auto& [name, record] : session.Processes()) out.push_back(record);
    }
    return out;
  }

  // Node `rank`'s daemon `name` ("head", "agent"); pid 0 when there is none.
  detail::ProcessRecord Daemon(int rank, const std::string& name) const {
    for (const auto& session : detail::Session::List(TempDir(rank))) {
      auto processes = session.Processes();
      if (auto it = processes.find(name); it != processes.end()) return it->second;
    }
    return {};
  }

  // Waits until `node` printed `text` on stdout.
  ::testing::AssertionResult Printed(const BackgroundCommand& node, const std::string& text,
                                     int64_t timeout_ms) {
    if (WaitUntil([&] { return Contains(node.Out(), text); }, timeout_ms)) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "never printed '" << text << "'\n--- stdout ---\n"
                                         << node.Out() << "--- stderr ---\n"
                                         << node.Err();
  }

  static ::testing::AssertionResult AllGone(const std::vector<detail::ProcessRecord>& records,
                                            int64_t timeout_ms) {
    if (WaitUntil(
            [&] {
              for (const auto& r : records) {
                if (detail::IsRunning(r)) return false;
              }
              return true;
            },
            timeout_ms)) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "a recorded rayx process still runs";
  }

  // The command node 0 runs: a 3-node launch printing each rank's variables,
  // then it waits for the test's go (so the test sees the cluster running).
  std::vector<std::string> LaunchThenWait(int nodes) const {
    return {"/bin/sh", "-c",
            "echo $$ > " + dir_ + "/command.pid; " + RayxCliPath() + " launch --nnodes " +
                std::to_string(nodes) +
                " --nproc-per-node 1 -- sh -c 'echo rank=$RANK world=$WORLD_SIZE' && "
                "until [ -e " +
                dir_ + "/go ]; do sleep 0.05; done"};
  }

  void Go() const { std::ofstream(dir_ + "/go").put('\n'); }

  std::string dir_;
  uint16_t port_ = 0;
  std::string address_;
};

TEST_F(PlatformStart, EveryNodeRunsTheSameCommandRankZeroRunsTheJobAndAllExitWhenItEnds) {
  // Nodes 1 and 2 come up before the head exists, as pods do.
  auto node1 = StartNode(1, TorchEnv(1, 3), {}, LaunchThenWait(3));
  auto node2 = StartNode(2, TorchEnv(2, 3), {}, LaunchThenWait(3));
  ASSERT_TRUE(Printed(node1,
                      "node rank 1 of 3 (from RANK/WORLD_SIZE), joining the head on "
                      "127.0.0.1:" +
                          std::to_string(port_),
                      30000));
  auto node0 = StartNode(0, TorchEnv(0, 3), {}, LaunchThenWait(3));
  ASSERT_TRUE(Printed(node0, "3 of 3 nodes have joined", 60000));
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(Printed(node0, "rank=" + std::to_string(rank) + " world=3", 60000));
  }
  auto status = QueryClusterStatus(address_, kToken, 5000);
  ASSERT_TRUE(status.ok()) << status.status();
  std::map<std::string, std::string> rank_of_ip;
  for (const auto& node : status->nodes) {
    if (node.alive) rank_of_ip[node.address] = node.labels.at("rayx.io/node-rank");
  }
  EXPECT_EQ(rank_of_ip, (std::map<std::string, std::string>{
                            {"127.0.0.1", "0"}, {"127.0.0.2", "1"}, {"127.0.0.3", "2"}}))
      << "node 0 at MASTER_ADDR, each node labelled with its rank";
  std::vector<detail::ProcessRecord> daemons;
  for (int rank = 0; rank < 3; ++rank) {
    auto mine = Daemons(rank);
    EXPECT_EQ(mine.size(), rank == 0 ? 2u : 1u) << "node " << rank;
    daemons.insert(daemons.end(), mine.begin(), mine.end());
  }

  Go();
  EXPECT_EQ(node0.Wait(60000), 0) << node0.Out() << node0.Err();
  EXPECT_EQ(node1.Wait(30000), 0) << node1.Out() << node1.Err();
  EXPECT_EQ(node2.Wait(30000), 0) << node2.Out() << node2.Err();
  EXPECT_TRUE(Contains(node0.Out(), "stopped the cluster: every node agent left")) << node0.Out();
  EXPECT_TRUE(Contains(node1.Out(), "the node agent left cleanly (the cluster was stopped)"))
      << node1.Out();
  EXPECT_FALSE(Contains(node1.Out(), "rank=")) << "only node 0 runs the command";
  EXPECT_TRUE(AllGone(daemons, 10000));
}

TEST_F(PlatformStart, TheCommandsExitStatusIsNodeZerosAndNodesStillExitCleanly) {
  auto node1 = StartNode(1, TorchEnv(1, 2), {}, {"/bin/sh", "-c", "exit 7"});
  auto node0 = StartNode(0, TorchEnv(0, 2), {}, {"/bin/sh", "-c", "exit 7"});
  EXPECT_EQ(node0.Wait(60000), 7) << node0.Out() << node0.Err();
  EXPECT_TRUE(Contains(node0.Out(), "the command exited with status 7")) << node0.Out();
  EXPECT_EQ(node1.Wait(30000), 0) << node1.Out() << node1.Err();
}

// The platform stopping the job: SIGTERM to node 0 reaches the command, which
// may clean up; then the cluster stops and every node exits.
TEST_F(PlatformStart, SigtermToNodeZeroReachesTheCommandAndEndsTheJob) {
  std::vector<std::string> command = {
      "/bin/sh", "-c",
      "trap 'echo cleaned-up; exit 5' TERM; echo ready; while :; do sleep 0.05; done"};
  auto node1 = StartNode(1, TorchEnv(1, 2), {}, command);
  auto node0 = StartNode(0, TorchEnv(0, 2), {}, command);
  ASSERT_TRUE(Printed(node0, "ready", 60000));
  ::kill(node0.pid(), SIGTERM);
  EXPECT_EQ(node0.Wait(30000), 5) << node0.Out() << node0.Err();
  EXPECT_TRUE(Contains(node0.Out(), "cleaned-up")) << node0.Out();
  EXPECT_EQ(node1.Wait(30000), 0) << node1.Out() << node1.Err();
}

TEST_F(PlatformStart, SlurmVariablesUnderSrunGiveTheSameCluster) {
  // What srun sets for a 2-node step with one task per node.
  auto slurm = [&](int rank) {
    return std::map<std::string, std::string>{{"SLURM_JOB_ID", "4242"},
                                              {"SLURM_PROCID", std::to_string(rank)},
                                              {"SLURM_NODEID", std::to_string(rank)},
                                              {"SLURM_LOCALID", "0"},
                                              {"SLURM_NNODES", "2"},
                                              {"SLURM_NTASKS", "2"},
                                              {"SLURM_STEP_NODELIST", "127.0.0.1,127.0.0.2"},
                                              {"RAYX_TOKEN", kToken}};
  };
  std::vector<std::string> port = {"--port", std::to_string(port_)};
  auto command = std::vector<std::string>{RayxCliPath(), "status"};
  auto node1 = StartNode(1, slurm(1), port, command);
  auto node0 = StartNode(0, slurm(0), port, command);
  EXPECT_EQ(node0.Wait(60000), 0) << node0.Out() << node0.Err();
  EXPECT_TRUE(Contains(node0.Out(), "node rank 0 of 2 (from SLURM)")) << node0.Out();
  EXPECT_TRUE(Contains(node0.Out(), "127.0.0.2")) << "`rayx status` listed node 1: " << node0.Out();
  EXPECT_EQ(node1.Wait(30000), 0) << node1.Out() << node1.Err();
}

TEST_F(PlatformStart, ANodeThatNeverJoinsIsNamedAndTheOthersExit) {
  auto node1 = StartNode(1, TorchEnv(1, 3), {}, {"/bin/true"});
  // Long enough for node 1, started just before, to join on a loaded machine.
  auto node0 = StartNode(0, TorchEnv(0, 3), {"--join-timeout-s", "8"}, {"/bin/true"});
  EXPECT_EQ(node0.Wait(60000), 1) << node0.Out() << node0.Err();
  EXPECT_TRUE(Contains(node0.Err(), "node rank 2 of 3 did not join within 8 s")) << node0.Err();
  EXPECT_EQ(node1.Wait(30000), 0) << node1.Out() << node1.Err();
  EXPECT_TRUE(AllGone(Daemons(0), 5000));
}

TEST_F(PlatformStart, AKilledNodeFailsTheJobNamingItAndNothingIsLeftRunning) {
  fs::create_directories(dir_ + "/pids");
  // Each launch rank records its pid and sleeps: the job runs until a node dies.
  std::vector<std::string> command = {
      "/bin/sh", "-c",
      RayxCliPath() + " launch --nnodes 3 --nproc-per-node 1 -- sh -c 'echo $$ > " + dir_ +
          "/pids/rank$RANK; echo started=$RANK; exec sleep 600'"};
  auto node1 = StartNode(1, TorchEnv(1, 3), {}, command);
  auto node2 = StartNode(2, TorchEnv(2, 3), {}, command);
  auto node0 = StartNode(0, TorchEnv(0, 3), {}, command);
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_TRUE(Printed(node0, "started=" + std::to_string(rank), 60000));
  }
  std::vector<pid_t> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    std::ifstream in(dir_ + "/pids/rank" + std::to_string(rank));
    pid_t pid = 0;
    ASSERT_TRUE(in >> pid) << "rank " << rank;
    ranks.push_back(pid);
  }
  std::vector<detail::ProcessRecord> daemons;
  for (int rank = 0; rank < 3; ++rank) {
    auto mine = Daemons(rank);
    daemons.insert(daemons.end(), mine.begin(), mine.end());
  }

  // The platform loses node 2: its `rayx start` is SIGKILLed.
  ::kill(node2.pid(), SIGKILL);
  int code = node0.Wait(60000);
  EXPECT_NE(code, 0) << node0.Out() << node0.Err();
  EXPECT_NE(code, -1) << "node 0 must end, not hang";
  EXPECT_TRUE(Contains(node0.Out() + node0.Err(), "127.0.0.3")) << "the dead node is named:\n"
                                                                << node0.Out() << node0.Err();
  EXPECT_EQ(node1.Wait(30000), 0) << node1.Out() << node1.Err();
  EXPECT_TRUE(AllGone(daemons, 10000));
  EXPECT_TRUE(WaitUntil(
      [&] {
        for (pid_t p : ranks) {
          if (PidAlive(p)) return false;
        }
        return true;
      },
      10000))
      << "every launched rank stopped, on every node";
}

TEST_F(PlatformStart, TheOtherNodesExitWhenNodeZeroIsKilled) {
  std::vector<std::string> lost = {"--head-lost-timeout-ms", "2000"};
  auto node1 = StartNode(1, TorchEnv(1, 2), lost, LaunchThenWait(2));
  auto node0 = StartNode(0, TorchEnv(0, 2), {}, LaunchThenWait(2));
  ASSERT_TRUE(Printed(node0, "rank=1 world=2", 60000));
  auto daemons = Daemons(0);
  auto node1_daemons = Daemons(1);
  daemons.insert(daemons.end(), node1_daemons.begin(), node1_daemons.end());
  pid_t command = 0;
  ASSERT_TRUE(std::ifstream(dir_ + "/command.pid") >> command);
  ASSERT_TRUE(PidAlive(command));
  ::kill(node0.pid(), SIGKILL);
  EXPECT_TRUE(WaitUntil([&] { return !PidAlive(command); }, 10000))
      << "node 0's command dies with it (the agent's reaper)";
  EXPECT_EQ(node1.Wait(30000), 1) << node1.Out() << node1.Err();
  EXPECT_TRUE(Contains(node1.Err(), "the agent")) << node1.Err();
  EXPECT_TRUE(AllGone(daemons, 10000)) << "node 0's daemons follow its rayx start, node 1's "
                                          "agent leaves once the head is silent";
}

// As a container's PID 1 (here: a child subreaper), `rayx start` inherits
// what a lease left behind; its exit is not a daemon's and ends nothing.
TEST_F(PlatformStart, OrphansInheritedAsPidOneDoNotStopTheNode) {
  std::vector<std::string> command = {
      "/bin/sh", "-c", RayxCliPath() + " launch --nnodes 2 -- sh -c 'sleep 30 & echo left=$RANK'"};
  // PR_SET_CHILD_SUBREAPER (36) survives exec: node 1's rayx start adopts orphans.
  const std::string subreaper =
      "import ctypes, os, sys; ctypes.CDLL(None).prctl(36, 1, 0, 0, 0); "
      "os.execv(sys.argv[1], sys.argv[1:])";
  std::vector<std::string> argv = {
      "/usr/bin/python3",  "-c",         subreaper, RayxCliPath(), "start",
      "--from-env",        "--num-cpus", "1",       "--temp-dir",  TempDir(1),
      "--node-ip-address", "127.0.0.2"};
  auto node1 = BackgroundCommand::Start(argv, dir_, TorchEnv(1, 2), "node1");
  auto node0 = StartNode(0, TorchEnv(0, 2), {}, command);
  EXPECT_EQ(node0.Wait(60000), 0) << node0.Out() << node0.Err();
  EXPECT_TRUE(Contains(node0.Out(), "left=1")) << node0.Out();
  EXPECT_EQ(node1.Wait(30000), 0) << node1.Out() << node1.Err();
  EXPECT_FALSE(Contains(node1.Err(), "stopping the others")) << node1.Err();
}

// A requeued job, or a rerun after node 0 was SIGKILLed, in the same temp dir
// and port: a new cluster, whatever the old one's token was.
TEST_F(PlatformStart, ARerunAfterNodeZeroWasKilledStartsANewCluster) {
  auto first = StartNode(0, TorchEnv(0, 1), {},
                         {"/bin/sh", "-c", "echo ready; while :; do sleep 0.05; done"});
  ASSERT_TRUE(Printed(first, "ready", 60000));
  auto daemons = Daemons(0);
  ::kill(first.pid(), SIGKILL);
  ASSERT_TRUE(AllGone(daemons, 10000));
  auto env = TorchEnv(0, 1);
  env["RAYX_TOKEN"] = "another-token";
  auto again = StartNode(0, env, {}, {RayxCliPath(), "status"});
  EXPECT_EQ(again.Wait(60000), 0) << again.Out() << again.Err();
  EXPECT_TRUE(Contains(again.Out(), "Started the rayx")) << again.Out();
  EXPECT_FALSE(Contains(again.Out(), "Restarted")) << again.Out();
}

// Node 0's agent dies while the job runs: the command goes with it, node 0
// stops the cluster, and node 1 exits at once (not after the head-lost timeout).
TEST_F(PlatformStart, NodeZerosAgentDyingEndsTheJobOnEveryNodePromptly) {
  std::vector<std::string> command = {"/bin/sh", "-c",
                                      "echo $$ > " + dir_ +
                                          "/command.pid; echo ready; "
                                          "while :; do sleep 0.05; done"};
  // Were it left to notice the head's silence, node 1 would wait an hour.
  auto node1 = StartNode(1, TorchEnv(1, 2), {"--head-lost-timeout-ms", "3600000"}, command);
  auto node0 = StartNode(0, TorchEnv(0, 2), {}, command);
  ASSERT_TRUE(Printed(node0, "ready", 60000));
  pid_t pid = 0;
  ASSERT_TRUE(std::ifstream(dir_ + "/command.pid") >> pid);
  detail::ProcessRecord agent = Daemon(0, "agent");
  ASSERT_GT(agent.pid, 0);
  ::kill(agent.pid, SIGKILL);
  EXPECT_EQ(node0.Wait(30000), 1) << node0.Out() << node0.Err();
  EXPECT_TRUE(Contains(node0.Err(), "the agent (pid " + std::to_string(agent.pid) + ")"))
      << node0.Err();
  EXPECT_EQ(node1.Wait(30000), 0) << "node 1 heard the stop: " << node1.Out() << node1.Err();
  EXPECT_TRUE(WaitUntil([&] { return !PidAlive(pid); }, 10000)) << "the command is gone";
}

// The waits before the job runs end on what would end the job: a dead head,
// a stop signal (the platform cancelling a job whose nodes never came).
TEST_F(PlatformStart, WaitingForNodesEndsOnADeadHeadOrASignal) {
  auto waiting = StartNode(0, TorchEnv(0, 3), {}, {"/bin/true"});
  ASSERT_TRUE(Printed(waiting, "1 of 3 nodes have joined", 60000));
  detail::ProcessRecord head = Daemon(0, "head");
  ASSERT_GT(head.pid, 0);
  ::kill(head.pid, SIGKILL);
  EXPECT_EQ(waiting.Wait(30000), 1) << waiting.Out() << waiting.Err();
  EXPECT_TRUE(Contains(waiting.Err(), "the head (pid " + std::to_string(head.pid) +
                                          ") exited while waiting for the nodes"))
      << waiting.Err();

  auto signalled = StartNode(0, TorchEnv(0, 3), {}, {"/bin/true"});
  ASSERT_TRUE(Printed(signalled, "1 of 3 nodes have joined", 60000));
  auto daemons = Daemons(0);
  ::kill(signalled.pid(), SIGTERM);
  EXPECT_EQ(signalled.Wait(30000), 128 + SIGTERM) << signalled.Out() << signalled.Err();
  EXPECT_TRUE(AllGone(daemons, 10000));

  // A node waiting for a head that never comes ends on SIGTERM too.
  auto joining = StartNode(1, TorchEnv(1, 3), {}, {"/bin/true"});
  ASSERT_TRUE(Printed(joining, "joining the head", 30000));
  ::kill(joining.pid(), SIGTERM);
  int code = joining.Wait(30000);
  EXPECT_NE(code, -1) << "it must not wait out --join-timeout-s";
  EXPECT_TRUE(AllGone(Daemons(1), 10000));
}

// Kubeflow gives the master pod MASTER_ADDR=localhost: node 0 then takes its
// default address (its first interface), not loopback from MASTER_ADDR. (On a
// machine with no other interface the default is loopback too; the rule itself
// is unit-tested in platform_env_test.)
TEST_F(PlatformStart, NodeZeroNeverAdvertisesALoopbackMasterAddr) {
  auto env = TorchEnv(0, 1);
  env["MASTER_ADDR"] = "localhost";
  std::vector<std::string> argv = {RayxCliPath(), "start",      "--from-env", "--num-cpus",
                                   "1",           "--temp-dir", TempDir(0),   "--",
                                   RayxCliPath(), "status"};
  auto r = RunCommand(argv, env, 60000);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "on " + DefaultNodeIp() + ":")) << r.out;
  EXPECT_TRUE(Contains(r.out, "at " + DefaultNodeIp() + " with")) << "its agent too: " << r.out;
}

TEST_F(PlatformStart, BadEnvironmentsAreRefusedBeforeAnythingStarts) {
  struct Case {
    std::map<std::string, std::string> env;
    std::vector<std::string> flags;
    std::string error;  // what stderr must say
  };
  const std::vector<Case> cases = {
      {{}, {"--from-env"}, "found neither SLURM's variables"},
      {{{"RANK", "3"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "127.0.0.1"}, {"RAYX_TOKEN", kToken}},
       {"--from-env"},
       "RANK=3 is not a node index below WORLD_SIZE=3"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"}},
       {"--from-env"},
       "set RAYX_TOKEN"},
      {{{"SLURM_PROCID", "0"},
        {"SLURM_NODEID", "0"},
        {"SLURM_NNODES", "2"},
        {"SLURM_NTASKS", "16"},
        {"SLURM_NODELIST", "gpu[1-2]"},
        {"RAYX_TOKEN", kToken}},
       {"--from-env"},
       "16 tasks on 2 nodes"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"RAYX_TOKEN", kToken}},
       {"--from-env", "--head"},
       "drop --head and --address"},
      {{}, {"--head", "--", "/bin/true"}, "runs only with --from-env"},
  };
  for (const auto& c : cases) {
    // Empty unsets: the test's own environment may have any of these.
    std::map<std::string, std::string> env = c.env;
    for (const char* name :
         {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", "RAYX_TOKEN"}) {
      env.emplace(name, "");
    }
    std::vector<std::string> argv = {RayxCliPath(), "start", "--temp-dir", TempDir(0)};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    auto r = RunCommand(argv, env, 30000);
    EXPECT_EQ(r.exit_code, 2) << r.Describe();
    EXPECT_TRUE(Contains(r.err, c.error)) << "expected '" << c.error << "' in " << r.err;
  }
  EXPECT_TRUE(detail::Session::List(TempDir(0)).empty()) << "nothing was started";
}

}  // namespace
}  // namespace rayx::testing
