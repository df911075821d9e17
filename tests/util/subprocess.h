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

// A command running in the background (argv[0] a path), `env` added, stdout
// and stderr in files `<dir>/<name>.out` and `.err`. Destroying it SIGKILLs the
// command if it still runs.
class BackgroundCommand {
 public:
  static BackgroundCommand Start(const std::vector<std::string>& argv, const std::string& dir,
                                 const std::map<std::string, std::string>& env = {},
                                 const std::string& name = "bg");
  BackgroundCommand(BackgroundCommand&& other) noexcept;
  BackgroundCommand& operator=(BackgroundCommand&&) = delete;
  ~BackgroundCommand();

  pid_t pid() const { return pid_; }
  // The exit code (128 + signal when a signal ended it), or -1 when it still
  // ran after `timeout_ms` (it is SIGKILLed then).
  int Wait(int64_t timeout_ms);
  std::string Out() const;
  std::string Err() const;

 private:
  BackgroundCommand() = default;
  pid_t pid_ = -1;
  std::string out_path_, err_path_;
};

// True while `pid` runs; a zombie (exited, not yet reaped) counts as gone.
bool PidAlive(pid_t pid);

// Checks `done` every 20 ms until it holds (true) or `timeout_ms` passes (false).
bool WaitUntil(const std::function<bool()>& done, int64_t timeout_ms);

}  // namespace rayx::testing
