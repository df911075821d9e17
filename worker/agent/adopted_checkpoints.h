// The checkpoints in a checkpoint directory this agent adopted (one that an
// agent that is gone left: a stopped cluster's, a crashed node's). Once the
// node joined, their records go to the head (AdoptCheckpointsRequest, in
// batches) so that `rayx train` and a run resuming by its name find them
// again; the head's answer names the ones dropped while no agent held the
// directory, and their files go.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "object_store/checkpoint_files.h"
#include "protocol/kv_messages.h"

namespace rayx::worker {

class AdoptedCheckpoints {
 public:
  // At most this many records, and kMaxBytes of them, are read from a
  // directory (more are logged and left on disk), and a request's records
  // hold at most kMaxBatchBytes.
  static constexpr size_t kMaxRecords = 4096;
  static constexpr uint64_t kMaxBytes = 256u << 20;
  static constexpr size_t kMaxBatchBytes = 8u << 20;

  explicit AdoptedCheckpoints(CheckpointFiles files) : files_(std::move(files)) {}

  // The directory's records as requests to the head (none when it holds none).
  // Reads the directory once: later calls return nothing.
  std::vector<protocol::AdoptCheckpointsRequest> Requests();
  // The head's answer to one request: removes the dropped checkpoints from
  // the directory. Returns how many were removed.
  size_t OnReply(const protocol::AdoptCheckpointsReply& reply);

 private:
  CheckpointFiles files_;
  bool read_ = false;
  std::unordered_map<std::string, std::string> dir_of_key_;  // record key -> checkpoint dir
};

}  // namespace rayx::worker
