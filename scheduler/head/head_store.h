// The head's durable state: one SQLite file in its session directory, so a
// restarted head (same port, same temp dir) finds its cluster again.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "protocol/job_messages.h"
#include "protocol/messages.h"
#include "protocol/placement_messages.h"
#include "rayx/cluster_status.h"
#include "rayx/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace rayx::scheduler {

// One node as remembered across restarts: what it registered with and the
// incarnation (epoch) its agent stamps its messages with.
struct StoredNode {
  NodeInfo info;
  uint64_t epoch = 0;
};

// One bundle's reservation: the node and the node's devices it holds (nil node:
// lost with its node, waiting to be placed again).
struct StoredBundle {
  std::string node_id;  // hex, "" when not reserved
  std::vector<int> devices;
  MSGPACK_DEFINE_MAP(node_id, devices)
};

// A placement group's spec, state and where its bundles were reserved.
struct StoredPlacementGroup {
  protocol::PlacementGroupInfo info;
  LabelMap label_selector;
  std::vector<StoredBundle> bundles;  // empty: nothing reserved
  MSGPACK_DEFINE_MAP(info, label_selector, bundles)
};

// A lease as the head granted it. The agent's report on rejoin says whether
// its worker still runs; this says what the agent does not know.
struct StoredLease {
  LeaseId lease_id;
  JobId job_id;
  std::string node_id;  // hex
  ResourceMap resources;
  std::vector<int> gpu_ids;
  std::string owner_peer;  // the owner's routing id ("" for the head)
  bool owner_head = false;
  bool running = false;  // the owner was told (granted); false while starting
  bool detached = false;
  bool for_actor = false;
  bool process = false;
  PlacementGroupId group_id;
  int32_t bundle_index = -1;
  int32_t pid = 0;
  ActorId actor_id;  // for_actor: the actor it was granted for (EndActorLeases)
  MSGPACK_DEFINE_MAP(lease_id, job_id, node_id, resources, gpu_ids, owner_peer, owner_head,
                     running, detached, for_actor, process, group_id, bundle_index, pid, actor_id)
};

// One watched rank of a collective group (GroupWatch).
struct StoredGroupWatch {
  std::string group;
  std::string attempt_id;
  int32_t world_size = 0;
  int32_t rank = -1;
  LeaseId lease_id;
  std::string peer;  // the rank's routing id (fixed for a runtime's life)
  MSGPACK_DEFINE_MAP(group, attempt_id, world_size, rank, lease_id, peer)
};

// A driver job the head keeps (LeaseManager's jobs).
struct StoredJob {
  JobId job_id;
  bool supervised = false;
};

// One KV entry.
struct StoredKv {
  std::string ns;
  std::string key;
  std::string value;
  JobId job_id;
};

// Everything the head loads at start.
struct HeadState {
  std::map<std::string, std::string> meta;  // cluster_id, ...
  std::vector<StoredNode> nodes;
  std::vector<StoredKv> kv;
  std::vector<protocol::ActorInfo> actors;
  std::vector<StoredPlacementGroup> placement_groups;
  std::vector<StoredJob> jobs;
  std::vector<protocol::JobInfo> submitted_jobs;
  std::vector<StoredLease> leases;
  std::vector<StoredGroupWatch> group_watches;
  std::vector<std::pair<std::string, std::string>> package_keepers;  // {hash, owner}
  bool empty() const {
    return nodes.empty() && kv.empty() && actors.empty() && placement_groups.empty() &&
           jobs.empty() && submitted_jobs.empty() && leases.empty() && group_watches.empty() &&
           package_keepers.empty();
  }
};

// Design: write-through. Each mutation of the head's tables is one statement
// in one transaction (autocommit), on a prepared statement, in WAL mode with
// synchronous=NORMAL: a commit is an append to the WAL without fsync, which
// survives the head's crash or SIGKILL (the OS has the pages) but may lose the
// last commits on a power loss. Values are msgpack maps of the wire structs
// (new fields read as their defaults from older rows); keys are columns.
// Reading happens once, at start (Load); the head's managers keep the live
// copy in memory and never read back.
//
// Group commit: the head's event loop handles its messages in passes
// (transport::ZmqSocketLoop) and wraps each pass in BeginBatch/EndBatch. The
// pass's writes then share one transaction, begun at its first write and
// committed by EndBatch; the head sends the pass's replies only after that
// (HeadServer), so a reply still means its change is in the file. Writes
// outside a batch (timers) commit one by one.
//
// A failed write (disk full, file removed) is logged once per minute and
// counted (write_errors); the head keeps serving from memory: losing
// durability is better than losing the cluster.
//
// Owns the SQLite connection. Not thread-safe: the head's event loop owns it.
class HeadStore {
 public:
  // Opens or creates the file at `path` (WAL, synchronous=NORMAL) and its
  // tables. Returns Internal naming the path and what to do when the file
  // cannot be opened, is not a rayx head state file, is corrupt, or was
  // written by a newer rayx.
  static Result<std::unique_ptr<HeadStore>> Open(const std::string& path);
  ~HeadStore();
  HeadStore(const HeadStore&) = delete;
  HeadStore& operator=(const HeadStore&) = delete;

