// WorkerEnv: encoding and parsing of a worker's RAYX_* environment.
#include "worker/worker_env.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "common/address.h"
#include "rayx/version.h"

namespace rayx {

namespace {

// Parses a decimal int >= `min`.
Result<int> ParseInt(const std::string& name, const std::string& text, long min = 0) {
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < min || v > INT_MAX) {
    return Status::InvalidArgument(name + "='" + text + "' is not " +
                                   (min == 0 ? "a non-negative integer" : "an integer"));
  }
  return static_cast<int>(v);
}

Status Missing(const char* name) {
  return Status::InvalidArgument(std::string(name) +
                                 " is not set: a worker is started by a node "
                                 "agent, which sets it (do not set "
                                 "RAYX_WORKER_MODE yourself)");
}

}  // namespace

transport::WireSecurity WorkerEnv::Mechanism() const {
  return wire_security == transport::WireSecurityName(transport::WireSecurity::kEncrypted)
             ? transport::WireSecurity::kEncrypted
             : transport::WireSecurity::kAuthenticated;
}

transport::ClientSecurity WorkerEnv::ObjectServerSecurity() const {
  transport::Credential credential;
  if (!job_secret.empty() && !job_id.IsNil()) credential = transport::Credential::Job(job_id, job_secret);
  return transport::ClientSecurity::ObjectServer(Mechanism(), std::move(credential), cluster_key);
}

transport::ClientSecurity WorkerEnv::HeadSecurity() const {
  transport::Credential credential;
  if (!job_secret.empty() && !job_id.IsNil()) credential = transport::Credential::Job(job_id, job_secret);
  return transport::ClientSecurity::Head(std::move(credential), cluster_key);
}

std::map<std::string, std::string> WorkerEnv::Encode() const {
  std::map<std::string, std::string> vars = {
      {kWorkerMode, "1"},
      {kReadyFd, std::to_string(ready_fd)},
      {kNodeIp, node_ip},
      {kHeadAddress, head_address},
      {kJobId, job_id.Hex()},
      {kLeaseId, lease_id.Hex()},
      {kJobSecret, job_secret},
      {kClusterKey, cluster_key},
      {kWireSecurity, wire_security},
      {kStoreDir, store_dir},
      {kCheckpointDir, checkpoint_dir},
      {kObjectAddress, object_address},
      {kGpuIds, JoinIdList(gpu_ids)},
  };
  // A worker sees exactly its GPUs, so its device 0 is its own; none when it
  // holds none.
  if (visible_gpu_ids.empty()) {
    vars[kCudaVisibleDevices] = JoinIdList(gpu_ids);
  } else {
    vars[kCudaVisibleDevices] = JoinIdList(visible_gpu_ids);
  }
  vars[kCudaDeviceOrder] = kPciBusOrder;
  if (local_rank) vars[kLocalRank] = std::to_string(*local_rank);
  if (!package_hash.empty()) {
    vars[kPackageHash] = package_hash;
    vars[kPackageDir] = package_dir;
  }
  if (!actor_init.empty()) vars[kActorInit] = actor_init;
  if (report_construction) vars[kReportConstruction] = "1";
  if (counters_fd >= 0) vars[kCountersFd] = std::to_string(counters_fd);
  return vars;
}

