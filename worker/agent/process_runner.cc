// Supervised processes of process leases.
#include "agent/process_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/logging.h"
#include "common/process_spawn.h"
#include "rayx/cluster_status.h"
#include "worker/worker_env.h"
#include "transport/security.h"

extern char** environ;

namespace rayx::worker {

namespace {

std::string SafeLogName(const std::string& name, const LeaseId& lease_id, size_t index) {
  std::string out;
  for (char c : name.substr(0, 120)) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    out += ok ? c : '_';
  }
  if (out.empty() || out[0] == '.') {
    out = "process-" + lease_id.Hex().substr(0, 12) + "-" + std::to_string(index);
  }
  return out + ".log";
}

// KEY=VALUE strings: the agent's environment, then `overrides` replacing or adding.
std::vector<std::string> BuildEnvironment(const std::map<std::string, std::string>& overrides) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    merged[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : overrides) merged[k] = v;
  // A launched process is no rank of a GPU group: a RAYX_LOCAL_RANK inherited
  // from the agent would point NCCL at another process's GPU.
  merged.erase(WorkerEnv::kLocalRank);
  // It acts for its job only (its job's secret is in the overrides): the
  // cluster token the agent was started with is not passed on.
  for (const char* name : WorkerEnv::kClusterTokenVariables) merged.erase(name);
  std::vector<std::string> out;
  out.reserve(merged.size());
  for (const auto& [k, v] : merged) out.push_back(k + "=" + v);
  return out;
}

std::string DescribeExit(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    return "killed by signal " + std::to_string(WTERMSIG(wait_status)) + " (" +
           strsignal(WTERMSIG(wait_status)) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
}

}  // namespace

ProcessRunner::ProcessRunner(Options options, ExitCallback on_exit)
    : options_(std::move(options)), on_exit_(std::move(on_exit)) {}

ProcessRunner::~ProcessRunner() { KillAll(); }

