// Starting a program in a child process: the one launcher every place rayx
// starts one goes through (daemons, workers, lease processes, the CLI's
// helpers and foreground command).
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "rayx/status.h"

namespace rayx::detail {

// Design: everything the child needs (its argv, its whole environment, the
// descriptors it gets) is built in the parent before the fork; between fork
// and exec the child makes only async-signal-safe calls (the parent may have
// threads: a malloc lock held by one of them at the fork would never be let
// go in the child). The child's setup is in one order: its session or group,
// death with its parent, its descriptors, its signals, its directory, exec.
struct SpawnOptions {
  // argv[0] is the program: a path, or a name looked up on the child's PATH
  // (its environment's, below) when `search_path`. REQUIRES: not empty.
  std::vector<std::string> argv;
  bool search_path = false;
  // The child's environment: this process's (unless `clear_env`), without
  // `unset_env`, then `set_env` ("NAME=value", later entries win).
  std::vector<std::string> set_env;
  std::vector<std::string> unset_env;
  bool clear_env = false;
  std::string cwd;  // "": this process's
  // 0, 1, 2: -1 keeps this process's; kDevNull reads (writes) nothing.
  static constexpr int kDevNull = -2;
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  // More descriptors, at the numbers the child finds them at (from, to),
  // e.g. a ready pipe at 3. Sources may be any open descriptors, close-on-exec
  // or not; targets are left open across the exec.
  std::vector<std::pair<int, int>> pass_fds;
  enum class Group {
    kInherit,
    kNewSession,  // setsid: its own session and process group (daemons, workers)
    kNewGroup,    // setpgid(0, 0): its own process group in this session
  };
  Group group = Group::kInherit;
  // With kNewGroup: the child's group becomes the foreground of the terminal
  // on stdin (as a shell gives a command; the parent does the same, whichever
  // runs first).
  bool take_terminal = false;
  // SIGKILL when this process dies (PR_SET_PDEATHSIG; a parent that died
  // before the child set it makes the child exit at once).
  bool die_with_parent = false;
  // Signals set back to their default disposition (SIGPIPE always); the
  // child's signal mask is emptied (a parent waiting in sigwait blocks some).
  std::vector<int> default_signals;
  // Where the child says why it could not start (one line: `error_prefix`,
  // then "cannot enter DIR: ..." or "cannot execute PROGRAM: ..."). -1: its
  // stderr.
  int error_fd = -1;
  std::string error_prefix;
};

// Forks and execs as `options` say. Returns the child's pid; Internal when
// the fork fails. Whether the exec succeeded is the caller's to learn (an
// error_fd pipe, close-on-exec, reads EOF on success; the child exits 126
// when it cannot enter its directory, 127 when it cannot execute).
Result<pid_t> Spawn(const SpawnOptions& options);

}  // namespace rayx::detail
