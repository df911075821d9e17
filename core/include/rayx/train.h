// Train: run a training loop on every rank of an actor group with a collective
// group ready, keep its checkpoints in the cluster, restart from the latest one
// when a rank or node dies, and grow or shrink with the cluster. Ray Train's
// names.
//
//   struct Config { int epochs; double lr; MSGPACK_DEFINE_MAP(epochs, lr) };
//   void TrainLoop(Config config) {
//     auto ctx = rayx::train::GetContext();
//     int start = 0;
//     if (auto ckpt = rayx::train::GetCheckpoint()) start = LoadEpoch(ckpt->path());
//     for (int epoch = start; epoch < config.epochs; ++epoch) {
//       ... rayx::collective::AllReduce(grads, rayx::collective::ReduceOp::kSum,
//                                       ctx.GetCollectiveGroup());
//       rayx::train::Report({{"loss", loss}}, rayx::train::Checkpoint::FromDirectory(dir));
//     }
//   }
//   RAYX_REMOTE(TrainLoop);
//   ...
//   rayx::train::DataParallelTrainer trainer(TrainLoop, Config{3, 0.1},
//                                            {.num_workers = 4}, {.name = "run-1"},
//                                            {.max_failures = 2});
//   rayx::train::Result result = trainer.Fit();
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rayx/placement_group.h"
#include "rayx/rayx.h"

namespace rayx::train {

struct ScalingConfig {
  // Ranks to run. With min_workers/max_workers set, the size the run starts at
  // is the largest that fits between them; num_workers is then ignored.
  int num_workers = 1;
  // Elastic runs: start once min_workers fit, grow toward max_workers when
  // nodes join, shrink (never below min_workers) when nodes are lost.
  // 0: not elastic.
  int min_workers = 0;
  int max_workers = 0;
  // One GPU per rank (plus resources_per_worker), NCCL between ranks.
  bool use_gpu = false;
  // Default: {CPU: 1}.
  ResourceMap resources_per_worker;
  PlacementStrategy placement_strategy = PlacementStrategy::PACK;
};

struct RunConfig {
  // Names the run: its checkpoints are kept under it. Default: a new id.
  std::string name;
  // A shared mount to keep checkpoints in instead of the nodes: every rank's
  // files go into one folder per report, storage_path/<run>/checkpoint_<id>.
  // Default: none (the nodes keep them, num_replicas).
  std::string storage_path;
  // Checkpoints kept per run (the latest ones); 0 keeps all. Default 2.
  int num_to_keep = 2;
  // Copies of each checkpoint shard the nodes keep: every rank may report a
  // checkpoint directory (its shard), kept on its own node's disk and copied
  // node to node to num_replicas - 1 others; a checkpoint is the union of the
  // shards of one Report, committed once every rank reported. Default 2. 0:
  // rank 0's checkpoint alone, packed and kept by the head (at most 1 GiB).
  // Ignored with storage_path.
  int num_replicas = 2;
};

struct FailureConfig {
  // Restarts from the latest checkpoint after a rank's failure. Default 0.
  int max_failures = 0;
};

using Metrics = std::map<std::string, double>;

// A directory of files that make up a checkpoint, or a rank's shard of one.
// Reported, it is kept by the cluster (by the nodes: RunConfig::num_replicas;
// or packed by the head); GetCheckpoint() in a resumed run makes it a local
// directory on the rank's own node.
class Checkpoint {
 public:
  Checkpoint() = default;
  static Checkpoint FromDirectory(std::string dir) {
    Checkpoint c;
    c.path_ = std::move(dir);
    return c;
  }
  // The local directory with the checkpoint's files.
  const std::string& path() const { return path_; }
  // The id under which the cluster keeps it (a content hash, or a path under
  // storage_path); empty until reported.
  const std::string& id() const { return id_; }

  // For rayx's own use.
  static Checkpoint FromId(std::string id, std::string path) {
    Checkpoint c;
    c.id_ = std::move(id);
    c.path_ = std::move(path);
    return c;
  }

 private:
  std::string path_, id_;
};

struct Result {
  Metrics metrics;                      // the last metrics rank 0 reported
  // Rank 0's reports, oldest first: the last 1,000, fewer when they would take
  // more than half the KV's 1 MiB value limit (the oldest go first).
  std::vector<Metrics> metrics_history;
  std::optional<Checkpoint> checkpoint;  // the latest checkpoint (its id; path empty)
  int num_restarts = 0;
  int num_workers = 0;                  // ranks of the last attempt
  std::string error;                    // empty on success, else the rank, its node and the cause
};

// Inside the loop: who this rank is.
class TrainContext {
 public:
  int GetWorldRank() const { return rank_; }
  int GetWorldSize() const { return world_size_; }
  int GetLocalRank() const { return local_rank_; }
  int GetLocalWorldSize() const { return local_world_size_; }
  int GetNodeRank() const { return node_rank_; }
  // The collective group's name, for rayx::collective calls.
  const std::string& GetCollectiveGroup() const { return collective_group_; }
  const std::string& GetRunName() const { return run_name_; }
  int GetAttempt() const { return attempt_; }

 private:
  friend struct ContextAccess;
  int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_world_size_ = 1, node_rank_ = 0;
  int attempt_ = 0;
  std::string collective_group_, run_name_;
};

// Inside the loop; throw std::runtime_error elsewhere.
TrainContext GetContext();
// A barrier across ranks: every rank calls it the same number of times. Rank
// 0's metrics are kept. The checkpoints given become the run's latest: every
// rank's (its shard) when the nodes keep them (RunConfig::num_replicas > 0),
// committed once all ranks reported; else rank 0's. Throws
// rayx::collective::CollectiveError when another rank failed, and
// std::runtime_error when a shard could not be stored.
void Report(const Metrics& metrics, const std::optional<Checkpoint>& checkpoint = std::nullopt);
// The checkpoint to resume from (unpacked into a local directory), or nullopt
// on a fresh start. Kept by the nodes (RunConfig::num_replicas): this rank's
// own shard when the checkpoint has one (from this node's disk when a copy is
// here, else from the nearest live copy), else the whole checkpoint.
std::optional<Checkpoint> GetCheckpoint();
// The whole checkpoint to resume from: every rank's shard, in one local
// directory (a file several ranks reported: the lowest rank's).
std::optional<Checkpoint> GetWholeCheckpoint();

namespace detail {

struct FitSpec {
  std::string loop;          // the registered loop function's name
  std::string config;        // its argument, msgpack
  ScalingConfig scaling;
  RunConfig run;
  FailureConfig failure;
};
Result Fit(const FitSpec& spec);

}  // namespace detail

// Runs `loop(config)` on every rank. `loop` is a registered function
// (RAYX_REMOTE) taking one argument.
template <typename Config>
class DataParallelTrainer {
 public:
  DataParallelTrainer(void (*loop)(Config), Config config, ScalingConfig scaling = {},
                      RunConfig run = {}, FailureConfig failure = {}) {
    spec_.loop = rayx::detail::Lookup(loop).name;
    spec_.config = rayx::detail::Pack(config);
    spec_.scaling = std::move(scaling);
    spec_.run = std::move(run);
    spec_.failure = failure;
  }
  // Blocks until the run ends. Throws std::invalid_argument for bad configs;
  // failures of the run itself come back in Result::error.
  Result Fit() { return detail::Fit(spec_); }

 private:
  detail::FitSpec spec_;
};

}  // namespace rayx::train
