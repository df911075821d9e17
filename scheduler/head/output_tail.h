// The last lines each job's workers and own processes (a submitted job's
// entrypoint, `rayx launch` commands) printed, kept by the head for the
// dashboard (drivers get their workers' lines as they come; this is for a
// person who opens a page later).
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <string>
#include <unordered_map>

#include "protocol/messages.h"
#include "rayx/ids.h"
#include "rayx/status.h"

namespace rayx::scheduler {

// Bounded twice: bytes per job (the oldest lines go first) and jobs (the job
// that printed least recently goes first). Not thread-safe.
class OutputTail {
 public:
  struct Options {
    size_t max_jobs = 64;                 // Default: 64
    size_t max_bytes_per_job = 64 * 1024; // Default: 64 KiB of lines
  };
  OutputTail() : OutputTail(Options{}) {}
  explicit OutputTail(Options options) : options_(options) {}

  // Workers' lines, or with notice.processes the job's own processes'.
  void Add(const protocol::WorkerOutputNotice& notice);
  // {"job_id": ..., "lines": [{"source": ..., "line": ...}, ...], "dropped": N,
  //  "process_lines": [...], "process_dropped": N}: the workers' lines, then
  // the job's processes'. NotFound when the job printed nothing the tail
  // still holds. `job` is hex.
  Result<std::string> Json(const std::string& job) const;
  size_t job_count() const { return jobs_.size(); }

 private:
  struct Line {
    std::string source;
    std::string text;
  };
  // The newest lines of one kind, at most max_bytes_per_job.
  struct Lines {
    std::deque<Line> lines;
    size_t bytes = 0;
    uint64_t dropped = 0;  // lines let go to stay in bounds
  };
  struct Tail {
    Lines workers;
    Lines processes;
    std::list<JobId>::iterator recency;  // its place in recency_
  };
  void Append(Lines& lines, const std::string& source, const std::string& text);
  static void AppendJson(std::string* out, const Lines& lines, const char* name,
                         const char* dropped);
  Options options_;
  std::unordered_map<JobId, Tail> jobs_;
  std::list<JobId> recency_;  // most recently written first
};

}  // namespace rayx::scheduler
