// What a node agent runs for its leases, behind an interface so tests can run none.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/process_runner.h"
#include "agent/worker_pool.h"
#include "protocol/messages.h"
#include "rayx/status.h"

namespace rayx::worker {

// The processes of this node's leases: one worker per task lease, the
// commands of a process lease (`request.processes`).
//
// Single-threaded: used on the agent's io_context only.
class LeaseProcesses {
 public:
  using StartCallback = std::function<void(Result<protocol::StartWorkerReply>)>;
  virtual ~LeaseProcesses() = default;

  // The node's object server, told to workers.
  virtual void SetObjectAddress(const std::string& address) = 0;
  // Starts what the lease runs; calls `done` exactly once, possibly before
  // returning, with the reply for the head or why it could not start.
  virtual void Start(const protocol::StartWorkerRequest& request, StartCallback done) = 0;
  // Kills everything the lease runs; a no-op for an unknown lease. A killed
  // process counts as alive until AllGone/DevicesReleased see it gone.
  virtual void Kill(const LeaseId& lease_id) = 0;
  virtual void KillAll() = 0;
  // Reaps exited children and does their bookkeeping (call on SIGCHLD).
  virtual void Reap() = 0;
  // True when nothing this agent started is alive any more: no lease runs,
  // every killed process is reaped and its process group is empty. Fencing
  // waits for it before the agent joins as a new node.
  virtual bool AllGone() = 0;
  // True when no killed or exited lease process that held one of `gpu_ids`
  // (or anything in its process group) is still alive: a new worker may get
  // these devices.
  virtual bool DevicesReleased(const std::vector<int>& gpu_ids) = 0;
  // True while something of the lease runs (or starts): reported to a
  // restarted head when the agent rejoins it.
  virtual bool IsLive(const LeaseId& lease_id) const = 0;
  // The log of process `index` of a process lease, for the object server.
  virtual std::optional<ProcessRunner::LogInfo> FindLog(const LeaseId& lease_id,
                                                        uint32_t index) const = 0;
  // The running (ready) workers, for the memory monitor. Default: none.
  virtual std::vector<WorkerPool::Running> RunningWorkers() const { return {}; }
  // Running workers that exited by themselves since the last call (their
  // last output is still to be read). Default: none.
  virtual std::vector<WorkerPool::Running> TakeExitedWorkers() { return {}; }
  // The processes of process leases that run now, and those that exited
  // since the last call (their last output is still to be read), for the
  // output forwarder. Default: none.
  virtual std::vector<ProcessRunner::Output> RunningProcesses() const { return {}; }
  virtual std::vector<ProcessRunner::Output> TakeExitedProcesses() { return {}; }
  // What this node's workers did since the agent started
  // (WorkerPool::ReadCounters). Default: nothing.
  virtual WorkCounts ReadWorkCounters() { return {}; }
};

// Real processes: a WorkerPool and a ProcessRunner, which own them. Killed
// process groups are remembered, with the devices their lease held, until
// they are empty: a process group is gone when its leader was reaped and
// kill(-group, 0) finds no member (which is polled: members that are not our
// children exit unseen). A process that left its group (setsid) is not seen.
// Each group is recorded under Options::group_dir from its start until it is
// gone, so that `rayx stop` can kill what is left of it if the agent dies.
class LocalLeaseProcesses final : public LeaseProcesses {
 public:
  struct Options {
    std::string node_ip;
    std::string log_dir;
    std::string group_dir;  // RecordGroup's directory, or "" for none
    std::string token;      // the cluster token (workers get job credentials from it)
    std::string wire_security = "authenticated";
    std::string store_dir;
    std::string checkpoint_dir;
    int64_t worker_start_timeout_ms = 30000;  // WorkerPool::Options::start_timeout_ms
    std::vector<int> gpu_devices;             // NodeAgentOptions::gpu_devices
    double memory_usage_threshold = 0;        // WorkerPool::Options
    std::string socket_interface;             // WorkerPool::Options
  };
  // `on_exit` hears of every process of a process lease that exits, and of
  // every running worker that exits by itself (not killed through Kill): one
  // notice with index 0 and all_exited set.
  // `on_construction` hears what workers of detached actors say of their
  // constructors (WorkerPool::ConstructionCallback).
  LocalLeaseProcesses(boost::asio::io_context& io, const Options& options,
                      ProcessRunner::ExitCallback on_exit,
                      WorkerPool::ConstructionCallback on_construction = nullptr);

  void SetObjectAddress(const std::string& address) override;
  void Start(const protocol::StartWorkerRequest& request, StartCallback done) override;
  void Kill(const LeaseId& lease_id) override;
  void KillAll() override;
  void Reap() override;
  bool AllGone() override;
  bool DevicesReleased(const std::vector<int>& gpu_ids) override;
  bool IsLive(const LeaseId& lease_id) const override { return lease_gpus_.count(lease_id) > 0; }
  std::optional<ProcessRunner::LogInfo> FindLog(const LeaseId& lease_id,
                                                uint32_t index) const override;
  std::vector<WorkerPool::Running> RunningWorkers() const override {
    return workers_.RunningWorkers();
  }
  std::vector<WorkerPool::Running> TakeExitedWorkers() override {
    return workers_.TakeExitedWorkers();
  }
  WorkCounts ReadWorkCounters() override { return workers_.ReadCounters(); }
  std::vector<ProcessRunner::Output> RunningProcesses() const override {
    return processes_.Running();
  }
  std::vector<ProcessRunner::Output> TakeExitedProcesses() override {
    return processes_.TakeExited();
  }

 private:
  // A process group that was killed, or whose leader exited, and may still
  // have live members.
  struct Dying {
    pid_t group = 0;
    bool reaped = false;
    std::vector<int> gpu_ids;
  };
  // Reaps, then forgets dying groups that are empty now (ForgetGone).
  void Prune();
  void ForgetGone();
  // Records a lease process's group (a no-op without a group_dir).
  void Record(pid_t leader, const LeaseId& lease_id);

  std::string group_dir_;
  ProcessRunner::ExitCallback on_exit_;
  WorkerPool workers_;
  ProcessRunner processes_;
  std::map<LeaseId, std::vector<int>> lease_gpus_;  // the devices of each running lease
  std::vector<Dying> dying_;
};

}  // namespace rayx::worker
