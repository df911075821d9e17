// Train's checkpoints kept by the nodes.
#include "train/checkpoint_shards.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <zmq.hpp>

#include "common/clock.h"
#include "common/logging.h"
#include "object_store/checkpoint_files.h"
#include "object_store/object_pull.h"
#include "object_store/object_server_directory.h"
#include "protocol/data_messages.h"
#include "rayx/detail/runtime_api.h"
#include "runtime/kv_client.h"
#include "worker/worker_env.h"

namespace fs = std::filesystem;

namespace rayx::train::detail {

namespace {

// A shard's copy from one node to another takes as long as its bytes need.
constexpr int64_t kReplicateTimeoutMs = 30 * 60 * 1000;

std::string RecordKey(const std::string& id_suffix) { return kCheckpointRecordPrefix + id_suffix; }
// The shards ranks recorded for rank 0 to commit: listed by this prefix (the
// run's name length-prefixed, so that no run's prefix is another's).
std::string ShardPrefix(const std::string& run, const std::string& checkpoint_id) {
  return "train/shard/" + rayx::detail::CurrentJobId() + "/" + std::to_string(run.size()) + ":" +
         run + "/" + checkpoint_id + "/";
}
std::string ShardKey(const std::string& run, const std::string& checkpoint_id, int rank) {
  return ShardPrefix(run, checkpoint_id) + std::to_string(rank);
}

// Where this process keeps shards: its node's checkpoint directory (a rank),
// else a directory of its own for its life (a driver fetching a whole
// checkpoint).
CheckpointFiles LocalFiles() {
  const char* dir = std::getenv(rayx::WorkerEnv::kCheckpointDir);
  if (dir != nullptr && *dir != '\0') return CheckpointFiles(dir);
  return CheckpointFiles(ProcessFetchDir());
}
std::string LocalObjectAddress() {
  const char* address = std::getenv(rayx::WorkerEnv::kObjectAddress);
  return address == nullptr ? "" : address;
}

ClusterStatus ClusterNow(const char* what) {
  auto status = rayx::detail::CurrentClusterStatus(10000);
  if (!status.ok()) {
    throw std::runtime_error(std::string(what) + ": the head's cluster status: " +
                             status.status().message());
  }
  return *status;
}

std::unique_ptr<ObjectServerDirectory> Servers(const ClusterStatus& status) {
  static const SystemClock* clock = new SystemClock();  // outlives every directory
  return std::make_unique<ObjectServerDirectory>(
      FetchObjectServersFromHead(rayx::detail::CurrentHeadAddress(),
                                 rayx::detail::CurrentHeadSecurity(), 5000),
      *clock, ObjectServerDirectory::Options{}, AliveObjectServers(status));
}

// Rank `shard.rank`'s shard as a directory on this node.
std::string EnsureLocal(const ShardRecord& shard, const CheckpointFiles& files,
                        const ClusterStatus& status, const std::string& id) {
  // Here already (this node holds a copy, or fetched it before).
  if (auto here = files.Read(shard.shard_dir); here.ok() && here->hash == shard.manifest.hash) {
    return files.dir() + "/" + shard.shard_dir;
  }
  const LiveCopies live(status);
  zmq::context_t context(1);
  auto servers = Servers(status);
  std::string tried;
  for (const ShardReplica& replica : shard.replicas) {
    const NodeInfo* holder = live.Holder(replica);
    if (holder == nullptr) {
      tried += (tried.empty() ? "" : "; ") + replica.node_id.substr(0, 12) + " is dead";
      continue;
    }
    rayx::Status pulled = PullShard(context, rayx::detail::CurrentObjectServerSecurity(), *servers,
                                    holder->object_address, replica.dir, shard.shard_dir,
                                    shard.manifest.files, shard.manifest.hash, files);
    if (pulled.ok()) return files.dir() + "/" + shard.shard_dir;
    tried += (tried.empty() ? "" : "; ") + replica.node_id.substr(0, 12) + ": " + pulled.message();
  }
  (void)files.Remove(shard.shard_dir);
  throw std::runtime_error("checkpoint " + id + ": every copy of rank " +
                           std::to_string(shard.rank) + "'s shard (" +
                           std::to_string(shard.manifest.bytes) + " bytes) is gone (" + tried +
                           ")");
}

CheckpointRecord ReadRecord(const std::string& id) {
  if (id.rfind(kNodesPrefix, 0) != 0) throw std::runtime_error("not a node-kept checkpoint: " + id);
  auto bytes = rayx::detail::KvGet(kKvNamespace, RecordKey(id.substr(std::strlen(kNodesPrefix))));
  if (!bytes) throw std::runtime_error("checkpoint " + id + " is not known (dropped?)");
  return rayx::detail::Unpack<CheckpointRecord>(*bytes);
}

}  // namespace

LiveCopies::LiveCopies(const ClusterStatus& status) {
  for (const auto& n : status.nodes) {
    if (!n.alive || n.object_address.empty()) continue;
    by_node_[n.node_id.Hex()] = &n;
    if (!n.checkpoint_dir.empty()) by_dir_[n.checkpoint_dir] = &n;
  }
}

const NodeInfo* LiveCopies::Holder(const ShardReplica& replica) const {
  if (auto it = by_node_.find(replica.node_id); it != by_node_.end()) return it->second;
  if (auto it = by_dir_.find(replica.dir); it != by_dir_.end()) return it->second;
  return nullptr;
}

std::vector<std::string> RecordedCheckpoints(const std::string& run) {
  std::vector<std::pair<int64_t, std::string>> found;  // (committed, id)
  // Keys are train/ckpt/<job>/<id>/<run>: every record is looked at, once.
  for (const std::string& key : rayx::detail::KvList(kKvNamespace, kCheckpointRecordPrefix)) {
    if (protocol::CheckpointRecordRun(key) != run) continue;
    auto bytes = rayx::detail::KvGet(kKvNamespace, key);
    if (!bytes) continue;
    const auto record = rayx::detail::Unpack<CheckpointRecord>(*bytes);
    found.emplace_back(record.committed_ms, kNodesPrefix + record.id);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> ids;
  for (auto& [committed, id] : found) ids.push_back(std::move(id));
  return ids;
}

ShardRecord StoreShard(const std::string& dir, const std::string& run_name,
                       const std::string& checkpoint_id, int rank, int copies) {
  const CheckpointFiles files = LocalFiles();
  const std::string own = LocalObjectAddress();
  if (std::getenv(rayx::WorkerEnv::kCheckpointDir) == nullptr || own.empty()) {
    throw std::runtime_error("Report: this rank's node keeps no checkpoints (its agent was "
                             "started without a checkpoint directory)");
  }
  const auto started = std::chrono::steady_clock::now();
  auto ms_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 t)
        .count();
  };
  ShardRecord record;
  record.rank = rank;
  record.shard_dir =
      CheckpointFiles::ShardDir(rayx::detail::CurrentJobId(), run_name, checkpoint_id, rank);
  // Within the node's disk limit, or the report fails with the figures (the
  // previous checkpoint stays the latest).
  uint64_t bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->symlink_status(ec).type() == fs::file_type::regular) bytes += it->file_size(ec);
  }
  if (rayx::Status room = files.CheckRoom(bytes); !room.ok()) {
    throw std::runtime_error("Report: rank " + std::to_string(rank) + "'s checkpoint: " +
                             room.message());
  }
  auto manifest = files.CopyIn(dir, record.shard_dir);
  if (!manifest.ok()) throw std::runtime_error("Report: " + manifest.status().message());
  record.manifest = std::move(*manifest);
  const int64_t copied_in_ms = ms_since(started);
  const auto replicating = std::chrono::steady_clock::now();
  const ClusterStatus status = ClusterNow("Report");
  // This node first; then others, spread by the shard's name.
  std::vector<const NodeInfo*> others;
  for (const auto& n : status.nodes) {
    if (!n.alive || n.object_address.empty()) continue;
    if (n.object_address == own) {
      record.replicas.insert(record.replicas.begin(), {n.node_id.Hex(), own, files.dir()});
    } else {
      others.push_back(&n);
    }
  }
  if (record.replicas.empty()) record.replicas.push_back({"", own, files.dir()});
  const std::hash<std::string> hash;
  std::sort(others.begin(), others.end(), [&](const NodeInfo* a, const NodeInfo* b) {
    return hash(a->node_id.Hex() + record.shard_dir) < hash(b->node_id.Hex() + record.shard_dir);
  });
  const size_t wanted = static_cast<size_t>(std::max(copies - 1, 0));
  static std::mutex warned_mu;
  static std::set<std::string> warned;  // runs told already (once per process)
  bool first = false;
  if (others.size() < wanted) {
    std::lock_guard<std::mutex> lock(warned_mu);
    first = warned.insert(run_name).second;
  }
  if (first) {
    RAYX_LOG(Warning) << "run " << run_name << ": rank " << rank << "'s shard keeps "
                      << others.size() + 1 << " copies, not " << copies
                      << ": the cluster has no more nodes";
  }
  protocol::ReplicateShardRequest req;
  req.shard_dir = record.shard_dir;
  req.source = own;
  req.source_dir = files.dir();
  req.files = record.manifest.files;
  req.hash = record.manifest.hash;
  zmq::context_t context(1);
  auto servers = Servers(status);
  std::string refusals;
  for (size_t i = 0; i < others.size() && record.replicas.size() < wanted + 1; ++i) {
    auto copied = ReplicateShard(context, rayx::detail::CurrentObjectServerSecurity(), *servers,
                                 others[i]->object_address, req, kReplicateTimeoutMs);
    if (!copied.ok()) {
      // Another node may take it instead.
      RAYX_LOG(Warning) << "run " << run_name << ": node " << others[i]->address
                        << " did not keep a copy of rank " << rank << "'s shard: "
                        << copied.status();
      refusals += "; " + copied.status().message();
      continue;
    }
    record.replicas.push_back({others[i]->node_id.Hex(), others[i]->object_address, copied->dir});
  }
  if (record.replicas.size() < std::min(wanted, others.size()) + 1) {
    throw std::runtime_error("Report: rank " + std::to_string(rank) + "'s shard has " +
                             std::to_string(record.replicas.size()) + " copies of the " +
                             std::to_string(copies) + " asked for: the other nodes refused it" +
                             refusals);
  }
  rayx::detail::KvPut(kKvNamespace, ShardKey(run_name, checkpoint_id, rank),
                      rayx::detail::Pack(record), /*overwrite=*/true, /*job_scoped=*/true);
  if (record.manifest.bytes >= (uint64_t{64} << 20)) {  // where the time is worth saying
    RAYX_LOG(Info) << "run " << run_name << ": rank " << rank << "'s shard of checkpoint "
                   << checkpoint_id << " (" << record.manifest.files.size() << " files, "
                   << record.manifest.bytes << " bytes) kept here in " << copied_in_ms
                   << " ms and on " << record.replicas.size() - 1 << " other node(s) in "
                   << ms_since(replicating) << " ms";
  }
  return record;
}