Result<protocol::StartWorkerReply> ProcessRunner::Start(
    const protocol::StartWorkerRequest& request) {
  if (leases_.count(request.lease_id)) {
    return Status::AlreadyExists("lease " + request.lease_id.Hex() + " already runs processes");
  }
  std::string devices = WorkerEnv::JoinIdList(GpuDevicesOf(request.gpu_ids, options_.gpu_devices));

  Lease lease;
  lease.job_id = request.job_id;
  protocol::StartWorkerReply reply;
  reply.lease_id = request.lease_id;
  for (size_t i = 0; i < request.processes.size(); ++i) {
    const protocol::ProcessSpec& spec = request.processes[i];
    auto fail = [&](const std::string& why) -> Status {
      for (auto& p : lease.processes) {
        ::kill(-p.pid, SIGKILL);
        ::kill(p.pid, SIGKILL);
        unreaped_.push_back(p.pid);
      }
      return Status::InvalidArgument("cannot start '" + (spec.argv.empty() ? "" : spec.argv[0]) +
                                     "' on node " + options_.node_ip + ": " + why);
    };
    if (spec.argv.empty() || spec.argv[0].empty()) return fail("no command given");
    std::map<std::string, std::string> overrides = spec.env;
    overrides["RAYX_ADDRESS"] = request.head_address;
    overrides["RAYX_JOB_ID"] = request.job_id.Hex();
    overrides["RAYX_LEASE_ID"] = request.lease_id.Hex();
    overrides["RAYX_NODE_IP"] = options_.node_ip;
    // A rayx program started here (a submitted job's driver) acts for its
    // job only: it holds the job's credential, never the cluster token
    // (BuildEnvironment drops the agent's own too).
    for (const char* name : WorkerEnv::kClusterTokenVariables) overrides.erase(name);
    if (!options_.token.empty()) {
      transport::Credential cluster = transport::Credential::Cluster(options_.token);
      overrides[WorkerEnv::kJobSecret] = transport::Credential::JobSecret(options_.token, request.job_id);
      overrides[WorkerEnv::kClusterKey] = cluster.CurvePublicKey();
    }
    overrides[WorkerEnv::kWireSecurity] = options_.wire_security;
    overrides["RAYX_STORE_DIR"] = options_.store_dir;
    overrides[WorkerEnv::kCheckpointDir] = options_.checkpoint_dir;
    overrides["RAYX_GPU_IDS"] = devices;
    overrides[WorkerEnv::kCudaVisibleDevices] = devices;
    overrides[WorkerEnv::kCudaDeviceOrder] = WorkerEnv::kPciBusOrder;  // see WorkerEnv
    for (const char* name : WorkerEnv::kSocketInterfaceVariables) {
      if (!options_.socket_interface.empty() && !overrides.count(name) && !std::getenv(name)) {
        overrides[name] = options_.socket_interface;
      }
    }
    overrides.erase("RAYX_WORKER_MODE");
    std::string cwd = spec.cwd;
    if (!cwd.empty()) {
      struct stat st {};
      if (::stat(cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        return fail("its working directory " + cwd + " does not exist on this node");
      }
    }
    std::string log_path = options_.log_dir + "/" + SafeLogName(spec.log_name, request.lease_id, i);
    int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) return fail("cannot open its log " + log_path + ": " + std::strerror(errno));
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      ::close(log_fd);
      return fail(std::string("pipe2: ") + std::strerror(errno));
    }
    detail::SpawnOptions launch;
    launch.argv = spec.argv;
    launch.search_path = true;
    launch.clear_env = true;
    launch.set_env = BuildEnvironment(overrides);
    launch.cwd = cwd;
    launch.group = detail::SpawnOptions::Group::kNewSession;
    launch.die_with_parent = true;
    launch.stdin_fd = detail::SpawnOptions::kDevNull;
    launch.stdout_fd = log_fd;
    launch.stderr_fd = log_fd;
    launch.error_fd = fds[1];
    Result<pid_t> spawned = detail::Spawn(launch);
    ::close(fds[1]);
    ::close(log_fd);
    if (!spawned.ok()) {
      ::close(fds[0]);
      return fail(spawned.status().message());
    }
    const pid_t pid = *spawned;
    // EOF: exec succeeded (the pipe closed on exec); bytes: why it failed.
    char buf[512];
    ssize_t n;
    std::string error;
    while ((n = ::read(fds[0], buf, sizeof buf)) != 0) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      error.append(buf, static_cast<size_t>(n));
    }
    ::close(fds[0]);
    if (!error.empty()) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      if (error.back() == '\n') error.pop_back();
      std::string hint = WIFEXITED(status) && WEXITSTATUS(status) == 127 &&
                                 error.find(std::strerror(ENOENT)) != std::string::npos
                             ? " (not found; is it on PATH on every node?)"
                             : "";
      return fail(error + hint);
    }
    lease.processes.push_back(
        {pid, false, log_path, std::filesystem::path(spec.argv[0]).filename().string()});
    ++lease.running;
    reply.process_pids.push_back(pid);
    RememberLog({request.lease_id, static_cast<uint32_t>(i)}, {log_path, false});
    RAYX_LOG(Info) << "started pid " << pid << " (" << spec.argv[0] << ") for lease "
                   << request.lease_id.Short() << ", output in " << log_path;
  }
  if (!lease.processes.empty()) reply.worker_pid = lease.processes[0].pid;
  leases_[request.lease_id] = std::move(lease);
  return reply;
}

std::vector<pid_t> ProcessRunner::Kill(const LeaseId& lease_id) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return {};
  std::vector<pid_t> groups;
  for (auto& p : it->second.processes) {
    // An exited leader's group may still hold what it started.
    ::kill(-p.pid, SIGKILL);
    if (!p.exited) ::kill(p.pid, SIGKILL);
    groups.push_back(p.pid);
  }
  for (uint32_t i = 0; i < it->second.processes.size(); ++i) {
    auto log = logs_.find({lease_id, i});
    if (log != logs_.end() && !log->second.exited) RememberLog(log->first, {log->second.path, true});
  }
  // Reaped on SIGCHLD (unknown pids are ignored then).
  leases_.erase(it);
  return groups;
}

