// Command execution with captured output.
#include "util/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>
#include <string>

namespace rayx::testing {

std::string CommandResult::Describe() const {
  return "exit " + std::to_string(exit_code) + (timed_out ? " (timed out)" : "") +
         "\n--- stdout ---\n" + out + "--- stderr ---\n" + err;
}

namespace {

// Forks; the child runs `redirect` (which points stdout and stderr somewhere),
// reads stdin from /dev/null, adds `env` and execs `argv`. Returns the child's pid.
pid_t ForkExec(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
               const std::function<void()>& redirect) {
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    redirect();
    dup2(open("/dev/null", O_RDONLY), 0);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    execv(cargv[0], cargv.data());
    dprintf(2, "exec %s: %s\n", cargv[0], strerror(errno));
    _exit(127);
  }
  return pid;
}

}  // namespace

CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env, int64_t timeout_ms) {
  CommandResult result;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) return result;
  pid_t pid = ForkExec(argv, env, [&] {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
  });
  close(out_pipe[1]);
  close(err_pipe[1]);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_count = 2;
  while (open_count > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      result.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, static_cast<int>(left)) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!result.timed_out && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

bool WaitUntil(const std::function<bool()>& done, int64_t timeout_ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

bool PidAlive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  size_t close = line.rfind(')');
  return close == std::string::npos || line.size() < close + 3 || line[close + 2] != 'Z';
}

BackgroundCommand BackgroundCommand::Start(const std::vector<std::string>& argv,
                                           const std::string& dir,
                                           const std::map<std::string, std::string>& env,
                                           const std::string& name) {
  BackgroundCommand b;
  b.out_path_ = dir + "/" + name + ".out";
  b.err_path_ = dir + "/" + name + ".err";
  b.pid_ = ForkExec(argv, env, [&] {
    dup2(::open(b.out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 1);
    dup2(::open(b.err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
  });
  return b;
}

BackgroundCommand::BackgroundCommand(BackgroundCommand&& other) noexcept
    : pid_(other.pid_),
      out_path_(std::move(other.out_path_)),
      err_path_(std::move(other.err_path_)) {
  other.pid_ = -1;
}

BackgroundCommand::~BackgroundCommand() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

int BackgroundCommand::Wait(int64_t timeout_ms) {
  if (pid_ <= 0) return -1;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      pid_ = -1;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

namespace {
std::string ReadWhole(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
}  // namespace

std::string BackgroundCommand::Out() const { return ReadWhole(out_path_); }
std::string BackgroundCommand::Err() const { return ReadWhole(err_path_); }

}  // namespace rayx::testing
