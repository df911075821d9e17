// Submitted jobs on the head.
#include "head/job_manager.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/content_hash.h"
#include "common/logging.h"
#include "protocol/process_messages.h"

namespace rayx::scheduler {

namespace fs = std::filesystem;

namespace {
bool ValidSubmissionId(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}
}  // namespace

JobManager::JobManager(Options options, LeaseManager& leases, NodeTable& nodes, const Clock& clock)
    : options_(std::move(options)), leases_(leases), nodes_(nodes), clock_(clock) {
  leases_.SetHeadOwner(this);
  std::error_code ec;
  if (options_.package_dir.empty()) return;
  fs::create_directories(options_.package_dir, ec);
  // The packages a previous head life stored count in the store, as used
  // now; its uploads cannot be continued (their peers start again).
  int64_t now = clock_.NowMs();
  for (const auto& entry : fs::directory_iterator(options_.package_dir, ec)) {
    std::string name = entry.path().filename().string();
    std::error_code size_ec;
    if (name.size() == 64 + 5 && name.compare(64, 5, ".part") == 0) {
      fs::remove(entry.path(), size_ec);
    } else if (name.size() == 64 + 4 && name.compare(64, 4, ".tar") == 0 &&
               IsContentHash(name.substr(0, 64)) && entry.is_regular_file(size_ec)) {
      uint64_t bytes = entry.file_size(size_ec);
      if (size_ec) continue;
      packages_[name.substr(0, 64)] = StoredPackage{bytes, now};
      package_bytes_ += bytes;
    }
  }
}

Result<protocol::JobInfo> JobManager::Submit(const protocol::SubmitJobRequest& req) {
  if (req.entrypoint.empty() || req.entrypoint[0].empty()) {
    return Status::InvalidArgument("no entrypoint: rayx job submit -- COMMAND ARGS...");
  }
  JobId job_id = JobId::FromSecureRandom();  // a credential: not guessable
  std::string id = req.submission_id.empty() ? "rayxjob_" + job_id.Hex() : req.submission_id;
  if (!ValidSubmissionId(id)) {
    return Status::InvalidArgument("submission id '" + id.substr(0, 80) +
                                   "': use 1-64 characters of A-Z a-z 0-9 _ - .");
  }
  if (jobs_.count(id)) {
    return Status::AlreadyExists("a job with submission id '" + id +
                                 "' exists already: choose another id");
  }
  ExpireUploads();
  if (!req.package_hash.empty() && !HasPackage(req.package_hash)) {
    return Status::InvalidArgument("the head has no working directory package " +
                                   req.package_hash.substr(0, 12) + ": upload it first");
  }
  if (!req.package_hash.empty()) packages_[req.package_hash].last_used_ms = clock_.NowMs();
  protocol::JobInfo job;
  job.submission_id = id;
  job.job_id = job_id;
  job.state = protocol::JobState::kPending;
  job.entrypoint = req.entrypoint;
  job.package_hash = req.package_hash;
  job.submitted_at_ms = clock_.WallMs();
  leases_.AddSupervisedJob(job_id, clock_.NowMs());

  // The entrypoint: a process on the head node, holding no resources.
  protocol::RequestLeaseRequest lease;
  lease.job_id = job_id;
  lease.detached = true;  // ended by this manager, not by FinishJob
  for (const NodeId& node : nodes_.AliveInOrder()) {
    const NodeInfo* info = nodes_.FindAlive(node);
    if (info && info->is_head_node) {
      lease.strategy = protocol::LeaseStrategy::kNodeAffinity;
      lease.affinity_node_id = node.Hex();
      lease.affinity_soft = true;
    }
  }
  protocol::ProcessSpec spec;
  spec.argv = req.entrypoint;
  spec.env = req.env;
  spec.env["RAYX_SUBMISSION_ID"] = id;
  spec.log_name = "job-" + id;
  spec.package_hash = req.package_hash;
  lease.processes.push_back(std::move(spec));
  uint64_t request_id = next_request_id_++;
  lease_requests_[request_id] = id;
  jobs_[id] = job;
  if (store_) store_->PutSubmittedJob(job);
  RAYX_LOG(Info) << "job " << id << " (job id " << job_id << ") submitted: " << req.entrypoint[0];
  leases_.RequestLeaseForHead(request_id, lease);
  return jobs_[id];
}

Result<protocol::JobInfo> JobManager::Get(const std::string& submission_id) const {
  auto it = jobs_.find(submission_id);
  if (it == jobs_.end()) {
    return Status::NotFound("no job '" + submission_id + "' (see `rayx job list`)");
  }
  return it->second;
}

std::vector<protocol::JobInfo> JobManager::List() const {
  std::vector<protocol::JobInfo> out;
  for (const auto& [id, job] : jobs_) out.push_back(job);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.submitted_at_ms < b.submitted_at_ms;
  });
  return out;
}