Result<WorkerEnv> WorkerEnv::Decode(const std::map<std::string, std::string>& vars) {
  auto get = [&](const char* name) -> const std::string* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : &it->second;
  };
  WorkerEnv env;
  const std::string* mode = get(kWorkerMode);
  if (mode == nullptr || mode->empty()) return Missing(kWorkerMode);
  const std::string* fd = get(kReadyFd);
  if (fd == nullptr) return Missing(kReadyFd);
  auto ready_fd = ParseInt(kReadyFd, *fd);
  if (!ready_fd.ok()) return ready_fd.status();
  env.ready_fd = *ready_fd;
  const std::string* ip = get(kNodeIp);
  if (ip == nullptr || ip->empty()) return Missing(kNodeIp);
  env.node_ip = *ip;
  const std::string* head = get(kHeadAddress);
  if (head == nullptr || head->empty()) return Missing(kHeadAddress);
  if (auto parsed = ParseHostPort(*head, kDefaultHeadPort); !parsed.ok()) {
    return Status::InvalidArgument(std::string(kHeadAddress) + "='" + *head +
                                   "' is not a head address: " + parsed.status().message());
  }
  env.head_address = *head;
  auto optional = [&](const char* name, std::string* out) {
    if (const std::string* v = get(name)) *out = *v;
  };
  if (const std::string* v = get(kJobId)) env.job_id = JobId::FromWire(*v);
  if (const std::string* v = get(kLeaseId)) env.lease_id = LeaseId::FromWire(*v);
  optional(kJobSecret, &env.job_secret);
  optional(kClusterKey, &env.cluster_key);
  optional(kWireSecurity, &env.wire_security);
  optional(kStoreDir, &env.store_dir);
  optional(kCheckpointDir, &env.checkpoint_dir);
  optional(kObjectAddress, &env.object_address);
  optional(kPackageHash, &env.package_hash);
  optional(kPackageDir, &env.package_dir);
  optional(kActorInit, &env.actor_init);
  if (const std::string* v = get(kReportConstruction)) env.report_construction = *v == "1";
  if (const std::string* v = get(kCountersFd)) {
    auto counters_fd = ParseInt(kCountersFd, *v);
    if (!counters_fd.ok()) return counters_fd.status();
    env.counters_fd = *counters_fd;
  }
  if (const std::string* ids = get(kGpuIds)) {
    auto parsed = ParseIdList(*ids);
    if (!parsed.ok()) {
      return Status::InvalidArgument(std::string(kGpuIds) + ": " + parsed.status().message());
    }
    env.gpu_ids = std::move(*parsed);
  }
  if (const std::string* rank = get(kLocalRank)) {
    auto parsed = ParseInt(kLocalRank, *rank, INT_MIN);
    if (!parsed.ok()) return parsed.status();
    env.local_rank = *parsed;
    // Only a rank of a GPU group is told its group's devices.
    if (const std::string* visible = get(kCudaVisibleDevices)) {
      auto devices = ParseIdList(*visible);
      if (!devices.ok()) {
        return Status::InvalidArgument(std::string(kCudaVisibleDevices) + ": " +
                                       devices.status().message());
      }
      env.visible_gpu_ids = std::move(*devices);
    }
  }
  return env;
}

Result<WorkerEnv> WorkerEnv::FromEnvironment() {
  std::map<std::string, std::string> vars;
  for (const char* name :
       {kWorkerMode, kReadyFd, kNodeIp, kHeadAddress, kJobId, kLeaseId, kJobSecret, kClusterKey,
        kWireSecurity, kStoreDir, kCheckpointDir,
        kObjectAddress, kGpuIds, kLocalRank, kPackageHash, kPackageDir, kActorInit,
        kReportConstruction, kCountersFd, kCudaVisibleDevices}) {
    if (const char* v = std::getenv(name)) vars[name] = v;
  }
  return Decode(vars);
}

bool WorkerEnv::InWorkerMode() {
  const char* mode = std::getenv(kWorkerMode);
  return mode != nullptr && *mode != '\0';
}

void WorkerEnv::ClearWorkerOnlyVariables() {
  ::unsetenv(kWorkerMode);
  ::unsetenv(kReadyFd);
  ::unsetenv(kActorInit);
  ::unsetenv(kReportConstruction);
  ::unsetenv(kCountersFd);
}

std::string WorkerEnv::JoinIdList(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

Result<std::vector<int>> WorkerEnv::ParseIdList(const std::string& text) {
  std::vector<int> ids;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    auto id = ParseInt("id", item);
    if (!id.ok()) {
      return Status::InvalidArgument("'" + text + "' is not a comma-separated list of ids");
    }
    ids.push_back(*id);
    start = comma + 1;
  }
  return ids;
}

}  // namespace rayx
