// The jobs the head knows and whether each is live (Ray's GcsJobManager
// keeps the same table).
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "rayx/ids.h"

namespace rayx::scheduler {

// One entry per job: a driver's (it heartbeats) or a submitted job's
// (supervised: JobManager watches its entrypoint instead). A job is live
// from its first registration until its end begins (BeginFinish), and
// forgotten once its end is done (Erase). Persistence and what a job's end
// does (its leases, actors, groups) stay with LeaseManager, which owns this
// table. O(1) per job, except Silent and ForEach (O(jobs), once per period).
// Not thread-safe.
class JobTable {
 public:
  // Adds `job_id`, heard at `now_ms` (a driver's registration, a submitted
  // job, a job restored from the head's store), or refreshes its heartbeat
  // when it is known; `supervised` marks it so (never unmarks). True when
  // it was new.
  bool Add(const JobId& job_id, int64_t now_ms, bool supervised = false);
  // A driver's heartbeat: false when the job is unknown or ending (the
  // driver must stop).
  bool Heartbeat(const JobId& job_id, int64_t now_ms);
  // Known, and its end has not begun.
  bool Live(const JobId& job_id) const;
  // Begins the end of a live job (from now on it is not live); false when
  // it was not live.
  bool BeginFinish(const JobId& job_id);
  // Forgets a job (its end is done).
  void Erase(const JobId& job_id);
  // Live jobs of drivers silent for longer than `timeout_ms` (supervised
  // ones never are).
  std::vector<JobId> Silent(int64_t now_ms, int64_t timeout_ms) const;
  // Every known job, ending ones included.
  void ForEach(const std::function<void(const JobId& job_id)>& fn) const;
  size_t size() const { return jobs_.size(); }

 private:
  struct Job {
    int64_t last_heartbeat_ms = 0;
    bool finishing = false;
    bool supervised = false;
  };
  std::unordered_map<JobId, Job> jobs_;
};

}  // namespace rayx::scheduler