void JobManager::End(protocol::JobInfo& job, protocol::JobState state, const std::string& message) {
  if (protocol::Ended(job.state)) return;
  job.state = state;
  job.message = message;
  job.ended_at_ms = clock_.WallMs();
  if (store_) store_->PutSubmittedJob(job);
  leases_.FinishJob(job.job_id, "job " + job.submission_id + " " + std::string(protocol::Name(state)));
  if (unkept_in_use_.count(job.package_hash) > 0 && !RunsInPackage(job.package_hash)) {
    DeleteUnkeptPackage(job.package_hash);
  }
  RAYX_LOG(Info) << "job " << job.submission_id << " " << protocol::Name(state)
                 << (message.empty() ? "" : ": " + message);
  finished_.push_back(job.submission_id);
  while (finished_.size() > options_.max_finished_jobs) {
    if (store_) store_->DeleteSubmittedJob(finished_.front());
    jobs_.erase(finished_.front());
    finished_.pop_front();
  }
}

Result<protocol::JobInfo> JobManager::Stop(const std::string& submission_id) {
  auto it = jobs_.find(submission_id);
  if (it == jobs_.end()) {
    return Status::NotFound("no job '" + submission_id + "' (see `rayx job list`)");
  }
  protocol::JobInfo& job = it->second;
  if (protocol::Ended(job.state)) return job;
  // Not started yet: its queued or starting lease is withdrawn (a starting
  // entrypoint is stopped by its agent).
  for (auto req = lease_requests_.begin(); req != lease_requests_.end();) {
    if (req->second == submission_id) {
      (void)leases_.CancelHeadRequest(req->first);
      req = lease_requests_.erase(req);
    } else {
      ++req;
    }
  }
  if (!job.lease_id.IsNil()) (void)leases_.ReturnLease(job.lease_id);  // kills the entrypoint
  protocol::JobInfo copy = job;
  End(job, protocol::JobState::kStopped, "stopped by `rayx job stop`");
  auto again = jobs_.find(submission_id);
  return again != jobs_.end() ? again->second : copy;
}

protocol::JobInfo* JobManager::FindByLease(const LeaseId& lease_id) {
  for (auto& [id, job] : jobs_) {
    if (job.lease_id == lease_id && !protocol::Ended(job.state)) return &job;
  }
  return nullptr;
}

void JobManager::OnLeaseGranted(uint64_t request_id, const protocol::RequestLeaseReply& grant) {
  auto req = lease_requests_.find(request_id);
  auto it = req == lease_requests_.end() ? jobs_.end() : jobs_.find(req->second);
  if (req != lease_requests_.end()) lease_requests_.erase(req);
  if (it == jobs_.end() || protocol::Ended(it->second.state)) {
    (void)leases_.ReturnLease(grant.lease_id);  // nobody wants it now: stops the entrypoint
    return;
  }
  protocol::JobInfo& job = it->second;
  job.state = protocol::JobState::kRunning;
  job.lease_id = grant.lease_id;
  job.node_address = grant.node_address;
  job.object_address = grant.object_address;
  job.pid = grant.process_pids.empty() ? grant.worker_pid : grant.process_pids[0];
  if (store_) store_->PutSubmittedJob(job);
}