std::vector<pid_t> ProcessRunner::Pids() const {
  std::vector<pid_t> out = unreaped_;
  for (const auto& [lease_id, lease] : leases_) {
    for (const auto& p : lease.processes) {
      if (!p.exited) out.push_back(p.pid);
    }
  }
  return out;
}

void ProcessRunner::KillAll() {
  while (!leases_.empty()) Kill(leases_.begin()->first);
}

bool ProcessRunner::OnChildExit(pid_t pid, int wait_status) {
  if (std::erase(unreaped_, pid) > 0) return true;
  for (auto& [lease_id, lease] : leases_) {
    for (uint32_t i = 0; i < lease.processes.size(); ++i) {
      Process& p = lease.processes[i];
      if (p.pid != pid || p.exited) continue;
      p.exited = true;
      --lease.running;
      if (exited_.size() < kMaxExited) {
        exited_.push_back({lease_id, lease.job_id, pid, p.log_path, p.name});
      }
      protocol::ProcessExitedNotice notice;
      notice.lease_id = lease_id;
      notice.index = i;
      notice.pid = pid;
      if (WIFSIGNALED(wait_status)) {
        notice.signal = WTERMSIG(wait_status);
      } else {
        notice.exit_code = WEXITSTATUS(wait_status);
      }
      auto log = logs_.find({lease_id, i});
      if (log != logs_.end()) {
        notice.log_tail = TailLines(log->second.path, 20);
        RememberLog(log->first, {log->second.path, true});
      }
      notice.all_exited = lease.running == 0;
      RAYX_LOG(Info) << "process pid " << pid << " of lease " << lease_id.Short() << " "
                     << DescribeExit(wait_status);
      LeaseId id = lease_id;
      if (notice.all_exited) leases_.erase(id);
      on_exit_(notice);
      return true;
    }
  }
  return false;
}

std::vector<ProcessRunner::Output> ProcessRunner::Running() const {
  std::vector<Output> out;
  for (const auto& [lease_id, lease] : leases_) {
    for (const Process& p : lease.processes) {
      if (!p.exited) out.push_back({lease_id, lease.job_id, p.pid, p.log_path, p.name});
    }
  }
  return out;
}

void ProcessRunner::RememberLog(const LogKey& key, LogInfo info) {
  bool was_finished = false;
  auto it = logs_.find(key);
  if (it != logs_.end()) was_finished = it->second.exited;
  logs_[key] = info;
  if (info.exited && !was_finished) {
    finished_order_.push_back(key);
    while (finished_order_.size() > options_.max_finished_logs) {
      logs_.erase(finished_order_.front());
      finished_order_.pop_front();
    }
  }
}

std::optional<ProcessRunner::LogInfo> ProcessRunner::FindLog(const LeaseId& lease_id,
                                                             uint32_t index) const {
  auto it = logs_.find({lease_id, index});
  if (it == logs_.end()) return std::nullopt;
  return it->second;
}

std::string ProcessRunner::TailLines(const std::string& path, int max_lines) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  std::streamoff start = std::max<std::streamoff>(0, size - 4096);
  in.seekg(start);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (start > 0) {  // drop the partial first line
    size_t nl = text.find('\n');
    text = nl == std::string::npos ? "" : text.substr(nl + 1);
  }
  while (!text.empty() && text.back() == '\n') text.pop_back();
  size_t pos = text.size();
  for (int lines = 0; lines < max_lines; ++lines) {
    size_t nl = pos == 0 ? std::string::npos : text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;
    pos = nl;
  }
  return text.substr(pos + 1);
}

}  // namespace rayx::worker
