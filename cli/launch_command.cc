// `rayx launch`: runs an unmodified torchrun-style program as N x M ranks on the
// cluster, with the environment torchrun gives, and supervises them as a group.
#include "launch_command.h"

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <deque>
#include <iostream>
#include <sstream>

#include "cluster_client.h"
#include "common/flags.h"
#include "common/session_dir.h"
#include "protocol/placement_messages.h"
#include "protocol/process_messages.h"

namespace rayx::cli {
namespace {

using protocol::MessageType;
using transport::FrameView;

volatile std::sig_atomic_t g_stop_signal = 0;
void OnStopSignal(int signo) { g_stop_signal = signo; }

struct LaunchFlags {
  std::string address, token, temp_dir = detail::DefaultTempDir();
  int64_t nnodes = 1, nproc_per_node = 1, max_restarts = 0, master_port = 0;
  double gpus_per_proc = 0, cpus_per_proc = 1, wait_s = 0;
  std::string resources;
  std::vector<std::string> env;
  bool dry_run = false, help = false;
};

// One rank: where it runs and how far its output has been read.
struct Rank {
  int rank = 0, local_rank = 0, node_rank = 0;
  std::string node_address, object_address, node_id;
  std::string lease_id;
  uint32_t index = 0;      // its process in the node's lease
  uint64_t offset = 0;     // output read so far
  std::string partial;     // an unfinished output line
  std::string log_path;    // on its node
  bool exited = false;     // the agent reported its exit
  bool drained = false;    // and all its output was read
  int exit_code = 0, signal = 0;
  std::string tail;
};

std::string DescribeExit(const Rank& r) {
  if (r.signal) return "was killed by signal " + std::to_string(r.signal) + " (" + strsignal(r.signal) + ")";
  return "exited with status " + std::to_string(r.exit_code);
}

int Fail(const std::string& message, int code = 1) {
  std::cerr << "rayx launch: " << message << "\n";
  return code;
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

// Reads what is new in every rank's output and prints whole lines.
void PumpOutput(ClusterClient& client, std::vector<Rank>& ranks, bool final_pass) {
  for (Rank& r : ranks) {
    if (r.drained || r.lease_id.empty()) continue;
    for (int round = 0; round < 64; ++round) {  // at most 64 MiB per rank per pass
      protocol::ReadLogRequest req;
      req.lease_id = r.lease_id;
      req.index = r.index;
      req.offset = r.offset;
      auto reply = client.CallAgent(r.object_address, req, 5000);
      if (!reply.ok()) {
        if (final_pass) r.drained = true;
        break;
      }
      auto body = protocol::Decode<protocol::ReadLogReply>(FrameView((*reply)[1]));
      if (!body.ok()) break;
      r.log_path = body->path;
      std::string_view chunk = reply->size() > 2 ? FrameView((*reply)[2]) : std::string_view();
      r.offset += chunk.size();
      r.partial.append(chunk);
      size_t start = 0, nl;
      std::string out;
      while ((nl = r.partial.find('\n', start)) != std::string::npos) {
        out += "[rank " + std::to_string(r.rank) + " " + r.node_address + "] " +
               r.partial.substr(start, nl - start + 1);
        start = nl + 1;
      }
      r.partial.erase(0, start);
      if (!out.empty()) std::cout << out << std::flush;
      bool at_end = r.offset >= body->size;
      if (at_end && body->exited) {
        if (!r.partial.empty()) {
          std::cout << "[rank " << r.rank << " " << r.node_address << "] " << r.partial << "\n";
          r.partial.clear();
        }
        r.drained = true;
      }
      if (at_end || chunk.empty()) break;
    }
  }
}

}  // namespace

int LaunchCommand(const std::vector<std::string>& all_args) {
  // Flags before "--", the command after it.
  std::vector<std::string> args, command;
  bool after = false;
  for (const auto& a : all_args) {
    if (!after && a == "--") {
      after = true;
      continue;
    }
    (after ? command : args).push_back(a);
  }
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
  flags.AddString("token", &f.token, "the cluster token (default: $RAYX_TOKEN or this machine's "
                                     "session)");
  flags.AddString("temp-dir", &f.temp_dir, "session directory root (default /tmp/rayx)");
  flags.AddBool("help", &f.help, "show this help");
  if (Status s = flags.Parse(args, nullptr); !s.ok()) {
    return Fail(s.message() + " (the command goes after `--`: rayx launch --nnodes 2 -- python "
                              "train.py)", 2);
  }
  if (f.help) {
    std::cout << kHelp << flags.Usage();
    return 0;
  }
  if (command.empty()) {
    return Fail("no command: put it after `--`, e.g. rayx launch --nnodes 2 --nproc-per-node 4 "
                "-- python train.py", 2);
  }
  if (f.gpus_per_proc > 1 && f.gpus_per_proc != std::floor(f.gpus_per_proc)) {
    return Fail("--gpus-per-proc " + FormatAmount(f.gpus_per_proc) +
                ": more than one GPU must be a whole number", 2);
  }
  if (f.gpus_per_proc > 0 && f.gpus_per_proc < 1 && f.nproc_per_node > 1) {
    // M fractional shares of one node's bundle would pack onto fewer devices
    // than ranks; torchrun ranks use device LOCAL_RANK, so refuse.
    return Fail("--gpus-per-proc below 1 with several processes per node is not supported: "
                "each local rank uses device LOCAL_RANK", 2);
  }
  ResourceMap per_proc;
  if (!f.resources.empty()) {
    auto r = ParseResourcesJson(f.resources);
    if (!r.ok()) return Fail("--resources: " + r.status().message(), 2);
    per_proc = *r;
  }
  per_proc[kCpu] = f.cpus_per_proc;
  if (f.gpus_per_proc > 0) per_proc[kGpu] = f.gpus_per_proc;
  std::map<std::string, std::string> user_env;
  for (const auto& kv : f.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Fail("--env '" + kv + "': expected KEY=VALUE", 2);
    }
    user_env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  ResourceMap per_node;
  for (const auto& [name, amount] : per_proc) {
    if (amount > 0) per_node[name] = amount * static_cast<double>(f.nproc_per_node);
  }
  if (per_node.empty()) per_node[kCpu] = 0.001;  // a bundle must reserve something

  auto cluster = ResolveCluster(f.address, f.token, f.temp_dir);
  if (!cluster.ok()) return Fail(cluster.status().message());
  auto connected = ClusterClient::Connect(cluster->first, cluster->second, 10000);
  if (!connected.ok()) return Fail(connected.status().message());
  ClusterClient& client = **connected;

  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);