void JobManager::OnLeaseLost(const LeaseId& lease_id, const std::string& why) {
  protocol::JobInfo* job = FindByLease(lease_id);
  if (job == nullptr || protocol::Ended(job->state)) return;
  End(*job, protocol::JobState::kFailed, "the entrypoint's lease was lost: " + why);
}

void JobManager::Restore(const std::vector<protocol::JobInfo>& jobs) {
  std::vector<protocol::JobInfo> sorted = jobs;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.ended_at_ms < b.ended_at_ms;
  });
  std::vector<std::string> unstarted;
  for (const auto& job : sorted) {
    jobs_[job.submission_id] = job;
    if (protocol::Ended(job.state)) {
      finished_.push_back(job.submission_id);
    } else if (job.lease_id.IsNil()) {
      unstarted.push_back(job.submission_id);
    }
  }
  for (const auto& id : unstarted) {
    End(jobs_[id], protocol::JobState::kFailed,
        "the head restarted before the entrypoint started: submit the job again");
  }
}

void JobManager::OnLeaseFailed(uint64_t request_id, const Status& status) {
  auto req = lease_requests_.find(request_id);
  if (req == lease_requests_.end()) return;
  auto it = jobs_.find(req->second);
  lease_requests_.erase(req);
  if (it == jobs_.end() || protocol::Ended(it->second.state)) return;
  End(it->second, protocol::JobState::kFailed, "the entrypoint did not start: " + status.message());
}

void JobManager::OnProcessExited(const protocol::ProcessExitedNotice& notice) {
  protocol::JobInfo* job = FindByLease(notice.lease_id);
  if (job == nullptr) return;
  job->exit_code = notice.signal ? 128 + notice.signal : notice.exit_code;
  if (notice.signal == 0 && notice.exit_code == 0) {
    End(*job, protocol::JobState::kSucceeded, "");
  } else {
    End(*job, protocol::JobState::kFailed,
        notice.signal ? "the entrypoint was killed by signal " + std::to_string(notice.signal)
                      : "the entrypoint exited with status " + std::to_string(notice.exit_code));
  }
}

std::string JobManager::PackagePath(const std::string& hash) const {
  return options_.package_dir + "/" + hash + ".tar";
}

std::string JobManager::PartPath(const std::string& hash) const {
  return options_.package_dir + "/" + hash + ".part";
}

bool JobManager::HasPackage(const std::string& hash) const {
  if (!IsContentHash(hash) || packages_.count(hash) == 0) return false;
  std::error_code ec;
  return fs::is_regular_file(PackagePath(hash), ec);
}

void JobManager::ForgetPackage(const std::string& hash) {
  auto it = packages_.find(hash);
  if (it == packages_.end()) return;
  package_bytes_ -= it->second.bytes;
  packages_.erase(it);
}

void JobManager::DropUpload(const std::string& hash) {
  auto it = uploads_.find(hash);
  if (it == uploads_.end()) return;
  upload_bytes_ -= it->second.received;
  uploads_.erase(it);
  std::error_code ec;
  fs::remove(PartPath(hash), ec);
}

void JobManager::ExpireUploads() {
  int64_t now = clock_.NowMs();
  std::vector<std::string> abandoned;
  for (const auto& [hash, upload] : uploads_) {
    if (now - upload.last_chunk_ms >= options_.upload_expiry_ms) abandoned.push_back(hash);
  }
  for (const auto& hash : abandoned) {
    RAYX_LOG(Info) << "dropped the upload of package " << hash.substr(0, 12) << ": no chunk for "
                   << options_.upload_expiry_ms / 1000 << " s";
    DropUpload(hash);
  }
}

std::set<std::string> JobManager::PackagesInUse() const {
  std::set<std::string> out;
  for (const auto& [id, job] : jobs_) {
    if (!job.package_hash.empty() && !protocol::Ended(job.state)) out.insert(job.package_hash);
  }
  return out;
}

bool JobManager::Evictable(const std::string& hash, const std::set<std::string>& in_use) const {
  return keepers_.count(hash) == 0 && unkept_in_use_.count(hash) == 0 && in_use.count(hash) == 0;
}

