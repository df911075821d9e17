// A real head and real node agents on loopback, driven through the rayx CLI.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>
#include <fstream>
#include <sstream>

#include "rayx/kv.h"
#include "rayx/rayx.h"
#include "rayx/version.h"
#include "common/session_dir.h"
#include "util/local_cluster.h"
#include "util/test_helpers.h"

namespace rayx::testing {
namespace {

std::unique_ptr<LocalCluster> StartCluster(LocalCluster::Options options = {}) {
  auto cluster = LocalCluster::Start(options);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  return cluster.ok() ? std::move(*cluster) : nullptr;
}

const NodeInfo* FindNode(const ClusterStatus& status, const std::string& hex) {
  for (const auto& node : status.nodes) {
    if (node.node_id.Hex() == hex) return &node;
  }
  return nullptr;
}

TEST(Cluster, StatusShowsBothNodesWithTheirTotals) {
  LocalCluster::Options options;
  options.head_node.num_cpus = 2;
  options.head_node.resources = R"({"tpu": 4})";
  options.head_node.labels = "zone=a";
  auto cluster = StartCluster(options);
  ASSERT_TRUE(cluster);
  auto worker = cluster->AddNode({.num_cpus = 3, .num_gpus = 2, .labels = "accelerator=H100"});
  ASSERT_TRUE(worker.ok()) << worker.status();

  auto status = cluster->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->AliveNodeCount(), 2u);
  ResourceMap total = status->TotalResources();
  EXPECT_EQ(total["CPU"], 5);
  EXPECT_EQ(total["GPU"], 2);
  EXPECT_EQ(total["tpu"], 4);
  const NodeInfo* head = FindNode(*status, cluster->head_node().node_id);
  const NodeInfo* second = FindNode(*status, worker->node_id);
  ASSERT_TRUE(head && second);
  EXPECT_TRUE(head->is_head_node);
  EXPECT_FALSE(second->is_head_node);
  EXPECT_EQ(head->labels.at("zone"), "a");
  EXPECT_EQ(second->labels.at("accelerator"), "H100");
  EXPECT_EQ(second->address, "127.0.0.1");
  EXPECT_EQ(second->agent_pid, worker->agent.pid);

  // The CLI prints the same, like `ray status`.
  CommandResult cli = cluster->RunCli({"status"});
  ASSERT_EQ(cli.exit_code, 0) << cli.Describe();
  EXPECT_TRUE(Contains(cli.out, "node_" + cluster->head_node().node_id)) << cli.out;
  EXPECT_TRUE(Contains(cli.out, "node_" + worker->node_id)) << cli.out;
  EXPECT_TRUE(Contains(cli.out, "0/5 CPU")) << cli.out;
  EXPECT_TRUE(Contains(cli.out, "0/2 GPU")) << cli.out;
  EXPECT_TRUE(Contains(cli.out, "0/4 tpu")) << cli.out;
  EXPECT_TRUE(Contains(cli.out, "(no dead nodes)")) << cli.out;

  CommandResult verbose = cluster->RunCli({"status", "-v"});
  ASSERT_EQ(verbose.exit_code, 0) << verbose.Describe();
  EXPECT_TRUE(Contains(verbose.out, "Node: node_" + worker->node_id)) << verbose.out;
  EXPECT_TRUE(Contains(verbose.out, "accelerator=H100")) << verbose.out;

  // From another machine's point of view: explicit address, the token in a
  // file only its owner reads.
  std::string token_file = cluster->temp_dir() + "/copied-token";
  ASSERT_TRUE(detail::WriteTokenFile(token_file, cluster->token()).ok());
  CommandResult remote = cluster->RunCli(
      {"status", "--address", cluster->address(), "--token-file", token_file}, false);
  ASSERT_EQ(remote.exit_code, 0) << remote.Describe();
  EXPECT_TRUE(Contains(remote.out, "0/5 CPU")) << remote.out;
  // A token file others may read is refused, saying how to fix it; so is a
  // token on the command line.
  ASSERT_EQ(::chmod(token_file.c_str(), 0644), 0);
  CommandResult open_file = cluster->RunCli(
      {"status", "--address", cluster->address(), "--token-file", token_file}, false);
  EXPECT_NE(open_file.exit_code, 0);
  EXPECT_TRUE(Contains(open_file.err, "chmod 600 " + token_file)) << open_file.err;
  CommandResult on_command_line = cluster->RunCli(
      {"status", "--address", cluster->address(), "--token", cluster->token()}, false);
  EXPECT_NE(on_command_line.exit_code, 0);
  EXPECT_TRUE(Contains(on_command_line.err, "set RAYX_TOKEN")) << on_command_line.err;
}

TEST(Cluster, WrongTokenIsRefusedAndLeavesNothingRunning) {
  auto cluster = StartCluster();
  ASSERT_TRUE(cluster);
  size_t before = cluster->RecordedProcesses().size();
  CommandResult r = cluster->RunCli({"start", "--address", cluster->address()}, true,
                                    {{"RAYX_TOKEN", "0000not-the-token"}});
  EXPECT_NE(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "is the cluster token right")) << r.err;
  EXPECT_EQ(cluster->RecordedProcesses().size(), before);
  auto status = cluster->GetStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->AliveNodeCount(), 1u);
  // A status request with a wrong token is refused too.
  EXPECT_EQ(QueryClusterStatus(cluster->address(), "wrong", 2000).status().code(),
            StatusCode::kUnauthenticated);
}

