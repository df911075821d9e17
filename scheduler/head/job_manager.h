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
  // Up to `length` bytes from `offset`, and the package's size.
  Result<std::pair<uint64_t, std::string>> ReadPackage(const std::string& hash, uint64_t offset,
                                                       uint64_t length) const;
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
  void End(protocol::JobInfo& job, const std::string& state, const std::string& message);
  protocol::JobInfo* FindByLease(const LeaseId& lease_id);
  // Whether a job that has not ended runs in package `hash`.
  bool RunsInPackage(const std::string& hash) const;
  bool DeleteUnkeptPackage(const std::string& hash);

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
  uint64_t next_request_id_ = 1;
  HeadStore* store_ = nullptr;
};

}  // namespace rayx::scheduler