  const int nnodes = static_cast<int>(f.nnodes), nproc = static_cast<int>(f.nproc_per_node);
  const int world = nnodes * nproc;
  // 1. Reserve N bundles on N distinct nodes, all or nothing.
  protocol::CreatePlacementGroupRequest create;
  create.job_id = client.job_id();
  create.name = "rayx-launch";
  create.strategy = "STRICT_SPREAD";
  create.bundles.assign(static_cast<size_t>(nnodes), per_node);
  auto created = client.Call<protocol::CreatePlacementGroupReply>(create, 10000);
  if (!created.ok()) return Fail("cannot reserve the nodes: " + created.status().message());
  std::string group_id = created->group.placement_group_id;
  protocol::PlacementGroupInfo group = created->group;
  if (group.state == "PENDING" && f.wait_s > 0) {
    protocol::WaitPlacementGroupRequest wait;
    wait.placement_group_id = group_id;
    wait.timeout_ms = static_cast<int64_t>(f.wait_s * 1000);
    std::cout << "rayx launch: waiting up to " << f.wait_s << " s for " << nnodes
              << " node(s) with " << FormatResourceShape(per_node) << " free each...\n"
              << std::flush;
    auto waited = client.Call<protocol::WaitPlacementGroupReply>(wait, wait.timeout_ms + 10000);
    if (!waited.ok()) return Fail(waited.status().message());
    group = waited->group;
  }
  if (group.state != "CREATED") {
    std::string what = std::to_string(world) + " processes (" + std::to_string(nnodes) +
                       " node(s) x " + std::to_string(nproc) + ", each node " +
                       FormatResourceShape(per_node) + ")";
    return Fail("cannot place " + what + ": " + group.reason +
                (group.state == "PENDING" && f.wait_s <= 0
                     ? ". Pass --wait SECONDS to wait for them to free up."
                     : ""));
  }

