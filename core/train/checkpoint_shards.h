// Train's checkpoints kept by the nodes: every rank may report a shard (a
// directory); each shard is copied into its rank's node's checkpoint
// directory and to other nodes (node to node, never through the head), and a
// checkpoint is the union of the shards its ranks reported, committed once
// every rank reported. The head's KV keeps metadata only: which shard, which
// nodes, sizes and hashes.
//
// Ids: a committed checkpoint is "nodes:<checkpoint id>" (Checkpoint::id());
// its record is in the KV, not job-scoped (it outlives the job; the shards
// live on the nodes' disks until the run drops them or the nodes' agents
// stop).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "protocol/kv_messages.h"
#include "protocol/shard_manifest.h"
#include "rayx/cluster_status.h"
#include "train/train_session.h"

namespace rayx::train::detail {

inline constexpr const char* kNodesPrefix = "nodes:";

// A copy of a shard: on the node `node_id`, whose object server is
// `object_address` and checkpoint directory `dir`.
struct ShardReplica {
  std::string node_id;
  std::string object_address;
  std::string dir;
  MSGPACK_DEFINE_MAP(node_id, object_address, dir)
};

struct ShardRecord {
  int32_t rank = 0;
  std::string shard_dir;  // CheckpointFiles::ShardDir, the same on every node
  ShardManifest manifest;
  std::vector<ShardReplica> replicas;  // the rank's own node first
  MSGPACK_DEFINE_MAP(rank, shard_dir, manifest, replicas)
};

struct CheckpointRecord {
  std::string id;  // without the prefix
  std::string run;
  std::string job;
  int32_t world_size = 0;
  std::vector<ShardRecord> shards;  // by rank; ranks that reported none are absent
  uint64_t bytes = 0;
  int64_t committed_ms = 0;  // wall clock, ms since the epoch
  MSGPACK_DEFINE_MAP(id, run, job, world_size, shards, bytes, committed_ms)
};

// The KV key (namespace kKvNamespace) of every committed checkpoint's record
// starts with this; `rayx train` lists them (the layout: kv_messages.h).
using protocol::kCheckpointRecordPrefix;

// Where each copy of a shard lives now. A copy stays in its node's checkpoint
// directory when the node's agent stops (a whole cluster's stop, a crash), and
// the next agent started on that machine adopts the directory: the copy is on
// its recorded node while that node lives, else on the alive node whose
// checkpoint directory is the copy's.
class LiveCopies {
 public:
  explicit LiveCopies(const ClusterStatus& status);
  // The node holding `replica` now, or nullptr when none that is alive does.
  const NodeInfo* Holder(const ShardReplica& replica) const;

 private:
  std::map<std::string, const NodeInfo*> by_node_;  // alive nodes by id (hex)
  std::map<std::string, const NodeInfo*> by_dir_;   // and by checkpoint directory
};

// The checkpoints recorded for run `run` (ids "nodes:...", oldest committed
// first): what a run that this job has no report of resumes from (an earlier
// job's, or one from before the cluster restarted).
std::vector<std::string> RecordedCheckpoints(const std::string& run);

// Inside a rank: copies `dir` into this node's checkpoint directory and to
// `copies` - 1 other alive nodes (fewer when the cluster has fewer), and
// records the shard for rank 0 to commit. Throws std::runtime_error naming
// what failed (the copy, a node that would not take it).
ShardRecord StoreShard(const std::string& dir, const std::string& run_name,
                       const std::string& checkpoint_id, int rank, int copies);

// Rank 0, once every rank reported: the checkpoint made of the shards the
// ranks recorded (its record written to the KV). Returns its id
// ("nodes:...") and its bytes in all; an empty id when no rank reported one.
StoredCheckpoint CommitShards(const std::string& run_name, const std::string& checkpoint_id,
                              int world_size);

// The checkpoint `id`'s shards are removed from every node that holds one, and
// its record from the KV. A failure is logged, never thrown.
void DropShards(const std::string& id);

// Whether report id `id` ("a<attempt>-s<report>") came before `current`:
// an earlier attempt, or an earlier report of the same one. (Later ones may be
// in progress: other ranks go on while rank 0 commits.)
bool EarlierReport(const std::string& id, const std::string& current);

// The attempt number a new fit of run `run` by job `job` starts at: one past
// every attempt of which `kept` (the run's kept checkpoint ids) holds a
// report, "nodes:<job>/a<N>-s<M>/<run>" of this job or a storage folder
// "path:.../checkpoint_a<N>-s<M>", and, with `storage_path`, of every report
// folder in the run's folder there (an uncommitted one's files would mix with
// a new report's); 0 when none. A fit that resumes (or a second fit of the
// run in one job) so never reports under an id a kept checkpoint has, which
// would overwrite its copies and its record.
int FirstAttempt(const std::vector<std::string>& kept, const std::string& job,
                 const std::string& run, const std::string& storage_path = "");

// Rank 0, after committing `checkpoint_id`: the shards ranks recorded for
// earlier reports of the run (never committed: a rank failed before the
// barrier) are removed from the nodes holding them, with their records.
void SweepUncommittedShards(const std::string& run_name, const std::string& checkpoint_id);

// Makes checkpoint `id` a local directory and returns its path: rank `rank`'s
// own shard when the checkpoint has one (from this node's disk when it is
// there, else pulled from the first live copy), else (or with rank < 0) the
// whole checkpoint, every shard's files in one directory (a file several
// ranks reported: the lowest rank's). Throws std::runtime_error when every
// copy of a needed shard is gone, naming the shard and its nodes.
std::string FetchShards(const std::string& id, int rank);

// Of `kept` (a run's checkpoint ids, oldest first), the newest that can be
// restored: a package or a path, or a node-kept one whose every shard has a
// copy on a node alive in `status` (LiveCopies). "" when none. `*skipped` says which
// newer ones were passed over and why.
std::string NewestRestorable(const std::vector<std::string>& kept, const ClusterStatus& status,
                             std::string* skipped);

}  // namespace rayx::train::detail
