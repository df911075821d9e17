// The real processes of a node's leases: workers and process-lease commands.
#include "agent/lease_processes.h"

#include <sys/wait.h>

namespace rayx::worker {

LocalLeaseProcesses::LocalLeaseProcesses(boost::asio::io_context& io, const Options& options,
                                         ProcessRunner::ExitCallback on_exit)
    : workers_(io, {.node_ip = options.node_ip,
                    .log_dir = options.log_dir,
                    .token = options.token,
                    .store_dir = options.store_dir}),
      processes_({.node_ip = options.node_ip,
                  .log_dir = options.log_dir,
                  .token = options.token,
                  .store_dir = options.store_dir},
                 std::move(on_exit)) {}

void LocalLeaseProcesses::SetObjectAddress(const std::string& address) {
  workers_.SetObjectAddress(address);
}

void LocalLeaseProcesses::Start(const protocol::StartWorkerRequest& request, StartCallback done) {
  if (!request.processes.empty()) {
    done(processes_.Start(request));
    return;
  }
  workers_.Start(request, std::move(done));
}

void LocalLeaseProcesses::Kill(const std::string& lease_id) {
  workers_.Kill(lease_id);
  processes_.Kill(lease_id);
}

void LocalLeaseProcesses::KillAll() {
  workers_.KillAll();
  processes_.KillAll();
}

void LocalLeaseProcesses::Reap() {
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    if (!workers_.OnChildExit(pid, status)) processes_.OnChildExit(pid, status);
  }
}

std::optional<ProcessRunner::LogInfo> LocalLeaseProcesses::FindLog(const std::string& lease_id,
                                                                   uint32_t index) const {
  return processes_.FindLog(lease_id, index);
}

}  // namespace rayx::worker