TEST(Cluster, VersionMismatchIsRefusedNamingBothVersions) {
  auto cluster = StartCluster();
  ASSERT_TRUE(cluster);
  CommandResult release = cluster->RunCli(
      {"start", "--address", cluster->address()}, true,
      {{"RAYX_TESTING_ANNOUNCE_VERSION", "9.9.9"}, {"RAYX_TOKEN", cluster->token()}});
  EXPECT_NE(release.exit_code, 0) << release.Describe();
  EXPECT_TRUE(Contains(release.err, "rayx 9.9.9")) << release.err;
  EXPECT_TRUE(Contains(release.err, std::string("rayx ") + kRayxVersion)) << release.err;

  CommandResult protocol = cluster->RunCli(
      {"start", "--address", cluster->address()}, true,
      {{"RAYX_TESTING_ANNOUNCE_PROTOCOL", "999"}, {"RAYX_TOKEN", cluster->token()}});
  EXPECT_NE(protocol.exit_code, 0) << protocol.Describe();
  EXPECT_TRUE(Contains(protocol.err, "protocol 999")) << protocol.err;
  EXPECT_TRUE(Contains(protocol.err, "protocol " + std::to_string(kProtocolVersion)))
      << protocol.err;
  auto status = cluster->GetStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->AliveNodeCount(), 1u);
}

TEST(Cluster, KilledAgentIsMarkedDeadWithinTheDefaultTimeout) {
  auto cluster = StartCluster();  // default heartbeat 250 ms, timeout 1500 ms
  ASSERT_TRUE(cluster);
  auto worker = cluster->AddNode({.num_cpus = 3});
  ASSERT_TRUE(worker.ok()) << worker.status();
  auto before = cluster->GetStatus();
  ASSERT_TRUE(before.ok());
  const std::string store = FindNode(*before, worker->node_id)->store_dir;
  ASSERT_TRUE(std::filesystem::is_directory(store)) << store;

  auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(cluster->KillNode(*worker).ok());
  // Defaults detect a killed agent once the 1.5 s timeout passes (checked
  // every heartbeat period): within 2 s on an idle machine; 4 s leaves a
  // loaded 2-core machine room for the head's and this test's own turns.
  Status dead = cluster->WaitFor(
      [&](const ClusterStatus& s) {
        const NodeInfo* n = FindNode(s, worker->node_id);
        return n && !n->alive;
      },
      4000);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - killed_at);
  ASSERT_TRUE(dead.ok()) << dead << " (waited " << took.count() << " ms)";
  auto status = cluster->GetStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_TRUE(Contains(FindNode(*status, worker->node_id)->death_reason, "no heartbeat"));
  EXPECT_EQ(status->TotalResources()["CPU"], 1);  // the dead node no longer counts

  CommandResult cli = cluster->RunCli({"status"});
  EXPECT_TRUE(Contains(cli.out, "Dead:\n node_" + worker->node_id)) << cli.out;
  // Its object store (RAM in /dev/shm) went with it: the agent's reaper.
  EXPECT_TRUE(WaitUntil([&] { return !std::filesystem::exists(store); }, 10000))
      << store << " outlived its agent";

  // A restarted agent joins as a new node.
  auto again = cluster->AddNode({.num_cpus = 3});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE(again->node_id, worker->node_id);
  ASSERT_TRUE(cluster->WaitForNodes(2, 5000).ok());
}