StoredCheckpoint CommitShards(const std::string& run_name, const std::string& checkpoint_id,
                              int world_size) {
  CheckpointRecord record;
  record.job = rayx::detail::CurrentJobId();
  record.run = run_name;
  record.id = record.job + "/" + checkpoint_id + "/" + run_name;
  record.world_size = world_size;
  record.committed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  for (const std::string& key : rayx::detail::KvList(kKvNamespace,
                                                      ShardPrefix(run_name, checkpoint_id))) {
    if (auto bytes = rayx::detail::KvGet(kKvNamespace, key)) {
      record.shards.push_back(rayx::detail::Unpack<ShardRecord>(*bytes));
      record.bytes += record.shards.back().manifest.bytes;
      rayx::detail::KvDelete(kKvNamespace, key);
    }
  }
  if (record.shards.empty()) return {};  // no rank reported a checkpoint this time
  std::sort(record.shards.begin(), record.shards.end(),
            [](const ShardRecord& a, const ShardRecord& b) { return a.rank < b.rank; });
  rayx::detail::KvPut(kKvNamespace, RecordKey(record.id), rayx::detail::Pack(record),
                      /*overwrite=*/true, /*job_scoped=*/false);
  // And with every node holding a shard of it, so that it outlives the head.
  protocol::KeepCheckpointRecordRequest keep;
  keep.checkpoint_dir = fs::path(record.shards.front().shard_dir).parent_path().string();
  keep.key = RecordKey(record.id);
  keep.record = rayx::detail::Pack(record);
  if (keep.record.size() <= protocol::KeepCheckpointRecordRequest::kMaxRecordBytes) {
    std::set<std::string> servers;
    for (const auto& shard : record.shards) {
      for (const auto& replica : shard.replicas) servers.insert(replica.object_address);
    }
    zmq::context_t context(1);
    ObjectDeleter sender(context);
    sender.SetSecurity(rayx::detail::CurrentObjectServerSecurity());
    for (const auto& server : servers) sender.KeepCheckpointRecord(server, keep);
  } else {
    RAYX_LOG(Warning) << "run " << run_name << ": checkpoint " << checkpoint_id << "'s record ("
                      << keep.record.size() << " bytes) is too large to keep on the nodes: it "
                      << "is lost if the whole cluster stops";
  }
  return {kNodesPrefix + record.id, record.bytes};
}

