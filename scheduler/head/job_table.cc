// The head's table of jobs (job_table.h).
#include "head/job_table.h"

namespace rayx::scheduler {

bool JobTable::Add(const JobId& job_id, int64_t now_ms, bool supervised) {
  auto [it, added] = jobs_.try_emplace(job_id);
  it->second.last_heartbeat_ms = now_ms;
  if (supervised) it->second.supervised = true;
  return added;
}

bool JobTable::Heartbeat(const JobId& job_id, int64_t now_ms) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || it->second.finishing) return false;
  it->second.last_heartbeat_ms = now_ms;
  return true;
}

bool JobTable::Live(const JobId& job_id) const {
  auto it = jobs_.find(job_id);
  return it != jobs_.end() && !it->second.finishing;
}

bool JobTable::BeginFinish(const JobId& job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || it->second.finishing) return false;
  it->second.finishing = true;
  return true;
}

void JobTable::Erase(const JobId& job_id) { jobs_.erase(job_id); }

std::vector<JobId> JobTable::Silent(int64_t now_ms, int64_t timeout_ms) const {
  std::vector<JobId> silent;
  for (const auto& [id, job] : jobs_) {
    if (job.supervised || job.finishing) continue;
    if (now_ms - job.last_heartbeat_ms > timeout_ms) silent.push_back(id);
  }
  return silent;
}

void JobTable::ForEach(const std::function<void(const JobId& job_id)>& fn) const {
  for (const auto& [id, job] : jobs_) fn(id);
}

}  // namespace rayx::scheduler
