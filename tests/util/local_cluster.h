// A real rayx cluster on loopback for integration tests: a head and node agents
// as separate processes, started and stopped through the `rayx` CLI, each
// cluster in its own temp dir so clusters never see each other.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/process_control.h"
#include "rayx/cluster_status.h"
#include "rayx/status.h"
#include "util/subprocess.h"

namespace rayx::testing {

// Paths of the built binaries (set by CMake).
std::string RayxCliPath();

struct NodeOptions {
  double num_cpus = 1;
  std::optional<double> num_gpus;
  std::string resources;  // JSON, e.g. {"tpu": 4}
  std::string labels;     // k=v,...
  std::vector<std::string> extra_args;
  std::map<std::string, std::string> env;  // set for its `rayx start` (and so its agent)
};

// A node agent the cluster started.
struct NodeHandle {
  std::string node_id;  // hex
  detail::ProcessRecord agent;
};

class LocalCluster {
 public:
  struct Options {
    NodeOptions head_node;
    int64_t heartbeat_period_ms = 250;
    int64_t node_timeout_ms = 1500;
  };

  // Starts a head (on a free port) and its node agent. The destructor stops
  // everything with `rayx stop`, checks nothing is left running, and removes
  // the temp dir, unless a test of this program failed: then it keeps it (with
  // the head's, agents' and workers' logs) and prints where.
  static Result<std::unique_ptr<LocalCluster>> Start(Options options);
  static Result<std::unique_ptr<LocalCluster>> Start() { return Start(Options()); }
  ~LocalCluster();

  // Joins one more node agent; waits until the head counts it.
  Result<NodeHandle> AddNode(const NodeOptions& options);
  // SIGTERM: the agent leaves cleanly.
  Status RemoveNode(const NodeHandle& node);
  // SIGKILL: the agent dies without a word.
  Status KillNode(const NodeHandle& node);
  // SIGKILLs the head, waits `down_ms`, and runs the same `rayx start --head`
  // again (same port and temp dir): the restarted head loads its state and
  // the agents rejoin. Returns once the new head answers.
  Status RestartHead(int64_t down_ms);

  Result<ClusterStatus> GetStatus() const;
  // Polls the head until `pred` holds for its status, or `timeout_ms` passes.
  Status WaitFor(const std::function<bool(const ClusterStatus&)>& pred, int64_t timeout_ms) const;
  Status WaitForNodes(size_t alive, int64_t timeout_ms) const;

  // Runs `rayx ARGS... --temp-dir <this cluster's temp dir>` when `with_temp_dir`.
  CommandResult RunCli(std::vector<std::string> args, bool with_temp_dir = true,
                       const std::map<std::string, std::string>& env = {},
                       int64_t timeout_ms = 60000) const;

  // `rayx stop`; afterwards no process this cluster started runs.
  Status Stop();

  // Every process this cluster's sessions recorded (head, agents).
  std::vector<detail::ProcessRecord> RecordedProcesses() const;

  const std::string& address() const { return address_; }
  const std::string& token() const { return token_; }
  const std::string& temp_dir() const { return temp_dir_; }
  const NodeHandle& head_node() const { return head_node_; }
  // The head daemon's process and log file.
  detail::ProcessRecord head_process() const;
  std::string head_log_path() const;

 private:
  LocalCluster() = default;
  Result<NodeHandle> NewestSessionNode(const std::vector<std::string>& before) const;

  std::string temp_dir_;
  std::string address_;
  std::string token_;
  NodeHandle head_node_;
  std::vector<detail::ProcessRecord> started_;
  std::vector<std::string> head_args_;  // `rayx start --head ...` as first run
  bool stopped_ = false;
};

// Appends the resource flags of `options` to a `rayx start` command line.
void AppendNodeFlags(const NodeOptions& options, std::vector<std::string>* args);

}  // namespace rayx::testing
