// What this node's workers write to stdout and stderr, for their jobs'
// drivers (Ray's log_to_driver).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "protocol/messages.h"
#include "rayx/ids.h"

namespace rayx::worker {

// Design: a worker's stdout and stderr go to its file in the session's log
// directory, as always; the agent reads what each running worker's file
// gained every period (NodeAgent: kOutputPeriodMs) and sends the new whole
// lines to the head, one WorkerOutputNotice per job, which passes them to
// the job's drivers that asked. A worker never waits for anyone: it writes
// to a file, and the agent only reads.
//
// Bounded: at most `max_bytes_per_period` of one worker's output is read a
// period; the rest of what it wrote meanwhile is skipped, and one line says
// how much and which file holds all of it. A line longer than
// `max_line_bytes` is cut. A notice holds at most `max_notice_bytes` of
// lines (more make more notices).
//
// A worker names its calls' output with a marker line
// (protocol::kOutputNameMarker + name) before a call of another function or
// actor class; the lines after it go under "(name pid=N, ip=A)".
//
// Single-threaded: used on the agent's io_context only.
class OutputForwarder {
 public:
  struct Options {
    std::string node_ip;
    size_t max_bytes_per_period = 64 << 10;  // per worker
    size_t max_line_bytes = 16 << 10;
    size_t max_notice_bytes = 1 << 20;
  };
  // A worker running now, or a process of a process lease (`process`: its
  // lines go in notices marked WorkerOutputNotice::processes, under `name`
  // until a marker line names them).
  struct Worker {
    LeaseId lease_id;
    JobId job_id;
    pid_t pid = 0;
    std::string log_path;
    bool process = false;
    std::string name;
  };

  explicit OutputForwarder(Options options) : options_(std::move(options)) {}

  // Reads what each of `running` wrote since the last call, and, a last
  // time, what each worker followed before and missing now, or in `exited`
  // (gone before any Poll saw it), wrote; then forgets those. Returns the
  // new lines, as notices by job.
  std::vector<protocol::WorkerOutputNotice> Poll(const std::vector<Worker>& running,
                                                 const std::vector<Worker>& exited = {});

  size_t followed() const { return followed_.size(); }

 private:
  struct Followed {
    JobId job_id;
    pid_t pid = 0;
    std::string path;
    uint64_t offset = 0;   // read up to here
    std::string partial;   // the start of a line not ended yet
    bool skip_line = false;  // after skipped bytes: drop up to the next newline
    std::string name;      // from the last marker line
    bool running = false;  // seen in this Poll's `running`
    bool process = false;  // Worker::process
  };
  class Batcher;  // the notices being filled
  // Reads `f`'s new bytes (at most max_bytes_per_period) into `batcher`;
  // `last`: the worker is gone, so a line without its newline ends too.
  void Read(Followed& f, bool last, Batcher& batcher);
  // One line of `f`'s output: a marker names what follows; others go out.
  void Line(Followed& f, std::string_view line, Batcher& batcher);
  std::string Source(const Followed& f) const;

  Options options_;
  // By lease and pid (a process lease runs several processes).
  std::map<std::pair<LeaseId, pid_t>, Followed> followed_;
};

}  // namespace rayx::worker
