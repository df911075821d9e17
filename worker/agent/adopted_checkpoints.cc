#include "agent/adopted_checkpoints.h"

#include "common/logging.h"
#include "protocol/codec.h"
#include "protocol/data_messages.h"

namespace rayx::worker {

std::vector<protocol::AdoptCheckpointsRequest> AdoptedCheckpoints::Requests() {
  std::vector<protocol::AdoptCheckpointsRequest> out;
  if (read_) return out;
  read_ = true;
  // One more than the bound: to know whether some were left.
  std::vector<CheckpointFiles::KeptRecord> kept = files_.Records(kMaxRecords + 1, kMaxBytes + 1);
  uint64_t read_bytes = 0;
  for (const auto& record : kept) read_bytes += record.bytes.size();
  if (kept.size() > kMaxRecords || read_bytes >= kMaxBytes) {
    RAYX_LOG(Warning) << files_.dir() << " holds more than " << kMaxRecords
                      << " checkpoint records or " << kMaxBytes
                      << " bytes of them: the first go to the head, the rest stay on disk "
                         "(`rayx train list` does not show them)";
    if (kept.size() > kMaxRecords) kept.resize(kMaxRecords);
  }
  size_t bytes = 0;
  for (auto& record : kept) {
    // The file holds the request the committing rank sent (its key and record).
    protocol::DecodeLimits limits;
    limits.max_str = protocol::KeepCheckpointRecordRequest::kMaxRecordBytes;
    auto parsed = protocol::Decode<protocol::KeepCheckpointRecordRequest>(record.bytes, limits);
    if (!parsed.ok() || parsed->checkpoint_dir != record.checkpoint_dir ||
        parsed->record.size() + parsed->key.size() > kMaxBatchBytes) {
      RAYX_LOG(Warning) << "ignored the unreadable checkpoint record in " << files_.dir() << "/"
                        << record.checkpoint_dir;
      continue;
    }
    const size_t size = parsed->record.size() + parsed->key.size();
    if (out.empty() || out.back().keys.size() >= protocol::AdoptCheckpointsRequest::kMaxRecords ||
        bytes + size > kMaxBatchBytes) {
      out.emplace_back();
      bytes = 0;
    }
    bytes += size;
    dir_of_key_[parsed->key] = record.checkpoint_dir;
    out.back().keys.push_back(std::move(parsed->key));
    out.back().records.push_back(std::move(parsed->record));
  }
  return out;
}

size_t AdoptedCheckpoints::OnReply(const protocol::AdoptCheckpointsReply& reply) {
  size_t removed = 0;
  for (const std::string& key : reply.dropped) {
    auto it = dir_of_key_.find(key);
    if (it == dir_of_key_.end()) continue;
    if (files_.Remove(it->second).ok()) ++removed;
    dir_of_key_.erase(it);
  }
  for (const std::string& key : reply.adopted) dir_of_key_.erase(key);
  return removed;
}

}  // namespace rayx::worker
