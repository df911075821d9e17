// Where this machine sits in a multi-node job of a batch or container platform,
// read from the environment the platform sets on every node: `rayx start
// --from-env` (node rank 0 starts the head, the others join it).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "rayx/status.h"

namespace rayx::cli {

// The label `rayx start --from-env` gives each node: its rank in the platform's
// job (SLURM_NODEID, RANK). `rayx launch` numbers nodes by it when every node it
// placed has one.
inline constexpr char kNodeRankLabel[] = "rayx.io/node-rank";

// One node's place in the platform's job.
struct PlatformRole {
  std::string source;     // the variables it came from, for messages: "SLURM", "RANK/WORLD_SIZE"
  int node_rank = 0;      // 0 runs the head
  int num_nodes = 1;      // how many nodes run `rayx start --from-env`
  std::string head_host;  // the host of node rank 0, as the platform names it
  // The port the platform opened on node rank 0 (MASTER_PORT), when it gives one.
  std::optional<uint16_t> head_port;
};

// The environment as a function (tests pass a map): nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// This process's environment.
EnvLookup ProcessEnv();

// Reads the node's role. SLURM first (inside `srun`: SLURM_PROCID is set),
// with one task per node: SLURM_NODEID, SLURM_STEP_NUM_NODES (or SLURM_NNODES),
// SLURM_STEP_NUM_TASKS (or SLURM_NTASKS), and the head is the first host of
// SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST, SLURM_NODELIST). Else the
// variables container platforms set per node for torch (Kubeflow's PyTorchJob,
// Volcano, ...): RANK (the node's index), WORLD_SIZE (the node count),
// MASTER_ADDR and, optionally, MASTER_PORT.
// Returns NotFound when neither set is there, InvalidArgument naming the
// variable, its value and the fix when one is malformed or inconsistent.
Result<PlatformRole> DetectPlatformRole(const EnvLookup& env);

// True when node rank 0 may advertise `ip` (MASTER_ADDR resolved) as its own
// address: one of this machine's, and neither loopback nor 0.0.0.0, which the
// other nodes cannot reach (Kubeflow sets MASTER_ADDR=localhost in the master
// pod). Otherwise node 0 takes its default address.
bool NodeZeroMayAdvertise(const std::string& ip);

// The first host of a SLURM node list in its compressed form:
// "gpu[07-09,12],cpu1" -> "gpu07" (zero padding kept), "a1,a2" -> "a1".
// InvalidArgument for an empty or malformed list.
Result<std::string> FirstSlurmHost(std::string_view nodelist);

}  // namespace rayx::cli