void DropShards(const std::string& id) {
  try {
    CheckpointRecord record = ReadRecord(id);
    const ClusterStatus status = ClusterNow("dropping a checkpoint");
    const LiveCopies live(status);
    zmq::context_t context(1);
    {
      ObjectDeleter deleter(context);
      deleter.SetSecurity(rayx::detail::CurrentObjectServerSecurity());
      // The checkpoint's directory on each live node holding a shard of it
      // (a dead one's copy is dropped when an agent adopts its directory).
      std::set<std::string> servers;
      bool away = false;  // a copy on a node not alive now
      for (const auto& shard : record.shards) {
        for (const auto& replica : shard.replicas) {
          if (const NodeInfo* holder = live.Holder(replica)) {
            servers.insert(holder->object_address);
          } else {
            away = true;
          }
        }
      }
      if (away) {
        // Its copy there is removed when an agent adopts it, even if the
        // run is unknown by then (kv_messages.h). Without the mark (a head
        // error, a key over the limit) the drop still goes on.
        try {
          rayx::detail::KvPut(kKvNamespace,
                              protocol::DroppedCheckpointKey(
                                  RecordKey(id.substr(std::strlen(kNodesPrefix)))),
                              "", /*overwrite=*/true, /*job_scoped=*/false);
        } catch (const std::exception& e) {
          RAYX_LOG(Warning) << "checkpoint " << id << ": cannot mark it dropped for the nodes "
                            << "that are away: " << e.what();
        }
      }
      const std::string checkpoint_dir =
          fs::path(record.shards.front().shard_dir).parent_path().string();
      for (const auto& server : servers) deleter.DeleteShards(server, {checkpoint_dir});
    }
    rayx::detail::KvDelete(kKvNamespace, RecordKey(id.substr(std::strlen(kNodesPrefix))));
  } catch (const std::exception& e) {
    RAYX_LOG(Warning) << "cannot drop checkpoint " << id << ": " << e.what();
  }
}

