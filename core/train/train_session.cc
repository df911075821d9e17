// The rank side of Train: TrainWorker runs the user's loop; Report and
// GetCheckpoint serve it.
#include "train/train_session.h"

#include "train/checkpoint_shards.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <stdexcept>

#include "common/address.h"
#include "common/content_hash.h"
#include "common/directory_archive.h"
#include "common/logging.h"
#include "common/progress.h"
#include "group/rank_setup.h"
#include "object_store/store_owner.h"
#include "protocol/train_record.h"
#include "rayx/collective.h"
#include "rayx/detail/registry.h"
#include "runtime/kv_client.h"
#include "transport/sync_client.h"

namespace fs = std::filesystem;

namespace rayx::train {

struct ContextAccess {
  static TrainContext Make(const rayx::detail::RankSetup& setup, const std::string& run,
                           int attempt) {
    TrainContext c;
    c.rank_ = setup.info.rank;
    c.world_size_ = setup.world_size;
    c.local_rank_ = setup.info.local_rank;
    c.local_world_size_ = setup.info.local_world_size;
    c.node_rank_ = setup.info.node_rank;
    c.collective_group_ = setup.collective_group;
    c.run_name_ = run;
    c.attempt_ = attempt;
    return c;
  }
};

namespace detail {
namespace {

// Checkpoints go through the head's package store; its own limit applies too.
constexpr uint64_t kMaxCheckpointBytes = 1ull << 30;

// The loop running in this process (one at a time: an actor runs one call at
// a time).
struct Session {
  TrainContext context;
  RunRequest request;
  std::optional<Checkpoint> resume;
  int64_t reports = 0;  // Report calls so far: names node-kept checkpoints
};
std::mutex g_mu;
std::optional<Session> g_session;

Session CurrentSession(const char* what) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_session) {
    throw std::runtime_error(std::string("rayx::train::") + what +
                             " is for the training loop, inside a rank of "
                             "DataParallelTrainer::Fit");
  }
  return *g_session;
}

}  // namespace

bool ParseReportId(const std::string& id, long* attempt, long* report) {
  char extra = 0;
  return std::sscanf(id.c_str(), "a%ld-s%ld%c", attempt, report, &extra) == 2 && *attempt >= 0 &&
         *report >= 0;
}

std::string StorageFolderReport(const std::string& folder_name) {
  const size_t prefix = std::strlen(kStorageFolderPrefix);
  return folder_name.rfind(kStorageFolderPrefix, 0) == 0 ? folder_name.substr(prefix) : "";
}

std::string RunDirName(const std::string& run_name) {
  std::string out = run_name.empty() ? std::string("run") : run_name;
  for (char& c : out) {
    if (c == '/' || c == '\\') c = '_';
  }
  if (out[0] == '.') out[0] = '_';
  return out;
}

namespace {

// The head's name for a run that keeps checkpoint packages: per job, like the
// run's KV record, so two jobs' runs of one name (whose identical checkpoints
// share a package) never let go of each other's.
std::string CheckpointKeeper(const std::string& run_name) {
  return "train:" + rayx::detail::CurrentJobId() + ":" + run_name;
}

std::unique_ptr<transport::SyncClient> HeadConnection() {
  auto where = ParseHostPort(rayx::detail::CurrentHeadAddress());
  if (!where.ok()) throw std::runtime_error("train: bad head address: " + where.status().message());
  auto client = transport::SyncClient::Connect(*where, rayx::detail::CurrentHeadSecurity());
  if (!client.ok()) throw std::runtime_error("train: " + client.status().message());
  return std::move(*client);
}

// Runs the user's loop on this rank.
class TrainWorker {
 public:
  static TrainWorker* Create() { return new TrainWorker(); }

  bool Run(RunRequest request) {
    auto setup = rayx::detail::CurrentRankSetup();
    if (!setup) throw std::runtime_error("TrainWorker: the rank was not set up by its group");
    const rayx::detail::RemoteFunction* loop =
        rayx::detail::FunctionRegistry::Instance().FindByName(request.loop);
    if (loop == nullptr || !loop->invoke) {
      throw std::invalid_argument("train loop " + request.loop +
                                  " is not registered in this program: add it to RAYX_REMOTE");
    }
    Session session;
    session.context = ContextAccess::Make(*setup, request.run_name, request.attempt);
    if (!request.checkpoint_id.empty()) {
      session.resume = Checkpoint::FromId(
          request.checkpoint_id, FetchCheckpoint(request.checkpoint_id, request.run_name,
                                                 request.storage_path, setup->info.rank));
    }
    session.request = request;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_session = std::move(session);
    }
    struct Clear {
      ~Clear() {
        std::lock_guard<std::mutex> lock(g_mu);
        g_session.reset();
      }
    } clear;
    loop->invoke(nullptr, {std::string_view(request.config)});
    return true;
  }
};