bool JobManager::MakeRoom(uint64_t more, const std::string& uploading) {
  auto fits = [&] {
    return store_bytes() <= options_.max_store_bytes &&
           more <= options_.max_store_bytes - store_bytes();
  };
  if (fits()) return true;
  // Least recently used first, among packages nobody needs now.
  std::vector<std::pair<int64_t, std::string>> evictable;
  const std::set<std::string> in_use = PackagesInUse();
  for (const auto& [hash, package] : packages_) {
    if (hash != uploading && Evictable(hash, in_use)) {
      evictable.emplace_back(package.last_used_ms, hash);
    }
  }
  std::sort(evictable.begin(), evictable.end());
  uint64_t freeable = 0;
  for (const auto& [used, hash] : evictable) freeable += packages_[hash].bytes;
  if (store_bytes() - std::min(store_bytes(), freeable) > options_.max_store_bytes ||
      more > options_.max_store_bytes - (store_bytes() - std::min(store_bytes(), freeable))) {
    return false;  // deleting every evictable package would not be enough
  }
  for (const auto& [used, hash] : evictable) {
    if (fits()) break;
    std::error_code ec;
    fs::remove(PackagePath(hash), ec);
    RAYX_LOG(Info) << "deleted package " << hash.substr(0, 12) << " ("
                   << FormatBytes(static_cast<double>(packages_[hash].bytes))
                   << "), the least recently used, to make room in the package store";
    ForgetPackage(hash);
  }
  return fits();
}

Result<bool> JobManager::PutPackage(const protocol::PutPackageRequest& req, std::string_view bytes) {
  if (!IsContentHash(req.hash)) {
    return Status::InvalidArgument("a package is named by its 64-hex-digit content hash");
  }
  if (req.total_size > options_.max_package_bytes) {
    return Status::InvalidArgument(
        "the working directory package is " + FormatBytes(static_cast<double>(req.total_size)) +
        ", over the limit of " + FormatBytes(static_cast<double>(options_.max_package_bytes)) +
        ": exclude large files with --exclude, or keep data outside the working directory");
  }
  ExpireUploads();
  int64_t now = clock_.NowMs();
  if (HasPackage(req.hash)) {
    packages_[req.hash].last_used_ms = now;
    return true;
  }
  ForgetPackage(req.hash);  // its file went behind the head's back
  auto upload = uploads_.find(req.hash);
  uint64_t have = upload == uploads_.end() || req.offset == 0 ? 0 : upload->second.received;
  if (req.offset != have || req.offset + bytes.size() > req.total_size ||
      (upload != uploads_.end() && req.offset > 0 && upload->second.total_size != req.total_size)) {
    return Status::InvalidArgument("package chunk at offset " + std::to_string(req.offset) +
                                   " does not follow the " + std::to_string(have) +
                                   " bytes received: upload it again from the start");
  }
  if (req.offset == 0) DropUpload(req.hash);  // a new start
  if (!MakeRoom(bytes.size(), req.hash)) {
    uint64_t pinned = 0;
    const std::set<std::string> in_use = PackagesInUse();
    for (const auto& [hash, package] : packages_) {
      if (!Evictable(hash, in_use)) pinned += package.bytes;
    }
    return Status::Unavailable(
        "the head's package store is full: it holds " + FormatBytes(static_cast<double>(store_bytes())) +
        " of its " + FormatBytes(static_cast<double>(options_.max_store_bytes)) + " (" +
        FormatBytes(static_cast<double>(pinned)) + " in packages kept or used by running jobs, " +
        FormatBytes(static_cast<double>(upload_bytes_)) + " in " + std::to_string(uploads_.size()) +
        " uploads in progress), so a chunk of " + FormatBytes(static_cast<double>(bytes.size())) +
        " does not fit: try again once uploads finish or jobs end, or start the head with a "
        "larger --max-package-store-bytes");
  }
  std::string part = PartPath(req.hash);
  std::ofstream out(part, req.offset == 0 ? std::ios::binary | std::ios::trunc
                                          : std::ios::binary | std::ios::app);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  Upload& state = uploads_[req.hash];
  state.total_size = req.total_size;
  state.last_chunk_ms = now;
  state.received += bytes.size();
  upload_bytes_ += bytes.size();
  if (!out) {
    DropUpload(req.hash);
    return Status::Internal("cannot write " + part + " (is the head's disk full?)");
  }
  if (req.offset + bytes.size() < req.total_size) return false;
  auto hash = FileContentHashHex(part);
  if (!hash.ok() || *hash != req.hash) {
    DropUpload(req.hash);
    return Status::InvalidArgument("the uploaded package does not match its hash: upload it again");
  }
  std::error_code ec;
  fs::rename(part, PackagePath(req.hash), ec);
  if (ec) {
    DropUpload(req.hash);
    return Status::Internal("cannot store the package: " + ec.message());
  }
  upload_bytes_ -= state.received;
  uploads_.erase(req.hash);
  packages_[req.hash] = StoredPackage{req.total_size, now};
  package_bytes_ += req.total_size;
  RAYX_LOG(Info) << "stored package " << req.hash.substr(0, 12) << " ("
                 << FormatBytes(static_cast<double>(req.total_size)) << ")";
  return true;
}