TEST(Cluster, StoppedAgentLeavesAtOnce) {
  // A long timeout shows the agent's leave is reported, not timed out.
  auto cluster = StartCluster({.node_timeout_ms = 60000});
  ASSERT_TRUE(cluster);
  auto worker = cluster->AddNode({});
  ASSERT_TRUE(worker.ok()) << worker.status();
  ASSERT_TRUE(cluster->RemoveNode(*worker).ok());
  auto status = cluster->GetStatus();
  ASSERT_TRUE(status.ok());
  const NodeInfo* n = FindNode(*status, worker->node_id);
  ASSERT_TRUE(n);
  EXPECT_FALSE(n->alive);
  EXPECT_TRUE(Contains(n->death_reason, "stopped")) << n->death_reason;
}

TEST(Cluster, TwoClustersOnOneMachineDoNotSeeEachOther) {
  auto a = StartCluster();
  auto b = StartCluster();
  ASSERT_TRUE(a && b);
  ASSERT_NE(a->address(), b->address());
  ASSERT_TRUE(a->AddNode({.num_cpus = 4}).ok());
  auto sa = a->GetStatus();
  auto sb = b->GetStatus();
  ASSERT_TRUE(sa.ok() && sb.ok());
  EXPECT_EQ(sa->AliveNodeCount(), 2u);
  EXPECT_EQ(sb->AliveNodeCount(), 1u);
  EXPECT_NE(sa->cluster_id, sb->cluster_id);
  // A's token does not open B.
  CommandResult r = b->RunCli({"start", "--address", b->address()}, true,
                              {{"RAYX_TOKEN", a->token()}});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(QueryClusterStatus(b->address(), a->token(), 2000).status().code(),
            StatusCode::kUnauthenticated);
}

TEST(Cluster, StopLeavesNoProcessOfTheSessionAlive) {
  auto cluster = StartCluster();
  ASSERT_TRUE(cluster);
  ASSERT_TRUE(cluster->AddNode({}).ok());
  ASSERT_TRUE(cluster->AddNode({}).ok());
  std::vector<detail::ProcessRecord> all = cluster->RecordedProcesses();
  ASSERT_EQ(all.size(), 4u);  // head, its agent, two more agents
  CommandResult r = cluster->RunCli({"stop"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "Stopped rayx-head")) << r.out;
  for (const auto& p : all) {
    EXPECT_FALSE(detail::IsRunning(p)) << "pid " << p.pid << " still runs";
    EXPECT_TRUE(Contains(r.out, "(pid " + std::to_string(p.pid) + ")")) << r.out;
  }
  EXPECT_TRUE(cluster->RecordedProcesses().empty());
  // Status now says there is no cluster, and how to start one.
  CommandResult status = cluster->RunCli({"status"});
  EXPECT_NE(status.exit_code, 0);
  EXPECT_TRUE(Contains(status.err, "rayx start --head")) << status.err;
  // Stopping again is a no-op that says so.
  CommandResult again = cluster->RunCli({"stop"});
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_TRUE(Contains(again.out, "No rayx processes")) << again.out;
}

// Submits a job whose shell starts `sleep 300` in the background and waits
// for it: when the shell (the lease's process) dies with its agent, the sleep
// is what the lease left behind. Returns the sleep's record.
std::optional<detail::ProcessRecord> StartJobWithBackgroundChild(const LocalCluster& cluster) {
  std::string pid_file = cluster.temp_dir() + "/grandchild.pid";
  std::filesystem::remove(pid_file);
  CommandResult submitted = RunCommand(
      {RayxCliPath(), "job", "submit", "--temp-dir", cluster.temp_dir(), "--no-wait", "--", "sh",
       "-c", "sleep 300 & echo $! > " + pid_file + ".tmp && mv " + pid_file + ".tmp " + pid_file +
                 "; wait"},
      {{"RAYX_EXIT_WITH_PID", std::to_string(getpid())}}, 60000);
  EXPECT_EQ(submitted.exit_code, 0) << submitted.Describe();
  pid_t grandchild = 0;
  WaitUntil(
      [&] {
        std::ifstream in(pid_file);
        if (!(in >> grandchild)) grandchild = 0;
        return grandchild != 0;
      },
      30000);
  EXPECT_GT(grandchild, 1) << "the job never started its background process";
  auto start = detail::ProcessStartTime(grandchild);
  EXPECT_TRUE(start.ok()) << start.status();
  if (grandchild <= 1 || !start.ok()) return std::nullopt;
  return detail::ProcessRecord{grandchild, *start};
}