[[maybe_unused]] const bool kRegistered = [] {
  rayx::detail::RegisterOne(kTrainWorkerFactory, &TrainWorker::Create);
  rayx::detail::RegisterOne(kTrainWorkerRun, &TrainWorker::Run);
  return true;
}();

}  // namespace

std::string PackTrainRecord(const std::string& run_name, const std::string& job, int attempt,
                            const LatestReport& latest) {
  const auto& history = latest.history;
  protocol::TrainRunRecord record;
  record.run = run_name;
  record.job = job;
  record.attempt = attempt;
  record.reports = latest.reports;
  record.checkpoints = latest.checkpoints;
  record.checkpoint_bytes = latest.checkpoint_bytes;
  record.last_checkpoint_bytes = latest.last_checkpoint_bytes;
  size_t first =
      history.size() > protocol::kTrainRecordHistory ? history.size() - protocol::kTrainRecordHistory : 0;
  for (size_t i = first; i < history.size(); ++i) {
    auto& metrics = record.history.emplace_back();
    for (const auto& [name, value] : history[i]) {
      if (std::isfinite(value)) metrics.emplace(name, value);
    }
  }
  return rayx::detail::Pack(record);
}

std::string LatestReportKey(const std::string& run_name) {
  return "train/" + run_name + "/latest";
}

std::string PackLatestReport(LatestReport& latest, size_t max_bytes) {
  auto& history = latest.history;
  if (history.size() > kMaxHistory) history.erase(history.begin(), history.end() - kMaxHistory);
  std::string packed = rayx::detail::Pack(latest);
  while (packed.size() > max_bytes && !history.empty()) {
    // Drop the oldest entries that add up to the excess, then measure again
    // (the array's own header may shrink by a few bytes).
    const size_t excess = packed.size() - max_bytes;
    size_t drop = 0;
    for (size_t freed = 0; drop < history.size() && freed < excess; ++drop) {
      freed += rayx::detail::Pack(history[drop]).size();
    }
    history.erase(history.begin(), history.begin() + static_cast<std::ptrdiff_t>(drop));
    packed = rayx::detail::Pack(latest);
  }
  return packed;
}

StoredCheckpoint StoreCheckpoint(const std::string& dir, const std::string& storage_path,
                                 const std::string& run_name) {
  if (!fs::is_directory(dir)) {
    throw std::invalid_argument("Report: the checkpoint directory " + dir + " does not exist");
  }
  auto archive = PackDirectory(dir, {}, kMaxCheckpointBytes);
  if (!archive.ok()) throw std::runtime_error("Report: " + archive.status().message());
  const std::string hash = ContentHashHex(*archive);
  if (!storage_path.empty()) {
    // Per run (Ray's layout): dropping one run's copy never touches another's.
    fs::path target = fs::path(storage_path) / RunDirName(run_name) /
                      ("checkpoint_" + hash.substr(0, 16));
    Status unpacked = UnpackArchive(*archive, target.string());
    if (!unpacked.ok()) throw std::runtime_error("Report: " + unpacked.message());
    return {kPathPrefix + target.string(), archive->size()};
  }
  auto head = HeadConnection();
  // The connection proves who this rank is: packages need no token.
  const std::string token;
  rayx::Result<std::string> stored = Status::Internal("not uploaded");
  // Identical contents share one package: another run's drop may delete it
  // between the upload and the keep (NotFound). Upload it again then.
  Progress progress(std::cout, "Uploading run " + run_name + "'s checkpoint", archive->size(),
                    isatty(STDOUT_FILENO) != 0);
  for (int attempt = 0; attempt < 3; ++attempt) {
    stored = UploadPackage(*head, token, *archive, 60000,
                           [&](uint64_t sent, uint64_t) { progress.Update(sent); });
    if (!stored.ok()) break;
    auto kept = KeepPackage(*head, token, *stored, CheckpointKeeper(run_name), true, 60000);
    if (kept.ok()) break;
    stored = kept.status();
    if (kept.status().code() != StatusCode::kNotFound) break;
  }
  progress.Finish();
  if (!stored.ok()) {
    throw std::runtime_error("Report: the head did not keep the checkpoint: " +
                             stored.status().message());
  }
  return {kPackagePrefix + *stored, archive->size()};
}

