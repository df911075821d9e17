// Train's node-kept checkpoints outlive the head: a node agent that adopted a
// checkpoint directory (a stopped cluster's, a crashed node's) hands the head
// the records kept there (AdoptCheckpointsRequest), and the head stores them
// in its KV again, where `rayx train` and a run resuming by its name find
// them. Records are opaque here: only their keys are read
// ("train/ckpt/<job>/<id>/<run>", KV namespace "rayx").
//
// A record is stored when its run is not known to the cluster: no record of
// the run that the KV holds was committed since this head started (each was
// adopted). Otherwise the KV is left as it is: a record it lacks while the
// run has committed ones was dropped (num_to_keep, `rayx train delete`) while
// the node was away, and the agent is told to remove its copy. A record
// dropped while a copy may have been away (its dropped-record key is in the
// KV, protocol::DroppedCheckpointKey) is removed too, known run or not.
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include "head/kv_store.h"
#include "protocol/kv_messages.h"

namespace rayx::scheduler {

class CheckpointAdoption {
 public:
  // The KV namespace of checkpoint records (their keys: kv_messages.h).
  static constexpr char kNamespace[] = "rayx";

  explicit CheckpointAdoption(KvStore& kv) : kv_(kv) {}

  struct Outcome {
    protocol::AdoptCheckpointsReply reply;
    std::vector<KvWaitAnswer> answered;  // KV waits the stored records ended
  };
  // A key that is not a record's is neither adopted nor dropped.
  Outcome Adopt(const protocol::AdoptCheckpointsRequest& req);

  // `rayx train delete`: the records `keys` go, each leaving its dropped-record
  // key (copies on nodes away now are removed when they come back).
  void Drop(const std::vector<std::string>& keys);

 private:
  // The runs with a record in the KV that was committed, not adopted (one
  // scan of the records; forgets adopted keys that are gone).
  std::unordered_set<std::string> CommittedRuns();

  KvStore& kv_;
  std::unordered_set<std::string> adopted_;  // keys stored from agents
};

}  // namespace rayx::scheduler
