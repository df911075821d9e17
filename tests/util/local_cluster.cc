// The loopback cluster harness.
#include "util/local_cluster.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <thread>

#include <gtest/gtest.h>

#include "common/session_dir.h"

namespace fs = std::filesystem;

namespace rayx::testing {

std::string RayxCliPath() { return RAYX_CLI_PATH; }

void AppendNodeFlags(const NodeOptions& options, std::vector<std::string>* args) {
  args->insert(args->end(), {"--num-cpus", std::to_string(options.num_cpus)});
  if (options.num_gpus) args->insert(args->end(), {"--num-gpus", std::to_string(*options.num_gpus)});
  if (!options.resources.empty()) args->insert(args->end(), {"--resources", options.resources});
  if (!options.labels.empty()) args->insert(args->end(), {"--labels", options.labels});
  args->insert(args->end(), options.extra_args.begin(), options.extra_args.end());
}

namespace {
std::vector<std::string> SessionPaths(const std::string& temp_dir) {
  std::vector<std::string> out;
  for (const auto& s : detail::Session::List(temp_dir)) out.push_back(s.path());
  return out;
}
}  // namespace

Result<std::unique_ptr<LocalCluster>> LocalCluster::Start(Options options) {
  std::unique_ptr<LocalCluster> cluster(new LocalCluster());
  std::string pattern = (fs::temp_directory_path() / "rayx-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) return Status::Internal("mkdtemp failed");
  cluster->temp_dir_ = pattern;
  std::vector<std::string> args = {"start", "--head", "--port", "0", "--node-ip-address",
                                   "127.0.0.1", "--heartbeat-period-ms",
                                   std::to_string(options.heartbeat_period_ms),
                                   "--node-timeout-ms", std::to_string(options.node_timeout_ms)};
  AppendNodeFlags(options.head_node, &args);
  cluster->head_args_ = args;
  CommandResult r = cluster->RunCli(args);
  if (r.exit_code != 0) return Status::Unavailable("rayx start --head failed: " + r.Describe());
  auto node = cluster->NewestSessionNode({});
  if (!node.ok()) return node.status();
  cluster->head_node_ = *node;
  auto local = detail::FindLocalCluster(cluster->temp_dir_);
  if (!local.ok()) return local.status();
  cluster->address_ = local->address;
  cluster->token_ = local->token;
  cluster->started_ = cluster->RecordedProcesses();
  return cluster;
}

LocalCluster::~LocalCluster() {
  if (!stopped_) {
    Status s = Stop();
    if (!s.ok()) std::cerr << "LocalCluster: " << s << "\n";
  }
  // A failed test keeps the cluster's logs (head, agents, workers) to read.
  if (::testing::Test::HasFailure() ||
      ::testing::UnitTest::GetInstance()->failed_test_count() > 0) {
    std::cerr << "LocalCluster: a test failed: kept " << temp_dir_
              << " with the cluster's logs\n";
    return;
  }
  std::error_code ec;
  fs::remove_all(temp_dir_, ec);
}

Result<NodeHandle> LocalCluster::NewestSessionNode(const std::vector<std::string>& before) const {
  for (const auto& session : detail::Session::List(temp_dir_)) {
    if (std::find(before.begin(), before.end(), session.path()) != before.end()) continue;
    auto config = session.ReadConfig();
    auto procs = session.Processes();
    if (!procs.count("agent") || config["node_id"].empty()) continue;
    return NodeHandle{config["node_id"], procs["agent"]};
  }
  return Status::NotFound("no new session with a node agent in " + temp_dir_);
}

Result<NodeHandle> LocalCluster::AddNode(const NodeOptions& options) {
  std::vector<std::string> before = SessionPaths(temp_dir_);
  std::vector<std::string> args = {"start", "--address", address_};
  AppendNodeFlags(options, &args);
  // The token by the environment: never on a command line.
  std::map<std::string, std::string> env = options.env;
  env.emplace("RAYX_TOKEN", token_);
  CommandResult r = RunCli(args, /*with_temp_dir=*/true, env);
  if (r.exit_code != 0) return Status::Unavailable("rayx start --address failed: " + r.Describe());
  auto node = NewestSessionNode(before);
  if (!node.ok()) return node.status();
  started_.push_back(node->agent);
  std::string id = node->node_id;
  RAYX_RETURN_IF_ERROR(WaitFor(
      [&](const ClusterStatus& s) {
        return std::any_of(s.nodes.begin(), s.nodes.end(),
                           [&](const NodeInfo& n) { return n.alive && n.node_id.Hex() == id; });
      },
      10000));
  return node;
}

Status LocalCluster::RemoveNode(const NodeHandle& node) {
  if (!detail::SignalGroup(node.agent, SIGTERM)) return Status::NotFound("agent not running");
  if (!detail::WaitForExit({node.agent}, 10000).empty()) {
    return Status::TimedOut("agent did not exit after SIGTERM");
  }
  return Status::OK();
}

Status LocalCluster::RestartHead(int64_t down_ms) {
  detail::ProcessRecord head = head_process();
  if (head.pid <= 0 || !detail::IsRunning(head)) return Status::NotFound("the head is not running");
  ::kill(head.pid, SIGKILL);
  if (!detail::WaitForExit({head}, 10000).empty()) return Status::TimedOut("head survived SIGKILL");
  std::this_thread::sleep_for(std::chrono::milliseconds(down_ms));  // the head stays down
  std::vector<std::string> args = head_args_;
  auto port = std::find(args.begin(), args.end(), "--port");
  if (port == args.end() || port + 1 == args.end()) return Status::Internal("no --port");
  *(port + 1) = address_.substr(address_.rfind(':') + 1);
  CommandResult r = RunCli(args);
  if (r.exit_code != 0) return Status::Unavailable("rayx start --head again failed: " + r.Describe());
  for (const auto& p : RecordedProcesses()) {
    if (std::none_of(started_.begin(), started_.end(),
                     [&](const auto& s) { return s.pid == p.pid; })) {
      started_.push_back(p);
    }
  }
  return WaitFor([](const ClusterStatus&) { return true; }, 10000);
}

Status LocalCluster::KillNode(const NodeHandle& node) {
  if (!detail::IsRunning(node.agent)) return Status::NotFound("agent not running");
  ::kill(node.agent.pid, SIGKILL);
  if (!detail::WaitForExit({node.agent}, 10000).empty()) {
    return Status::TimedOut("agent survived SIGKILL");
  }
  return Status::OK();
}

Result<ClusterStatus> LocalCluster::GetStatus() const {
  return QueryClusterStatus(address_, token_, 5000);
}

Status LocalCluster::WaitFor(const std::function<bool(const ClusterStatus&)>& pred,
                             int64_t timeout_ms) const {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  Status last = Status::TimedOut("condition never held");
  while (std::chrono::steady_clock::now() < deadline) {
    auto s = QueryClusterStatus(address_, token_, 1000);
    if (s.ok() && pred(*s)) return Status::OK();
    if (!s.ok()) last = s.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::TimedOut("condition did not hold within " + std::to_string(timeout_ms) +
                          " ms (last error: " + last.ToString() + ")");
}

Status LocalCluster::WaitForNodes(size_t alive, int64_t timeout_ms) const {
  return WaitFor([&](const ClusterStatus& s) { return s.AliveNodeCount() == alive; }, timeout_ms);
}

CommandResult LocalCluster::RunCli(std::vector<std::string> args, bool with_temp_dir,
                                   const std::map<std::string, std::string>& env,
                                   int64_t timeout_ms) const {
  args.insert(args.begin(), RayxCliPath());
  if (with_temp_dir) args.insert(args.end(), {"--temp-dir", temp_dir_});
  // Daemons started by a test end with it, even when it is killed.
  std::map<std::string, std::string> all_env = env;
  all_env.emplace("RAYX_EXIT_WITH_PID", std::to_string(getpid()));
  return RunCommand(args, all_env, timeout_ms);
}

detail::ProcessRecord LocalCluster::head_process() const {
  for (const auto& session : detail::Session::List(temp_dir_)) {
    auto procs = session.Processes();
    if (procs.count("head")) return procs["head"];
  }
  return {};
}

std::string LocalCluster::head_log_path() const {
  for (const auto& session : detail::Session::List(temp_dir_)) {
    if (session.ReadConfig()["role"] == "head") return session.LogPath("head");
  }
  return "";
}

std::vector<detail::ProcessRecord> LocalCluster::RecordedProcesses() const {
  std::vector<detail::ProcessRecord> out;
  for (const auto& session : detail::Session::List(temp_dir_)) {
    for (const auto& [name, record] : session.Processes()) out.push_back(record);
  }
  return out;
}

Status LocalCluster::Stop() {
  stopped_ = true;
  std::vector<detail::ProcessRecord> all = started_;
  for (const auto& r : RecordedProcesses()) all.push_back(r);
  CommandResult r = RunCli({"stop", "--grace-period", "5"});
  if (r.exit_code != 0) return Status::Internal("rayx stop failed: " + r.Describe());
  auto left = detail::WaitForExit(all, 5000);
  if (!left.empty()) {
    return Status::Internal("rayx stop left pid " + std::to_string(left[0].pid) + " running");
  }
  return Status::OK();
}

}  // namespace rayx::testing