// An agent killed by SIGKILL takes its lease processes with it (they die with
// their parent), and its reaper kills what they started (a job's
// `sh -c 'x & wait'` leaves x) the moment it is gone: nothing of the lease
// keeps holding the node's devices until `rayx stop`.
TEST(Cluster, WhatALeaseLeftBehindDiesWithItsKilledAgent) {
  auto cluster = StartCluster();
  ASSERT_TRUE(cluster);
  auto orphan = StartJobWithBackgroundChild(*cluster);
  ASSERT_TRUE(orphan);
  ASSERT_TRUE(cluster->KillNode(cluster->head_node()).ok());
  EXPECT_TRUE(detail::WaitForExit({*orphan}, 5000).empty())
      << "pid " << orphan->pid << " outlived its agent by 5 s";
  // The reaper kills the group, then removes its record, then logs it.
  std::string head_log = cluster->head_log_path();
  const std::string agent_log_path = head_log.substr(0, head_log.rfind('/')) + "/agent.log";
  std::string text;
  EXPECT_TRUE(WaitUntil(
      [&] {
        std::ifstream agent_log(agent_log_path);
        text.assign(std::istreambuf_iterator<char>(agent_log), std::istreambuf_iterator<char>());
        return Contains(text, "killed what was left of 1 lease process group");
      },
      5000))
      << text;
}

// Killed with its whole process group, the agent's reaper dies with it: what
// the lease left behind runs on. The next `rayx start` on the machine kills it
// (a new agent would offer its devices again), and so would `rayx stop`.
TEST(Cluster, StartAndStopKillWhatALeaseLeftBehindWhenAgentAndReaperWereKilled) {
  for (bool restart : {true, false}) {
    SCOPED_TRACE(restart ? "rayx start" : "rayx stop");
    auto cluster = StartCluster();
    ASSERT_TRUE(cluster);
    auto orphan = StartJobWithBackgroundChild(*cluster);
    ASSERT_TRUE(orphan);
    auto status = cluster->GetStatus();
    ASSERT_TRUE(status.ok());
    const std::string store = FindNode(*status, cluster->head_node().node_id)->store_dir;
    ASSERT_TRUE(std::filesystem::is_directory(store)) << store;
    detail::ProcessRecord agent = cluster->head_node().agent;
    ASSERT_EQ(::kill(-agent.pid, SIGKILL), 0);
    ASSERT_TRUE(detail::WaitForExit({agent}, 10000).empty());
    EXPECT_TRUE(detail::IsRunning(*orphan)) << "nothing should have stopped it yet";
    CommandResult r =
        restart ? cluster->RunCli({"start", "--address", cluster->address(),
                                   "--node-ip-address", "127.0.0.1", "--num-cpus", "1"},
                                  true, {{"RAYX_TOKEN", cluster->token()}})
                : cluster->RunCli({"stop"});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_TRUE(Contains(r.out, "Killed what was left of 1 lease process group")) << r.out;
    EXPECT_TRUE(detail::WaitForExit({*orphan}, 5000).empty())
        << "pid " << orphan->pid << " survived";
    // The dead agent's object store (its reaper died with it) goes too: by
    // this command, which says so, unless an agent of another cluster on this
    // machine (the Python suite's, running beside) started first and swept it.
    EXPECT_TRUE(WaitUntil([&] { return !std::filesystem::exists(store); }, 5000)) << store;
    if (!Contains(r.out, "Removed " + store + ", the object store of a node agent that is gone")) {
      std::cout << "(the dead store was removed before `rayx " << (restart ? "start" : "stop")
                << "` came to it)\n";
    }
  }
}

TEST(Cluster, StopWithAddressStopsOnlyThatCluster) {
  auto cluster = StartCluster();
  ASSERT_TRUE(cluster);
  // A second cluster recorded in the same temp dir.
  CommandResult other = cluster->RunCli({"start", "--head", "--port", "0", "--node-ip-address",
                                         "127.0.0.1", "--num-cpus", "1"});
  ASSERT_EQ(other.exit_code, 0) << other.Describe();
  ASSERT_EQ(cluster->RecordedProcesses().size(), 4u);
  CommandResult r = cluster->RunCli({"stop", "--address", cluster->address()});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  // Only the other cluster's head and agent remain.
  auto left = cluster->RecordedProcesses();
  ASSERT_EQ(left.size(), 2u);
  for (const auto& p : left) EXPECT_TRUE(detail::IsRunning(p));
  EXPECT_FALSE(QueryClusterStatus(cluster->address(), cluster->token(), 300).ok());
}

