// Running a command and capturing its output, for tests.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace rayx::testing {

struct CommandResult {
  int exit_code = -1;     // -1 when killed by a signal or timed out
  bool timed_out = false;
  std::string out;        // stdout
  std::string err;        // stderr
  std::string Describe() const;  // for assertion messages
};

// Runs argv (argv[0] a path) with `env` added, waits up to `timeout_ms` (then
// SIGKILLs it), and returns what it printed.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env = {},
                         int64_t timeout_ms = 60000);

// True while `pid` runs; a zombie (exited, not yet reaped) counts as gone.
bool PidAlive(pid_t pid);

// Checks `done` every 20 ms until it holds (true) or `timeout_ms` passes (false).
bool WaitUntil(const std::function<bool()>& done, int64_t timeout_ms);

}  // namespace rayx::testing
