// The processes of process leases: commands the agent runs for `rayx launch`
// and `rayx job` instead of rayx workers.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "protocol/messages.h"
#include "protocol/process_messages.h"
#include "rayx/status.h"

namespace rayx::worker {

// Runs every ProcessSpec of a process lease as its own process group (setsid,
// PR_SET_PDEATHSIG, so none outlives the agent), output to a log file on the
// node, and reports each exit. All of a lease's processes hold the lease's
// resources together: CUDA_VISIBLE_DEVICES lists all the lease's GPUs in order,
// as torchrun gives every local rank of a node the node's devices.
//
// Start is synchronous: exec failures (no such program) are known before it
// returns, through a close-on-exec pipe. Logs stay readable after the process
// ends (the last kMaxFinishedLogs). Single-threaded: the agent's event loop.
class ProcessRunner {
 public:
  struct Options {
    std::string node_ip;
    std::string log_dir;
    // The cluster token: a process gets its job's credential derived from it
    // (RAYX_JOB_SECRET), never the token itself.
    std::string token;
    std::string wire_security = "authenticated";  // RAYX_WIRE_SECURITY
    std::string store_dir;
    std::string checkpoint_dir;
    size_t max_finished_logs = 4096;
    std::vector<int> gpu_devices;  // WorkerPool::Options::gpu_devices
    std::string socket_interface;  // WorkerPool::Options::socket_interface
  };
  using ExitCallback = std::function<void(const protocol::ProcessExitedNotice&)>;

  ProcessRunner(Options options, ExitCallback on_exit);
  ~ProcessRunner();  // kills every process

  // Starts the lease's processes. On any failure the ones already started are
  // killed and the error says which command could not start and why.
  Result<protocol::StartWorkerReply> Start(const protocol::StartWorkerRequest& request);
  // SIGKILLs every process group of the lease and returns their ids (the
  // processes' pids); no exit notices follow. Empty for an unknown lease.
  std::vector<pid_t> Kill(const LeaseId& lease_id);
  void KillAll();
  // The pids of every process that has not exited.
  std::vector<pid_t> Pids() const;
  // Returns true when `pid` was one of ours (and reports its exit).
  bool OnChildExit(pid_t pid, int wait_status);

  struct LogInfo {
    std::string path;
    bool exited = false;
  };
  std::optional<LogInfo> FindLog(const LeaseId& lease_id, uint32_t index) const;
  size_t running_leases() const { return leases_.size(); }

  // A process whose output the agent forwards to the head (OutputForwarder).
  struct Output {
    LeaseId lease_id;
    JobId job_id;
    pid_t pid = 0;
    std::string log_path;
    std::string name;  // its program's file name
  };
  // The processes that run now.
  std::vector<Output> Running() const;
  // Those that exited since the last call (at most kMaxExited are kept).
  std::vector<Output> TakeExited() { return std::exchange(exited_, {}); }
  static constexpr size_t kMaxExited = 4096;

  // The last `max_lines` lines of `path` (at most 4 KiB).
  static std::string TailLines(const std::string& path, int max_lines);

 private:
  struct Process {
    pid_t pid = 0;
    bool exited = false;
    std::string log_path;
    std::string name;
  };
  struct Lease {
    JobId job_id;
    std::vector<Process> processes;
    size_t running = 0;
  };
  using LogKey = std::pair<LeaseId, uint32_t>;
  void RememberLog(const LogKey& key, LogInfo info);

  Options options_;
  ExitCallback on_exit_;
  std::map<LeaseId, Lease> leases_;
  std::map<LogKey, LogInfo> logs_;
  std::deque<LogKey> finished_order_;  // oldest first, bounded
  // Killed when a later process of their lease could not start; reaped later.
  std::vector<pid_t> unreaped_;
  std::vector<Output> exited_;  // TakeExited
};

}  // namespace rayx::worker
