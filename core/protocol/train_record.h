// The dashboard's copy of a Train run's reports: written by the run's rank 0
// (C++ and Python alike) into the head's KV, read by the head for the
// dashboard and /metrics.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <msgpack.hpp>

namespace rayx::protocol {

// Under (kTrainRecordNamespace, "<job hex>/<run name>"), job-scoped (it goes
// with the job), msgpack. The head decodes it with DecodeLimits: a record no
// rank wrote right is skipped, never trusted.
inline constexpr const char* kTrainRecordNamespace = "rayx.dashboard.train";
// Reports kept in `history`, at most (the newest).
inline constexpr size_t kTrainRecordHistory = 200;

struct TrainRunRecord {
  std::string run;
  std::string job;      // hex
  int32_t attempt = 0;  // 0, then one more per restart
  int64_t reports = 0;  // reports in all (history keeps the newest)
  std::vector<std::map<std::string, double>> history;  // numeric metrics per report
  int64_t checkpoints = 0;          // reports that stored a checkpoint
  uint64_t checkpoint_bytes = 0;    // their packed sizes, in all
  uint64_t last_checkpoint_bytes = 0;
  MSGPACK_DEFINE_MAP(run, job, attempt, reports, history, checkpoints, checkpoint_bytes,
                     last_checkpoint_bytes)
};

}  // namespace rayx::protocol
