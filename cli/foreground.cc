// `rayx start` in the foreground: waiting on its daemons, and node rank 0's
// command of `rayx start --from-env` (foreground.h).
#include "foreground.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "common/address.h"
#include "common/process_control.h"
#include "common/process_spawn.h"
#include "platform_env.h"
#include "protocol/messages.h"
#include "rayx/cluster_status.h"
#include "transport/sync_client.h"

namespace rayx::cli {
namespace {

constexpr int64_t kPollMs = 200;
// How long node rank 0 waits for a daemon's exit to show after its command
// was SIGKILLed by someone else (the dying agent's reaper, say).
constexpr int64_t kDaemonExitGraceMs = 2000;

sigset_t ForegroundSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGCHLD);
  return set;
}

// The name `processes` records `pid` under ("agent", "head"), or "".
std::string NameOf(const std::map<std::string, detail::ProcessRecord>& processes, pid_t pid) {
  for (const auto& [name, record] : processes) {
    if (record.pid == pid) return name;
  }
  return "";
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

// Makes process group `group` the terminal's foreground group. SIGTTOU is
// blocked meanwhile: a process of a background group may hand it over too.
void TakeTerminal(pid_t group) {
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  sigprocmask(SIG_BLOCK, &ttou, &old);
  (void)tcsetpgrp(STDIN_FILENO, group);
  sigprocmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace

int PendingStopSignal() {
  sigset_t pending;
  if (sigpending(&pending) != 0) return 0;
  if (sigismember(&pending, SIGTERM)) return SIGTERM;
  if (sigismember(&pending, SIGINT)) return SIGINT;
  return 0;
}

void BlockForegroundSignals() {
  sigset_t set = ForegroundSignals();
  sigprocmask(SIG_BLOCK, &set, nullptr);
}

void StopSessionProcesses(const detail::Session& session) {
  std::vector<detail::ProcessRecord> records;
  auto processes = session.Processes();
  // The agent first: it tells the head it leaves while the head still runs.
  for (const char* name : {"agent", "head"}) {
    auto it = processes.find(name);
    if (it == processes.end()) continue;
    detail::SignalGroup(it->second, SIGTERM);
    records.push_back(it->second);
  }
  for (const auto& r : detail::WaitForExit(records, 10000)) detail::SignalGroup(r, SIGKILL);
  detail::WaitForExit(records, 5000);
  // Reap what exited (they are our children); nothing else of ours is left.
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  for (const auto& [name, record] : processes) session.ForgetProcess(name);
}

int BlockUntilDone(const detail::Session& session) {
  sigset_t set = ForegroundSignals();
  // The daemons this process started, as recorded now: `rayx stop` removes
  // the pid files before they exit, so they are never read again here.
  const auto started = session.Processes();
  std::cout << "--block: running until a rayx process exits or Ctrl-C.\n" << std::flush;
  int code = 0;
  while (true) {
    int signo = 0;
    sigwait(&set, &signo);
    if (signo != SIGCHLD) break;  // SIGINT or SIGTERM
    // Every exited child is reaped, but only a daemon's exit ends the wait: as
    // a container's PID 1 (or a subreaper) this process also inherits orphans,
    // such as what a lease left behind and its agent killed.
    std::string ended;
    int status = 0;
    pid_t pid;
    while (ended.empty() && (pid = waitpid(-1, &status, WNOHANG)) > 0) ended = NameOf(started, pid);
    if (ended.empty()) continue;
    if (ended == "agent" && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      std::cout << "rayx start: the node agent left cleanly (the cluster was stopped)\n";
    } else {
      std::cerr << "rayx start: the " << ended << " (pid " << pid << ") " << DescribeExit(status)
                << "; stopping the others\n";
      code = 1;
    }
    break;
  }
  StopSessionProcesses(session);
  return code;
}

Status WaitForNodes(const detail::Session& session, const std::string& address,
                    const std::string& token, int num_nodes, int64_t timeout_ms) {
  int64_t deadline = NowMs() + timeout_ms;
  size_t reported = 0;
  std::set<std::string> joined_ranks;
  while (true) {
    if (int signo = PendingStopSignal()) {
      return Status::Cancelled("signal " + std::to_string(signo) + " while waiting for the nodes");
    }
    for (const auto& [name, record] : session.Processes()) {
      if (!detail::IsRunning(record)) {
        return Status::Unavailable("the " + name + " (pid " + std::to_string(record.pid) +
                                   ") exited while waiting for the nodes; see " +
                                   session.LogPath(name));
      }
    }
    auto status = QueryClusterStatus(address, token, 2000);
    if (status.ok()) {
      joined_ranks.clear();
      for (const auto& node : status->nodes) {
        if (!node.alive) continue;
        auto rank = node.labels.find(kNodeRankLabel);
        if (rank != node.labels.end()) joined_ranks.insert(rank->second);
      }
      size_t alive = status->AliveNodeCount();
      if (alive != reported) {
        reported = alive;
        std::cout << "rayx start: " << alive << " of " << num_nodes << " nodes have joined\n"
                  << std::flush;
      }
      if (alive >= static_cast<size_t>(num_nodes)) return Status::OK();
    }
    if (NowMs() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
  }
  std::string missing;
  int count = 0;
  for (int rank = 0; rank < num_nodes; ++rank) {
    if (joined_ranks.count(std::to_string(rank))) continue;
    if (++count <= 20) missing += (missing.empty() ? "" : ", ") + std::to_string(rank);
  }
  if (count > 20) missing += ", ... (" + std::to_string(count) + " in all)";
  return Status::Unavailable(
      "node rank" + std::string(count == 1 ? " " : "s ") + missing + " of " +
      std::to_string(num_nodes) + " did not join within " + std::to_string(timeout_ms / 1000) +
      " s: check that every node runs `rayx start --from-env` with the same RAYX_TOKEN and "
      "reaches this node at " +
      address + " (--join-timeout-s waits longer)");
}

Result<int> StopCluster(const std::string& address, const std::string& token,
                        const std::string& reason, int64_t timeout_ms) {
  protocol::StopClusterRequest request;
  request.token = token;
  request.reason = reason;
  auto reply = transport::CallOnce<protocol::StopClusterReply>(
      address, transport::ClientSecurity::ClusterToHead(token), request, 5000);
  if (!reply.ok()) return reply.status();
  // The agents hear it in their next heartbeat reply and leave.
  int64_t deadline = NowMs() + timeout_ms;
  int alive = static_cast<int>(reply->alive_nodes);
  while (alive > 0 && NowMs() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto status = QueryClusterStatus(address, token, 2000);
    if (status.ok()) alive = static_cast<int>(status->AliveNodeCount());
  }
  return alive;
}

int RunCommandThenStopCluster(const detail::Session& session,
                              const std::vector<std::string>& command, const std::string& address,
                              const std::string& token) {
  std::cout << "rayx start: running `" << command[0] << (command.size() > 1 ? " ..." : "")
            << "` on this node (RAYX_ADDRESS=" << address << ")\n"
            << std::flush;
  // Started from a terminal, the command gets it as a shell would give it
  // (its own process group in the foreground): it may read stdin, and Ctrl-C
  // reaches it directly.
  const bool give_terminal = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
  detail::SpawnOptions launch;
  launch.argv = command;
  launch.search_path = true;
  launch.set_env = {"RAYX_ADDRESS=" + address, "RAYX_TOKEN=" + token,
                    "RAYX_START_COMMAND=" + session.path()};  // the last: the group's marker
  launch.unset_env = {"RAYX_EXIT_WITH_PID"};  // the command's own `rayx start` is its business
  launch.group = detail::SpawnOptions::Group::kNewGroup;
  launch.take_terminal = give_terminal;
  launch.error_prefix = "rayx start: ";
  Result<pid_t> spawned = detail::Spawn(launch);
  if (!spawned.ok()) {
    std::cerr << "rayx start: cannot start the command: " << spawned.status().message() << "\n";
    StopSessionProcesses(session);
    return 1;
  }
  const pid_t child = *spawned;
  setpgid(child, child);  // also here: whichever runs first
  if (give_terminal) TakeTerminal(child);
  // Recorded with the agent's lease groups: should this process be killed, the
  // agent follows it (ParentWatch) and its reaper kills the command's group.
  std::string marker = "RAYX_START_COMMAND=" + session.path();
  if (auto started = detail::ProcessStartTime(child); started.ok()) {
    (void)detail::RecordGroup(session.GroupDir(), {child, *started}, marker);
  }

  sigset_t set = ForegroundSignals();
  const auto daemons = session.Processes();  // as BlockUntilDone's `started`
  int command_status = 0;
  bool command_done = false;
  std::string daemon_died;
  int64_t kill_at_ms = 0;  // after the first forwarded signal
  int first_signal = 0;
  while (!command_done) {
    int signo = 0;
    if (kill_at_ms > 0) {
      int64_t left = std::max<int64_t>(kill_at_ms - NowMs(), 0);
      timespec wait{static_cast<time_t>(left / 1000), static_cast<long>(left % 1000) * 1000000};
      signo = sigtimedwait(&set, nullptr, &wait);
      if (signo < 0) {
        if (errno == EAGAIN) {
          kill(-child, SIGKILL);
          kill_at_ms = 0;
        }
        continue;
      }
    } else {
      sigwait(&set, &signo);
    }
    if (signo == SIGCHLD) {
      siginfo_t info{};
      // Peek at each exited child before reaping it: the command's exit is
      // handled while its zombie holds the pid, so that its process group
      // number cannot name anybody else's group yet. Other children are our
      // daemons, or orphans inherited as a container's PID 1.
      while (!command_done && waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
             info.si_pid != 0) {
        pid_t pid = info.si_pid;
        if (pid == child) {
          kill(-child, SIGKILL);  // what the command left running in its group
          waitpid(child, &command_status, 0);
          detail::ForgetGroup(session.GroupDir(), child);
          command_done = true;
          break;
        }
        int status = 0;
        waitpid(pid, &status, 0);
        std::string name = NameOf(daemons, pid);
        if (!name.empty() && daemon_died.empty()) {
          daemon_died =
              "the " + name + " (pid " + std::to_string(pid) + ") " + DescribeExit(status);
          std::cerr << "rayx start: " << daemon_died << "; stopping the command\n";
          kill(-child, SIGTERM);
          kill_at_ms = NowMs() + 10000;
        }
      }
      continue;
    }
    // SIGINT or SIGTERM: the platform stops this node.
    if (first_signal == 0) {
      first_signal = signo;
      std::cerr << "rayx start: signal " << signo << ": stopping the command\n";
      kill(-child, SIGTERM);
      kill_at_ms = NowMs() + 10000;
    } else {
      kill(-child, SIGKILL);
    }
  }
  // A daemon that died at the same moment is why the command ended: name it,
  // whichever exit waitid happened to give first. The agent's reaper kills
  // the command's group when the agent dies, and its parent-death signal can
  // come before the dying agent is a zombie we can see: a command killed by a
  // SIGKILL nobody here sent waits up to kDaemonExitGraceMs, on SIGCHLD, for a
  // daemon's exit.
  const bool killed_unasked = WIFSIGNALED(command_status) &&
                              WTERMSIG(command_status) == SIGKILL && first_signal == 0;
  const int64_t grace_until = killed_unasked ? NowMs() + kDaemonExitGraceMs : 0;
  while (daemon_died.empty()) {
    siginfo_t info{};
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) break;  // no child left
    if (info.si_pid == 0) {
      const int64_t left = grace_until - NowMs();
      if (left <= 0) break;
      sigset_t chld;
      sigemptyset(&chld);
      sigaddset(&chld, SIGCHLD);
      timespec wait{static_cast<time_t>(left / 1000), static_cast<long>(left % 1000) * 1000000};
      (void)sigtimedwait(&chld, nullptr, &wait);
      continue;
    }
    int status = 0;
    waitpid(info.si_pid, &status, 0);
    std::string name = NameOf(daemons, info.si_pid);
    if (name.empty()) continue;
    daemon_died = "the " + name + " (pid " + std::to_string(info.si_pid) + ") " +
                  DescribeExit(status);
    std::cerr << "rayx start: " << daemon_died << "\n";
  }
  if (give_terminal) TakeTerminal(getpgrp());
  int code =
      WIFSIGNALED(command_status) ? 128 + WTERMSIG(command_status) : WEXITSTATUS(command_status);
  std::cout << "rayx start: the command " << DescribeExit(command_status) << "\n" << std::flush;
  if (!daemon_died.empty()) {
    // The other nodes should not wait for a head that is about to go.
    (void)StopCluster(address, token, "node rank 0's " + daemon_died, 5000);
    StopSessionProcesses(session);
    return 1;
  }
  auto left = StopCluster(address, token,
                          "the command of node rank 0 " + DescribeExit(command_status), 10000);
  if (!left.ok()) {
    std::cerr << "rayx start: could not stop the cluster: " << left.status().message() << "\n";
  } else if (*left > 0) {
    std::cerr << "rayx start: " << *left << " node agents had not left 10 s after the stop\n";
  } else {
    std::cout << "rayx start: stopped the cluster: every node agent left\n";
  }
  StopSessionProcesses(session);
  return code;
}

}  // namespace rayx::cli