bool EarlierReport(const std::string& id, const std::string& current) {
  long a = 0, r = 0, ca = 0, cr = 0;
  if (!ParseReportId(id, &a, &r) || !ParseReportId(current, &ca, &cr)) return false;
  return a < ca || (a == ca && r < cr);
}

int FirstAttempt(const std::vector<std::string>& kept, const std::string& job,
                 const std::string& run, const std::string& storage_path) {
  std::vector<std::string> ids = kept;
  if (!storage_path.empty()) {
    std::error_code ec;
    for (fs::directory_iterator it(fs::path(storage_path) / RunDirName(run), ec), end;
         !ec && it != end; it.increment(ec)) {
      ids.push_back(kPathPrefix + it->path().string());
    }
  }
  int first = 0;
  for (const std::string& id : ids) {
    std::string report;
    if (id.rfind(kNodesPrefix, 0) == 0) {
      // nodes:<job>/<report>/<run>: the record key's layout (kv_messages.h).
      const std::string rest = id.substr(std::strlen(kNodesPrefix));
      if (protocol::CheckpointRecordRun(RecordKey(rest)) != run ||
          rest.compare(0, job.size() + 1, job + "/") != 0) {
        continue;
      }
      report = rest.substr(job.size() + 1, rest.find('/', job.size() + 1) - job.size() - 1);
    } else if (id.rfind(kPathPrefix, 0) == 0) {
      const fs::path folder(id.substr(std::strlen(kPathPrefix)));
      report = StorageFolderReport(folder.filename().string());
    }
    long attempt = 0, number = 0;
    if (ParseReportId(report, &attempt, &number) && attempt < (1L << 30)) {
      first = std::max(first, static_cast<int>(attempt) + 1);
    }
  }
  return first;
}

