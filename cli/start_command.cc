// `rayx start`: starts rayx-head and rayx-agent as daemons, waits for their
// READY lines, and records them in a session so `rayx stop` can find them.
#include "start_command.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

#include "cluster_client.h"
#include "command_error.h"
#include "common/address.h"
#include "common/flags.h"
#include "common/process_control.h"
#include "common/session_dir.h"
#include "foreground.h"
#include "platform_env.h"
#include "rayx/cluster_status.h"
#include "rayx/ids.h"
#include "rayx/version.h"
#include "status_format.h"
#include "stop_command.h"

namespace rayx::cli {
namespace {

constexpr int64_t kStartTimeoutMs = 30000;

struct StartFlags {
  bool head = false;
  std::string address;
  std::string token;
  int64_t port = kDefaultHeadPort;
  int64_t dashboard_port = 8265;  // only passed on when given
  int64_t metrics_port = -1;
  double num_cpus = 0, num_gpus = 0, memory = 0;
  std::string resources, labels, node_ip, temp_dir = detail::DefaultTempDir();
  bool block = false, help = false;
  int64_t heartbeat_ms = 250, node_timeout_ms = 1500, connect_timeout_ms = 15000;
  int64_t worker_start_timeout_ms = 30000;
  int64_t head_lost_timeout_ms = 60000;
  double memory_usage_threshold = 0.95;
  int64_t memory_monitor_period_ms = 250;
  int64_t object_store_memory = 0, object_spill_limit = 0;
  std::string object_spill_dir;
  std::string checkpoint_dir;
  int64_t checkpoint_disk_limit = 0;
  bool from_env = false;
  int64_t join_timeout_s = 300;
  bool encrypt = false;
  std::map<std::string, int64_t> caps;  // the cap flags given (kCapFlags)
};

// Caps on what peers can make a daemon keep, passed on as given (defaults:
// the daemon's own, in JobManager::Options, KvLimits and TarLimits).
struct CapFlag {
  const char* name;
  bool head;  // the head's (only with --head); else every node agent's
  const char* help;
};
constexpr CapFlag kCapFlags[] = {
    {"max-package-bytes", true, "(head) the largest working directory package an upload may be"},
    {"max-package-store-bytes", true, "(head) packages and uploads kept in all"},
    {"package-upload-expiry-ms", true, "(head) drop an upload that sent no chunk for this long"},
    {"kv-max-job-bytes", true, "(head) KV bytes one job's job-scoped keys may hold"},
    {"kv-max-job-keys", true, "(head) KV keys one job's job-scoped keys may number"},
    {"kv-max-namespace-bytes", true, "(head) KV bytes one namespace may hold"},
    {"kv-max-namespace-keys", true, "(head) KV keys one namespace may hold"},
    {"kv-max-total-bytes", true, "(head) KV bytes the whole store may hold"},
    {"kv-max-total-keys", true, "(head) KV keys the whole store may hold"},
    {"max-package-unpacked-bytes", false, "refuse a working directory holding more than this"},
    {"max-package-entries", false, "refuse a working directory of more files than this"},
};

// Appends the cap flags of the head (`head`) or of the agent that were given.
void AddCapArgs(const FlagParser& flags, const StartFlags& f, bool head,
                std::vector<std::string>* argv) {
  for (const CapFlag& cap : kCapFlags) {
    if (cap.head != head || !flags.WasSet(cap.name)) continue;
    argv->insert(argv->end(), {std::string("--") + cap.name, std::to_string(f.caps.at(cap.name))});
  }
}

// Passes the resource flags the user gave on to rayx-agent.
void AddResourceArgs(const FlagParser& flags, const StartFlags& f, std::vector<std::string>* argv) {
  auto num = [](double v) {
    std::string s = std::to_string(v);
    return s;
  };
  if (flags.WasSet("num-cpus")) argv->insert(argv->end(), {"--num-cpus", num(f.num_cpus)});
  if (flags.WasSet("num-gpus")) argv->insert(argv->end(), {"--num-gpus", num(f.num_gpus)});
  if (flags.WasSet("memory")) argv->insert(argv->end(), {"--memory", num(f.memory)});
  if (!f.resources.empty()) argv->insert(argv->end(), {"--resources", f.resources});
  if (!f.labels.empty()) argv->insert(argv->end(), {"--labels", f.labels});
  if (flags.WasSet("worker-start-timeout-ms")) {
    argv->insert(argv->end(),
                 {"--worker-start-timeout-ms", std::to_string(f.worker_start_timeout_ms)});
  }
  if (flags.WasSet("head-lost-timeout-ms")) {
    argv->insert(argv->end(), {"--head-lost-timeout-ms", std::to_string(f.head_lost_timeout_ms)});
  }
  if (flags.WasSet("memory-usage-threshold")) {
    argv->insert(argv->end(), {"--memory-usage-threshold", num(f.memory_usage_threshold)});
  }
  if (flags.WasSet("memory-monitor-period-ms")) {
    argv->insert(argv->end(),
                 {"--memory-monitor-period-ms", std::to_string(f.memory_monitor_period_ms)});
  }
  if (flags.WasSet("object-store-memory")) {
    argv->insert(argv->end(), {"--object-store-memory", std::to_string(f.object_store_memory)});
  }
  if (flags.WasSet("checkpoint-disk-limit")) {
    argv->insert(argv->end(),
                 {"--checkpoint-disk-limit", std::to_string(f.checkpoint_disk_limit)});
  }
  if (flags.WasSet("object-spill-limit")) {
    argv->insert(argv->end(), {"--object-spill-limit", std::to_string(f.object_spill_limit)});
  }
}

// Stops the daemons of `session` started so far (start-up failed half-way) and
// removes the session: a failed start leaves nothing behind. The error printed
// already carries the end of the failed daemon's log.
void Undo(const detail::Session& session) {
  std::vector<detail::ProcessRecord> records;
  for (const auto& [name, record] : session.Processes()) {
    detail::SignalGroup(record, SIGKILL);
    records.push_back(record);
  }
  detail::WaitForExit(records, 5000);
  session.Remove();
}

// --from-env: takes this node's role from the platform's variables (SLURM's,
// or RANK/WORLD_SIZE/MASTER_ADDR[/MASTER_PORT]): node rank 0 starts the head
// (on MASTER_PORT unless --port is given, at MASTER_ADDR's address when
// NodeZeroMayAdvertise it), the others join it, waiting up to --join-timeout-s
// for it to come up and for its name to resolve. Labels each node with its rank.
Status ApplyPlatformRole(const PlatformRole& role, const FlagParser& flags, StartFlags* f) {
  if (!f->labels.empty()) f->labels += ",";
  f->labels += std::string(kNodeRankLabel) + "=" + std::to_string(role.node_rank);
  if (!flags.WasSet("port") && role.head_port) f->port = *role.head_port;
  if (!flags.WasSet("connect-timeout-ms")) f->connect_timeout_ms = f->join_timeout_s * 1000;
  std::cout << "rayx start --from-env: node rank " << role.node_rank << " of " << role.num_nodes
            << " (from " << role.source << "), "
            << (role.node_rank == 0
                    ? "starting the head"
                    : "joining the head on " + role.head_host + ":" + std::to_string(f->port))
            << "\n"
            << std::flush;
  if (role.node_rank == 0) {
    f->head = true;
    if (f->node_ip.empty()) {
      auto ip = ResolveIpv4(role.head_host);
      if (ip.ok() && NodeZeroMayAdvertise(*ip)) f->node_ip = *ip;
    }
    return Status::OK();
  }
  // Node 0's name may resolve only once it runs (a Kubernetes headless
  // service): wait for it as for the head itself.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(f->join_timeout_s);
  bool said = false;
  while (true) {
    auto ip = ResolveIpv4(role.head_host);
    if (ip.ok()) {
      f->address = *ip + ":" + std::to_string(f->port);
      return Status::OK();
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::Unavailable("node rank 0's host '" + role.head_host + "' (from " +
                                 role.source + ") did not resolve within " +
                                 std::to_string(f->join_timeout_s) + " s");
    }
    if (!said) {
      std::cout << "rayx start --from-env: waiting for '" << role.head_host << "' to resolve\n"
                << std::flush;
      said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace

int StartCommand(const std::vector<std::string>& args) {
  StartFlags f;
  FlagParser flags("rayx start");
  flags.AddBool("head", &f.head, "start the head on this machine");
  flags.AddString("address", &f.address, "join the cluster whose head is at HOST:PORT");
  TokenFlags token_flags;
  token_flags.Add(flags);
  flags.AddInt("port", &f.port, 0, 65535, "the head's port (default 6380; 0 picks a free one)");
  flags.AddInt("dashboard-port", &f.dashboard_port, -1, 65535,
               "head only: serve the dashboard and Prometheus' /metrics on this port (default "
               "8265, or a free one when another cluster has it; 0 picks a free one; -1 none)");
  flags.AddInt("metrics-port", &f.metrics_port, -1, 65535,
               "head only: also serve /metrics on this port (default: the dashboard's)");
  flags.AddDouble("num-cpus", &f.num_cpus, "CPUs this node offers (default: all cores)");
  flags.AddDouble("num-gpus", &f.num_gpus, "GPUs this node offers (default: detected through NVML)");
  flags.AddDouble("memory", &f.memory, "bytes of memory this node offers (default: physical RAM)");
  flags.AddString("resources", &f.resources, "custom resources as JSON, e.g. '{\"tpu\": 4}'");
  flags.AddString("labels", &f.labels, "node labels, e.g. accelerator=H100,zone=a");
  flags.AddString("node-ip-address", &f.node_ip,
                  "this node's address (default: the interface that reaches the head)");
  flags.AddString("temp-dir", &f.temp_dir, "session directory root (default /tmp/rayx)");
  flags.AddBool("block", &f.block, "stay in the foreground until the processes exit");
  flags.AddInt("heartbeat-period-ms", &f.heartbeat_ms, 10, 60000,
               "head only: how often agents heartbeat (default 250)");
  flags.AddInt("node-timeout-ms", &f.node_timeout_ms, 50, 3600000,
               "head only: silence before a node is declared dead (default 1500)");
  flags.AddInt("connect-timeout-ms", &f.connect_timeout_ms, 100, 3600000,
               "give up joining when the head does not answer within this (default 15000)");
  flags.AddInt("worker-start-timeout-ms", &f.worker_start_timeout_ms, 100, 3600000,
               "stop a worker that has not started within this (default 30000; a detached "
               "actor's constructor that the head runs at start is not limited)");
  flags.AddInt("head-lost-timeout-ms", &f.head_lost_timeout_ms, 1000, 86400000,
               "the node agent exits when the head has been silent this long (default 60000)");
  flags.AddInt("object-store-memory", &f.object_store_memory, 1 << 20, int64_t{1} << 52,
               "bytes this node's object store holds before it spills objects to disk (default "
               "30% of RAM, at most the size of /dev/shm)");
  flags.AddString("object-spill-dir", &f.object_spill_dir,
                  "where objects that do not fit in the store are spilled (default: the "
                  "session directory's spill/)");
  flags.AddInt("object-spill-limit", &f.object_spill_limit, 1 << 20, int64_t{1} << 60,
               "bytes the spill directory may hold; then a Put fails with ObjectStoreFullError "
               "(default: until the spill disk is 95% full)");
  flags.AddString("checkpoint-dir", &f.checkpoint_dir,
                  "where Train keeps the checkpoint shards of this node's ranks and the copies "
                  "other nodes send it; they outlive the cluster, and the next `rayx start` "
                  "with the same directory takes them back (default: --temp-dir's "
                  "checkpoints/)");
  flags.AddInt("checkpoint-disk-limit", &f.checkpoint_disk_limit, 0, int64_t{1} << 60,
               "bytes of checkpoint shards this node keeps at most; a Train report past it "
               "fails with the figures (default 0: the disk)");
  flags.AddBool("from-env", &f.from_env,
                "take this node's role from SLURM's or a platform's RANK/WORLD_SIZE/MASTER_ADDR: "
                "rank 0 starts the head and runs the command after `--`, the others join");
  flags.AddInt("join-timeout-s", &f.join_timeout_s, 1, 86400,
               "--from-env: how long the nodes may take to join (default 300)");
  flags.AddBool("encrypt", &f.encrypt,
                "head only: encrypt workers' and object servers' connections too (CURVE; "
                "slower transfers); every connection is authenticated either way, and the "
                "head's own is always encrypted");
  flags.AddDouble("memory-usage-threshold", &f.memory_usage_threshold,
                  "stop a worker when this machine's memory use passes this fraction "
                  "(default 0.95; 1 turns the memory monitor off)");
  flags.AddInt("memory-monitor-period-ms", &f.memory_monitor_period_ms, 0, 3600000,
               "how often the memory monitor looks (default 250; 0 turns it off)");
  for (const CapFlag& cap : kCapFlags) {
    flags.AddInt(cap.name, &f.caps[cap.name], 1, int64_t{1} << 60,
                 std::string(cap.help) + " (default: the daemon's own)");
  }
  flags.AddBool("help", &f.help, "show this help");
  auto [flag_args, command] = SplitAtDoubleDash(args);
  if (Status s = flags.Parse(flag_args, nullptr); !s.ok()) return Fail("start", s.message(), 2);
  // The token never comes from the command line: --token-file, RAYX_TOKEN or
  // RAYX_TOKEN_FILE (or, joining, this machine's session).
  if (auto given = token_flags.Resolve(); !given.ok()) {
    return Fail("start", given.status().message(), 2);
  } else {
    f.token = *given;
  }
  if (f.help) {
    std::cout << "usage: rayx start (--head | --address HOST:PORT) [FLAGS]\n"
                 "       rayx start --from-env [FLAGS] [-- COMMAND ARGS...]\n"
              << flags.Usage();
    return 0;
  }
  if (!command.empty() && !f.from_env) {
    return Fail("start",
                "a command after `--` runs only with --from-env (node rank 0 runs it "
                "once every node joined, then stops the cluster)",
                2);
  }
  std::optional<PlatformRole> role;
  if (f.from_env) {
    if (f.head || !f.address.empty()) {
      return Fail("start",
                  "--from-env takes the role from the environment: drop --head and "
                  "--address",
                  2);
    }
    auto detected = DetectPlatformRole(ProcessEnv());
    if (!detected.ok()) return Fail("start", detected.status().message(), 2);
    if (f.token.empty()) {
      return Fail("start",
                  "--from-env needs the same cluster token on every node: set "
                  "RAYX_TOKEN to a secret in the job's environment (for example a "
                  "Kubernetes Secret, or `export RAYX_TOKEN=$(openssl rand -hex 16)` "
                  "in the sbatch script before srun) or pass --token-file",
                  2);
    }
    role = *detected;
    if (Status s = ApplyPlatformRole(*role, flags, &f); !s.ok()) {
      return Fail("start", s.message(), 1);
    }
    f.block = true;
  }
  if (f.encrypt && !f.head && !f.from_env) {
    return Fail("start", "--encrypt is the head's choice (rayx start --head --encrypt); joining "
                         "nodes take it from the head",
                2);
  }
  if (!(f.memory_usage_threshold > 0)) {
    return Fail("start", "--memory-usage-threshold must be a fraction above 0 (1 turns the "
                         "memory monitor off)", 2);
  }
  for (const char* name : {"dashboard-port", "metrics-port"}) {
    if (flags.WasSet(name) && !f.head && !f.from_env) {
      return Fail("start", std::string("--") + name + " is the head's: give it to `rayx start --head`",
                  2);
    }
  }
  for (const CapFlag& cap : kCapFlags) {
    if (cap.head && flags.WasSet(cap.name) && !f.head && !f.from_env) {
      return Fail("start", std::string("--") + cap.name +
                               " is a cap of the head's: give it to `rayx start --head`",
                  2);
    }
  }
  if (f.head == !f.address.empty()) {
    return Fail("start", "pass exactly one of --head (start a new cluster here) or --address "
                         "HOST:PORT (join an existing one)", 2);
  }
  // Validate everything before starting anything.
  if (!f.resources.empty()) {
    auto r = ParseResourcesJson(f.resources);
    if (!r.ok()) return Fail("start", "--resources: " + r.status().message(), 2);
  }
  if (auto l = ParseLabels(f.labels); !l.ok()) {
    return Fail("start", "--labels: " + l.status().message(), 2);
  }
  if (f.node_timeout_ms <= f.heartbeat_ms) {
    return Fail("start", "--node-timeout-ms must be longer than --heartbeat-period-ms", 2);
  }
  if (!f.node_ip.empty() && !ResolveIpv4(f.node_ip).ok()) {
    return Fail("start", "--node-ip-address '" + f.node_ip + "' is not an IPv4 address", 2);
  }
  HostPort head;
  if (!f.head) {
    auto hp = ParseHostPort(f.address, kDefaultHeadPort);
    if (!hp.ok()) return Fail("start", hp.status().message(), 2);
    head = *hp;
    if (!ResolveIpv4(head.host).ok()) {
      return Fail("start", "cannot resolve the head's host '" + head.host + "'", 2);
    }
    if (f.token.empty()) {
      if (auto t = detail::FindTokenFor(f.temp_dir, head.ToString())) f.token = *t;
    }
    if (f.token.empty()) {
      return Fail("start", "no cluster token: set RAYX_TOKEN or pass --token-file FILE (the "
                           "head machine's session has the file: `rayx start --head` says where) "
                           "on the head machine) or set RAYX_TOKEN", 2);
    }
  }

  // A head takes $RAYX_TOKEN too (the token every node and command of the
  // cluster is then given the same way), else makes a random one below.
  // A head takes the given token (every node and command of the cluster is
  // then given the same one the same way), else makes a random one below.
  const bool token_given = f.head && !f.token.empty();

  // A node agent of this machine that died with its reaper (its whole process
  // group SIGKILLed) left what its leases started running, holding the devices
  // the agent started here now offers again.
  for (const auto& previous : detail::Session::List(f.temp_dir)) {
    KillLeftoversOfDeadAgent(previous, true);
  }

  // With --block the stop signals are blocked from here on (taken later by the
  // foreground loop); a daemon's start, which may wait minutes for a head that
  // is not up yet, still ends on one.
  std::function<bool()> stop_pending;
  if (f.block) stop_pending = [] { return PendingStopSignal() != 0; };
  if (f.block) {
    BlockForegroundSignals();
    // What this foreground process starts ends with it, even when it is
    // SIGKILLed (a container's or a batch scheduler's stop): the daemons watch
    // this pid (ParentWatch) and stop, with their workers, once it is gone.
    setenv("RAYX_EXIT_WITH_PID", std::to_string(getpid()).c_str(), 1);
  }
  // A head that died without `rayx stop` (its pid file is still there) and is
  // started again on the same port from the same temp dir restarts in its own
  // session: it finds its state file there, and its agents rejoin it.
  std::optional<detail::Session> resumed;
  std::map<std::string, std::string> old_config;
  // A platform's job always starts a new cluster: a requeued job or a rerun
  // after a SIGKILL is a new job, not the old head's restart.
  if (f.head && f.port != 0 && !role) {
    for (const auto& previous : detail::Session::List(f.temp_dir)) {
      auto conf = previous.ReadConfig();
      if (conf["role"] != "head" || conf["port"] != std::to_string(f.port)) continue;
      auto procs = previous.Processes();
      auto head_record = procs.find("head");
      if (head_record == procs.end()) continue;  // stopped with `rayx stop`: a new cluster
      if (detail::IsRunning(head_record->second)) {
        return Fail("start", "port " + std::to_string(f.port) +
                                 " is already in use by a running rayx head (pid " +
                                 std::to_string(head_record->second.pid) + ", session " +
                                 previous.path() +
                                 "): stop it with `rayx stop` or choose another --port", 1);
      }
      if (!f.token.empty() && f.token != conf["token"]) {
        return Fail("start",
                    "the head that ran on port " + std::to_string(f.port) + " (session " +
                        previous.path() + ") had another cluster token: " +
                        (token_given ? std::string("give that token (RAYX_TOKEN, --token-file)")
                                     : std::string("restart it without a token")) +
                        ", or run `rayx stop` first to start a new cluster",
                    2);
      }
      resumed = previous;
      old_config = conf;
      break;
    }
  }
  auto session = resumed ? Result<detail::Session>(*resumed) : detail::Session::Create(f.temp_dir);
  if (!session.ok()) return Fail("start", session.status().message());
  std::string bin = detail::SelfDirectory();
  std::map<std::string, std::string> config;
  std::string node_ip = f.node_ip;

  if (f.head) {
    if (resumed) {
      f.token = old_config["token"];
      // A restarted head protects connections as it did: its agents' object
      // servers and workers still run with that mechanism.
      if (old_config["wire_security"] == "encrypted") f.encrypt = true;
      auto old_address = ParseHostPort(old_config["address"], static_cast<uint16_t>(f.port));
      if (node_ip.empty() && old_address.ok()) node_ip = old_address->host;
    }
    if (f.token.empty()) f.token = detail::SecureRandomHex(16);
    if (node_ip.empty()) node_ip = DefaultNodeIp();
    std::vector<std::string> argv = {bin + "/rayx-head",
                                     "--port", std::to_string(f.port),
                                     "--node-ip-address", node_ip,
                                     "--heartbeat-period-ms", std::to_string(f.heartbeat_ms),
                                     "--node-timeout-ms", std::to_string(f.node_timeout_ms),
                                     "--package-dir", session->path() + "/packages",
                                     "--state-dir", session->path(),
                                     "--wire-security", f.encrypt ? "encrypted" : "authenticated"};
    AddCapArgs(flags, f, /*head=*/true, &argv);
    if (flags.WasSet("dashboard-port")) {
      argv.insert(argv.end(), {"--dashboard-port", std::to_string(f.dashboard_port)});
    }
    if (flags.WasSet("metrics-port")) {
      argv.insert(argv.end(), {"--metrics-port", std::to_string(f.metrics_port)});
    }
    auto daemon = detail::SpawnDaemon(argv, {{"RAYX_CLUSTER_TOKEN", f.token}},
                                      session->LogPath("head"), kStartTimeoutMs, stop_pending);
    if (!daemon.ok()) {
      if (!resumed) Undo(*session);  // a restarted head's session keeps its state
      return Fail("start", "the head did not start: " + daemon.status().message());
    }
    (void)session->RecordProcess("head", daemon->record);
    // The head listens on its node address only (not every interface).
    head = {node_ip, static_cast<uint16_t>(std::stoi(daemon->ready["port"]))};
    config = old_config;
    config["role"] = "head";
    config["address"] = node_ip + ":" + std::to_string(head.port);
    config["port"] = std::to_string(head.port);
    config["cluster_id"] = daemon->ready["cluster_id"];
    config["token"] = f.token;
    config["wire_security"] = f.encrypt ? "encrypted" : "authenticated";
    config["dashboard"] = daemon->ready["dashboard"];
    (void)session->WriteConfig(config);
    // A copy of the token alone (0600), to carry to the other machines.
    (void)detail::WriteTokenFile(session->path() + "/token", f.token);
    std::cout << (resumed ? "Restarted" : "Started") << " the rayx " << kRayxVersion
              << " head (pid " << daemon->record.pid << ") of cluster "
              << daemon->ready["cluster_id"] << " on " << node_ip << ":" << head.port << ".\n";
    if (!daemon->ready["dashboard"].empty()) {
      std::cout << "Dashboard and Prometheus metrics: " << daemon->ready["dashboard"]
                << " (read-only; `rayx dashboard` prints the credential to log in with)\n";
    }
    if (resumed) {
      std::cout << "It restored its state from " << session->path()
                << "/head_state.sqlite3; the node agents that still run rejoin it by "
                   "themselves, keeping their workers.\n";
      auto procs = session->Processes();
      auto agent = procs.find("agent");
      if (agent != procs.end() && detail::IsRunning(agent->second)) {
        std::cout << "This machine's node agent (pid " << agent->second.pid
                  << ") still runs and rejoins the head.\n";
        session->MarkLatest();
        if (f.block) return BlockUntilDone(*session);
        return 0;
      }
    }
  } else {
    config = {{"role", "node"}, {"address", head.ToString()},
              {"port", std::to_string(head.port)}, {"token", f.token}};
    (void)session->WriteConfig(config);
  }

  std::vector<std::string> argv = {bin + "/rayx-agent", "--address", head.ToString(),
                                   "--connect-timeout-ms", std::to_string(f.connect_timeout_ms)};
  if (f.head) argv.push_back("--head-node");
  argv.insert(argv.end(), {"--log-dir", session->path() + "/logs"});
  ::mkdir(session->GroupDir().c_str(), 0700);
  argv.insert(argv.end(), {"--group-dir", session->GroupDir()});
  argv.insert(argv.end(), {"--package-dir", session->path() + "/node-packages"});
  argv.insert(argv.end(), {"--object-spill-dir", f.object_spill_dir.empty()
                                                     ? session->path() + "/spill"
                                                     : f.object_spill_dir});
  argv.insert(argv.end(), {"--checkpoint-dir", f.checkpoint_dir.empty()
                                                   ? f.temp_dir + "/checkpoints"
                                                   : f.checkpoint_dir});
  if (!node_ip.empty()) argv.insert(argv.end(), {"--node-ip-address", node_ip});
  AddResourceArgs(flags, f, &argv);
  AddCapArgs(flags, f, /*head=*/false, &argv);
  auto agent =
      detail::SpawnDaemon(argv, {{"RAYX_CLUSTER_TOKEN", f.token}}, session->LogPath("agent"),
                          f.connect_timeout_ms + kStartTimeoutMs, stop_pending);
  if (!agent.ok()) {
    Undo(*session);
    return Fail("start", "the node agent did not start: " + agent.status().message());
  }
  (void)session->RecordProcess("agent", agent->record);
  config["cluster_id"] = agent->ready["cluster_id"];
  config["node_id"] = agent->ready["node_id"];
  if (!f.object_spill_dir.empty()) config["spill_dir"] = f.object_spill_dir;
  (void)session->WriteConfig(config);
  session->MarkLatest();

  auto status = QueryClusterStatus(head.ToString(), f.token, 5000);
  std::string resources;
  if (status.ok()) {
    for (const auto& node : status->nodes) {
      if (node.node_id.Hex() == agent->ready["node_id"]) resources = FormatResourceList(node.total);
    }
  }
  std::cout << "Started the node agent (pid " << agent->record.pid << ") as node "
            << agent->ready["node_id"].substr(0, 8) << " at " << agent->ready["node_ip"]
            << (resources.empty() ? "" : " with " + resources) << ".\n";
  if (role) {
    // The platform's other nodes join by themselves; its job ends the cluster.
    std::cout << "Logs: " << session->path() << "/logs\n" << std::flush;
  } else {
    if (f.head) {
      std::cout << "\nTo add another machine to this cluster, copy the token file "
                << session->path() << "/token to it (keep it readable by you alone: "
                   "chmod 600) and run on it:\n"
                << "  rayx start --address " << config["address"] << " --token-file TOKEN_FILE\n"
                << "(or set RAYX_TOKEN to the file's content instead of --token-file)\n";
    }
    std::cout << "\nTo see the cluster:  rayx status"
              << (f.temp_dir != detail::DefaultTempDir() ? " --temp-dir " + f.temp_dir : "") << "\n"
              << "To stop the rayx processes on this machine:  rayx stop"
              << (f.temp_dir != detail::DefaultTempDir() ? " --temp-dir " + f.temp_dir : "") << "\n"
              << "Logs: " << session->path() << "/logs\n"
              << std::flush;
  }
  if (role && role->node_rank == 0 && !command.empty()) {
    std::string address = config["address"];
    Status joined =
        WaitForNodes(*session, address, f.token, role->num_nodes, f.join_timeout_s * 1000);
    if (!joined.ok()) {
      std::cerr << "rayx start: " << joined.message() << "\n";
      (void)StopCluster(address, f.token, "the job did not start: " + joined.message(), 5000);
      StopSessionProcesses(*session);
      int signo = PendingStopSignal();
      return joined.code() == StatusCode::kCancelled && signo ? 128 + signo : 1;
    }
    return RunCommandThenStopCluster(*session, command, address, f.token);
  }
  if (f.block) return BlockUntilDone(*session);
  return 0;
}

}  // namespace rayx::cli