  // Everything stored. Internal (naming the path) when a row cannot be read.
  Result<HeadState> Load();

  void PutMeta(const std::string& key, const std::string& value);
  void PutNode(const NodeInfo& info, uint64_t epoch);
  void DeleteNode(const NodeId& id);
  void PutKv(const std::string& ns, const std::string& key, const std::string& value,
             const JobId& job_id);
  void DeleteKv(const std::string& ns, const std::string& key);
  void DeleteKvOfJob(const JobId& job_id);
  void PutActor(const protocol::ActorInfo& actor);
  void DeleteActor(const std::string& name);
  void PutPlacementGroup(const StoredPlacementGroup& group);
  void DeletePlacementGroup(const PlacementGroupId& group_id);
  void PutJob(const StoredJob& job);
  void DeleteJob(const JobId& job_id);
  void PutSubmittedJob(const protocol::JobInfo& job);
  void DeleteSubmittedJob(const std::string& submission_id);
  void PutLease(const StoredLease& lease);
  void DeleteLease(const LeaseId& lease_id);
  void PutGroupWatch(const StoredGroupWatch& watch);
  void DeleteGroupWatch(const std::string& group, const std::string& attempt_id, int32_t rank);
  // Every rank of one group attempt.
  void DeleteGroupWatches(const std::string& group, const std::string& attempt_id);
  void PutPackageKeeper(const std::string& hash, const std::string& owner);
  void DeletePackageKeeper(const std::string& hash, const std::string& owner);

  // Group commit (see above). EndBatch commits what the batch wrote. A batch
  // SQLite rolls back (a failed statement inside it: disk full, I/O error) or
  // whose commit fails is logged once and counted as that many failed writes;
  // the head keeps serving from memory, as for any failed write.
  void BeginBatch() { batching_ = true; }
  void EndBatch();

  const std::string& path() const { return path_; }
  uint64_t write_errors() const { return write_errors_; }
  // Runs `sql` on the store's connection (tests: e.g. a page limit).
  bool TEST_Exec(const std::string& sql) { return Exec(sql.c_str()); }

 private:
  // Prepared statements, by purpose.
  enum Stmt {
    kPutMeta,
    kPutNode,
    kDeleteNode,
    kPutKv,
    kDeleteKv,
    kDeleteKvOfJob,
    kPutActor,
    kDeleteActor,
    kPutGroup,
    kDeleteGroup,
    kPutJob,
    kDeleteJob,
    kPutSubmitted,
    kDeleteSubmitted,
    kPutLease,
    kDeleteLease,
    kPutGroupWatch,
    kDeleteGroupWatch,
    kDeleteGroupWatches,
    kPutPackageKeeper,
    kDeletePackageKeeper,
    kStmtCount
  };
  struct Arg {
    enum Kind { kText, kInt } kind;
    std::string text;
    int64_t number = 0;
  };
  static Arg Text(std::string s);
  static Arg Int(int64_t n);

  HeadStore(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  Status Init();
  // Runs the prepared statement with `args` bound in order.
  void Run(Stmt stmt, const std::vector<Arg>& args);
  void WriteFailed(const std::string& what, uint64_t count = 1);
  // Runs a transaction statement (BEGIN, COMMIT, ROLLBACK); false on failure.
  bool Exec(const char* sql);
  // A batch's transaction was rolled back by `what`: logs it and counts each
  // of its writes as failed.
  void BatchLost(const std::string& what);
  Status Error(const std::string& what) const;

  std::string path_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmts_[kStmtCount] = {};
  bool batching_ = false;        // between BeginBatch and EndBatch
  bool in_transaction_ = false;  // the batch's transaction is open
  uint64_t batch_writes_ = 0;    // statements run in it
  uint64_t write_errors_ = 0;
  int64_t last_error_log_s_ = 0;
};

}  // namespace rayx::scheduler