Result<bool> JobManager::KeepPackage(const std::string& hash, const std::string& owner,
                                     bool keep) {
  if (!IsContentHash(hash)) {
    return Status::InvalidArgument("a package is named by its 64-hex-digit content hash");
  }
  if (owner.empty() || owner.size() > 1024) {
    return Status::InvalidArgument("a package's keeper is named by 1 to 1024 bytes");
  }
  if (keep) {
    if (!HasPackage(hash)) return Status::NotFound("the head has no package " + hash.substr(0, 12));
    unkept_in_use_.erase(hash);
    if (keepers_[hash].insert(owner).second && store_) store_->PutPackageKeeper(hash, owner);
    return false;
  }
  auto it = keepers_.find(hash);
  if (it == keepers_.end() || it->second.erase(owner) == 0) return false;
  if (store_) store_->DeletePackageKeeper(hash, owner);
  if (!it->second.empty()) return false;
  keepers_.erase(it);
  if (RunsInPackage(hash)) {
    unkept_in_use_.insert(hash);  // deleted when the last job in it ends (End)
    return false;
  }
  return DeleteUnkeptPackage(hash);
}

bool JobManager::RunsInPackage(const std::string& hash) const {
  for (const auto& [id, job] : jobs_) {
    if (job.package_hash == hash && !protocol::Ended(job.state)) return true;
  }
  return false;
}

bool JobManager::DeleteUnkeptPackage(const std::string& hash) {
  unkept_in_use_.erase(hash);
  std::error_code ec;
  bool removed = fs::remove(PackagePath(hash), ec);
  ForgetPackage(hash);
  if (removed) RAYX_LOG(Info) << "deleted package " << hash.substr(0, 12) << ": nobody keeps it";
  return removed;
}

void JobManager::RestoreKeepers(const std::vector<std::pair<std::string, std::string>>& keepers) {
  for (const auto& [hash, owner] : keepers) keepers_[hash].insert(owner);
}

Result<std::pair<uint64_t, std::string>> JobManager::ReadPackage(const std::string& hash,
                                                                  uint64_t offset,
                                                                  uint64_t length) {
  if (!HasPackage(hash)) return Status::NotFound("the head has no package " + hash.substr(0, 12));
  packages_[hash].last_used_ms = clock_.NowMs();
  std::string path = PackagePath(hash);
  std::ifstream in(path, std::ios::binary);
  in.seekg(0, std::ios::end);
  uint64_t size = static_cast<uint64_t>(in.tellg());
  std::string chunk;
  if (offset < size) {
    chunk.resize(std::min<uint64_t>({length, size - offset, uint64_t{8} << 20}));
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    chunk.resize(static_cast<size_t>(in.gcount()));
  }
  return std::make_pair(size, std::move(chunk));
}

}  // namespace rayx::scheduler
