// The environment a node agent gives a worker process: one struct for every
// RAYX_* variable.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rayx/ids.h"
#include "rayx/status.h"
#include "transport/security.h"

namespace rayx {

// What a worker process is told through its environment, written by the node
// agent (Encode) and read back by the worker (FromEnvironment). Both sides use
// this struct, so a variable is named and parsed in exactly one place.
//
// RAYX_WORKER_MODE and RAYX_WORKER_READY_FD make a process a worker; the worker
// removes them and the other worker-only ones (ClearWorkerOnlyVariables) before
// user code runs, so a rayx program that a task starts is a driver. The other
// variables stay visible to user code (RAYX_NODE_IP, RAYX_GPU_IDS, ...).
//
// A plain value: copyable, no shared state.
struct WorkerEnv {
  static constexpr const char* kWorkerMode = "RAYX_WORKER_MODE";
  static constexpr const char* kReadyFd = "RAYX_WORKER_READY_FD";
  static constexpr const char* kNodeIp = "RAYX_NODE_IP";
  static constexpr const char* kHeadAddress = "RAYX_ADDRESS";
  static constexpr const char* kJobId = "RAYX_JOB_ID";
  static constexpr const char* kLeaseId = "RAYX_LEASE_ID";
  // Workers hold their job's secret (transport::Credential), never the cluster
  // token; and the head's public CURVE key, to connect to it.
  static constexpr const char* kJobSecret = "RAYX_JOB_SECRET";
  static constexpr const char* kClusterKey = "RAYX_CLUSTER_KEY";
  static constexpr const char* kWireSecurity = "RAYX_WIRE_SECURITY";
  static constexpr const char* kStoreDir = "RAYX_STORE_DIR";
  static constexpr const char* kCheckpointDir = "RAYX_CHECKPOINT_DIR";
  static constexpr const char* kObjectAddress = "RAYX_OBJECT_ADDRESS";
  static constexpr const char* kGpuIds = "RAYX_GPU_IDS";
  static constexpr const char* kLocalRank = "RAYX_LOCAL_RANK";
  static constexpr const char* kPackageHash = "RAYX_PACKAGE_HASH";
  static constexpr const char* kPackageDir = "RAYX_PACKAGE_DIR";
  static constexpr const char* kActorInit = "RAYX_ACTOR_INIT";
  static constexpr const char* kReportConstruction = "RAYX_WORKER_REPORT_CONSTRUCTION";
  static constexpr const char* kCountersFd = "RAYX_COUNTERS_FD";
  // The cluster's credential as daemons and the CLI take it: never in the
  // environment of a process an agent starts (its workers, a job's
  // entrypoint, `rayx launch`'s processes), which act for their job only.
  static constexpr const char* kClusterTokenVariables[] = {"RAYX_TOKEN", "RAYX_CLUSTER_TOKEN",
                                                           "RAYX_TOKEN_FILE"};
  static constexpr const char* kCudaVisibleDevices = "CUDA_VISIBLE_DEVICES";
  // GPU ids are NVML's indices, which follow the PCI bus; CUDA numbers devices
  // fastest first unless told otherwise, so on a node with mixed GPUs
  // CUDA_VISIBLE_DEVICES would name another process's device. Every process an
  // agent starts gets PCI_BUS_ID, whatever its caller asked for.
  static constexpr const char* kCudaDeviceOrder = "CUDA_DEVICE_ORDER";
  static constexpr const char* kPciBusOrder = "PCI_BUS_ID";
  // The interface Gloo's and NCCL's sockets use (torch.distributed): every
  // process an agent starts gets the one that holds its node's address, unless
  // the process's caller or the agent's own environment sets them. Without
  // them torch binds what the machine's hostname resolves to, often 127.0.0.1
  // (Debian's "127.0.1.1 hostname" line), which other hosts cannot reach.
  static constexpr const char* kSocketInterfaceVariables[] = {"GLOO_SOCKET_IFNAME",
                                                              "NCCL_SOCKET_IFNAME"};

  int ready_fd = 3;          // where the worker writes its READY/ERROR line
  std::string node_ip;       // the node's address; the worker listens on it
  std::string head_address;  // "host:port" of the head
  JobId job_id;              // the job the lease belongs to
  LeaseId lease_id;
  std::string job_secret;      // the job's credential (transport::Credential::Job)
  std::string cluster_key;     // the head's and object servers' CURVE public key
  std::string wire_security = "authenticated";  // transport::WireSecurityName
  std::string store_dir;       // the node's object store ("" = results go inline)
  std::string checkpoint_dir;  // the node's checkpoint directory (Train's shards)
  std::string object_address;  // the node's object server
  std::vector<int> gpu_ids;    // the lease's GPUs
  // The GPU group's devices on this node when the lease is one rank of a group
  // (then `local_rank` names this worker's own); empty: exactly `gpu_ids`.
  std::vector<int> visible_gpu_ids;
  std::optional<int> local_rank;
  std::string package_hash;  // the job's working-directory package, if any
  std::string package_dir;
  // A file holding the actor (protocol::ActorInit) to construct before the
  // worker says it is ready (the head restarting a detached actor); "": none.
  std::string actor_init;
  // Keep `ready_fd` open after READY and write on it when the actor's
  // constructor (sent by its owner) begins and how it ends (ReadyPipe's
  // CONSTRUCTOR lines): a detached actor, which the head may take over.
  bool report_construction = false;
  // The shared page this worker counts its work into (WorkCounters, made by
  // the agent, which sums the node's pages); -1: none.
  int counters_fd = -1;

  // How this worker connects to object servers (its job's credential, the
  // cluster's mechanism and key). An empty credential when the agent gave no
  // secret (tests of the loop alone).
  transport::ClientSecurity ObjectServerSecurity() const;
  // How this worker connects to the head (its job's credential, CURVE).
  transport::ClientSecurity HeadSecurity() const;
  // The mechanism of this worker's own socket.
  transport::WireSecurity Mechanism() const;

  // The variables to set in the worker's environment (CUDA_VISIBLE_DEVICES
  // included), by name.
  std::map<std::string, std::string> Encode() const;

  // Parses `vars` (as Encode writes them). Returns InvalidArgument, naming the
  // variable, when one is missing or malformed.
  static Result<WorkerEnv> Decode(const std::map<std::string, std::string>& vars);

  // Decode() over this process's environment.
  static Result<WorkerEnv> FromEnvironment();

  // True when this process was started as a worker (RAYX_WORKER_MODE is set).
  static bool InWorkerMode();

  // Removes the variables that make a process a worker from this process's
  // environment. Not thread-safe (setenv/unsetenv): call before user code runs.
  static void ClearWorkerOnlyVariables();

  // Parses "0,1,3"; "" is no ids. InvalidArgument for anything else.
  static Result<std::vector<int>> ParseIdList(const std::string& text);
  // The inverse: {0, 1, 3} -> "0,1,3"; no ids -> "".
  static std::string JoinIdList(const std::vector<int>& ids);
};

}  // namespace rayx