TEST(Cluster, BadFlagsFailWithOneLineAndStartNothing) {
  auto cluster = StartCluster();
  ASSERT_TRUE(cluster);
  size_t before = cluster->RecordedProcesses().size();
  std::string port = cluster->address().substr(cluster->address().rfind(':') + 1);
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  std::vector<Case> cases = {
      {{"start", "--head", "--resources", "{\"tpu\": 4"}, "invalid resources JSON"},
      {{"start", "--head", "--resources", "{\"tpu\": -4}"}, "negative"},
      {{"start", "--head", "--num-cpus", "-2"}, "--num-cpus cannot be negative"},
      {{"start", "--head", "--labels", "novalue"}, "invalid label"},
      {{"start", "--head", "--port", "99999"}, "--port must be between"},
      {{"start", "--head", "--port", port, "--node-ip-address", "127.0.0.1"}, "already in use"},
      {{"start", "--head", "--bogus"}, "unknown flag --bogus"},
      {{"start"}, "exactly one of --head"},
      {{"start", "--address", "127.0.0.1:notaport"}, "port must be a number"},
      {{"start", "--address", "127.0.0.1:1", "--connect-timeout-ms", "500"},
       "no answer from the head"},
      {{"start", "--address", "127.0.0.1:1", "--token", "x"}, "set RAYX_TOKEN"},
  };
  for (const auto& c : cases) {
    CommandResult r = cluster->RunCli(c.args, true, {{"RAYX_TOKEN", "x"}});
    EXPECT_NE(r.exit_code, 0) << r.Describe();
    EXPECT_TRUE(Contains(r.err, c.expect)) << "expected '" << c.expect << "' in: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(cluster->RecordedProcesses().size(), before) << r.Describe();
  }
  auto status = cluster->GetStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->AliveNodeCount(), 1u);
}

}  // namespace
}  // namespace rayx::testing

namespace rayx::testing {
namespace {

TEST(Cluster, BlockKeepsTheDaemonsInTheForegroundUntilSigterm) {
  std::string temp = (std::filesystem::temp_directory_path() / "rayx-block-XXXXXX").string();
  ASSERT_NE(mkdtemp(temp.data()), nullptr);
  std::vector<std::string> args = {RayxCliPath(), "start", "--head", "--port", "0",
                                   "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
                                   "--temp-dir", temp, "--block"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t cli = fork();
  if (cli == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    execv(argv[0], argv.data());
    _exit(127);
  }
  // Wait until both daemons are recorded and running.
  std::vector<detail::ProcessRecord> daemons;
  WaitUntil(
      [&] {
        daemons.clear();
        for (const auto& s : detail::Session::List(temp)) {
          for (const auto& [name, record] : s.Processes()) daemons.push_back(record);
        }
        return daemons.size() == 2 && detail::IsRunning(daemons[0]) &&
               detail::IsRunning(daemons[1]);
      },
      20000);
  ASSERT_EQ(daemons.size(), 2u);
  int status = 0;
  EXPECT_EQ(waitpid(cli, &status, WNOHANG), 0) << "--block returned while its daemons run";
  ASSERT_EQ(kill(cli, SIGTERM), 0);
  ASSERT_EQ(waitpid(cli, &status, 0), cli);
  EXPECT_TRUE(WIFEXITED(status)) << "the CLI died of the signal instead of stopping its daemons";
  for (const auto& d : daemons) EXPECT_FALSE(detail::IsRunning(d)) << "pid " << d.pid << " survived";
  // They stopped on SIGTERM (cleanly), not on the SIGKILL that follows a grace period.
  for (const auto& s : detail::Session::List(temp)) {
    std::ifstream log(s.LogPath("head"));
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("signal 15: shutting down"), std::string::npos) << text;
  }
  std::filesystem::remove_all(temp);
}

// A head started with $RAYX_TOKEN uses it (as every command given the same
// variable does), not a random token: one secret set once for a container.
TEST(Cluster, AHeadTakesItsTokenFromRayxToken) {
  std::string temp = (std::filesystem::temp_directory_path() / "rayx-envtoken-XXXXXX").string();
  ASSERT_NE(mkdtemp(temp.data()), nullptr);
  std::map<std::string, std::string> env = {{"RAYX_TOKEN", "token-from-the-environment"}};
  auto started = RunCommand({RayxCliPath(), "start", "--head", "--port", "0", "--node-ip-address",
                             "127.0.0.1", "--num-cpus", "1", "--temp-dir", temp},
                            env, 60000);
  ASSERT_EQ(started.exit_code, 0) << started.Describe();
  // The join line names a token file, never the token.
  EXPECT_TRUE(Contains(started.out, "--token-file")) << started.out;
  EXPECT_FALSE(Contains(started.out, "token-from-the-environment")) << started.out;
  auto conf = detail::FindLocalCluster(temp);
  ASSERT_TRUE(conf.ok()) << conf.status();
  EXPECT_EQ(conf->token, "token-from-the-environment");
  auto status = QueryClusterStatus(conf->address, "token-from-the-environment", 5000);
  EXPECT_TRUE(status.ok()) << status.status();
  auto stopped = RunCommand({RayxCliPath(), "stop", "--temp-dir", temp}, {}, 60000);
  EXPECT_EQ(stopped.exit_code, 0) << stopped.Describe();
  std::filesystem::remove_all(temp);
}

}  // namespace
}  // namespace rayx::testing

