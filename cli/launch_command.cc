// `rayx launch`: parses the flags, reserves N nodes (a STRICT_SPREAD placement
// group) and hands the plan to LaunchSupervisor, which runs an unmodified
// torchrun-style program as N x M ranks with the environment torchrun gives.
#include "launch_command.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <map>

#include "cluster_client.h"
#include "command_error.h"
#include "common/flags.h"
#include "common/session_dir.h"
#include "launch_supervisor.h"
#include "policy/resource_demand.h"
#include "protocol/placement_messages.h"
#include "worker/worker_env.h"

namespace rayx::cli {
namespace {

// How long one wait for the nodes lasts before launch says again what it
// waits for (when the head's reason changed).
constexpr int64_t kWaitSliceMs = 5000;

struct LaunchFlags {
  std::string address, temp_dir = detail::DefaultTempDir();
  TokenFlags token;
  int64_t nnodes = 1, nproc_per_node = 1, max_restarts = 0, master_port = 0;
  double gpus_per_proc = 0, cpus_per_proc = 1, wait_s = 0;
  std::string resources;
  std::vector<std::string> env;
  bool dry_run = false, help = false;
};

int LaunchFail(const std::string& message, int code = 1) {
  return cli::Fail("launch", message, code);
}

const char* kHelp = R"(usage: rayx launch [FLAGS] -- COMMAND [ARGS...]

Runs COMMAND as NNODES x NPROC_PER_NODE processes (ranks) on distinct nodes of the
cluster, each with the environment torchrun gives: RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK, MASTER_ADDR and MASTER_PORT (a free port
on rank 0's node), and CUDA_VISIBLE_DEVICES listing the GPUs given to that node's
processes in local-rank order. Output is streamed with a [rank N node IP] prefix
and kept in per-rank log files on the nodes. When a rank fails, every rank is
stopped (after --max-restarts restarts of the whole group). Ctrl-C stops all.
The command runs in the current directory, which must exist on every node.

)";

}  // namespace

int LaunchCommand(const std::vector<std::string>& all_args) {
  auto [args, command] = SplitAtDoubleDash(all_args);
  LaunchFlags f;
  FlagParser flags("rayx launch");
  flags.AddInt("nnodes", &f.nnodes, 1, 10000, "how many nodes (default 1)");
  flags.AddInt("nproc-per-node", &f.nproc_per_node, 1, 1024, "processes per node (default 1)");
  flags.AddDouble("gpus-per-proc", &f.gpus_per_proc, "GPUs each process holds (default 0)");
  flags.AddDouble("cpus-per-proc", &f.cpus_per_proc, "CPUs each process holds (default 1)");
  flags.AddString("resources", &f.resources, "custom resources per process, JSON: '{\"tpu\": 1}'");
  flags.AddInt("max-restarts", &f.max_restarts, 0, 1000,
               "restart the whole group this many times after a rank fails (default 0)");
  flags.AddInt("master-port", &f.master_port, 0, 65535,
               "MASTER_PORT (default: a free port reserved on rank 0's node)");
  flags.AddDouble("wait", &f.wait_s,
                  "seconds to wait for the resources to become free (default 0: fail at once)");
  flags.AddStringList("env", &f.env, "K=V set for every rank (repeatable)");
  flags.AddBool("dry-run", &f.dry_run, "print the placement plan and exit");
  flags.AddString("address", &f.address, "the head, HOST:PORT (default: $RAYX_ADDRESS, else "
                                         "this machine's cluster)");
  f.token.Add(flags);
  flags.AddString("temp-dir", &f.temp_dir, "session directory root (default /tmp/rayx)");
  flags.AddBool("help", &f.help, "show this help");
  if (Status s = flags.Parse(args, nullptr); !s.ok()) {
    return LaunchFail(s.message() + " (the command goes after `--`: rayx launch --nnodes 2 -- python "
                      "train.py)", 2);
  }
  if (f.help) {
    std::cout << kHelp << flags.Usage();
    return 0;
  }
  if (command.empty()) {
    return LaunchFail("no command: put it after `--`, e.g. rayx launch --nnodes 2 --nproc-per-node 4 "
                      "-- python train.py", 2);
  }
  if (Status bad = scheduler::policy::ResourceDemand::CheckGpuAmount(f.gpus_per_proc); !bad.ok()) {
    return LaunchFail("--gpus-per-proc: " + bad.message(), 2);
  }
  if (f.gpus_per_proc > 0 && f.gpus_per_proc < 1 && f.nproc_per_node > 1) {
    // M fractional shares of one node's bundle would pack onto fewer devices
    // than ranks; torchrun ranks use device LOCAL_RANK, so refuse.
    return LaunchFail("--gpus-per-proc below 1 with several processes per node is not supported: "
                      "each local rank uses device LOCAL_RANK", 2);
  }
  ResourceMap per_proc;
  if (!f.resources.empty()) {
    auto r = ParseResourcesJson(f.resources);
    if (!r.ok()) return LaunchFail("--resources: " + r.status().message(), 2);
    per_proc = *r;
  }
  per_proc[kCpu] = f.cpus_per_proc;
  if (f.gpus_per_proc > 0) per_proc[kGpu] = f.gpus_per_proc;
  std::map<std::string, std::string> user_env;
  for (const auto& kv : f.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return LaunchFail("--env '" + kv + "': expected KEY=VALUE", 2);
    }
    user_env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  ResourceMap per_node;
  for (const auto& [name, amount] : per_proc) {
    if (amount > 0) per_node[name] = amount * static_cast<double>(f.nproc_per_node);
  }
  if (per_node.empty()) per_node[kCpu] = 0.001;  // a bundle must reserve something

  auto cluster = ResolveCluster(f.address, f.token, f.temp_dir);
  if (!cluster.ok()) return LaunchFail(cluster.status().message());
  auto connected = ClusterClient::Connect(cluster->first, cluster->second, 10000);
  if (!connected.ok()) return LaunchFail(connected.status().message());
  ClusterClient& client = **connected;

  LaunchSupervisor::CatchStopSignals();

  LaunchPlan plan;
  plan.command = command;
  plan.user_env = user_env;
  plan.per_node = per_node;
  plan.nnodes = static_cast<int>(f.nnodes);
  plan.nproc_per_node = static_cast<int>(f.nproc_per_node);
  plan.max_restarts = f.max_restarts;
  plan.master_port = f.master_port;
  const int nnodes = plan.nnodes, nproc = plan.nproc_per_node;
  const int world = nnodes * nproc;
  // 1. Reserve N bundles on N distinct nodes, all or nothing.
  protocol::CreatePlacementGroupRequest create;
  create.job_id = client.job_id();
  create.name = "rayx-launch";
  create.strategy = protocol::PlacementStrategy::kStrictSpread;
  create.bundles.assign(static_cast<size_t>(nnodes), per_node);
  auto created = client.Call<protocol::CreatePlacementGroupReply>(create, 10000);
  if (!created.ok()) return LaunchFail("cannot reserve the nodes: " + created.status().message());
  PlacementGroupId group_id = created->group.placement_group_id;
  protocol::PlacementGroupInfo group = created->group;
  if (group.state == protocol::PlacementGroupState::kPending && f.wait_s > 0) {
    // Waits in slices, saying what it waits for whenever the head's reason
    // changes (which node has what free), not once and then nothing.
    const auto end = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(f.wait_s * 1000));
    std::cout << "rayx launch: waiting up to " << f.wait_s << " s for " << nnodes
              << " node(s) with " << FormatResourceShape(per_node) << " free each...\n"
              << std::flush;
    std::string said;
    while (group.state == protocol::PlacementGroupState::kPending) {
      int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(
                         end - std::chrono::steady_clock::now())
                         .count();
      if (left <= 0) break;
      if (!group.reason.empty() && group.reason != said) {
        std::cout << "rayx launch: waiting for " << nnodes << " bundle(s) of "
                  << FormatResourceShape(per_node) << " (" << (left + 999) / 1000
                  << " s left): " << group.reason << "\n"
                  << std::flush;
        said = group.reason;
      }
      protocol::WaitPlacementGroupRequest wait;
      wait.placement_group_id = group_id;
      wait.timeout_ms = std::min<int64_t>(left, kWaitSliceMs);
      auto waited = client.Call<protocol::WaitPlacementGroupReply>(wait, wait.timeout_ms + 10000);
      if (!waited.ok()) return LaunchFail(waited.status().message());
      group = waited->group;
      if (LaunchSupervisor::StopRequested()) return LaunchFail("stopped while waiting for nodes");
    }
  }
  if (group.state != protocol::PlacementGroupState::kCreated) {
    std::string what = std::to_string(world) + " processes (" + std::to_string(nnodes) +
                       " node(s) x " + std::to_string(nproc) + ", each node " +
                       FormatResourceShape(per_node) + ")";
    return LaunchFail("cannot place " + what + ": " + group.reason +
                      (group.state == protocol::PlacementGroupState::kPending && f.wait_s <= 0
                      ? ". Pass --wait SECONDS to wait for them to free up."
                      : ""));
  }
  plan.group = group;

