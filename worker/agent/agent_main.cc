// rayx-agent: the node agent daemon. Started by `rayx start`, which passes the
// cluster token in RAYX_CLUSTER_TOKEN and a --ready-fd for the start-up
// handshake. Resources not given as flags are detected on this machine.
#include <csignal>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "agent/gpu_monitor.h"
#include "agent/node_agent.h"
#include "agent/node_resources.h"
#include "common/flags.h"
#include "common/logging.h"
#include "common/parent_watch.h"
#include "common/process_control.h"
#include "common/ready_pipe.h"
#include "object_store/checkpoint_files.h"
#include "object_store/store_owner.h"
#include "rayx/cluster_status.h"
#include "rayx/ids.h"
#include "transport/security.h"
#include "worker/worker_env.h"

int main(int argc, char** argv) {
  using namespace rayx;
  detail::SetLogProgramName("rayx-agent");
  std::signal(SIGPIPE, SIG_IGN);

  std::string address, node_ip, resources_json, labels_text, log_dir = ".", store_root = "/dev/shm";
  double num_cpus = 0, num_gpus = 0, memory = 0;
  bool head_node = false;
  int64_t ready_fd = -1, connect_timeout_ms = 15000, head_lost_timeout_ms = 60000;
  int64_t worker_start_timeout_ms = 30000;
  FlagParser flags("rayx-agent");
  flags.AddString("address", &address, "the head, HOST:PORT");
  flags.AddString("node-ip-address", &node_ip, "this node's address (default: the local "
                                               "address of the interface that reaches the head)");
  flags.AddDouble("num-cpus", &num_cpus, "CPUs to offer (default: all)");
  flags.AddDouble("num-gpus", &num_gpus, "GPUs to offer (default: detected through NVML)");
  flags.AddDouble("memory", &memory, "memory in bytes to offer (default: physical RAM)");
  flags.AddString("resources", &resources_json, "custom resources as JSON, e.g. '{\"tpu\": 4}'");
  flags.AddString("labels", &labels_text, "node labels, k=v,k2=v2");
  flags.AddBool("head-node", &head_node, "this agent runs beside the head");
  flags.AddString("log-dir", &log_dir, "where worker log files go (default: .)");
  std::string group_dir;
  flags.AddString("group-dir", &group_dir,
                  "record each lease's process group here, for `rayx stop` (default: none)");
  std::string package_dir = "node-packages";
  flags.AddString("package-dir", &package_dir,
                  "where job working directories fetched from the head go (default ./node-packages)");
  int64_t max_unpacked = static_cast<int64_t>(TarLimits().max_unpacked_bytes);
  flags.AddInt("max-package-unpacked-bytes", &max_unpacked, 1, int64_t{1} << 50,
               "refuse a working directory whose files hold more than this in all "
               "(default 1073741824: 1 GiB)");
  int64_t max_entries = static_cast<int64_t>(TarLimits().max_entries);
  flags.AddInt("max-package-entries", &max_entries, 1, int64_t{1} << 32,
               "refuse a working directory of more files, directories and links than this "
               "(default 100000)");
  flags.AddString("store-root", &store_root,
                  "where the node's shared-memory object store directory is made (default /dev/shm)");
  int64_t object_store_memory = 0, spill_limit = 0;
  flags.AddInt("object-store-memory", &object_store_memory, 1 << 20, int64_t{1} << 52,
               "bytes the node's object store may hold before it spills to disk (default 30% "
               "of RAM, at most the size of the store's file system)");
  std::string spill_root = "/tmp";
  flags.AddString("object-spill-dir", &spill_root,
                  "where objects that do not fit in the store are spilled (default /tmp; "
                  "`rayx start`: the session directory)");
  flags.AddInt("object-spill-limit", &spill_limit, 1 << 20, int64_t{1} << 60,
               "bytes the spill directory may hold (default: until its disk is 95% full)");
  std::string checkpoint_root = "/tmp";
  flags.AddString("checkpoint-dir", &checkpoint_root,
                  "where Train's checkpoint shards are kept on this node, past this agent's "
                  "life (default /tmp; `rayx start`: --temp-dir's checkpoints/)");
  int64_t checkpoint_limit = 0;
  flags.AddInt("checkpoint-disk-limit", &checkpoint_limit, 0, int64_t{1} << 60,
               "bytes of checkpoint shards this node keeps at most; a report past it fails "
               "with the figures (default 0: the disk)");
  flags.AddInt("ready-fd", &ready_fd, -1, 1 << 20, "fd to report start-up on");
  flags.AddInt("connect-timeout-ms", &connect_timeout_ms, 100, 3600000,
               "give up joining after this long (default 15000)");
  flags.AddInt("head-lost-timeout-ms", &head_lost_timeout_ms, 1000, 86400000,
               "exit when the head is silent this long (default 60000)");
  flags.AddInt("worker-start-timeout-ms", &worker_start_timeout_ms, 100, 3600000,
               "stop a worker that has not started within this (default 30000; an actor's "
               "constructor run at start is not limited)");
  worker::MemoryMonitor::Options memory_monitor;
  flags.AddDouble("memory-usage-threshold", &memory_monitor.threshold,
                  "stop a worker when the machine's memory use passes this fraction "
                  "(default 0.95; 1 turns the memory monitor off)");
  flags.AddInt("memory-monitor-period-ms", &memory_monitor.period_ms, 0, 3600000,
               "how often the memory monitor looks (default 250; 0 turns it off)");
  std::vector<std::string> args(argv + 1, argv + argc);
  Status parsed = flags.Parse(args, nullptr);
  ReadyPipe real_ready(static_cast<int>(ready_fd));
  auto fail = [&](const std::string& msg, int code) {
    std::cerr << "rayx-agent: " << msg << "\n";
    real_ready.Fail(msg);
    return code;
  };
  if (!parsed.ok()) return fail(parsed.message(), 2);
  // The node's object store: RAM in /dev/shm. Stores of agents that are gone
  // (killed with their reaper) go first; this one is claimed for this
  // process's life, and the reaper removes it when this agent dies.
  if (::access(store_root.c_str(), W_OK) != 0) store_root = "/tmp";
  const std::string store_hex = detail::RandomHex(6);
  const std::string store_dir = store_root + "/rayx-store-" + store_hex;
  for (const std::string& dead : RemoveDeadStores(store_root)) {
    RAYX_LOG(Info) << "removed " << dead << ": the object store of a node agent that is gone";
  }
  // Its spill directory, on disk, named after the store and claimed the same way.
  {
    std::error_code ec;
    std::filesystem::create_directories(spill_root, ec);
    if (ec) return fail("cannot make the spill directory " + spill_root + ": " + ec.message(), 2);
  }
  const std::string spill_dir = spill_root + "/" + kSpillDirPrefix + store_hex;
  for (const std::string& dead : RemoveDeadStores(spill_root, kSpillDirPrefix)) {
    RAYX_LOG(Info) << "removed " << dead << ": the spilled objects of a node agent that is gone";
  }
  // And its checkpoint directory, which outlives it: one that an agent that
  // is gone left (a stopped cluster's, a crashed node's) is adopted, with its
  // checkpoints (the agent hands their records to the head once it joined);
  // else a new one, named after the store. Claimed the same way.
  {
    std::error_code ec;
    std::filesystem::create_directories(checkpoint_root, ec);
    if (ec) {
      return fail("cannot make the checkpoint directory " + checkpoint_root + ": " + ec.message(),
                  2);
    }
  }
  auto empty = [](const std::string& dir) { return CheckpointFiles(dir).Empty(); };
  for (const std::string& dead :
       RemoveDeadStores(checkpoint_root, CheckpointFiles::kDirPrefix, empty)) {
    RAYX_LOG(Info) << "removed " << dead << ": the empty checkpoint directory of a node agent "
                   << "that is gone";
  }
  std::optional<std::string> adopted_checkpoints =
      AdoptDeadStore(checkpoint_root, CheckpointFiles::kDirPrefix);
  const std::string checkpoint_dir =
      adopted_checkpoints ? *adopted_checkpoints
                          : checkpoint_root + "/" + CheckpointFiles::kDirPrefix + store_hex;
  if (adopted_checkpoints) {
    RAYX_LOG(Info) << "adopted " << checkpoint_dir << ": the checkpoints of a node agent that is gone";
    // Copies no commit covers (a report that failed, a record that never
    // came) are of no checkpoint anyone can restore: they go now, before
    // anything writes into the directory again.
    for (const std::string& dir : CheckpointFiles(checkpoint_dir).RemoveUnrecorded()) {
      RAYX_LOG(Info) << "removed " << dir << " from " << checkpoint_dir
                     << ": a checkpoint copy no commit covers";
    }
  }
  if (!flags.WasSet("object-store-memory")) {
    object_store_memory = static_cast<int64_t>(DefaultObjectStoreMemory(store_root));
  }
  // Before any thread starts (it forks): what this agent's leases started
  // themselves (a job's `sh -c 'x & wait'`, a trainer's helpers) is killed the
  // moment the agent dies, even by SIGKILL, instead of holding its devices
  // until `rayx stop`. Its workers die with it by PR_SET_PDEATHSIG.
  if (!group_dir.empty()) {
    if (auto reaper = detail::StartGroupReaper(
            group_dir, {store_dir, spill_dir, spill_dir + ".lock", store_dir + ".lock"});
        !reaper.ok()) {
      std::cerr << "rayx-agent: no reaper for lease process groups (" << reaper.status().message()
                << "): what they leave behind if this agent is killed waits for `rayx stop`\n";
    }
  }

  worker::NodeAgentOptions options;
  auto head = ParseHostPort(address);
  if (!head.ok()) return fail(head.status().message(), 2);
  options.head = *head;
  auto head_ip = ResolveIpv4(head->host);
  if (!head_ip.ok()) return fail(head_ip.status().message(), 2);
  options.head.host = *head_ip;
  if (node_ip.empty()) {
    auto local = LocalAddressToward(*head_ip);
    if (!local.ok()) return fail(local.status().message() + ": pass --node-ip-address", 2);
    node_ip = *local;
  }
  options.node_ip = node_ip;
  const char* token = std::getenv("RAYX_CLUSTER_TOKEN");
  if (token == nullptr || *token == '\0') {
    return fail("RAYX_CLUSTER_TOKEN is not set: start the agent with `rayx start --address "
                "HOST:PORT` (with RAYX_TOKEN or --token-file)",
                2);
  }
  options.token = token;
  // Kept in memory only: the workers and processes this agent starts act for
  // their jobs and never inherit it (nor a RAYX_TOKEN the shell had). Before
  // any thread runs: the environment is not thread-safe.
  for (const char* name : WorkerEnv::kClusterTokenVariables) ::unsetenv(name);
  // The cluster's data sockets are protected as the head says: asked before
  // the object server binds (and checked again at registration).
  {
    auto status = QueryClusterStatus(options.head.ToString(), options.token, connect_timeout_ms);
    if (!status.ok()) {
      if (status.status().code() == StatusCode::kUnavailable) {
        return fail("no answer from the head at " + options.head.ToString() + " within " +
                        std::to_string(connect_timeout_ms / 1000) +
                        " s: check the address, that `rayx start --head` runs there, and that "
                        "port " + std::to_string(options.head.port) +
                        " is reachable from this machine (firewall?)",
                    1);
      }
      return fail("the head at " + options.head.ToString() + " refused this node: " +
                      status.status().message(),
                  1);
    }
    auto mode = transport::ParseWireSecurity(status->wire_security);
    if (!mode.ok()) {
      return fail("the head at " + options.head.ToString() + " runs another rayx version (" +
                      status->rayx_version + "): install the same version on every node",
                  1);
    }
    options.wire_security = *mode;
  }
  worker::ResourceOverrides overrides;
  if (flags.WasSet("num-cpus")) overrides.num_cpus = num_cpus;
  if (flags.WasSet("num-gpus")) overrides.num_gpus = num_gpus;
  if (flags.WasSet("memory")) overrides.memory_bytes = memory;
  if (!resources_json.empty()) {
    auto custom = ParseResourcesJson(resources_json);
    if (!custom.ok()) return fail(custom.status().message(), 2);
    overrides.custom = *custom;
  }
  auto labels = ParseLabels(labels_text);
  if (!labels.ok()) return fail(labels.status().message(), 2);
  options.labels = *labels;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    overrides.cuda_visible_devices = visible;
  }
  auto resolved = worker::ResolveNodeResources(overrides);
  if (!resolved.ok()) return fail(resolved.status().message(), 2);
  std::string gpu_note = resolved->gpu_note;
  options.resources = resolved->resources;
  options.gpu_devices = resolved->gpu_devices;
  // GPU metrics: the devices the node offers, read through NVML (nothing where
  // GPUs were given with --num-gpus on a machine without the driver).
  std::shared_ptr<worker::GpuMonitor> gpu_monitor;
  if (auto gpus = options.resources.find(kGpu);
      gpus != options.resources.end() && gpus->second >= 1) {
    std::vector<int> devices = options.gpu_devices;
    if (devices.empty()) {
      for (int i = 0; i < static_cast<int>(gpus->second); ++i) devices.push_back(i);
    }
    std::string why;
    gpu_monitor = worker::GpuMonitor::Open(std::move(devices), &why);
    if (gpu_monitor) options.sample_gpus = [gpu_monitor] { return gpu_monitor->Sample(); };
    gpu_note += "; " + why;
  }
  options.hostname = worker::LocalHostname();
  options.is_head_node = head_node;
  options.connect_timeout_ms = connect_timeout_ms;
  options.head_lost_timeout_ms = head_lost_timeout_ms;
  options.worker_start_timeout_ms = worker_start_timeout_ms;
  options.log_dir = log_dir;
  options.group_dir = group_dir;
  options.package_dir = package_dir;
  options.package_limits.max_unpacked_bytes = static_cast<uint64_t>(max_unpacked);
  options.package_limits.max_entries = static_cast<uint64_t>(max_entries);
  if (!(memory_monitor.threshold > 0)) {
    return fail("--memory-usage-threshold must be a fraction above 0 (1 turns the monitor off)", 2);
  }
  options.memory_monitor = memory_monitor;
  if (Status claimed = ClaimStore(store_dir); !claimed.ok()) return fail(claimed.message(), 1);
  if (Status claimed = ClaimStore(spill_dir); !claimed.ok()) return fail(claimed.message(), 1);
  if (!adopted_checkpoints) {
    if (Status claimed = ClaimStore(checkpoint_dir); !claimed.ok()) {
      return fail(claimed.message(), 1);
    }
  }
  options.checkpoint_dir = checkpoint_dir;
  options.checkpoint_limit = static_cast<uint64_t>(checkpoint_limit);
  options.store_dir = store_dir;
  options.spill_dir = spill_dir;
  options.object_store_memory = static_cast<uint64_t>(object_store_memory);
  options.spill_limit = static_cast<uint64_t>(spill_limit);
  // However main returns (a clean leave, a fatal error, a failed start), the
  // store and then its lock file go. A store that cannot be removed yet (a
  // dying worker still writing into it) keeps its lock file, so that the
  // reaper or the next agent on this machine removes it.
  struct StoreCleanup {
    std::string dir;
    ~StoreCleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      if (!std::filesystem::exists(dir, ec)) std::filesystem::remove(dir + ".lock", ec);
    }
  } store_cleanup{store_dir}, spill_cleanup{spill_dir};
  // The checkpoint directory stays, and its lock file (unlocked once this
  // process is gone: the next agent adopts it), unless it holds nothing.
  struct CheckpointCleanup {
    std::string dir;
    ~CheckpointCleanup() {
      if (!CheckpointFiles(dir).Empty()) return;
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      if (!std::filesystem::exists(dir, ec)) std::filesystem::remove(dir + ".lock", ec);
    }
  } checkpoint_cleanup{checkpoint_dir};
  // Test hooks for the version check: make this agent announce another version.
  if (const char* v = std::getenv("RAYX_TESTING_ANNOUNCE_VERSION")) options.announced_version = v;
  if (const char* p = std::getenv("RAYX_TESTING_ANNOUNCE_PROTOCOL")) {
    options.announced_protocol = static_cast<uint32_t>(std::strtoul(p, nullptr, 10));
  }
  RAYX_LOG(Info) << "rayx " << kRayxVersion << " node agent at " << node_ip << " joining "
                 << options.head.ToString() << "; " << gpu_note;

  boost::asio::io_context io(1);
  SystemClock clock;
  int exit_code = 0;
  worker::NodeAgent agent(
      io, options, clock,
      {.on_joined =
           [&](const protocol::RegisterNodeReply& reply) {
             real_ready.Ready({{"node_id", reply.node_id.Hex()},
                               {"cluster_id", reply.cluster_id},
                               {"node_ip", node_ip}});
           },
       .on_fatal =
           [&](const Status& status) {
             std::cerr << "rayx-agent: " << status.message() << "\n";
             real_ready.Fail(status.message());
             exit_code = 1;
             io.stop();
           },
       .on_cluster_stopped =
           [&](const std::string& reason) {
             // Exits with 0: `rayx start --block` reports a clean end.
             agent.Leave("the cluster was stopped: " + reason, 1000, [&] { io.stop(); });
           }});
  if (Status started = agent.Start(); !started.ok()) return fail(started.message(), 1);

  boost::asio::signal_set children(io, SIGCHLD);
  std::function<void()> watch_children = [&] {
    children.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      agent.ReapWorkers();
      watch_children();
    });
  };
  watch_children();

  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    RAYX_LOG(Info) << "signal " << signo << ": leaving the cluster";
    agent.Leave("stopped by signal " + std::to_string(signo) + " (rayx stop)", 1000,
                [&] { io.stop(); });
  });
  ParentWatch parent(io, [&] {
    RAYX_LOG(Info) << "the process this agent belongs to exited: leaving";
    // A private cluster's driver, or the `rayx start --block` it belongs to.
    const char* owner = std::getenv("RAYX_EXIT_WITH_PID");
    agent.Leave(std::string("the process it belongs to (pid ") + (owner ? owner : "?") + ") exited",
                500, [&] { io.stop(); });
  });
  io.run();
  return exit_code;
}
