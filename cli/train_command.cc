// `rayx train list|delete|export`: the checkpoints the nodes keep for Train
// runs (core/train/checkpoint_shards.h): their records in the head's KV, their
// shards on the nodes' disks.
#include "train_command.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <zmq.hpp>

#include "cluster_client.h"
#include "common/address.h"
#include "common/clock.h"
#include "common/flags.h"
#include "common/session_dir.h"
#include "object_store/checkpoint_files.h"
#include "object_store/object_pull.h"
#include "object_store/object_server_directory.h"
#include "protocol/kv_messages.h"
#include "rayx/detail/runtime_api.h"
#include "status_format.h"
#include "token_flags.h"
#include "train/checkpoint_shards.h"
#include "transport/sync_client.h"

namespace fs = std::filesystem;

namespace rayx::cli {

namespace {

using train::detail::CheckpointRecord;
constexpr int64_t kTimeoutMs = 10000;

struct Found {
  std::string key;
  CheckpointRecord record;
};

// The records of the checkpoints of `run` (all when empty) and `job`, oldest
// first; with `drop`, the head deletes them as it answers.
Result<std::vector<Found>> ReadRecords(transport::SyncClient& head, const std::string& run,
                                       const std::string& job, bool drop) {
  protocol::CheckpointRecordsRequest req;
  req.run = run;
  req.job = job;
  req.drop = drop;
  auto reply = head.Call<protocol::CheckpointRecordsReply>(req, kTimeoutMs);
  if (!reply.ok()) return reply.status();
  std::vector<Found> out;
  for (size_t i = 0; i < reply->keys.size() && i < reply->records.size(); ++i) {
    try {
      out.push_back({reply->keys[i], rayx::detail::Unpack<CheckpointRecord>(reply->records[i])});
    } catch (const std::exception&) {
      // Not a record this rayx reads: left out.
    }
  }
  std::sort(out.begin(), out.end(), [](const Found& a, const Found& b) {
    return a.record.committed_ms < b.record.committed_ms;
  });
  return out;
}

// Why a checkpoint cannot be restored ("" when every shard has a live copy).
std::string Lost(const CheckpointRecord& record, const train::detail::LiveCopies& live_copies) {
  for (const auto& shard : record.shards) {
    bool live = std::any_of(shard.replicas.begin(), shard.replicas.end(),
                            [&](const auto& r) { return live_copies.Holder(r) != nullptr; });
    if (!live) return "rank " + std::to_string(shard.rank) + "'s shard lost";
  }
  return "";
}

}  // namespace

int TrainCommand(const std::vector<std::string>& args) {
  std::string address, temp_dir = detail::DefaultTempDir(), job, checkpoint;
  TokenFlags token;
  bool help = false;
  FlagParser flags("rayx train");
  flags.AddString("address", &address, "the head, HOST:PORT (default: $RAYX_ADDRESS, else this "
                                       "machine's cluster)");
  token.Add(flags);
  flags.AddString("temp-dir", &temp_dir, "session directory root (default /tmp/rayx)");
  flags.AddString("job", &job, "only the run of this job (hex id; default: every job's)");
  flags.AddString("checkpoint", &checkpoint,
                  "export: this checkpoint (its id, as `rayx train list` shows it; default the "
                  "run's newest that can be restored)");
  flags.AddBool("help", &help, "show this help");
  const std::string usage =
      "usage: rayx train list [FLAGS]            the checkpoints the nodes keep, by run\n"
      "       rayx train delete RUN [FLAGS]      remove a run's checkpoints from every node\n"
      "       rayx train export RUN DIR [FLAGS]  copy a run's checkpoint (every rank's files) "
      "into DIR\n";
  std::vector<std::string> positional;
  if (Status s = flags.Parse(args, &positional); !s.ok()) {
    std::cerr << "rayx train: " << s.message() << "\n";
    return 2;
  }
  if (help) {
    std::cout << usage << flags.Usage();
    return 0;
  }
  const std::string sub = positional.empty() ? "" : positional[0];
  const size_t want = sub == "list" ? 1 : sub == "delete" ? 2 : sub == "export" ? 3 : 0;
  if (want == 0 || positional.size() != want) {
    std::cerr << "rayx train: " << (want == 0 ? "say list, delete or export" : "wrong arguments")
              << ".\n" << usage;
    return 2;
  }
  auto cluster = ResolveCluster(address, token, temp_dir);
  if (!cluster.ok()) {
    std::cerr << "rayx train: " << cluster.status().message() << "\n";
    return 1;
  }
  auto client = ConnectToHead(cluster->first, cluster->second);
  if (!client.ok()) {
    std::cerr << "rayx train: " << client.status().message() << "\n";
    return 1;
  }
  const std::string run = positional.size() > 1 ? positional[1] : "";
  auto records = ReadRecords(**client, run, job, sub == "delete");
  auto status = QueryClusterStatus(cluster->first, cluster->second, kTimeoutMs);
  if (!records.ok() || !status.ok()) {
    std::cerr << "rayx train: the head did not answer: "
              << (records.ok() ? status.status() : records.status()).message() << "\n";
    return 1;
  }
  // Where each copy is now (an agent may have adopted a stopped node's directory).
  const train::detail::LiveCopies alive(*status);
  std::vector<Found> mine = std::move(*records);

  if (sub == "list") {
    std::vector<std::vector<std::string>> rows = {
        {"RUN", "JOB", "CHECKPOINT", "COMMITTED", "SHARDS", "BYTES", "COPIES", "STATE"}};
    for (const auto& f : mine) {
      size_t copies = SIZE_MAX;
      for (const auto& shard : f.record.shards) copies = std::min(copies, shard.replicas.size());
      const std::string lost = Lost(f.record, alive);
      rows.push_back({f.record.run, f.record.job, train::detail::kNodesPrefix + f.record.id,
                      FormatWallTime(f.record.committed_ms), std::to_string(f.record.shards.size()),
                      FormatBytes(static_cast<double>(f.record.bytes)),
                      copies == SIZE_MAX ? "0" : std::to_string(copies),
                      lost.empty() ? "restorable" : lost});
    }
    if (mine.empty()) {
      std::cout << "No checkpoints are kept by the nodes.\n";
      return 0;
    }
    std::cout << FormatTable(rows);
    return 0;
  }
  if (mine.empty()) {
    std::cerr << "rayx train: no checkpoints of run '" << run << "'"
              << (job.empty() ? "" : " of job " + job) << " (`rayx train list` shows them)\n";
    return 1;
  }
  const auto mode = transport::ParseWireSecurity(status->wire_security);
  if (!mode.ok()) {
    std::cerr << "rayx train: " << mode.status().message() << "\n";
    return 1;
  }
  const auto credential = transport::Credential::Cluster(cluster->second);
  const auto security =
      transport::ClientSecurity::ObjectServer(*mode, credential, credential.CurvePublicKey());
  zmq::context_t context(1);

  if (sub == "delete") {
    size_t nodes = 0;
    {
      ObjectDeleter deleter(context);
      deleter.SetSecurity(security);
      for (const auto& f : mine) {
        std::set<std::string> servers;
        for (const auto& shard : f.record.shards) {
          for (const auto& replica : shard.replicas) {
            if (const NodeInfo* holder = alive.Holder(replica)) {
              servers.insert(holder->object_address);
            }
          }
        }
        if (f.record.shards.empty()) continue;
        const std::string dir = fs::path(f.record.shards.front().shard_dir).parent_path().string();
        for (const auto& server : servers) deleter.DeleteShards(server, {dir});
        nodes = std::max(nodes, servers.size());
      }
    }  // the deleter's sockets linger until their requests went
    std::cout << "Deleted " << mine.size() << " checkpoint(s) of run " << run << " from the nodes ("
              << nodes << " node(s) held copies)\n";
    return 0;
  }

  // export: the chosen checkpoint, every shard pulled into DIR.
  const Found* chosen = nullptr;
  for (auto it = mine.rbegin(); it != mine.rend() && chosen == nullptr; ++it) {
    if (!checkpoint.empty() ? train::detail::kNodesPrefix + it->record.id == checkpoint ||
                                  it->record.id == checkpoint
                            : Lost(it->record, alive).empty()) {
      chosen = &*it;
    }
  }
  if (chosen == nullptr) {
    std::cerr << "rayx train: "
              << (checkpoint.empty() ? "every checkpoint of run " + run + " lost a shard with its nodes"
                                     : "no checkpoint " + checkpoint + " of run " + run)
              << " (`rayx train list` shows them)\n";
    return 1;
  }
  const fs::path dest = positional[2];
  std::error_code ec;
  fs::create_directories(dest, ec);
  const fs::path staging = dest / ".rayx-export";
  fs::remove_all(staging, ec);
  CheckpointFiles into(staging.string());
  SystemClock clock;
  ObjectServerDirectory servers(
      FetchObjectServersFromHead(cluster->first, transport::ClientSecurity::ClusterToHead(cluster->second),
                                 kTimeoutMs),
      clock, ObjectServerDirectory::Options{}, AliveObjectServers(*status));
  size_t files = 0;
  for (const auto& shard : chosen->record.shards) {
    Status pulled = Status::NotFound("no live copy");
    for (const auto& replica : shard.replicas) {
      const NodeInfo* holder = alive.Holder(replica);
      if (holder == nullptr) continue;
      pulled = PullShard(context, security, servers, holder->object_address, replica.dir,
                         shard.shard_dir, shard.manifest.files, shard.manifest.hash, into);
      if (pulled.ok()) break;
    }
    if (!pulled.ok()) {
      fs::remove_all(staging, ec);
      std::cerr << "rayx train: rank " << shard.rank << "'s shard: " << pulled.message() << "\n";
      return 1;
    }
    // Into DIR, as the whole checkpoint (a file several ranks reported: the
    // lowest rank's).
    for (const auto& file : shard.manifest.files) {
      const fs::path to = dest / file.path;
      if (fs::exists(to, ec)) continue;
      fs::create_directories(to.parent_path(), ec);
      fs::rename(staging / shard.shard_dir / file.path, to, ec);
      if (ec) {
        std::cerr << "rayx train: cannot write " << to.string() << ": " << ec.message() << "\n";
        return 1;
      }
      ++files;
    }
  }
  fs::remove_all(staging, ec);
  std::cout << "Exported checkpoint " << train::detail::kNodesPrefix << chosen->record.id << " of run "
            << run << " (" << chosen->record.shards.size() << " shard(s), " << files << " file(s), "
            << FormatBytes(static_cast<double>(chosen->record.bytes)) << ") into " << dest.string()
            << "\n";
  return 0;
}

}  // namespace rayx::cli
