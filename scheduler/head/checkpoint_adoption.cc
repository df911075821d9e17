#include "head/checkpoint_adoption.h"

#include "common/logging.h"

namespace rayx::scheduler {

std::unordered_set<std::string> CheckpointAdoption::CommittedRuns() {
  std::unordered_set<std::string> runs;
  std::unordered_set<std::string> still_adopted;
  std::string after;
  while (true) {
    auto page = kv_.List(kNamespace, protocol::kCheckpointRecordPrefix, 0, after);
    if (!page.ok()) break;
    for (const std::string& key : page->keys) {
      if (adopted_.count(key)) {
        still_adopted.insert(key);
      } else if (std::string run = protocol::CheckpointRecordRun(key); !run.empty()) {
        runs.insert(std::move(run));
      }
    }
    if (!page->truncated || page->keys.empty()) break;
    after = page->keys.back();
  }
  adopted_ = std::move(still_adopted);
  return runs;
}

CheckpointAdoption::Outcome CheckpointAdoption::Adopt(
    const protocol::AdoptCheckpointsRequest& req) {
  Outcome out;
  const std::unordered_set<std::string> committed = CommittedRuns();
  for (size_t i = 0; i < req.keys.size() && i < req.records.size(); ++i) {
    const std::string& key = req.keys[i];
    const std::string run = protocol::CheckpointRecordRun(key);
    if (run.empty()) continue;
    auto present = kv_.Get(kNamespace, key);
    if (!present.ok()) continue;
    if (present->has_value()) continue;  // known: the cluster's already
    auto dropped = kv_.Get(kNamespace, protocol::DroppedCheckpointKey(key));
    if (committed.count(run) || (dropped.ok() && dropped->has_value())) {
      out.reply.dropped.push_back(key);
      continue;
    }
    auto put = kv_.Put(kNamespace, key, req.records[i], /*overwrite=*/false, JobId());
    if (!put.ok()) {
      RAYX_LOG(Warning) << "cannot adopt checkpoint record " << key << ": " << put.status();
      continue;
    }
    adopted_.insert(key);
    out.reply.adopted.push_back(key);
    for (auto& answer : put->answered) out.answered.push_back(std::move(answer));
  }
  return out;
}

void CheckpointAdoption::Drop(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    const std::string dropped = protocol::DroppedCheckpointKey(key);
    if (dropped.empty()) continue;
    // The mark first: an agent adopting meanwhile never finds neither.
    auto put = kv_.Put(kNamespace, dropped, "", /*overwrite=*/true, JobId());
    if (!put.ok()) RAYX_LOG(Warning) << "cannot mark " << key << " dropped: " << put.status();
    (void)kv_.Delete(kNamespace, key);
  }
}

}  // namespace rayx::scheduler