namespace {
fs::path StorageFolder(const std::string& storage_path, const std::string& run_name,
                       const std::string& checkpoint_id) {
  return fs::path(storage_path) / RunDirName(run_name) / (kStorageFolderPrefix + checkpoint_id);
}
}  // namespace

namespace {
// The run folder's list of its kept checkpoints (KeepStorageIndex), and the
// most of it that is read.
constexpr char kStorageIndex[] = ".rayx-kept";
constexpr size_t kMaxStorageIndexBytes = 1 << 20;
}  // namespace

void KeepStorageIndex(const std::string& storage_path, const std::string& run_name,
                      const std::vector<std::string>& kept) {
  const fs::path run = fs::path(storage_path) / RunDirName(run_name);
  try {
    std::string text;
    for (const std::string& id : kept) {
      if (id.rfind(kPathPrefix, 0) != 0) continue;
      const fs::path folder(id.substr(std::strlen(kPathPrefix)));
      if (folder.parent_path().lexically_normal() != run.lexically_normal()) continue;
      text += folder.filename().string() + "\n";
    }
    // Whole or not at all: written aside, then renamed over the old one.
    const fs::path aside =
        run / (std::string(kStorageIndex) + ".new-" + std::to_string(::getpid()));
    {
      std::ofstream out(aside, std::ios::trunc);
      out << text;
      out.close();
      if (!out) throw std::runtime_error("cannot write " + aside.string());
    }
    fs::rename(aside, run / kStorageIndex);
  } catch (const std::exception& e) {
    RAYX_LOG(Warning) << "run " << run_name << ": cannot keep the list of its checkpoints in "
                      << run.string() << " (a later fit of it will not resume from them): "
                      << e.what();
  }
}

std::vector<std::string> StoredCheckpoints(const std::string& storage_path,
                                           const std::string& run_name) {
  const fs::path run = fs::path(storage_path) / RunDirName(run_name);
  std::vector<std::string> ids;
  std::ifstream in(run / kStorageIndex);
  std::string line;
  size_t read = 0;
  while (std::getline(in, line) && (read += line.size() + 1) <= kMaxStorageIndexBytes) {
    // Only report folders of this run: checkpoint_a<N>-s<M>.
    long attempt = 0, report = 0;
    if (!ParseReportId(StorageFolderReport(line), &attempt, &report)) continue;
    std::error_code ec;
    if (fs::is_directory(run / line, ec)) ids.push_back(kPathPrefix + (run / line).string());
  }
  return ids;
}

void CopyToStorage(const std::string& dir, const std::string& storage_path,
                   const std::string& run_name, const std::string& checkpoint_id) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw std::invalid_argument("Report: the checkpoint directory " + dir + " does not exist");
  }
  const fs::path target = StorageFolder(storage_path, run_name, checkpoint_id);
  fs::create_directories(target, ec);
  fs::copy(dir, target,
           fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
  if (ec) {
    throw std::runtime_error("Report: cannot copy the checkpoint into " + target.string() + ": " +
                             ec.message());
  }
}

StoredCheckpoint CommitStorage(const std::string& storage_path, const std::string& run_name,
                               const std::string& checkpoint_id) {
  const fs::path target = StorageFolder(storage_path, run_name, checkpoint_id);
  std::error_code ec;
  if (!fs::is_directory(target, ec)) return {};
  uint64_t bytes = 0;
  for (auto it = fs::recursive_directory_iterator(target, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) bytes += it->file_size(ec);
  }
  return {kPathPrefix + target.string(), bytes};
}

void SweepUncommitted(const std::string& storage_path, const std::string& run_name,
                      const std::vector<std::string>& kept, const std::string& checkpoint_id) {
  try {
    if (storage_path.empty()) return SweepUncommittedShards(run_name, checkpoint_id);
    const fs::path run = fs::path(storage_path) / RunDirName(run_name);
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(run, ec)) {
      const std::string name = entry.path().filename().string();
      // This trainer's report folders of earlier reports only: the ranks may
      // be copying into later ones already.
      if (!EarlierReport(StorageFolderReport(name), checkpoint_id)) continue;
      const std::string id = kPathPrefix + entry.path().string();
      if (std::find(kept.begin(), kept.end(), id) == kept.end()) fs::remove_all(entry.path(), ec);
    }
  } catch (const std::exception& e) {
    RAYX_LOG(Warning) << "run " << run_name << ": cannot remove uncommitted checkpoints: "
                      << e.what();
  }
}

std::vector<std::string> KeepLatest(std::vector<std::string>& kept, const std::string& id,
                                    int num_to_keep) {
  kept.erase(std::remove(kept.begin(), kept.end(), id), kept.end());
  kept.push_back(id);
  std::vector<std::string> dropped;
  if (num_to_keep <= 0) return dropped;
  while (kept.size() > static_cast<size_t>(num_to_keep)) {
    dropped.push_back(std::move(kept.front()));
    kept.erase(kept.begin());
  }
  return dropped;
}

