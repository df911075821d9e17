// The last lines each job's workers printed.
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
  for (const auto& batch : notice.batches) {
    for (const auto& line : batch.lines) {
      size_t size = batch.source.size() + line.size();
      if (size > options_.max_bytes_per_job) {
        ++tail.dropped;
        continue;
      }
      tail.lines.push_back({batch.source, line});
      tail.bytes += size;
      while (tail.bytes > options_.max_bytes_per_job) {
        tail.bytes -= tail.lines.front().source.size() + tail.lines.front().text.size();
        tail.lines.pop_front();
        ++tail.dropped;
      }
    }
  }
  while (jobs_.size() > options_.max_jobs) {
    jobs_.erase(recency_.back());
    recency_.pop_back();
  }
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
  out += ",\"lines\":[";
  bool first = true;
  for (const auto& line : tail->lines) {
    if (!first) out += ',';
    first = false;
    out += "{\"source\":";
    AppendJsonString(&out, line.source);
    out += ",\"line\":";
    AppendJsonString(&out, line.text);
    out += '}';
  }
  out += "],\"dropped\":" + std::to_string(tail->dropped) + "}";
  return out;
}

}  // namespace rayx::scheduler
