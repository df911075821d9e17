// Starting daemons and stopping exactly the processes rayx started, for the CLI
// (`rayx start` / `rayx stop`), ParentWatch and the test harness.
//
// rayx never looks processes up by name. Every daemon it starts is recorded as
// (pid, start time): the start time (field 22 of /proc/PID/stat) tells our
// process apart from an unrelated one that reused the pid after ours exited.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "rayx/status.h"

namespace rayx::detail {

struct ProcessRecord {
  pid_t pid = 0;
  uint64_t start_time = 0;  // clock ticks after boot, from /proc
  std::string ToString() const;
  static Result<ProcessRecord> Parse(const std::string& text);
};

// The start time of `pid`, or NotFound when no such (non-zombie) process exists.
Result<uint64_t> ProcessStartTime(pid_t pid);

// True when the recorded process still runs (same pid and start time, not a zombie).
bool IsRunning(const ProcessRecord& record);

struct SpawnedDaemon {
  ProcessRecord record;
  std::map<std::string, std::string> ready;  // fields of its READY line
};

// Starts `argv` (argv[0] an absolute path) as a daemon in a new session (so it
// and its children form one process group), with stdout and stderr appended to
// `log_path`, stdin from /dev/null, the extra `env`, and "--ready-fd 3" added.
// Waits up to `timeout_ms` for its READY line. On "ERROR msg", early exit or
// timeout, the daemon is killed and reaped and the error returned, with the
// last lines of its log when it said nothing. `cancelled`, when given, is
// asked at least every 200 ms; once it says true the daemon is killed and
// Cancelled returned (a stop signal during a long start).
Result<SpawnedDaemon> SpawnDaemon(const std::vector<std::string>& argv,
                                  const std::map<std::string, std::string>& env,
                                  const std::string& log_path, int64_t timeout_ms,
                                  const std::function<bool()>& cancelled = nullptr);

// Sends `signo` to the process group led by the recorded process, after
// checking it is still ours. Returns false when it was already gone.
bool SignalGroup(const ProcessRecord& record, int signo);

// Waits until none of `records` runs, up to `timeout_ms`. Returns those still running.
std::vector<ProcessRecord> WaitForExit(const std::vector<ProcessRecord>& records,
                                       int64_t timeout_ms);

// Lease process groups, recorded so that what an agent started can be stopped
// after the agent itself died. A node agent starts every lease process as the
// leader of a new session (setsid), with PR_SET_PDEATHSIG: the leader dies
// with the agent, but what it started stays in its process group and would be
// orphaned. The agent records each group as "pid start-time" and a `marker`
// line (the environment entry its processes carry, "RAYX_LEASE_ID=<lease>") in
// a file named by the pid under `dir` (`rayx start` gives it
// <session>/groups), and removes it once the group is empty; `rayx stop`
// kills what the files still name.
Status RecordGroup(const std::string& dir, const ProcessRecord& leader,
                   const std::string& marker);
void ForgetGroup(const std::string& dir, pid_t leader);
// SIGKILLs each recorded group that is still ours and removes the records.
// Ours: its leader runs with the recorded start time, or, the leader gone, a
// member of the process group of that number carries the marker in its
// environment (the number may belong to another group by now: a pid is free
// again once its group died out). A leader's pid used by another process is
// left alone. Returns how many groups were signalled. Reads /proc. REQUIRES:
// the agent that recorded them no longer runs.
int KillRecordedGroups(const std::string& dir);

// Starts the reaper of this process's recorded groups: a process that waits
// until this one has exited, however it ended (SIGKILL included), then runs
// KillRecordedGroups(`dir`), removes the paths in `remove` in order (a node
// agent's object store, RAM in /dev/shm, then its lock file; it stops at one
// it cannot remove), logs what it did to stderr and exits. It reads
// a pipe whose only writer is this process, so EOF means this process is gone.
// It is a grandchild, not a child (no waitpid of ours ever sees it), stays in
// this process group and ignores SIGINT, SIGTERM and SIGHUP: a signal that
// stops this process leaves it to do its work. Returns its pid.
// REQUIRES: no other thread runs yet (the reaper is a fork without exec).
Result<pid_t> StartGroupReaper(const std::string& dir, const std::vector<std::string>& remove = {});

// The last `n` lines of a file ("" when unreadable).
std::string TailFile(const std::string& path, int n);

// The directory holding this executable (for finding rayx-head and rayx-agent).
std::string SelfDirectory();

}  // namespace rayx::detail
