// The rank side of Train: TrainWorker runs the user's loop; Report and
// GetCheckpoint serve it.
#include "train/train_session.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>

#include "common/address.h"
#include "common/content_hash.h"
#include "common/directory_archive.h"
#include "group/rank_setup.h"
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

constexpr const char* kKvNamespace = "rayx";
constexpr const char* kPackagePrefix = "package:";
constexpr const char* kPathPrefix = "path:";
// Checkpoints go through the head's package store; its own limit applies too.
constexpr uint64_t kMaxCheckpointBytes = 1ull << 30;

// The loop running in this process (one at a time: an actor runs one call at
// a time).
struct Session {
  TrainContext context;
  RunRequest request;
  std::optional<Checkpoint> resume;
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

std::unique_ptr<transport::SyncClient> HeadConnection() {
  auto where = ParseHostPort(rayx::detail::CurrentHeadAddress());
  if (!where.ok()) throw std::runtime_error("train: bad head address: " + where.status().message());
  auto client = transport::SyncClient::Connect(*where);
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
          request.checkpoint_id,
          FetchCheckpoint(request.checkpoint_id, request.run_name, request.storage_path));
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

std::string LatestReportKey(const std::string& run_name) {
  return "train/" + run_name + "/latest";
}

std::string StoreCheckpoint(const std::string& dir, const std::string& storage_path) {
  if (!fs::is_directory(dir)) {
    throw std::invalid_argument("Report: the checkpoint directory " + dir + " does not exist");
  }
  auto archive = PackDirectory(dir, {}, kMaxCheckpointBytes);
  if (!archive.ok()) throw std::runtime_error("Report: " + archive.status().message());
  const std::string hash = ContentHashHex(*archive);
  if (!storage_path.empty()) {
    fs::path target = fs::path(storage_path) / ("checkpoint_" + hash.substr(0, 16));
    Status unpacked = UnpackArchive(*archive, target.string());
    if (!unpacked.ok()) throw std::runtime_error("Report: " + unpacked.message());
    return kPathPrefix + target.string();
  }
  auto head = HeadConnection();
  auto stored = UploadPackage(*head, rayx::detail::CurrentClusterToken(), *archive, 60000);
  if (!stored.ok()) {
    throw std::runtime_error("Report: the head did not keep the checkpoint: " +
                             stored.status().message());
  }
  return kPackagePrefix + *stored;
}

std::string FetchCheckpoint(const std::string& id, const std::string& run_name,
                            const std::string&) {
  if (id.rfind(kPathPrefix, 0) == 0) return id.substr(std::strlen(kPathPrefix));
  if (id.rfind(kPackagePrefix, 0) != 0) throw std::runtime_error("unknown checkpoint id " + id);
  const std::string hash = id.substr(std::strlen(kPackagePrefix));
  if (!IsContentHash(hash)) throw std::runtime_error("bad checkpoint id " + id);
  fs::path root = fs::temp_directory_path() / "rayx-checkpoints";
  fs::path dest = root / run_name / hash.substr(0, 16);
  std::error_code ec;
  if (fs::is_directory(dest, ec) && !fs::is_empty(dest, ec)) return dest.string();
  auto head = HeadConnection();
  auto archive = DownloadPackage(*head, rayx::detail::CurrentClusterToken(), hash, 60000);
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

void Report(const Metrics& metrics, const std::optional<Checkpoint>& checkpoint) {
  detail::Session session = detail::CurrentSession("Report");
  const TrainContext& ctx = session.context;
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
  if (latest.history.size() > detail::kMaxHistory) latest.history.erase(latest.history.begin());
  if (checkpoint) {
    std::string id = detail::StoreCheckpoint(checkpoint->path(), session.request.storage_path);
    latest.checkpoint_id = id;
    latest.kept.erase(std::remove(latest.kept.begin(), latest.kept.end(), id), latest.kept.end());
    latest.kept.push_back(id);
    const size_t keep = static_cast<size_t>(std::max(1, session.request.num_to_keep));
    while (latest.kept.size() > keep) latest.kept.erase(latest.kept.begin());
  }
  rayx::detail::KvPut(detail::kKvNamespace, key, rayx::detail::Pack(latest), /*overwrite=*/true,
                      /*job_scoped=*/true);
}

}  // namespace rayx::train