void SweepUncommittedShards(const std::string& run_name, const std::string& checkpoint_id) {
  // The run's pending shard records: train/shard/<job>/<len>:<run>/<id>/<rank>.
  const std::string mine = ShardPrefix(run_name, checkpoint_id);
  const std::string run_prefix = mine.substr(0, mine.size() - checkpoint_id.size() - 1);
  zmq::context_t context(1);
  ObjectDeleter deleter(context);
  deleter.SetSecurity(rayx::detail::CurrentObjectServerSecurity());
  for (const std::string& key : rayx::detail::KvList(kKvNamespace, run_prefix)) {
    // <run_prefix><id>/<rank>: only reports before this one.
    const std::string id = key.substr(run_prefix.size(), key.find('/', run_prefix.size()) -
                                                             run_prefix.size());
    if (!EarlierReport(id, checkpoint_id)) continue;
    if (auto bytes = rayx::detail::KvGet(kKvNamespace, key)) {
      const ShardRecord shard = rayx::detail::Unpack<ShardRecord>(*bytes);
      for (const auto& replica : shard.replicas) {
        deleter.DeleteShards(replica.object_address, {shard.shard_dir});
      }
    }
    rayx::detail::KvDelete(kKvNamespace, key);
  }
}

std::string FetchShards(const std::string& id, int rank) {
  const CheckpointRecord record = ReadRecord(id);
  const CheckpointFiles files = LocalFiles();
  const ClusterStatus status = ClusterNow("the checkpoint");
  // The ranks of one node restore at once: one at a time, so that a shard is
  // pulled here once and a directory another rank reads is never rebuilt.
  std::error_code ec;
  fs::create_directories(files.dir(), ec);
  const std::string lock_path = files.dir() + "/.restore.lock";
  int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock < 0 || ::flock(lock, LOCK_EX) != 0) {
    if (lock >= 0) ::close(lock);
    throw std::runtime_error("checkpoint " + id + ": cannot lock " + lock_path);
  }
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }  // drops the lock
  } unlock{lock};
  for (const auto& shard : record.shards) {
    if (rank >= 0 && shard.rank == rank) return EnsureLocal(shard, files, status, id);
  }
  // The whole checkpoint: every shard here, then one directory of links to
  // their files (lowest rank first: its file wins), made once per checkpoint
  // and node (its contents never change).
  const fs::path whole = fs::path(files.dir()) / fs::path(record.shards.front().shard_dir)
                                                     .parent_path() / "whole";
  std::vector<std::string> dirs;
  for (const auto& shard : record.shards) dirs.push_back(EnsureLocal(shard, files, status, id));
  if (fs::is_directory(whole, ec)) return whole.string();
  const fs::path making = whole.string() + ".making";
  fs::remove_all(making, ec);
  fs::create_directories(making, ec);
  for (size_t i = 0; i < dirs.size(); ++i) {
    for (const ShardFile& file : record.shards[i].manifest.files) {
      const fs::path to = making / file.path;
      if (fs::exists(to, ec)) continue;
      fs::create_directories(to.parent_path(), ec);
      fs::create_hard_link(fs::path(dirs[i]) / file.path, to, ec);
      if (ec) fs::copy_file(fs::path(dirs[i]) / file.path, to, ec);
      if (ec) throw std::runtime_error("checkpoint " + id + ": " + to.string() + ": " + ec.message());
    }
  }
  fs::rename(making, whole, ec);
  if (ec) throw std::runtime_error("checkpoint " + id + ": " + whole.string() + ": " + ec.message());
  return whole.string();
}

std::string NewestRestorable(const std::vector<std::string>& kept, const ClusterStatus& status,
                             std::string* skipped) {
  const LiveCopies copies(status);
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
    if (it->rfind(kNodesPrefix, 0) != 0) return *it;
    std::string lost;
    try {
      CheckpointRecord record = ReadRecord(*it);
      for (const auto& shard : record.shards) {
        bool live = std::any_of(shard.replicas.begin(), shard.replicas.end(),
                                [&](const ShardReplica& r) { return copies.Holder(r) != nullptr; });
        if (!live) {
          lost = "every copy of rank " + std::to_string(shard.rank) + "'s shard was on nodes "
                 "that died";
          break;
        }
      }
    } catch (const std::exception& e) {
      lost = e.what();
    }
    if (lost.empty()) return *it;
    if (skipped) *skipped += (skipped->empty() ? "" : "; ") + ("checkpoint " + *it + ": " + lost);
  }
  return "";
}

}  // namespace rayx::train::detail
