// `rayx logs`: the head says which nodes there are (and which lease an actor or
// pid is); each node's object server lists its log directory and reads a file
// of it (ListLogsRequest, ReadLogRequest::file).
#include "logs_command.h"

#include <csignal>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "cluster_client.h"
#include "command_error.h"
#include "common/address.h"
#include "common/flags.h"
#include "common/session_dir.h"
#include "protocol/placement_messages.h"
#include "protocol/process_messages.h"
#include "status_format.h"

namespace rayx::cli {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;
void OnInterrupt(int) { g_interrupted = 1; }

constexpr int64_t kCallTimeoutMs = 5000;
constexpr uint64_t kReadChunk = 1 << 20;

struct Node {
  std::string address;         // its IP
  std::string object_address;  // "tcp://ip:port"
};

// What to print: a file of a node's log directory, or a process lease's log.
struct Target {
  Node node;
  std::string file;      // a file of the log directory, or
  LeaseId lease_id;      // a process lease's output (index 0)
  std::string what;      // for messages
};

std::string FormatSize(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

class Logs {
 public:
  Logs(std::unique_ptr<transport::SyncClient> head, transport::ClientSecurity security)
      : head_(std::move(head)), security_(std::move(security)) {}

  Status LoadState(const std::string& token) {
    protocol::ListStateRequest req;
    req.token = token;
    auto state = head_->Call<protocol::ListStateReply>(req, kCallTimeoutMs);
    if (!state.ok()) return state.status();
    state_ = std::move(*state);
    for (const auto& n : state_.nodes) {
      if (n.alive && !n.object_address.empty()) nodes_.push_back({n.address, n.object_address});
    }
    return Status::OK();
  }
  const std::vector<Node>& nodes() const { return nodes_; }
  const protocol::ListStateReply& state() const { return state_; }

  Result<transport::SyncClient*> AgentOf(const Node& node) {
    auto it = agents_.find(node.object_address);
    if (it != agents_.end()) return it->second.get();
    std::string hostport = node.object_address;
    if (hostport.rfind("tcp://", 0) == 0) hostport = hostport.substr(6);
    auto hp = ParseHostPort(hostport);
    if (!hp.ok()) return hp.status();
    auto client = transport::SyncClient::Connect(*hp, security_);
    if (!client.ok()) return client.status();
    transport::SyncClient* raw = client->get();
    agents_[node.object_address] = std::move(*client);
    return raw;
  }

  Result<protocol::ListLogsReply> List(const Node& node) {
    auto agent = AgentOf(node);
    if (!agent.ok()) return agent.status();
    return (*agent)->Call<protocol::ListLogsReply>(protocol::ListLogsRequest{}, kCallTimeoutMs);
  }

  // One read of `target` from `offset`: the reply (size) and the bytes.
  Result<std::pair<protocol::ReadLogReply, std::string>> Read(const Target& target,
                                                              uint64_t offset, uint64_t max) {
    auto agent = AgentOf(target.node);
    if (!agent.ok()) return agent.status();
    protocol::ReadLogRequest req;
    req.file = target.file;
    req.lease_id = target.lease_id;
    req.offset = offset;
    req.max_bytes = max;
    return (*agent)->CallWithPayload<protocol::ReadLogReply>(req, "", kCallTimeoutMs);
  }

 private:
  std::unique_ptr<transport::SyncClient> head_;
  transport::ClientSecurity security_;
  protocol::ListStateReply state_;
  std::vector<Node> nodes_;
  std::map<std::string, std::unique_ptr<transport::SyncClient>> agents_;
};

int ListAll(Logs& logs) {
  std::vector<std::vector<std::string>> rows = {{"NODE", "FILE", "SIZE", "MODIFIED"}};
  int failed = 0;
  for (const Node& node : logs.nodes()) {
    auto list = logs.List(node);
    if (!list.ok()) {
      std::cerr << "rayx logs: node " << node.address << ": " << list.status().message() << "\n";
      ++failed;
      continue;
    }
    for (const auto& f : list->files) {
      rows.push_back({node.address, f.name, FormatSize(f.size), FormatWallTime(f.modified_ms)});
    }
    if (list->truncated) {
      std::cerr << "rayx logs: node " << node.address << " has more files than "
                << protocol::ListLogsReply::kMaxLogFiles << " (the oldest are not listed) in "
                << list->directory << "\n";
    }
  }
  std::cout << FormatTable(rows);
  std::cout << "\nPrint one: rayx logs [--node IP] FILE  (--follow to keep printing, --tail N)\n";
  return failed == 0 ? 0 : 1;
}

// The node whose log directory holds `file`: --node's, else the only one that
// has it.
Result<Target> FindFile(Logs& logs, const std::string& file, const std::string& node_ip) {
  std::vector<Node> holders;
  for (const Node& node : logs.nodes()) {
    if (!node_ip.empty() && node.address != node_ip) continue;
    if (!node_ip.empty()) return Target{node, file, LeaseId(), file + " on " + node.address};
    auto list = logs.List(node);
    if (!list.ok()) continue;
    for (const auto& f : list->files) {
      if (f.name == file) holders.push_back(node);
    }
  }
  if (!node_ip.empty()) {
    return Status::NotFound("no alive node at " + node_ip + ": `rayx status` lists them");
  }
  if (holders.empty()) {
    return Status::NotFound("no alive node has a log file '" + file + "': `rayx logs` lists them");
  }
  if (holders.size() > 1) {
    std::string which;
    for (const auto& n : holders) which += (which.empty() ? "" : ", ") + n.address;
    return Status::InvalidArgument("nodes " + which + " all have '" + file +
                                   "': say which with --node IP");
  }
  return Target{holders[0], file, LeaseId(), file + " on " + holders[0].address};
}

// The log of the live actor named `actor`, or of the worker or process `pid`.
Result<Target> FindLease(Logs& logs, const std::string& actor, int64_t pid,
                         const std::string& node_ip) {
  const protocol::LeaseListEntry* found = nullptr;
  for (const auto& l : logs.state().leases) {
    bool match = !actor.empty() ? (l.kind == protocol::LeaseKind::kActor && l.actor_name == actor)
                                : (l.pid == pid && (node_ip.empty() || l.node_address == node_ip));
    if (!match) continue;
    if (found != nullptr) {
      return Status::InvalidArgument("more than one process has pid " + std::to_string(pid) +
                                     ": say which node with --node IP");
    }
    found = &l;
  }
  std::string what = !actor.empty() ? "actor '" + actor + "'" : "pid " + std::to_string(pid);
  if (found == nullptr) {
    return Status::NotFound(
        "no running " + what +
        " (`rayx list actors` and `rayx list workers` show the running ones; an ended one's log "
        "stays on its node: `rayx logs` lists the files)");
  }
  for (const Node& node : logs.nodes()) {
    if (node.address != found->node_address) continue;
    if (found->kind == protocol::LeaseKind::kProcess) return Target{node, "", found->lease_id, what};
    return Target{node, "worker-" + found->lease_id.Hex().substr(0, 12) + ".log", LeaseId(),
                  what + " (worker-" + found->lease_id.Hex().substr(0, 12) + ".log on " +
                      node.address + ")"};
  }
  return Status::NotFound(what + " runs on " + found->node_address + ", which is not alive");
}

// Where to start so that the last `lines` lines are printed (-1: all).
Result<uint64_t> TailOffset(Logs& logs, const Target& target, int64_t lines) {
  auto first = logs.Read(target, 0, 0);
  if (!first.ok()) return first.status();
  uint64_t size = first->first.size;
  if (lines < 0) return uint64_t{0};
  if (lines == 0) return size;
  // Read backwards in chunks until enough newlines are seen.
  uint64_t start = size;
  int64_t seen = 0;
  while (start > 0) {
    uint64_t from = start > kReadChunk ? start - kReadChunk : 0;
    auto chunk = logs.Read(target, from, start - from);
    if (!chunk.ok()) return chunk.status();
    const std::string& bytes = chunk->second;
    for (size_t i = bytes.size(); i-- > 0;) {
      // The newline before the last N lines starts them (the file's own last
      // newline ends its last line).
      if (bytes[i] == '\n' && from + i + 1 != size && ++seen == lines) return from + i + 1;
    }
    start = from;
  }
  return uint64_t{0};
}

}  // namespace

int LogsCommand(const std::vector<std::string>& args) {
  std::string address, temp_dir = detail::DefaultTempDir(), node_ip, actor;
  TokenFlags token_flags;
  bool follow = false, help = false;
  int64_t tail = 1000, pid = 0;
  FlagParser flags("rayx logs");
  flags.AddString("address", &address, "the head, HOST:PORT (default: $RAYX_ADDRESS, else the "
                                       "cluster this machine belongs to)");
  token_flags.Add(flags);
  flags.AddString("node", &node_ip, "the node (its IP) whose file to print");
  flags.AddString("actor", &actor, "print the log of the running actor of this name");
  flags.AddInt("pid", &pid, 1, int64_t{1} << 31, "print the log of the worker or process PID");
  flags.AddBool("follow", &follow, "keep printing what the file gains until Ctrl-C");
  flags.AddInt("tail", &tail, -1, int64_t{1} << 40, "start with the last N lines (default 1000; -1 all)");
  flags.AddString("temp-dir", &temp_dir, "session directory root (default /tmp/rayx)");
  flags.AddBool("help", &help, "show this help");
  std::vector<std::string> rest;
  std::vector<std::string> normalized;
  for (const auto& a : args) normalized.push_back(a == "-f" ? "--follow" : a);
  if (Status s = flags.Parse(normalized, &rest); !s.ok()) return Fail("logs", s.message(), 2);
  if (help) {
    std::cout << "usage: rayx logs                         list every alive node's log files\n"
                 "       rayx logs [--node IP] FILE        print a log file\n"
                 "       rayx logs --actor NAME | --pid PID  print a running actor's or "
                 "worker's log\n"
              << flags.Usage();
    return 0;
  }
  int chosen = (rest.size() == 1) + !actor.empty() + (pid != 0);
  if (rest.size() > 1 || chosen > 1) {
    return Fail("logs", "name one thing to print: a FILE, --actor NAME or --pid PID", 2);
  }
  auto cluster = ResolveCluster(address, token_flags, temp_dir);
  if (!cluster.ok()) {
    bool usage = cluster.status().code() == StatusCode::kInvalidArgument;
    return Fail("logs", cluster.status().message(), usage ? 2 : 1);
  }
  auto head = ConnectToHead(cluster->first, cluster->second);
  if (!head.ok()) return Fail("logs", head.status().message());
  auto security = AgentSecurityOf(**head, cluster->second);
  if (!security.ok()) return Fail("logs", security.status().message());
  Logs logs(std::move(*head), std::move(*security));
  if (Status s = logs.LoadState(cluster->second); !s.ok()) return Fail("logs", s.message());
  if (chosen == 0) return ListAll(logs);

  auto target = !rest.empty() ? FindFile(logs, rest[0], node_ip)
                              : FindLease(logs, actor, pid, node_ip);
  if (!target.ok()) return Fail("logs", target.status().message());
  auto offset = TailOffset(logs, *target, tail);
  if (!offset.ok()) return Fail("logs", target->what + ": " + offset.status().message());
  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);
  uint64_t at = *offset;
  while (!g_interrupted) {
    auto chunk = logs.Read(*target, at, kReadChunk);
    if (!chunk.ok()) {
      // A followed node that went away ends the command, saying so.
      return Fail("logs", target->what + ": " + chunk.status().message());
    }
    if (chunk->first.size < at) {
      std::cerr << "rayx logs: " << target->what << " was truncated; reading from its start\n";
      at = 0;
      continue;
    }
    at += chunk->second.size();
    std::cout << chunk->second << std::flush;
    if (at < chunk->first.size) continue;  // more to read now
    if (!follow || chunk->first.exited) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return 0;
}

}  // namespace rayx::cli