namespace rayx::testing {
namespace {

// The daemon's command line, as /proc has it.
std::vector<std::string> CommandLineOf(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::vector<std::string> args;
  std::string arg;
  while (std::getline(in, arg, '\0')) args.push_back(arg);
  return args;
}

bool HasFlag(const std::vector<std::string>& args, const std::string& flag,
             const std::string& value) {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag && args[i + 1] == value) return true;
  }
  return false;
}

// `rayx start` takes the daemons' caps: the head's go to the head (and act
// there), the agent's to the agent; a head's cap on a joining node is refused.
TEST(Cluster, StartPassesTheCapsToTheDaemonsThatEnforceThem) {
  std::string temp = (std::filesystem::temp_directory_path() / "rayx-caps-XXXXXX").string();
  ASSERT_NE(mkdtemp(temp.data()), nullptr);
  auto started = RunCommand({RayxCliPath(), "start", "--head", "--port", "0", "--node-ip-address",
                             "127.0.0.1", "--num-cpus", "1", "--temp-dir", temp,
                             "--kv-max-total-keys", "2", "--max-package-entries", "7"},
                            {}, 60000);
  ASSERT_EQ(started.exit_code, 0) << started.Describe();
  auto conf = detail::FindLocalCluster(temp);
  ASSERT_TRUE(conf.ok()) << conf.status();
  std::map<std::string, int> pids;
  for (const auto& session : detail::Session::List(temp)) {
    for (const auto& [name, record] : session.Processes()) pids[name] = record.pid;
  }
  ASSERT_TRUE(pids.count("head") && pids.count("agent"));
  EXPECT_TRUE(HasFlag(CommandLineOf(pids["head"]), "--kv-max-total-keys", "2"));
  EXPECT_FALSE(HasFlag(CommandLineOf(pids["head"]), "--max-package-entries", "7"));
  EXPECT_TRUE(HasFlag(CommandLineOf(pids["agent"]), "--max-package-entries", "7"));
  EXPECT_FALSE(HasFlag(CommandLineOf(pids["agent"]), "--kv-max-total-keys", "2"));

  // The head enforces it: at the latest the third key (the runtime may keep
  // some of its own) is refused, naming the cap.
  rayx::Options options;
  options.address = conf->address;
  options.token = conf->token;
  rayx::Init(options);
  std::string refusal;
  for (int i = 0; i < 3 && refusal.empty(); ++i) {
    try {
      rayx::kv::Put("caps/" + std::to_string(i), "x");
    } catch (const std::exception& e) {
      refusal = e.what();
    }
  }
  EXPECT_TRUE(Contains(refusal, "limit of 2 keys")) << "refusal: " << refusal;
  rayx::Shutdown();

  auto joined = RunCommand({RayxCliPath(), "start", "--address", conf->address,
                            "--node-ip-address", "127.0.0.2", "--temp-dir", temp,
                            "--kv-max-total-keys", "5"},
                           {{"RAYX_TOKEN", conf->token}}, 60000);
  EXPECT_EQ(joined.exit_code, 2) << joined.Describe();
  EXPECT_TRUE(Contains(joined.err, "--kv-max-total-keys is a cap of the head's")) << joined.err;
  auto stopped = RunCommand({RayxCliPath(), "stop", "--temp-dir", temp}, {}, 60000);
  EXPECT_EQ(stopped.exit_code, 0) << stopped.Describe();
  std::filesystem::remove_all(temp);
}

}  // namespace
}  // namespace rayx::testing