void DropCheckpoint(const std::string& id, const std::string& run_name,
                    const std::string& storage_path) {
  if (id.rfind(kNodesPrefix, 0) == 0) return DropShards(id);
  try {
    if (id.rfind(kPathPrefix, 0) == 0) {
      // Only a copy this run made: storage_path/<run>/checkpoint_<hash>.
      fs::path path = fs::path(id.substr(std::strlen(kPathPrefix))).lexically_normal();
      fs::path mine = (fs::path(storage_path) / RunDirName(run_name)).lexically_normal();
      if (storage_path.empty() || path.parent_path() != mine ||
          path.filename().string().rfind(kStorageFolderPrefix, 0) != 0) {
        return;
      }
      fs::remove_all(path);
      return;
    }
    if (id.rfind(kPackagePrefix, 0) != 0) return;
    const std::string hash = id.substr(std::strlen(kPackagePrefix));
    auto head = HeadConnection();
    auto released = KeepPackage(*head, "", hash,
                                CheckpointKeeper(run_name), false, 60000);
    if (!released.ok()) {
      RAYX_LOG(Warning) << "run " << run_name << ": the head did not let go of checkpoint "
                        << hash.substr(0, 12) << ": " << released.status();
    }
  } catch (const std::exception& e) {
    RAYX_LOG(Warning) << "run " << run_name << ": cannot drop checkpoint " << id << ": "
                      << e.what();
  }
}

namespace {

// This process's fetch directory, removed at exit (by the process that made
// it: a forked child exiting leaves it).
class FetchDir {
 public:
  FetchDir() : owner_(::getpid()) {
    const fs::path root = fs::temp_directory_path() / "rayx-checkpoints";
    std::error_code ec;
    fs::create_directories(root, ec);
    RemoveDeadStores(root.string(), kFetchDirPrefix);  // those of processes gone
    std::string dir = (root / (std::string(kFetchDirPrefix) + "XXXXXX")).string();
    if (::mkdtemp(dir.data()) == nullptr) {
      throw std::runtime_error("cannot make a directory for fetched checkpoints under " +
                               root.string() + ": " + std::strerror(errno));
    }
    Status claimed = ClaimStore(dir);
    if (!claimed.ok()) {
      fs::remove_all(dir, ec);
      throw std::runtime_error("cannot claim " + dir + ": " + claimed.message());
    }
    path_ = std::move(dir);
  }
  ~FetchDir() {
    if (::getpid() != owner_) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
    fs::remove(path_ + ".lock", ec);
  }
  const std::string& path() const { return path_; }

 private:
  pid_t owner_;
  std::string path_;
};

}  // namespace

const std::string& ProcessFetchDir() {
  static FetchDir dir;  // made once (a throw: tried again next time)
  return dir.path();
}

std::string FetchCheckpoint(const std::string& id, const std::string& run_name,
                            const std::string&, int rank) {
  if (id.rfind(kNodesPrefix, 0) == 0) return FetchShards(id, rank);
  if (id.rfind(kPathPrefix, 0) == 0) return id.substr(std::strlen(kPathPrefix));
  if (id.rfind(kPackagePrefix, 0) != 0) throw std::runtime_error("unknown checkpoint id " + id);
  const std::string hash = id.substr(std::strlen(kPackagePrefix));
  if (!IsContentHash(hash)) throw std::runtime_error("bad checkpoint id " + id);
  fs::path dest = fs::path(ProcessFetchDir()) / "packages" / hash.substr(0, 16);
  std::error_code ec;
  if (fs::is_directory(dest, ec) && !fs::is_empty(dest, ec)) return dest.string();
  auto head = HeadConnection();
  auto archive = DownloadPackage(*head, "", hash, 60000);
  if (!archive.ok()) {
    throw std::runtime_error("cannot fetch checkpoint " + hash.substr(0, 12) + " of run " +
                             run_name + ": " + archive.status().message());
  }
  Status unpacked = UnpackArchive(*archive, dest.string());
  if (!unpacked.ok()) throw std::runtime_error(unpacked.message());
  return dest.string();
}

}  // namespace detail

TrainContext GetContext() { return detail::CurrentSession("GetContext").context; }

std::optional<Checkpoint> GetCheckpoint() { return detail::CurrentSession("GetCheckpoint").resume; }