  // 2. The plan: node rank b is bundle b; MASTER_ADDR is rank 0's node.
  std::vector<Rank> ranks;
  for (int b = 0; b < nnodes; ++b) {
    const auto& loc = group.locations[static_cast<size_t>(b)];
    for (int l = 0; l < nproc; ++l) {
      Rank r;
      r.rank = b * nproc + l;
      r.local_rank = l;
      r.node_rank = b;
      r.node_address = loc.node_address;
      r.object_address = loc.object_address;
      r.node_id = loc.node_id;
      r.index = static_cast<uint32_t>(l);
      ranks.push_back(r);
    }
  }
  const std::string master_addr = group.locations[0].node_address;
  auto reserve_port = [&]() -> Result<uint32_t> {
    if (f.master_port > 0) return static_cast<uint32_t>(f.master_port);
    auto reply = client.CallAgent(group.locations[0].object_address,
                                  protocol::ReservePortRequest{}, 5000);
    if (!reply.ok()) return reply.status();
    auto port = protocol::Decode<protocol::ReservePortReply>(FrameView((*reply)[1]));
    if (!port.ok()) return port.status();
    return port->port;
  };
  auto port = reserve_port();
  if (!port.ok()) return Fail("cannot reserve MASTER_PORT on " + master_addr + ": " +
                              port.status().message());
  auto gpu_list = [&](int b) {
    std::string s;
    for (int id : group.locations[static_cast<size_t>(b)].gpu_ids) {
      s += (s.empty() ? "" : ",") + std::to_string(id);
    }
    return s;
  };
  if (f.dry_run) {
    std::cout << "rayx launch plan: " << nnodes << " node(s) x " << nproc << " process(es) = "
              << world << " ranks; MASTER_ADDR=" << master_addr << " MASTER_PORT=" << *port
              << "\n";
    for (const Rank& r : ranks) {
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

  char cwd_buf[4096];
  std::string cwd = getcwd(cwd_buf, sizeof cwd_buf) ? cwd_buf : "";
  int exit_code = 0;
  for (int attempt = 0;; ++attempt) {
    // 3. One process lease per node, holding the node's whole bundle.
    std::map<uint64_t, int> requests;  // request id -> node rank
    std::vector<std::string> leases(static_cast<size_t>(nnodes));
    for (int b = 0; b < nnodes; ++b) {
      protocol::RequestLeaseRequest req;
      req.job_id = client.job_id();
      req.resources = per_node;
      req.placement_group_id = group_id;
      req.bundle_index = b;
      for (int l = 0; l < nproc; ++l) {
        const Rank& r = ranks[static_cast<size_t>(b * nproc + l)];
        protocol::ProcessSpec spec;
        spec.argv = command;
        spec.cwd = cwd;
        spec.log_name = "launch-" + client.job_id() + "-rank" + std::to_string(r.rank) +
                        (attempt ? "-restart" + std::to_string(attempt) : "");
        spec.env = user_env;
        spec.env["RANK"] = std::to_string(r.rank);
        spec.env["LOCAL_RANK"] = std::to_string(r.local_rank);
        spec.env["WORLD_SIZE"] = std::to_string(world);
        spec.env["LOCAL_WORLD_SIZE"] = std::to_string(nproc);
        spec.env["GROUP_RANK"] = std::to_string(r.node_rank);
        spec.env["NODE_RANK"] = std::to_string(r.node_rank);
        spec.env["GROUP_WORLD_SIZE"] = std::to_string(nnodes);
        spec.env["ROLE_RANK"] = std::to_string(r.rank);
        spec.env["ROLE_WORLD_SIZE"] = std::to_string(world);
        spec.env["ROLE_NAME"] = "default";
        spec.env["MASTER_ADDR"] = master_addr;
        spec.env["MASTER_PORT"] = std::to_string(*port);
        spec.env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(attempt);
        spec.env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(f.max_restarts);
        spec.env["TORCHELASTIC_RUN_ID"] = client.job_id();
        if (!user_env.count("PYTHONUNBUFFERED")) spec.env["PYTHONUNBUFFERED"] = "1";
        // torchrun's default: one OpenMP thread per process when several share a node.
        if (nproc > 1 && !user_env.count("OMP_NUM_THREADS")) spec.env["OMP_NUM_THREADS"] = "1";
        req.processes.push_back(std::move(spec));
      }
      requests[client.Send(req)] = b;
    }
    auto stop_all = [&] {
      for (const auto& lease : leases) {
        if (lease.empty()) continue;
        protocol::ReturnLeaseRequest ret;
        ret.lease_id = lease;
        (void)client.Call<protocol::ReturnLeaseReply>(ret, 5000);
      }
    };
    // 4. Wait for every node's processes to start.
    auto start_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    std::string start_error;
    std::deque<transport::Frames> early;  // exits reported before every node started
    while (!requests.empty() && start_error.empty()) {
      if (g_stop_signal) break;
      if (std::chrono::steady_clock::now() > start_deadline) {
        start_error = "the processes did not start within 120 s";
        break;
      }
      auto frames = client.Next(200);
      if (!frames) continue;
      auto it = requests.find(ClusterClient::IdOf(*frames));
      if (it == requests.end()) {
        if (ClusterClient::TypeOf(*frames) ==
            static_cast<uint16_t>(MessageType::kProcessExitedNotice)) {
          early.push_back(std::move(*frames));
        }
        continue;
      }
      int b = it->second;
      requests.erase(it);
      if (Status s = ClusterClient::AsError(*frames); !s.ok()) {
        start_error = "node " + group.locations[static_cast<size_t>(b)].node_address + ": " +
                      s.message();
        continue;
      }
      auto grant = protocol::Decode<protocol::RequestLeaseReply>(FrameView((*frames)[1]));
      if (!grant.ok()) {
        start_error = grant.status().message();
        continue;
      }
      leases[static_cast<size_t>(b)] = grant->lease_id;
      for (int l = 0; l < nproc; ++l) {
        Rank& r = ranks[static_cast<size_t>(b * nproc + l)];
        r = Rank{r.rank, r.local_rank, r.node_rank, r.node_address, r.object_address, r.node_id};
        r.lease_id = grant->lease_id;
        r.index = static_cast<uint32_t>(l);
      }
    }
    if (!start_error.empty() || g_stop_signal) {
      stop_all();
      (void)client.FinishJob();
      if (g_stop_signal) return 128 + g_stop_signal;
      return Fail("could not start the ranks: " + start_error);
    }
    if (attempt == 0) {
      std::cout << "rayx launch: job " << client.job_id() << ": " << world << " ranks on "
                << nnodes << " node(s), MASTER_ADDR=" << master_addr << " MASTER_PORT=" << *port
                << "\n" << std::flush;
    }

    // 5. Supervise: stream output; the first failure stops everyone.
    const Rank* failed = nullptr;
    size_t exited_ok = 0;
    auto last_pump = std::chrono::steady_clock::now();
    while (!g_stop_signal && failed == nullptr && exited_ok < ranks.size()) {
      std::optional<transport::Frames> frames;
      if (!early.empty()) {
        frames = std::move(early.front());
        early.pop_front();
      } else {
        frames = client.Next(100);
      }
      if (frames && ClusterClient::TypeOf(*frames) ==
                        static_cast<uint16_t>(MessageType::kProcessExitedNotice)) {
        auto notice = protocol::Decode<protocol::ProcessExitedNotice>(FrameView((*frames)[1]));
        if (notice.ok()) {
          for (Rank& r : ranks) {
            if (r.lease_id != notice->lease_id || r.index != notice->index || r.exited) continue;
            r.exited = true;
            r.exit_code = notice->exit_code;
            r.signal = notice->signal;
            r.tail = notice->log_tail;
            if (r.exit_code == 0 && r.signal == 0) {
              ++exited_ok;
            } else if (failed == nullptr) {
              failed = &r;
            }
          }
        }
      }
      if (!client.job_alive()) break;
      auto now = std::chrono::steady_clock::now();
      if (now - last_pump >= std::chrono::milliseconds(100)) {
        PumpOutput(client, ranks, false);
        last_pump = now;
      }
    }
    if (exited_ok == ranks.size()) {
      PumpOutput(client, ranks, true);
      std::cout << "rayx launch: all " << world << " ranks exited with status 0\n";
      (void)client.FinishJob();
      return 0;
    }
    if (g_stop_signal || !client.job_alive()) {
      stop_all();
      PumpOutput(client, ranks, true);
      (void)client.FinishJob();
      if (!client.job_alive() && !g_stop_signal) {
        return Fail("the cluster ended this job (the head restarted or lost this client); "
                    "every rank was stopped");
      }
      std::cerr << "rayx launch: stopped by " << strsignal(g_stop_signal) << "; stopped all "
                << world << " ranks\n";
      return 128 + g_stop_signal;
    }
    // A rank failed: stop the rest everywhere.
    Rank failed_copy = *failed;
    stop_all();
    PumpOutput(client, ranks, true);
    std::cerr << "rayx launch: rank " << failed_copy.rank << " (local rank "
              << failed_copy.local_rank << " on node " << failed_copy.node_rank << ", "
              << failed_copy.node_address << ") " << DescribeExit(failed_copy) << ".\n";
    if (!failed_copy.tail.empty()) {
      std::cerr << "rayx launch: its last lines:\n";
      std::istringstream lines(failed_copy.tail);
      for (std::string line; std::getline(lines, line);) std::cerr << "  | " << line << "\n";
    }
    if (!failed_copy.log_path.empty()) {
      std::cerr << "rayx launch: its full output: " << failed_copy.log_path << " on "
                << failed_copy.node_address << "\n";
    }
    exit_code = failed_copy.signal ? 128 + failed_copy.signal
                                   : (failed_copy.exit_code > 0 && failed_copy.exit_code < 126
                                          ? failed_copy.exit_code
                                          : 1);
    if (attempt < f.max_restarts) {
      std::cerr << "rayx launch: stopped every rank; restarting the group (restart "
                << attempt + 1 << " of " << f.max_restarts << ")\n";
      if (f.master_port == 0) {
        auto again = reserve_port();
        if (again.ok()) port = again;
      }
      continue;
    }
    std::cerr << "rayx launch: stopped the other ranks on every node"
              << (f.max_restarts ? " (no restarts left)" : "") << ".\n";
    (void)client.FinishJob();
    return exit_code;
  }
}

}  // namespace rayx::cli
