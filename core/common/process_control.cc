// Daemon start-up and pid-exact process control.
#include "common/process_control.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <limits>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/logging.h"
#include "common/process_spawn.h"
#include "common/ready_pipe.h"

namespace rayx::detail {

std::string ProcessRecord::ToString() const {
  return std::to_string(pid) + " " + std::to_string(start_time);
}

Result<ProcessRecord> ProcessRecord::Parse(const std::string& text) {
  std::istringstream in(text);
  ProcessRecord record;
  long long pid = 0;
  std::string start;
  // A pid outside pid_t's range would wrap (to 1, 0 or -1: kill(-1) signals
  // everything), so it is refused, like a negative start time.
  if (!(in >> pid >> start) || pid <= 1 || pid > std::numeric_limits<pid_t>::max() ||
      start.empty() || start[0] < '0' || start[0] > '9') {
    return Status::InvalidArgument("malformed pid record '" + text + "'");
  }
  record.start_time = std::strtoull(start.c_str(), nullptr, 10);
  record.pid = static_cast<pid_t>(pid);
  return record;
}

Result<uint64_t> ProcessStartTime(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!in || !std::getline(in, stat)) return Status::NotFound("no process " + std::to_string(pid));
  // The command name (field 2) may hold spaces and parentheses: parse after the last ')'.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return Status::NotFound("unreadable stat");
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  char state = 0;
  rest >> state;  // field 3
  if (state == 'Z' || state == 'X') return Status::NotFound("process exited (zombie)");
  for (int i = 4; i < 22; ++i) rest >> field;
  uint64_t start = 0;
  if (!(rest >> start)) return Status::NotFound("unreadable stat");
  return start;
}

bool IsRunning(const ProcessRecord& record) {
  auto start = ProcessStartTime(record.pid);
  return start.ok() && *start == record.start_time;
}

bool SignalGroup(const ProcessRecord& record, int signo) {
  if (!IsRunning(record)) return false;
  // Our daemons lead their own process group (setsid), so the group reaches
  // the workers they started too; fall back to the pid alone.
  if (getpgid(record.pid) == record.pid) {
    return ::kill(-record.pid, signo) == 0;
  }
  return ::kill(record.pid, signo) == 0;
}

std::vector<ProcessRecord> WaitForExit(const std::vector<ProcessRecord>& records,
                                       int64_t timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<ProcessRecord> running = records;
  while (true) {
    // Reap any that are our own children, so they do not linger as zombies.
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    std::vector<ProcessRecord> still;
    for (const auto& r : running) {
      if (IsRunning(r)) still.push_back(r);
    }
    running = std::move(still);
    if (running.empty() || std::chrono::steady_clock::now() >= deadline) return running;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Status RecordGroup(const std::string& dir, const ProcessRecord& leader,
                   const std::string& marker) {
  std::string path = dir + "/" + std::to_string(leader.pid);
  std::ofstream out(path, std::ios::trunc);
  out << leader.ToString() << "\n" << marker << "\n";
  out.close();
  if (!out) return Status::Internal("cannot write " + path);
  return Status::OK();
}

void ForgetGroup(const std::string& dir, pid_t leader) {
  ::unlink((dir + "/" + std::to_string(leader)).c_str());
}

namespace {

// The process group of `pid` from /proc/<pid>/stat, or -1.
pid_t ProcessGroupOf(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return -1;
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 2));
  char state = 0;
  long long ppid = 0, pgrp = -1;
  if (!(rest >> state >> ppid >> pgrp)) return -1;
  return static_cast<pid_t>(pgrp);
}

// True when some process of group `group` has `entry` in its environment.
bool GroupCarries(pid_t group, const std::string& entry) {
  if (entry.empty()) return false;
  std::error_code ec;
  for (const auto& proc : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = proc.path().filename();
    if (pid.empty() || pid[0] < '0' || pid[0] > '9') continue;
    if (ProcessGroupOf(pid) != group) continue;
    std::ifstream in("/proc/" + pid + "/environ", std::ios::binary);
    std::string var;
    while (std::getline(in, var, '\0')) {
      if (var == entry) return true;
    }
  }
  return false;
}

}  // namespace

int KillRecordedGroups(const std::string& dir) {
  std::error_code ec;
  int signalled = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::ifstream in(entry.path());
    std::string line, marker;
    std::getline(in, line);
    std::getline(in, marker);
    auto record = ProcessRecord::Parse(line);
    if (record.ok() && entry.path().filename() == std::to_string(record->pid)) {
      auto start = ProcessStartTime(record->pid);
      bool leader_runs = start.ok() && *start == record->start_time;
      bool ours = leader_runs || (!start.ok() && GroupCarries(record->pid, marker));
      if (ours && ::kill(-record->pid, SIGKILL) == 0) ++signalled;
    }
    std::filesystem::remove(entry.path(), ec);
  }
  return signalled;
}

