// The real processes of a node's leases: workers and process-lease commands.
#include "agent/lease_processes.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>

#include "common/logging.h"
#include "common/process_control.h"
#include "worker/worker_env.h"

namespace rayx::worker {

LocalLeaseProcesses::LocalLeaseProcesses(boost::asio::io_context& io, const Options& options,
                                         ProcessRunner::ExitCallback on_exit,
                                         WorkerPool::ConstructionCallback on_construction)
    : group_dir_(options.group_dir),
      on_exit_(std::move(on_exit)),
      workers_(io, {.node_ip = options.node_ip,
                    .log_dir = options.log_dir,
                    .token = options.token,
                    .wire_security = options.wire_security,
                    .store_dir = options.store_dir,
                    .checkpoint_dir = options.checkpoint_dir,
                    .start_timeout_ms = options.worker_start_timeout_ms,
                    .gpu_devices = options.gpu_devices,
                    .memory_usage_threshold = options.memory_usage_threshold,
                    .socket_interface = options.socket_interface}),
      processes_({.node_ip = options.node_ip,
                  .log_dir = options.log_dir,
                  .token = options.token,
                  .wire_security = options.wire_security,
                  .store_dir = options.store_dir,
                  .checkpoint_dir = options.checkpoint_dir,
                  .gpu_devices = options.gpu_devices,
                  .socket_interface = options.socket_interface},
                 [this](const protocol::ProcessExitedNotice& notice) {
                   // What the process left in its group goes with it; the
                   // lease's devices are free once that group is empty.
                   ::kill(-notice.pid, SIGKILL);
                   auto gpus = lease_gpus_.find(notice.lease_id);
                   dying_.push_back(Dying{notice.pid, true,
                                          gpus == lease_gpus_.end() ? std::vector<int>{}
                                                                    : gpus->second});
                   if (notice.all_exited && gpus != lease_gpus_.end()) lease_gpus_.erase(gpus);
                   on_exit_(notice);
                 }) {
  workers_.SetConstructionCallback(std::move(on_construction));
}

void LocalLeaseProcesses::SetObjectAddress(const std::string& address) {
  workers_.SetObjectAddress(address);
}

void LocalLeaseProcesses::Start(const protocol::StartWorkerRequest& request, StartCallback done) {
  lease_gpus_[request.lease_id] = request.gpu_ids;
  if (!request.processes.empty()) {
    auto started = processes_.Start(request);
    if (!started.ok()) lease_gpus_.erase(request.lease_id);
    if (started.ok()) {
      for (int32_t pid : started->process_pids) Record(pid, request.lease_id);
    }
    done(std::move(started));
    return;
  }
  workers_.Start(request, [this, lease_id = request.lease_id,
                           done = std::move(done)](Result<protocol::StartWorkerReply> result) {
    // A worker that failed to start was killed (and is tracked as dying).
    if (!result.ok()) lease_gpus_.erase(lease_id);
    if (result.ok()) Record(result->worker_pid, lease_id);
    done(std::move(result));
  });
}

void LocalLeaseProcesses::Record(pid_t leader, const LeaseId& lease_id) {
  if (group_dir_.empty() || leader <= 1) return;
  auto start = detail::ProcessStartTime(leader);
  if (!start.ok()) return;  // gone already: its exit is being handled
  // Workers and process-lease commands carry their lease id in their
  // environment, and so do their children (unless they drop it).
  std::string marker = std::string(WorkerEnv::kLeaseId) + "=" + lease_id.Hex();
  if (Status s = detail::RecordGroup(group_dir_, {leader, *start}, marker); !s.ok()) {
    RAYX_LOG(Warning) << "cannot record process group " << leader << ": " << s
                      << " (`rayx stop` will not find it if this agent dies)";
  }
}

void LocalLeaseProcesses::Kill(const LeaseId& lease_id) {
  std::vector<pid_t> groups = processes_.Kill(lease_id);
  if (pid_t worker = workers_.Kill(lease_id)) groups.push_back(worker);
  auto gpus = lease_gpus_.find(lease_id);
  for (pid_t group : groups) {
    dying_.push_back(
        Dying{group, false, gpus == lease_gpus_.end() ? std::vector<int>{} : gpus->second});
  }
  if (gpus != lease_gpus_.end()) lease_gpus_.erase(gpus);
}

void LocalLeaseProcesses::KillAll() {
  std::vector<LeaseId> leases;
  leases.reserve(lease_gpus_.size());
  for (const auto& [lease_id, gpus] : lease_gpus_) leases.push_back(lease_id);
  for (const auto& lease_id : leases) Kill(lease_id);
  // Anything left that was not in lease_gpus_ (none expected).
  workers_.KillAll();
  processes_.KillAll();
}

void LocalLeaseProcesses::Reap() {
  // Only the pids this agent started, never waitpid(-1): the package cache's
  // thread waits for its own tar child, which must not be reaped here.
  std::vector<pid_t> ours = workers_.Pids();
  for (pid_t pid : processes_.Pids()) ours.push_back(pid);
  for (const auto& d : dying_) {
    if (!d.reaped) ours.push_back(d.group);
  }
  for (pid_t candidate : ours) {
    int status = 0;
    pid_t pid = waitpid(candidate, &status, WNOHANG);
    if (pid <= 0) continue;
    for (auto& d : dying_) {
      if (d.group == pid) d.reaped = true;
    }
    if (auto lease = workers_.LeaseOf(pid)) {
      // A worker that exited by itself: its group is killed; its devices are
      // free once that group is empty.
      auto gpus = lease_gpus_.find(*lease);
      dying_.push_back(
          Dying{pid, true, gpus == lease_gpus_.end() ? std::vector<int>{} : gpus->second});
      if (gpus != lease_gpus_.end()) lease_gpus_.erase(gpus);
      if (workers_.OnChildExit(pid, status) == WorkerPool::ChildExit::kRunning) {
        // The head hears of it: nobody else may (a detached actor's owner
        // may be gone), and the lease's resources would stay booked.
        protocol::ProcessExitedNotice notice;
        notice.lease_id = *lease;
        notice.pid = pid;
        if (WIFSIGNALED(status)) {
          notice.signal = WTERMSIG(status);
        } else {
          notice.exit_code = WEXITSTATUS(status);
        }
        notice.all_exited = true;
        on_exit_(notice);
      }
      continue;
    }
    processes_.OnChildExit(pid, status);
  }
  ForgetGone();
}

void LocalLeaseProcesses::Prune() { Reap(); }

void LocalLeaseProcesses::ForgetGone() {
  std::erase_if(dying_, [this](Dying& d) {
    if (!d.reaped) {
      // Not reaped by Reap: no longer our child at all (ECHILD).
      int status = 0;
      pid_t r = waitpid(d.group, &status, WNOHANG);
      if (r == d.group || (r < 0 && errno == ECHILD)) d.reaped = true;
    }
    // A zombie leader keeps its group; reaped and empty means gone.
    bool gone = d.reaped && ::kill(-d.group, 0) != 0 && errno == ESRCH;
    if (gone && !group_dir_.empty()) detail::ForgetGroup(group_dir_, d.group);
    return gone;
  });
}

bool LocalLeaseProcesses::AllGone() {
  Prune();
  return dying_.empty() && workers_.size() == 0 && processes_.running_leases() == 0;
}

bool LocalLeaseProcesses::DevicesReleased(const std::vector<int>& gpu_ids) {
  if (gpu_ids.empty()) return true;
  Prune();
  for (const auto& d : dying_) {
    for (int id : d.gpu_ids) {
      if (std::find(gpu_ids.begin(), gpu_ids.end(), id) != gpu_ids.end()) return false;
    }
  }
  return true;
}

std::optional<ProcessRunner::LogInfo> LocalLeaseProcesses::FindLog(const LeaseId& lease_id,
                                                                   uint32_t index) const {
  return processes_.FindLog(lease_id, index);
}

}  // namespace rayx::worker
