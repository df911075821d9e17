// Submitted jobs (rayx job): their entrypoints, states and working directories.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "head/lease_manager.h"
#include "head/node_table.h"
#include "protocol/job_messages.h"

namespace rayx::scheduler {

// Design: a submitted job's entrypoint is a process lease the head itself owns
// (on the head node, holding no resources), so the job lives on when the
// submitting CLI goes away. The job is "supervised": it does not end when its
// drivers stop heartbeating, but when the entrypoint exits, fails to start or
// is stopped; then LeaseManager::FinishJob removes every worker, actor,
// placement group and object of the job on every node (detached actors stay).
//
// Working directories travel as packages: tar archives named by their content
// hash, uploaded once to the head (PutPackage, in chunks) and fetched once per
// node by the agents that run the job's processes.
//
// The package store is bounded: packages and uploads in progress (by the
// bytes received, so a declared size reserves nothing) hold at most
// max_store_bytes. A chunk that would pass it first deletes packages, least
// recently used first (put, submitted with, or read), among those nobody
// keeps (KeepPackage) and no job that has not ended runs in; when that is not
// enough the chunk is refused with the figures. An upload silent for
// upload_expiry_ms is abandoned and its part deleted (checked at every
// PutPackage and Submit, and by ExpireUploads); a restarted head deletes the
// parts it finds.
//
// Restart: with a HeadStore each job is written through on every state
// change. A restarted head Restores them: a RUNNING job's entrypoint lease is
// kept when its node rejoins and reports it live, and its exit then ends the
// job as before; a job still PENDING (its entrypoint had not started) fails,
// as its lease request died with the previous head.
//
// Owned by the head's event loop; not thread-safe.
class JobManager final : public HeadLeaseOwner {
 public:
  struct Options {
    std::string package_dir;                          // where packages are kept
    uint64_t max_package_bytes = uint64_t{100} << 20; // Default: 100 MiB
    // Packages and uploads in progress together; past it, the packages
    // least recently used that nobody keeps and no running job uses are
    // deleted. Default: 10 GiB.
    uint64_t max_store_bytes = uint64_t{10} << 30;
    // An upload with no chunk for this long is abandoned: its part is
    // deleted. Default: 10 minutes.
    int64_t upload_expiry_ms = 10 * 60 * 1000;
    size_t max_finished_jobs = 1000;                  // the oldest are forgotten
  };

  // Becomes `leases`' head owner: the entrypoints' grants, failures and exits
  // come here as typed calls.
  JobManager(Options options, LeaseManager& leases, NodeTable& nodes, const Clock& clock);

  // Returns InvalidArgument for an empty entrypoint, a malformed or taken
  // submission id, or a package the head does not have.
  Result<protocol::JobInfo> Submit(const protocol::SubmitJobRequest& req);
  Result<protocol::JobInfo> Get(const std::string& submission_id) const;
  std::vector<protocol::JobInfo> List() const;
  // Stops the entrypoint and everything of the job; a no-op for an ended job.
  Result<protocol::JobInfo> Stop(const std::string& submission_id);

  bool HasPackage(const std::string& hash) const;
  // Appends a chunk; returns true when the package is complete (hash checked).
  Result<bool> PutPackage(const protocol::PutPackageRequest& req, std::string_view bytes);
  // Up to `length` bytes from `offset`, and the package's size. Counts as a
  // use of the package.
  Result<std::pair<uint64_t, std::string>> ReadPackage(const std::string& hash, uint64_t offset,
                                                       uint64_t length);
  // Deletes the parts of uploads silent for upload_expiry_ms.
  void ExpireUploads();
  // Bytes the store holds: packages and the parts of uploads in progress.
  uint64_t store_bytes() const { return package_bytes_ + upload_bytes_; }
  uint64_t max_package_bytes() const { return options_.max_package_bytes; }
  // Records that `owner` keeps package `hash` (keep), or no longer does.
  // Once every keeper let go, the package is deleted unless a job that has
  // not ended runs in it (then it is deleted when the last such job ends);
  // returns whether it was deleted now. Packages nobody ever kept
  // (working directories) are not affected. InvalidArgument for a malformed
  // hash or an empty or over-long owner.
  Result<bool> KeepPackage(const std::string& hash, const std::string& owner, bool keep);
  // Loads the keepers of a previous head life.
  void RestoreKeepers(const std::vector<std::pair<std::string, std::string>>& keepers);

  // Writes jobs through to `store` (nullptr: none); it must outlive this.
  void SetStore(HeadStore* store) { store_ = store; }
  // Loads the submitted jobs of a previous head life (after
  // LeaseManager::Restore).
  void Restore(const std::vector<protocol::JobInfo>& jobs);

  // HeadLeaseOwner: what happens to the entrypoints' leases.
  void OnLeaseGranted(uint64_t request_id, const protocol::RequestLeaseReply& grant) override;
  void OnLeaseFailed(uint64_t request_id, const Status& status) override;
  void OnLeaseLost(const LeaseId& lease_id, const std::string& why) override;
  void OnProcessExited(const protocol::ProcessExitedNotice& notice) override;

 private:
  void End(protocol::JobInfo& job, protocol::JobState state, const std::string& message);
  protocol::JobInfo* FindByLease(const LeaseId& lease_id);
  // Whether a job that has not ended runs in package `hash`.
  bool RunsInPackage(const std::string& hash) const;
  bool DeleteUnkeptPackage(const std::string& hash);
  // Deletes packages (least recently used first, never kept or in-use ones)
  // until `more` bytes fit; false, with nothing deleted beyond what was
  // evictable, when they cannot.
  bool MakeRoom(uint64_t more, const std::string& uploading);
  // The packages jobs that have not ended run in.
  std::set<std::string> PackagesInUse() const;
  // Nobody keeps it and no job that has not ended runs in it (`in_use`).
  bool Evictable(const std::string& hash, const std::set<std::string>& in_use) const;
  void ForgetPackage(const std::string& hash);
  void DropUpload(const std::string& hash);
  std::string PackagePath(const std::string& hash) const;
  std::string PartPath(const std::string& hash) const;

  struct StoredPackage {
    uint64_t bytes = 0;
    int64_t last_used_ms = 0;
  };
  struct Upload {
    uint64_t total_size = 0;
    uint64_t received = 0;
    int64_t last_chunk_ms = 0;
  };

  Options options_;
  LeaseManager& leases_;
  NodeTable& nodes_;
  const Clock& clock_;
  std::map<std::string, protocol::JobInfo> jobs_;   // by submission id
  std::map<uint64_t, std::string> lease_requests_;  // request id -> submission id
  std::deque<std::string> finished_;                // oldest first
  // Packages' keepers (KeepPackage); a package leaves when its set empties.
  // Bounded by what keepers keep (a Train run: its last num_to_keep).
  std::map<std::string, std::set<std::string>> keepers_;
  // Packages every keeper let go of while a job ran in them: deleted when the
  // last such job ends. Not kept across a head restart (the package then
  // stays, like a working directory).
  std::set<std::string> unkept_in_use_;
  // The store's packages and uploads in progress, by hash.
  std::map<std::string, StoredPackage> packages_;
  std::map<std::string, Upload> uploads_;
  uint64_t package_bytes_ = 0;
  uint64_t upload_bytes_ = 0;
  uint64_t next_request_id_ = 1;
  HeadStore* store_ = nullptr;
};

}  // namespace rayx::scheduler