Result<pid_t> StartGroupReaper(const std::string& dir, const std::vector<std::string>& remove) {
  int watch[2], report[2];
  if (pipe2(watch, O_CLOEXEC) != 0) {
    return Status::Internal(std::string("pipe2: ") + std::strerror(errno));
  }
  if (pipe2(report, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(watch[0]);
    ::close(watch[1]);
    return Status::Internal(std::string("pipe2: ") + std::strerror(err));
  }
  const pid_t owner = getpid();
  pid_t middle = fork();
  if (middle == 0) {
    // Ignored before the reaper exists, so that no signal reaches it while it
    // cannot take it yet; it says its pid only once it is ready.
    std::signal(SIGINT, SIG_IGN);
    std::signal(SIGTERM, SIG_IGN);
    std::signal(SIGHUP, SIG_IGN);
    if (fork() != 0) _exit(0);
    // The reaper: every descriptor but the pipes' ends it uses and stdio
    // goes, so that it holds nothing of the owner's (a ready pipe, sockets).
    int keep = watch[0], tell = report[1];
    for (int fd = 3; fd < 1024; ++fd) {
      if (fd != keep && fd != tell) ::close(fd);
    }
    ::close_range(1024, ~0U, 0);
    pid_t self = getpid();
    ssize_t unused = ::write(tell, &self, sizeof self);
    (void)unused;
    ::close(tell);
    char byte;
    while (::read(keep, &byte, 1) < 0 && errno == EINTR) {
    }
    int killed = KillRecordedGroups(dir);
    if (killed > 0) {
      RAYX_LOG(Warning) << "pid " << owner
                        << " exited without stopping its leases: killed what was left of " << killed
                        << " lease process group(s)";
    }
    for (const std::string& path : remove) {
      // A directory left there means its owner did not end cleanly: say so.
      // One that cannot be removed (still written into) stops the list: what
      // follows it (its lock file) stays for the next one to find it.
      std::error_code ec;
      const bool left = std::filesystem::is_directory(path, ec);
      if (std::filesystem::remove_all(path, ec) > 0 && left) {
        RAYX_LOG(Warning) << "pid " << owner << " left " << path << " behind: removed it";
      }
      if (std::filesystem::exists(path, ec)) break;
    }
    _exit(0);
  }
  int fork_error = errno;
  ::close(watch[0]);
  ::close(report[1]);
  pid_t reaper = -1;
  if (middle > 0) {
    while (::read(report[0], &reaper, sizeof reaper) < 0 && errno == EINTR) {
    }
    while (waitpid(middle, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  ::close(report[0]);
  if (middle < 0 || reaper <= 0) {
    ::close(watch[1]);
    return Status::Internal(std::string("fork: ") +
                            std::strerror(middle < 0 ? fork_error : EAGAIN));
  }
  // watch[1] stays open (close-on-exec) for the rest of this process's life.
  return reaper;
}

std::string TailFile(const std::string& path, int n) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (static_cast<int>(lines.size()) > n) lines.pop_front();
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

std::string SelfDirectory() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

namespace {

// Kills a daemon that failed to start, and reaps it.
void KillAndReap(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

}  // namespace

Result<SpawnedDaemon> SpawnDaemon(const std::vector<std::string>& argv,
                                  const std::map<std::string, std::string>& env,
                                  const std::string& log_path, int64_t timeout_ms,
                                  const std::function<bool()>& cancelled) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::Internal("pipe2 failed: " + std::string(strerror(errno)));
  int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::Unavailable("cannot open log file " + log_path + ": " + strerror(errno));
  }
  SpawnOptions spawn;
  spawn.argv = argv;
  spawn.argv.insert(spawn.argv.end(), {"--ready-fd", "3"});
  for (const auto& [k, v] : env) spawn.set_env.push_back(k + "=" + v);
  spawn.group = SpawnOptions::Group::kNewSession;
  spawn.stdin_fd = SpawnOptions::kDevNull;
  spawn.stdout_fd = log_fd;
  spawn.stderr_fd = log_fd;
  spawn.pass_fds = {{fds[1], 3}};  // the ready pipe
  // The starter may ignore or block them (rayx start --block waits in
  // sigwait); a daemon takes them as the defaults (the mask is emptied).
  spawn.default_signals = {SIGINT, SIGTERM};
  spawn.error_fd = fds[1];
  spawn.error_prefix = "ERROR ";
  Result<pid_t> spawned = Spawn(spawn);
  ::close(fds[1]);
  ::close(log_fd);
  if (!spawned.ok()) {
    ::close(fds[0]);
    return spawned.status();
  }
  const pid_t pid = *spawned;

  // Read one line, until EOF or the deadline.
  std::string data;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  bool was_cancelled = false;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    if (cancelled && cancelled()) {
      was_cancelled = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int rc = poll(&p, 1, static_cast<int>(cancelled ? std::min<int64_t>(left, 200) : left));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;  // EOF: the daemon closed the pipe (or died)
    data.append(buf, static_cast<size_t>(n));
    if (data.find('\n') != std::string::npos) break;
  }
  ::close(fds[0]);
  std::string line = data.substr(0, data.find('\n'));
  std::string name = argv[0].substr(argv[0].rfind('/') + 1);

  SpawnedDaemon out;
  if (!was_cancelled && ParseReadyLine(line, &out.ready)) {
    auto start = ProcessStartTime(pid);
    if (!start.ok()) {
      return Status::Unavailable(name + " exited right after starting; see " + log_path);
    }
    out.record = {pid, *start};
    return out;
  }
  KillAndReap(pid);
  if (was_cancelled) return Status::Cancelled(name + "'s start was interrupted");
  if (line.rfind("ERROR ", 0) == 0) return Status::Unavailable(line.substr(6));
  std::string tail = TailFile(log_path, 5);
  if (timed_out) {
    return Status::TimedOut(name + " did not report ready within " +
                            std::to_string(timeout_ms / 1000) + " s; its log (" + log_path +
                            ") ends with:\n" + tail);
  }
  return Status::Unavailable(name + " exited during start-up; its log (" + log_path +
                             ") ends with:\n" + tail);
}

}  // namespace rayx::detail