std::optional<Checkpoint> GetWholeCheckpoint() {
  detail::Session session = detail::CurrentSession("GetWholeCheckpoint");
  if (!session.resume) return std::nullopt;
  const std::string& id = session.resume->id();
  return Checkpoint::FromId(id, detail::FetchCheckpoint(id, session.request.run_name,
                                                        session.request.storage_path, -1));
}

void Report(const Metrics& metrics, const std::optional<Checkpoint>& checkpoint) {
  detail::Session session = detail::CurrentSession("Report");
  const TrainContext& ctx = session.context;
  // Node-kept checkpoints: every rank's shard is stored (and copied to other
  // nodes) before the barrier, so that rank 0 commits only what every rank
  // finished; a rank that fails here fails everyone's Report.
  const bool by_nodes = session.request.num_replicas > 0 && session.request.storage_path.empty();
  int64_t step = 0;
  {
    std::lock_guard<std::mutex> lock(detail::g_mu);
    if (detail::g_session) step = ++detail::g_session->reports;
  }
  const std::string checkpoint_id =
      "a" + std::to_string(ctx.GetAttempt()) + "-s" + std::to_string(step);
  const std::string& storage = session.request.storage_path;
  if (by_nodes && checkpoint) {
    detail::StoreShard(checkpoint->path(), ctx.GetRunName(), checkpoint_id, ctx.GetWorldRank(),
                       session.request.num_replicas);
  } else if (!storage.empty() && checkpoint) {
    detail::CopyToStorage(checkpoint->path(), storage, ctx.GetRunName(), checkpoint_id);
  }
  // Every rank arrives before rank 0 records: a report marks a step all ranks
  // completed, and a failed rank fails everyone's Report.
  if (!ctx.GetCollectiveGroup().empty()) collective::Barrier(ctx.GetCollectiveGroup());
  if (ctx.GetWorldRank() != 0) return;
  const std::string key = detail::LatestReportKey(ctx.GetRunName());
  detail::LatestReport latest;
  if (auto bytes = rayx::detail::KvGet(detail::kKvNamespace, key)) {
    latest = rayx::detail::Unpack<detail::LatestReport>(*bytes);
  }
  latest.metrics = metrics;
  latest.reports++;
  latest.history.push_back(metrics);
  std::vector<std::string> dropped;  // ids past num_to_keep
  std::optional<detail::StoredCheckpoint> committed;
  if (by_nodes) {
    detail::StoredCheckpoint shards =
        detail::CommitShards(ctx.GetRunName(), checkpoint_id, ctx.GetWorldSize());
    if (!shards.id.empty()) committed = shards;
  } else if (!storage.empty()) {
    // Every rank's files, in the report's folder.
    detail::StoredCheckpoint folder = detail::CommitStorage(storage, ctx.GetRunName(), checkpoint_id);
    if (!folder.id.empty()) committed = folder;
  } else if (checkpoint) {
    committed = detail::StoreCheckpoint(checkpoint->path(), storage, ctx.GetRunName());
  }
  if (committed) {
    const detail::StoredCheckpoint& stored = *committed;
    const std::string& id = stored.id;
    latest.checkpoint_id = id;
    latest.checkpoints++;
    latest.checkpoint_bytes += stored.bytes;
    latest.last_checkpoint_bytes = stored.bytes;
    dropped = detail::KeepLatest(latest.kept, id, session.request.num_to_keep);
  }
  rayx::detail::KvPut(detail::kKvNamespace, key, detail::PackLatestReport(latest),
                      /*overwrite=*/true, /*job_scoped=*/true);
  // The dashboard's copy: a failure to write it never fails the run.
  try {
    const std::string job = rayx::detail::CurrentJobId();
    rayx::detail::KvPut(protocol::kTrainRecordNamespace, job + "/" + ctx.GetRunName(),
                        detail::PackTrainRecord(ctx.GetRunName(), job, ctx.GetAttempt(), latest),
                        /*overwrite=*/true, /*job_scoped=*/true);
  } catch (const std::exception& e) {
    RAYX_LOG(Warning) << "train: the dashboard's copy of run " << ctx.GetRunName()
                      << "'s report was not kept: " << e.what();
  }
  // Once the new latest is recorded (a resume never looks for a dropped one).
  for (const std::string& id : dropped) {
    detail::DropCheckpoint(id, ctx.GetRunName(), session.request.storage_path);
  }
  if (committed) {
    detail::SweepUncommitted(storage, ctx.GetRunName(), latest.kept, checkpoint_id);
    if (!by_nodes && !storage.empty()) detail::KeepStorageIndex(storage, ctx.GetRunName(), latest.kept);
  }
}

}  // namespace rayx::train
