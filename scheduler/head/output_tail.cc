// The last lines each job's workers and processes printed.
#include "head/output_tail.h"

#include "common/json.h"

namespace rayx::scheduler {

void OutputTail::Add(const protocol::WorkerOutputNotice& notice) {
  auto [it, fresh] = jobs_.try_emplace(notice.job_id);
  Tail& tail = it->second;
  if (fresh) {
    recency_.push_front(notice.job_id);
    tail.recency = recency_.begin();
  } else {
    recency_.splice(recency_.begin(), recency_, tail.recency);
  }
  Lines& lines = notice.processes ? tail.processes : tail.workers;
  for (const auto& batch : notice.batches) {
    for (const auto& line : batch.lines) Append(lines, batch.source, line);
  }
  while (jobs_.size() > options_.max_jobs) {
    jobs_.erase(recency_.back());
    recency_.pop_back();
  }
}

void OutputTail::Append(Lines& lines, const std::string& source, const std::string& text) {
  size_t size = source.size() + text.size();
  if (size > options_.max_bytes_per_job) {
    ++lines.dropped;
    return;
  }
  lines.lines.push_back({source, text});
  lines.bytes += size;
  while (lines.bytes > options_.max_bytes_per_job) {
    lines.bytes -= lines.lines.front().source.size() + lines.lines.front().text.size();
    lines.lines.pop_front();
    ++lines.dropped;
  }
}

void OutputTail::AppendJson(std::string* out, const Lines& lines, const char* name,
                            const char* dropped) {
  *out += ",\"";
  *out += name;
  *out += "\":[";
  bool first = true;
  for (const auto& line : lines.lines) {
    if (!first) *out += ',';
    first = false;
    *out += "{\"source\":";
    AppendJsonString(out, line.source);
    *out += ",\"line\":";
    AppendJsonString(out, line.text);
    *out += '}';
  }
  *out += "],\"";
  *out += dropped;
  *out += "\":" + std::to_string(lines.dropped);
}

Result<std::string> OutputTail::Json(const std::string& job) const {
  auto id = JobId::FromHex(job);
  const Tail* tail = nullptr;
  if (id.ok()) {
    auto it = jobs_.find(*id);
    if (it != jobs_.end()) tail = &it->second;
  }
  if (tail == nullptr) {
    return Status::NotFound("job " + job.substr(0, 64) +
                            ": no output kept (none printed, or it is older than the "
                            "last " + std::to_string(options_.max_jobs) + " jobs')");
  }
  std::string out = "{\"job_id\":";
  AppendJsonString(&out, job);
  AppendJson(&out, tail->workers, "lines", "dropped");
  AppendJson(&out, tail->processes, "process_lines", "process_dropped");
  out += '}';
  return out;
}

}  // namespace rayx::scheduler
