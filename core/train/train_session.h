// The rank side of Train: the built-in actor that runs a user's training loop,
// and the messages between it and the trainer.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <msgpack.hpp>

#include "rayx/kv.h"
#include "rayx/train.h"

namespace rayx::train::detail {

// Built-in names (registered in every rayx program).
inline constexpr const char* kTrainWorkerFactory = "rayx.train.TrainWorker.Create";
inline constexpr const char* kTrainWorkerRun = "rayx.train.TrainWorker.Run";

// What the trainer asks each rank to run.
struct RunRequest {
  std::string loop;     // registered function name
  std::string config;   // its argument, msgpack
  std::string run_name;
  int32_t attempt = 0;
  std::string checkpoint_id;  // resume from it; empty: fresh start
  std::string storage_path;
  int32_t num_to_keep = 2;
  int32_t num_replicas = 0;  // RunConfig::num_replicas
  MSGPACK_DEFINE_MAP(loop, config, run_name, attempt, checkpoint_id, storage_path, num_to_keep,
                     num_replicas)
};

// The run's latest report from rank 0, kept in the head's KV.
struct LatestReport {
  std::map<std::string, double> metrics;
  std::string checkpoint_id;
  std::vector<std::string> kept;  // checkpoint ids, oldest first
  int64_t reports = 0;
  std::vector<std::map<std::string, double>> history;  // the last kMaxHistory reports
  int64_t checkpoints = 0;        // reports that stored a checkpoint
  uint64_t checkpoint_bytes = 0;  // their packed sizes, in all
  uint64_t last_checkpoint_bytes = 0;
  MSGPACK_DEFINE_MAP(metrics, checkpoint_id, kept, reports, history, checkpoints,
                     checkpoint_bytes, last_checkpoint_bytes)
};

// Reports kept in a run's history, at most.
inline constexpr size_t kMaxHistory = 1000;
// The most bytes a packed LatestReport takes while it has history to drop:
// half the KV's value limit, so that Report never fails for the history.
inline constexpr size_t kMaxLatestReportBytes = kv::kMaxValueBytes / 2;

// Packs `latest` for the KV, first dropping the oldest history entries beyond
// kMaxHistory and then while the packed report would pass `max_bytes`. Only
// the latest metrics alone (the user's) can still make it larger.
std::string PackLatestReport(LatestReport& latest, size_t max_bytes = kMaxLatestReportBytes);

// The KV namespace of Train's records (latest reports).
inline constexpr const char* kKvNamespace = "rayx";

// The dashboard's copy of a run's reports (protocol::TrainRunRecord): the
// last kTrainRecordHistory of `history`, finite values only.
std::string PackTrainRecord(const std::string& run_name, const std::string& job, int attempt,
                            const LatestReport& latest);

// The KV key (namespace "rayx") of a run's latest report.
std::string LatestReportKey(const std::string& run_name);

// Packs a checkpoint directory and stores it where the run keeps checkpoints:
// under `storage_path` when set (a copy), else in the head's package store,
// kept there by run `run_name` (the head deletes a package no run keeps).
// An upload of 4 MiB or more prints its progress on stdout (lines, which
// reach the driver with the rank's output; a bar on a terminal).
struct StoredCheckpoint {
  std::string id;
  uint64_t bytes = 0;  // packed
};
StoredCheckpoint StoreCheckpoint(const std::string& dir, const std::string& storage_path,
                                 const std::string& run_name);
// RunConfig::storage_path, every rank: copies the files of `dir` into the
// report's folder, storage_path/<run>/checkpoint_<checkpoint_id>, which the
// ranks of one report share (Ray Train's layout: every worker's files in one
// checkpoint). Throws std::invalid_argument when `dir` is not a directory.
void CopyToStorage(const std::string& dir, const std::string& storage_path,
                   const std::string& run_name, const std::string& checkpoint_id);
// Rank 0, once every rank reported: the report's folder as a checkpoint
// ("path:..." and its bytes); an empty id when no rank reported one.
StoredCheckpoint CommitStorage(const std::string& storage_path, const std::string& run_name,
                               const std::string& checkpoint_id);

// Checkpoint ids: "package:<hash>" (the head's package store), "path:<folder>"
// (storage_path/<run>/checkpoint_<report>), "nodes:<job>/<report>/<run>"
// (kept by the nodes, checkpoint_shards.h). A report id is "a<attempt>-s<n>".
inline constexpr const char* kPackagePrefix = "package:";
inline constexpr const char* kPathPrefix = "path:";
inline constexpr const char* kStorageFolderPrefix = "checkpoint_";
// A report id's numbers; false for anything else.
bool ParseReportId(const std::string& id, long* attempt, long* report);
// The report id a storage folder's name holds ("" when it is not one's).
std::string StorageFolderReport(const std::string& folder_name);

// A run's folder name under storage_path: its name with '/' and leading dots
// replaced, so that it stays one folder.
std::string RunDirName(const std::string& run_name);

// RunConfig::storage_path: rank 0, after each commit, writes the run's kept
// checkpoints (`kept`'s folders of this run, oldest first) into the run's
// folder as ".rayx-kept" (a failure is logged); a later fit of the run
// (another job, another cluster) resumes from StoredCheckpoints, the
// listed folders that still exist, as Ray Train resumes a run found under its
// storage path.
void KeepStorageIndex(const std::string& storage_path, const std::string& run_name,
                      const std::vector<std::string>& kept);
std::vector<std::string> StoredCheckpoints(const std::string& storage_path,
                                           const std::string& run_name);

// Rank 0, after a commit: removes what reports that were never committed
// left behind (ranks copy before the barrier; a failed rank ends the report
// there): folders under storage_path/<run>/ that are not in `kept`, or the
// node-kept shards recorded for another report than `checkpoint_id`. A
// failure is logged, never thrown.
void SweepUncommitted(const std::string& storage_path, const std::string& run_name,
                      const std::vector<std::string>& kept, const std::string& checkpoint_id);

// Puts `id` last in `kept` (a run's checkpoints, oldest first) and takes out
// the oldest beyond `num_to_keep` (<= 0: none); returns those taken out.
std::vector<std::string> KeepLatest(std::vector<std::string>& kept, const std::string& id,
                                    int num_to_keep);
// Run `run_name` no longer keeps checkpoint `id`: the head deletes its
// package once no run keeps it; a copy under `storage_path` is removed. A
// failure is logged, never thrown (the run goes on).
void DropCheckpoint(const std::string& id, const std::string& run_name,
                    const std::string& storage_path);
// Where this process keeps the checkpoints it fetches when they have no place
// on a node (a driver's whole checkpoint; a package checkpoint):
// TMP/rayx-checkpoints/rayx-fetch-XXXXXX, its own, made on first use and
// claimed for its life (core/object_store/store_owner.h). Removed when the
// process exits; one a process left when it died goes when the next process
// makes its own: fetched copies never pile up.
inline constexpr char kFetchDirPrefix[] = "rayx-fetch-";
const std::string& ProcessFetchDir();

// Makes checkpoint `id` available as a local directory and returns its path:
// for a checkpoint the nodes keep, rank `rank`'s shard when it has one, else
// (and with rank < 0) the whole checkpoint. Outside a node's checkpoint
// directory (a driver), it lasts as long as this process (ProcessFetchDir).
std::string FetchCheckpoint(const std::string& id, const std::string& run_name,
                            const std::string& storage_path, int rank = -1);

}  // namespace rayx::train::detail
