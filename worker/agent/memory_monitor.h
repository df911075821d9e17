// The node agent's memory monitor: when the machine's memory use passes a
// threshold, one worker gives up its work (Ray's OOM prevention).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rayx/ids.h"
#include "rayx/status.h"

namespace rayx::worker {

// Design: Ray's rule, kept small. Every `period_ms` the agent reads the
// machine's memory (MemTotal - MemAvailable of /proc/meminfo, what the kernel
// could not give back without swapping). Above `threshold` (a fraction of
// MemTotal) it picks one of its workers: task workers before actors (an
// actor's state is lost with it), the most recently started first (the least
// work lost, and usually the one that grew). The victim is asked first
// (SIGUSR1): a Python worker raises OutOfMemoryError inside the call it runs,
// which its caller gets, and the memory the call held goes as the exception
// unwinds; a C++ worker ignores the signal. If memory is still above the
// threshold `grace_ms` later and the victim still runs, it is killed (its
// lease's process group, through the worker pool: the pids the agent
// recorded, never a name); its callers see the worker die. Only one victim at
// a time: a new one is chosen once the last was killed, or recovered memory
// below the threshold.
//
// Not thread-safe: the agent's loop calls Tick. The I/O goes through Deps, so
// unit tests drive it with made-up readings.
class MemoryMonitor {
 public:
  struct Options {
    double threshold = 0.95;  // of MemTotal; >= 1 turns the monitor off
    int64_t period_ms = 250;  // 0 turns it off
    int64_t grace_ms = 2000;  // from asking to killing
  };
  struct Usage {
    uint64_t total = 0, used = 0;  // bytes
  };
  struct Candidate {
    pid_t pid = 0;
    LeaseId lease_id;
    bool for_actor = false;
    uint64_t started = 0;  // larger: started later
  };
  struct Deps {
    std::function<Result<Usage>()> read_usage;
    std::function<std::vector<Candidate>()> candidates;  // ready workers
    std::function<bool(pid_t pid)> alive;
    std::function<void(pid_t pid)> ask;              // SIGUSR1
    // Kills the lease's process group; `why` says so to its callers (the
    // worker's exit is reported with it: they raise OutOfMemoryError).
    std::function<void(const LeaseId& lease, const std::string& why)> kill;
    std::function<void(const std::string& line)> log;
  };

  MemoryMonitor(Options options, Deps deps) : options_(options), deps_(std::move(deps)) {}

  bool enabled() const { return options_.period_ms > 0 && options_.threshold < 1.0; }
  int64_t period_ms() const { return options_.period_ms; }
  // One check at `now_ms`.
  void Tick(int64_t now_ms);

  // Reads /proc/meminfo (or `path`): MemTotal and MemTotal - MemAvailable.
  static Result<Usage> ReadMeminfo(const std::string& path = "/proc/meminfo");
  // Parses the text of /proc/meminfo.
  static Result<Usage> ParseMeminfo(const std::string& text);

  // Workers asked and killed so far (tests, logs).
  uint64_t asked() const { return asked_; }
  uint64_t killed() const { return killed_; }

 private:
  struct Victim {
    Candidate who;
    int64_t asked_at_ms = 0;
    bool killed = false;  // waits for it to be gone before choosing again
  };

  Options options_;
  Deps deps_;
  std::optional<Victim> victim_;
  uint64_t asked_ = 0, killed_ = 0;
  bool said_no_worker_ = false;  // logged once per episode above the threshold
  bool said_unreadable_ = false;
};

}  // namespace rayx::worker
