// The one launcher of child processes.
#include "common/process_spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <unordered_map>

extern char** environ;

namespace rayx::detail {

namespace {

// Descriptors are moved out of the way of every target first (at or above
// this number), then placed: a source that is also a target is never lost.
constexpr int kSpareFdBase = 100;

std::string_view NameOf(const std::string& entry) {
  return std::string_view(entry).substr(0, entry.find('='));
}

std::vector<std::string> ChildEnvironment(const SpawnOptions& options) {
  std::unordered_map<std::string_view, size_t> set;  // name -> its (last) set_env entry
  for (size_t i = 0; i < options.set_env.size(); ++i) set[NameOf(options.set_env[i])] = i;
  std::vector<std::string> env;
  if (!options.clear_env) {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      std::string entry(*e);
      std::string_view name = NameOf(entry);
      if (set.count(name)) continue;
      bool unset = false;
      for (const auto& u : options.unset_env) unset = unset || name == u;
      if (!unset) env.push_back(std::move(entry));
    }
  }
  for (size_t i = 0; i < options.set_env.size(); ++i) {
    if (set.at(NameOf(options.set_env[i])) == i) env.push_back(options.set_env[i]);
  }
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Async-signal-safe: write(2) only; the errno's text from glibc's table.
void Say(int fd, const std::string& prefix, const std::string& what, int err) {
  const char* text = strerrordesc_np(err);
  if (text == nullptr) text = "unknown error";
  (void)!::write(fd, prefix.data(), prefix.size());
  (void)!::write(fd, what.data(), what.size());
  (void)!::write(fd, text, std::strlen(text));
  (void)!::write(fd, "\n", 1);
}

}  // namespace

Result<pid_t> Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return Status::InvalidArgument("Spawn: no program to run");
  // Everything the child uses, made now.
  std::vector<std::string> args = options.argv;
  std::vector<char*> argv = Pointers(args);
  std::vector<std::string> env = ChildEnvironment(options);
  std::vector<char*> envp = Pointers(env);
  const std::string cannot_enter = "cannot enter " + options.cwd + ": ";
  const std::string cannot_execute = "cannot execute " + options.argv[0] + ": ";
  std::vector<std::pair<int, int>> fds;  // (source, target); kDevNull sources open /dev/null
  if (options.stdin_fd != -1) fds.emplace_back(options.stdin_fd, STDIN_FILENO);
  if (options.stdout_fd != -1) fds.emplace_back(options.stdout_fd, STDOUT_FILENO);
  if (options.stderr_fd != -1) fds.emplace_back(options.stderr_fd, STDERR_FILENO);
  fds.insert(fds.end(), options.pass_fds.begin(), options.pass_fds.end());
  const pid_t parent = getpid();

  pid_t pid = fork();
  if (pid < 0) return Status::Internal(std::string("fork: ") + std::strerror(errno));
  if (pid > 0) return pid;

  // The child: async-signal-safe calls only from here on.
  if (options.group == SpawnOptions::Group::kNewSession) {
    setsid();
  } else if (options.group == SpawnOptions::Group::kNewGroup) {
    setpgid(0, 0);
    if (options.take_terminal) {
      sigset_t ttou;
      sigemptyset(&ttou);
      sigaddset(&ttou, SIGTTOU);
      sigprocmask(SIG_BLOCK, &ttou, nullptr);  // emptied below
      (void)tcsetpgrp(STDIN_FILENO, getpid());
    }
  }
  if (options.die_with_parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);  // the parent died before prctl
  }
  // Where failures are told, out of the way of the descriptors placed below.
  int error_fd = options.error_fd >= 0 ? fcntl(options.error_fd, F_DUPFD_CLOEXEC, kSpareFdBase)
                                       : -1;
  for (auto& [source, target] : fds) {
    (void)target;
    int from = source == SpawnOptions::kDevNull ? ::open("/dev/null", O_RDWR | O_CLOEXEC) : source;
    source = from < 0 ? -1 : fcntl(from, F_DUPFD_CLOEXEC, kSpareFdBase);
  }
  for (const auto& [source, target] : fds) {
    if (source >= 0) dup2(source, target);  // the target stays open across exec
  }
  if (error_fd < 0) error_fd = STDERR_FILENO;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &dfl, nullptr);
  for (int sig : options.default_signals) sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (!options.cwd.empty() && chdir(options.cwd.c_str()) != 0) {
    Say(error_fd, options.error_prefix, cannot_enter, errno);
    _exit(126);
  }
  if (options.search_path) {
    // execvpe would search the PATH of this process's environment: the
    // child's own (a job's `--env PATH=...`) is the one to search.
    environ = envp.data();
    execvp(argv[0], argv.data());
  } else {
    execve(argv[0], argv.data(), envp.data());
  }
  Say(error_fd, options.error_prefix, cannot_execute, errno);
  _exit(127);
}

}  // namespace rayx::detail