  // 2. The plan: node ranks follow the platform's numbering when `rayx start
  // --from-env` labelled every node placed (rayx.io/node-rank), else placement
  // order; MASTER_ADDR is node rank 0's.
  std::map<std::string, NodeInfo> nodes;
  protocol::GetClusterStatusRequest status_request;
  status_request.token = cluster->second;
  if (auto status = client.Call<protocol::GetClusterStatusReply>(status_request, 5000);
      status.ok()) {
    for (auto& n : status->status.nodes) nodes[n.node_id.Hex()] = n;
  }
  std::map<std::string, LabelMap> labels_of;
  for (const auto& [id, node] : nodes) labels_of[id] = node.labels;
  plan.node_bundle = NodeOrderByRankLabel(group.locations, labels_of);
  const std::string master_addr = plan.NodeLocation(0).node_address;
  auto port = ReserveMasterPort(client, plan);
  if (!port.ok()) return LaunchFail("cannot reserve MASTER_PORT on " + master_addr + ": " +
                                    port.status().message());
  if (f.dry_run) {
    // The devices as the ranks will see them (a node's agent may be limited to
    // some of its machine's devices: NodeInfo::gpu_devices).
    auto gpu_list = [&](int b) {
      const protocol::BundleLocation& where = plan.NodeLocation(b);
      auto node = nodes.find(where.node_id);
      return WorkerEnv::JoinIdList(node == nodes.end() ? where.gpu_ids
                                                       : node->second.DevicesOf(where.gpu_ids));
    };
    std::cout << "rayx launch plan: " << nnodes << " node(s) x " << nproc << " process(es) = "
              << world << " ranks; MASTER_ADDR=" << master_addr << " MASTER_PORT=" << *port
              << "\n";
    for (const LaunchRank& r : PlanRanks(plan)) {
      std::string gpus = gpu_list(r.node_rank);
      std::cout << "  rank " << r.rank << ": node " << r.node_rank << " " << r.node_address
                << " (" << r.node_id.substr(0, 8) << "), local rank " << r.local_rank;
      if (!gpus.empty()) std::cout << ", CUDA_VISIBLE_DEVICES=" << gpus;
      std::cout << "\n";
    }
    protocol::RemovePlacementGroupRequest remove;
    remove.placement_group_id = group_id;
    (void)client.Call<protocol::RemovePlacementGroupReply>(remove, 5000);
    return client.FinishJob().ok() ? 0 : 1;
  }

  // 3. Start, supervise and restart the ranks.
  char cwd_buf[4096];
  plan.cwd = getcwd(cwd_buf, sizeof cwd_buf) ? cwd_buf : "";
  return LaunchSupervisor(client, std::move(plan)).Run(*port);
}

}  // namespace rayx::cli
