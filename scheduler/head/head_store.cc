// The head's durable state in SQLite.
#include "head/head_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include <algorithm>
#include <chrono>

#include "common/logging.h"
#include "protocol/codec.h"

namespace rayx::scheduler {

namespace {

// Bumped when a table changes shape; a file from a newer rayx is refused.
constexpr int kSchemaVersion = 1;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS nodes(node_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL,
                                 info BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS kv(ns TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
                              job_id TEXT NOT NULL, PRIMARY KEY(ns, key));
CREATE INDEX IF NOT EXISTS kv_by_job ON kv(job_id);
CREATE TABLE IF NOT EXISTS actors(name TEXT PRIMARY KEY, info BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS placement_groups(group_id TEXT PRIMARY KEY, info BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS jobs(job_id TEXT PRIMARY KEY, supervised INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS submitted_jobs(submission_id TEXT PRIMARY KEY, info BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS leases(lease_id TEXT PRIMARY KEY, node_id TEXT NOT NULL,
                                  info BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS group_watches(group_name TEXT NOT NULL, attempt_id TEXT NOT NULL,
                                         rank INTEGER NOT NULL, info BLOB NOT NULL,
                                         PRIMARY KEY(group_name, attempt_id, rank));
CREATE TABLE IF NOT EXISTS package_keepers(hash TEXT NOT NULL, owner TEXT NOT NULL,
                                           PRIMARY KEY(hash, owner));
)sql";

// Indexed by HeadStore::Stmt.
constexpr const char* kStatements[] = {
    "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)",
    "INSERT OR REPLACE INTO nodes(node_id, epoch, info) VALUES(?, ?, ?)",
    "DELETE FROM nodes WHERE node_id = ?",
    "INSERT OR REPLACE INTO kv(ns, key, value, job_id) VALUES(?, ?, ?, ?)",
    "DELETE FROM kv WHERE ns = ? AND key = ?",
    "DELETE FROM kv WHERE job_id = ?",
    "INSERT OR REPLACE INTO actors(name, info) VALUES(?, ?)",
    "DELETE FROM actors WHERE name = ?",
    "INSERT OR REPLACE INTO placement_groups(group_id, info) VALUES(?, ?)",
    "DELETE FROM placement_groups WHERE group_id = ?",
    "INSERT OR REPLACE INTO jobs(job_id, supervised) VALUES(?, ?)",
    "DELETE FROM jobs WHERE job_id = ?",
    "INSERT OR REPLACE INTO submitted_jobs(submission_id, info) VALUES(?, ?)",
    "DELETE FROM submitted_jobs WHERE submission_id = ?",
    "INSERT OR REPLACE INTO leases(lease_id, node_id, info) VALUES(?, ?, ?)",
    "DELETE FROM leases WHERE lease_id = ?",
    "INSERT OR REPLACE INTO group_watches(group_name, attempt_id, rank, info) VALUES(?, ?, ?, ?)",
    "DELETE FROM group_watches WHERE group_name = ? AND attempt_id = ? AND rank = ?",
    "DELETE FROM group_watches WHERE group_name = ? AND attempt_id = ?",
    "INSERT OR IGNORE INTO package_keepers(hash, owner) VALUES(?, ?)",
    "DELETE FROM package_keepers WHERE hash = ? AND owner = ?",
};

// Rows are our own writing, but a damaged file must not crash the head: the
// same bounded decoder as the wire, with room for large values.
protocol::DecodeLimits StoreLimits() {
  protocol::DecodeLimits limits;
  limits.max_str = protocol::kMaxControlFrameBytes;
  return limits;
}

std::string Column(sqlite3_stmt* stmt, int i) {
  const void* data = sqlite3_column_blob(stmt, i);
  int size = sqlite3_column_bytes(stmt, i);
  return data ? std::string(static_cast<const char*>(data), static_cast<size_t>(size))
              : std::string();
}

}  // namespace

Result<std::unique_ptr<HeadStore>> HeadStore::Open(const std::string& path) {
  // The file (and SQLite's journal beside it) holds the cluster's state: its
  // owner alone reads it. Created 0600; an older file is narrowed too.
  {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
      (void)::fchmod(fd, 0600);
      ::close(fd);
    }
  }
  mode_t old_mask = ::umask(0077);  // the journal SQLite creates next to it
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  ::umask(old_mask);
  if (rc != SQLITE_OK) {
    std::string why = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return Status::Internal("cannot open the head's state file " + path + ": " + why +
                            ": check that its directory exists and is writable");
  }
  std::unique_ptr<HeadStore> store(new HeadStore(path, db));
  RAYX_RETURN_IF_ERROR(store->Init());
  return store;
}

HeadStore::~HeadStore() {
  EndBatch();  // a batch still open (the head stopping mid-pass) is kept
  for (sqlite3_stmt* stmt : stmts_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

Status HeadStore::Error(const std::string& what) const {
  return Status::Internal(
      "the head's state file " + path_ + " " + what + ": " + sqlite3_errmsg(db_) +
      ": it is damaged or not a rayx head state file; move it away to start this head with an "
      "empty cluster (the nodes then join as new nodes), or pass another --temp-dir");
}

Status HeadStore::Init() {
  sqlite3_busy_timeout(db_, 1000);
  int version = 0;
  {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, "PRAGMA user_version", -1, &stmt, nullptr) != SQLITE_OK ||
        sqlite3_step(stmt) != SQLITE_ROW) {
      sqlite3_finalize(stmt);
      return Error("cannot be read");
    }
    version = sqlite3_column_int(stmt, 0);
    sqlite3_finalize(stmt);
  }
  if (version > kSchemaVersion) {
    return Status::Internal("the head's state file " + path_ + " was written by a newer rayx (schema " +
                            std::to_string(version) + ", this rayx knows " +
                            std::to_string(kSchemaVersion) +
                            "): start the head with that rayx version, or move the file away");
  }
  char* err = nullptr;
  std::string setup = std::string("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; ") +
                      kSchema + "PRAGMA user_version=" + std::to_string(kSchemaVersion) + ";";
  if (sqlite3_exec(db_, setup.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string why = err ? err : "unknown error";
    sqlite3_free(err);
    return Error("cannot be set up (" + why + ")");
  }
  // A corrupt file can pass the schema statements: check it once at start.
  {
    sqlite3_stmt* stmt = nullptr;
    bool ok = sqlite3_prepare_v2(db_, "PRAGMA quick_check", -1, &stmt, nullptr) == SQLITE_OK &&
              sqlite3_step(stmt) == SQLITE_ROW && Column(stmt, 0) == "ok";
    sqlite3_finalize(stmt);
    if (!ok) return Error("failed its integrity check");
  }
  for (int i = 0; i < kStmtCount; ++i) {
    if (sqlite3_prepare_v2(db_, kStatements[i], -1, &stmts_[i], nullptr) != SQLITE_OK) {
      return Error("cannot prepare \"" + std::string(kStatements[i]) + "\"");
    }
  }
  return Status::OK();
}

void HeadStore::WriteFailed(const std::string& what, uint64_t count) {
  const bool first = write_errors_ == 0;
  write_errors_ += count;
  int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count();
  if (first || now_s - last_error_log_s_ >= 60) {
    last_error_log_s_ = now_s;
    RAYX_LOG(Error) << "could not write " << what << " to the head's state file " << path_
                    << ": " << sqlite3_errmsg(db_) << " (" << write_errors_
                    << " failed writes so far; the head keeps running from memory, but a "
                       "restart would lose these changes)";
  }
}

bool HeadStore::Exec(const char* sql) {
  return sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) == SQLITE_OK;
}

void HeadStore::EndBatch() {
  batching_ = false;
  if (!in_transaction_) return;
  in_transaction_ = false;
  if (Exec("COMMIT")) return;
  // Busy (a checkpoint, a reader holding a lock): once more, then give up.
  if (sqlite3_errcode(db_) == SQLITE_BUSY && Exec("COMMIT")) return;
  BatchLost("COMMIT");
  // A commit that failed can leave the transaction open: end it, so that the
  // next writes are not held in it.
  if (!sqlite3_get_autocommit(db_)) Exec("ROLLBACK");
}

void HeadStore::BatchLost(const std::string& what) {
  // The batch's earlier writes are gone with it: each is a failed write.
  WriteFailed(what + " (with the " + std::to_string(batch_writes_) + " changes of its batch)",
              std::max<uint64_t>(batch_writes_, 1));
  batch_writes_ = 0;
}

void HeadStore::Run(Stmt which, const std::vector<Arg>& args) {
  if (batching_ && !in_transaction_) {
    // The batch's first write opens its transaction; if that fails, the
    // batch's writes commit one by one.
    in_transaction_ = Exec("BEGIN");
    if (!in_transaction_) batching_ = false;
    batch_writes_ = 0;
  }
  sqlite3_stmt* stmt = stmts_[which];
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  for (size_t i = 0; i < args.size(); ++i) {
    int index = static_cast<int>(i) + 1;
    if (args[i].kind == Arg::kInt) {
      sqlite3_bind_int64(stmt, index, args[i].number);
    } else {
      sqlite3_bind_blob(stmt, index, args[i].text.data(), static_cast<int>(args[i].text.size()),
                        SQLITE_TRANSIENT);
    }
  }
  int rc = sqlite3_step(stmt);
  sqlite3_reset(stmt);
  if (in_transaction_) ++batch_writes_;
  if (rc == SQLITE_DONE) return;
  if (in_transaction_ && sqlite3_get_autocommit(db_)) {
    // SQLite rolled the whole batch back (disk full, I/O error, no memory):
    // the rest of this pass commits write by write.
    in_transaction_ = false;
    batching_ = false;
    BatchLost(kStatements[which]);
    return;
  }
  WriteFailed(kStatements[which]);
}

Result<HeadState> HeadStore::Load() {
  HeadState state;
  auto query = [&](const char* sql, auto&& row) -> Status {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr) != SQLITE_OK) {
      return Error("cannot be read");
    }
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      Status s = row(stmt);
      if (!s.ok()) {
        sqlite3_finalize(stmt);
        return Status::Internal("the head's state file " + path_ + " has a damaged row (" +
                                s.message() +
                                "): move the file away to start this head with an empty cluster");
      }
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) return Error("cannot be read");
    return Status::OK();
  };
  auto limits = StoreLimits();
  RAYX_RETURN_IF_ERROR(query("SELECT key, value FROM meta", [&](sqlite3_stmt* s) {
    state.meta[Column(s, 0)] = Column(s, 1);
    return Status::OK();
  }));
  RAYX_RETURN_IF_ERROR(query("SELECT epoch, info FROM nodes", [&](sqlite3_stmt* s) -> Status {
    auto info = protocol::Decode<NodeInfo>(Column(s, 1), limits);
    if (!info.ok()) return info.status();
    state.nodes.push_back({std::move(*info), static_cast<uint64_t>(sqlite3_column_int64(s, 0))});
    return Status::OK();
  }));
  RAYX_RETURN_IF_ERROR(query("SELECT ns, key, value, job_id FROM kv", [&](sqlite3_stmt* s) {
    state.kv.push_back({Column(s, 0), Column(s, 1), Column(s, 2), JobId::FromWire(Column(s, 3))});
    return Status::OK();
  }));
  RAYX_RETURN_IF_ERROR(query("SELECT info FROM actors", [&](sqlite3_stmt* s) -> Status {
    auto actor = protocol::Decode<protocol::ActorInfo>(Column(s, 0), limits);
    if (!actor.ok()) return actor.status();
    state.actors.push_back(std::move(*actor));
    return Status::OK();
  }));
  RAYX_RETURN_IF_ERROR(query("SELECT info FROM placement_groups", [&](sqlite3_stmt* s) -> Status {
    auto group = protocol::Decode<StoredPlacementGroup>(Column(s, 0), limits);
    if (!group.ok()) return group.status();
    state.placement_groups.push_back(std::move(*group));
    return Status::OK();
  }));
  RAYX_RETURN_IF_ERROR(query("SELECT job_id, supervised FROM jobs", [&](sqlite3_stmt* s) {
    state.jobs.push_back({JobId::FromWire(Column(s, 0)), sqlite3_column_int64(s, 1) != 0});
    return Status::OK();
  }));
  RAYX_RETURN_IF_ERROR(query("SELECT info FROM submitted_jobs", [&](sqlite3_stmt* s) -> Status {
    auto job = protocol::Decode<protocol::JobInfo>(Column(s, 0), limits);
    if (!job.ok()) return job.status();
    state.submitted_jobs.push_back(std::move(*job));
    return Status::OK();
  }));
  RAYX_RETURN_IF_ERROR(query("SELECT info FROM leases", [&](sqlite3_stmt* s) -> Status {
    auto lease = protocol::Decode<StoredLease>(Column(s, 0), limits);
    if (!lease.ok()) return lease.status();
    state.leases.push_back(std::move(*lease));
    return Status::OK();
  }));
  RAYX_RETURN_IF_ERROR(query("SELECT info FROM group_watches", [&](sqlite3_stmt* s) -> Status {
    auto watch = protocol::Decode<StoredGroupWatch>(Column(s, 0), limits);
    if (!watch.ok()) return watch.status();
    state.group_watches.push_back(std::move(*watch));
    return Status::OK();
  }));
  RAYX_RETURN_IF_ERROR(query("SELECT hash, owner FROM package_keepers", [&](sqlite3_stmt* s) {
    state.package_keepers.emplace_back(Column(s, 0), Column(s, 1));
    return Status::OK();
  }));
  return state;
}

HeadStore::Arg HeadStore::Text(std::string s) { return {Arg::kText, std::move(s), 0}; }
HeadStore::Arg HeadStore::Int(int64_t n) { return {Arg::kInt, {}, n}; }

void HeadStore::PutMeta(const std::string& key, const std::string& value) {
  Run(kPutMeta, {Text(key), Text(value)});
}
void HeadStore::PutNode(const NodeInfo& info, uint64_t epoch) {
  Run(kPutNode, {Text(info.node_id.Hex()), Int(static_cast<int64_t>(epoch)),
                 Text(protocol::Encode(info))});
}
void HeadStore::DeleteNode(const NodeId& id) { Run(kDeleteNode, {Text(id.Hex())}); }
void HeadStore::PutKv(const std::string& ns, const std::string& key, const std::string& value,
                      const JobId& job_id) {
  Run(kPutKv, {Text(ns), Text(key), Text(value), Text(job_id.Hex())});
}
void HeadStore::DeleteKv(const std::string& ns, const std::string& key) {
  Run(kDeleteKv, {Text(ns), Text(key)});
}
void HeadStore::DeleteKvOfJob(const JobId& job_id) { Run(kDeleteKvOfJob, {Text(job_id.Hex())}); }
void HeadStore::PutActor(const protocol::ActorInfo& actor) {
  Run(kPutActor, {Text(actor.name), Text(protocol::Encode(actor))});
}
void HeadStore::DeleteActor(const std::string& name) { Run(kDeleteActor, {Text(name)}); }
void HeadStore::PutPlacementGroup(const StoredPlacementGroup& group) {
  Run(kPutGroup, {Text(group.info.placement_group_id.Hex()), Text(protocol::Encode(group))});
}
void HeadStore::DeletePlacementGroup(const PlacementGroupId& group_id) {
  Run(kDeleteGroup, {Text(group_id.Hex())});
}
void HeadStore::PutJob(const StoredJob& job) {
  Run(kPutJob, {Text(job.job_id.Hex()), Int(job.supervised ? 1 : 0)});
}
void HeadStore::DeleteJob(const JobId& job_id) { Run(kDeleteJob, {Text(job_id.Hex())}); }
void HeadStore::PutSubmittedJob(const protocol::JobInfo& job) {
  Run(kPutSubmitted, {Text(job.submission_id), Text(protocol::Encode(job))});
}
void HeadStore::DeleteSubmittedJob(const std::string& submission_id) {
  Run(kDeleteSubmitted, {Text(submission_id)});
}
void HeadStore::PutLease(const StoredLease& lease) {
  Run(kPutLease, {Text(lease.lease_id.Hex()), Text(lease.node_id), Text(protocol::Encode(lease))});
}
void HeadStore::DeleteLease(const LeaseId& lease_id) { Run(kDeleteLease, {Text(lease_id.Hex())}); }
void HeadStore::PutGroupWatch(const StoredGroupWatch& watch) {
  Run(kPutGroupWatch, {Text(watch.group), Text(watch.attempt_id), Int(watch.rank),
                       Text(protocol::Encode(watch))});
}
void HeadStore::DeleteGroupWatch(const std::string& group, const std::string& attempt_id,
                                 int32_t rank) {
  Run(kDeleteGroupWatch, {Text(group), Text(attempt_id), Int(rank)});
}
void HeadStore::DeleteGroupWatches(const std::string& group, const std::string& attempt_id) {
  Run(kDeleteGroupWatches, {Text(group), Text(attempt_id)});
}
void HeadStore::PutPackageKeeper(const std::string& hash, const std::string& owner) {
  Run(kPutPackageKeeper, {Text(hash), Text(owner)});
}
void HeadStore::DeletePackageKeeper(const std::string& hash, const std::string& owner) {
  Run(kDeletePackageKeeper, {Text(hash), Text(owner)});
}

}  // namespace rayx::scheduler
