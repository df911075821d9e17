// JobManager driven through LeaseManager and a recording outbox, without processes.
#include "head/job_manager.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/content_hash.h"
#include "head/lease_manager.h"
#include "head/node_table.h"
#include "recording_outbox.h"

namespace rayx::scheduler {
namespace job_manager_test {  // this file's own (unit tests compile in batches)

using Kind = RecordingOutbox::Kind;
constexpr char kAgent[] = "agent-head";

class JobManagerTest : public ::testing::Test {
 protected:
  JobManagerTest()
      : leases_(LeaseManager::Options{1000, "10.0.0.1:6380"}, nodes_, groups_, outbox_),
        jobs_(JobManager::Options{}, leases_, nodes_, clock_) {
    NodeInfo info;
    info.address = "10.0.0.1";
    info.is_head_node = true;
    info.total = {{"CPU", 2}};
    head_node_ = nodes_.Register(info, clock_.NowMs(), clock_.WallMs());
    leases_.OnNodeRegistered(head_node_, kAgent);
  }

  // Every test ends with no lease held and no answer sent to a remote caller:
  // the head owns the entrypoints' leases.
  void TearDown() override {
    for (const auto& r : outbox_.Take()) {
      EXPECT_NE(r.kind, Kind::kGrantLease);
      EXPECT_NE(r.kind, Kind::kProcessExited);
    }
  }

  // Submits `argv` and returns the job and the StartWorker request it caused.
  protocol::JobInfo Submit(std::vector<std::string> argv, RecordingOutbox::Record* start) {
    protocol::SubmitJobRequest req;
    req.entrypoint = std::move(argv);
    auto job = jobs_.Submit(req);
    EXPECT_TRUE(job.ok()) << job.status();
    auto records = outbox_.Take();
    EXPECT_EQ(records.size(), 1u);
    if (!records.empty()) {
      EXPECT_EQ(records[0].kind, Kind::kStartWorker);
      EXPECT_EQ(records[0].peer, kAgent);
      *start = records[0];
    }
    return job.ok() ? *job : protocol::JobInfo{};
  }

  // The agent reports the entrypoint running with pid `pid`.
  void Started(const RecordingOutbox::Record& start, int32_t pid) {
    protocol::StartWorkerReply reply;
    reply.lease_id = start.start.lease_id;
    reply.worker_pid = pid;
    reply.process_pids = {pid};
    leases_.OnStartWorkerReply(start.request_id, reply);
  }

  void Exited(const LeaseId& lease_id, int32_t exit_code, int32_t signal) {
    protocol::ProcessExitedNotice notice;
    notice.lease_id = lease_id;
    notice.exit_code = exit_code;
    notice.signal = signal;
    notice.all_exited = true;
    leases_.OnProcessExited(notice);
  }

  protocol::JobInfo Get(const std::string& id) {
    auto job = jobs_.Get(id);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : protocol::JobInfo{};
  }

  ManualClock clock_;
  NodeTable nodes_{NodeTable::Options{}};
  RecordingOutbox outbox_;
  PlacementGroupManager groups_{nodes_, outbox_};
  LeaseManager leases_;
  JobManager jobs_;
  NodeId head_node_;
};

TEST_F(JobManagerTest, EntrypointRunsOnTheHeadNodeAndIsRunningWhenStarted) {
  RecordingOutbox::Record start;
  auto job = Submit({"python3", "train.py"}, &start);
  EXPECT_EQ(protocol::Name(job.state), "PENDING");
  ASSERT_EQ(start.start.processes.size(), 1u);
  EXPECT_EQ(start.start.processes[0].argv, (std::vector<std::string>{"python3", "train.py"}));
  EXPECT_EQ(start.start.processes[0].env.at("RAYX_SUBMISSION_ID"), job.submission_id);
  Started(start, 4242);
  auto running = Get(job.submission_id);
  EXPECT_EQ(protocol::Name(running.state), "RUNNING");
  EXPECT_EQ(running.pid, 4242);
  EXPECT_EQ(running.lease_id, start.start.lease_id);
  EXPECT_EQ(running.node_address, "10.0.0.1");
}

TEST_F(JobManagerTest, EntrypointExitZeroSucceedsAndEndsTheJobOnEveryNode) {
  RecordingOutbox::Record start;
  auto job = Submit({"true"}, &start);
  Started(start, 7);
  Exited(start.start.lease_id, 0, 0);
  auto done = Get(job.submission_id);
  EXPECT_EQ(protocol::Name(done.state), "SUCCEEDED");
  EXPECT_EQ(done.exit_code, 0);
  auto finished = outbox_.OfKind(Kind::kJobFinished);
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].peer, kAgent);
  EXPECT_EQ(finished[0].job_id, job.job_id);
  EXPECT_EQ(leases_.lease_count(), 0u);
}

TEST_F(JobManagerTest, EntrypointKilledBySignalFailsNamingTheSignal) {
  RecordingOutbox::Record start;
  auto job = Submit({"sleep", "100"}, &start);
  Started(start, 8);
  Exited(start.start.lease_id, 0, 9);
  auto done = Get(job.submission_id);
  EXPECT_EQ(protocol::Name(done.state), "FAILED");
  EXPECT_EQ(done.exit_code, 128 + 9);
  EXPECT_NE(done.message.find("signal 9"), std::string::npos) << done.message;
}

TEST_F(JobManagerTest, EntrypointThatDoesNotStartFailsWithTheAgentsReason) {
  RecordingOutbox::Record start;
  auto job = Submit({"no-such-program"}, &start);
  leases_.OnStartWorkerError(start.request_id, Status::InvalidArgument("exec failed: ENOENT"));
  auto done = Get(job.submission_id);
  EXPECT_EQ(protocol::Name(done.state), "FAILED");
  EXPECT_NE(done.message.find("the entrypoint did not start"), std::string::npos) << done.message;
  EXPECT_NE(done.message.find("exec failed: ENOENT"), std::string::npos) << done.message;
  EXPECT_EQ(leases_.lease_count(), 0u);
}

TEST_F(JobManagerTest, StopKillsTheEntrypointAndIsFinal) {
  RecordingOutbox::Record start;
  auto job = Submit({"sleep", "100"}, &start);
  Started(start, 9);
  auto stopped = jobs_.Stop(job.submission_id);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(protocol::Name(stopped->state), "STOPPED");
  auto kills = outbox_.OfKind(Kind::kKillWorkers);
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].peer, kAgent);
  EXPECT_EQ(kills[0].kill.lease_ids, (std::vector<LeaseId>{start.start.lease_id}));
  // The exit that follows does not change the final state.
  Exited(start.start.lease_id, 0, 15);
  EXPECT_EQ(protocol::Name(Get(job.submission_id).state), "STOPPED");
  EXPECT_EQ(jobs_.Stop("no-such-job").status().code(), StatusCode::kNotFound);
}

// `rayx job stop` on an entrypoint whose agent is still starting it (fetching
// its package, say): the agent is told to stop it, the lease ends at once, and
// a start reply that crosses the kill on the wire stops it again.
TEST_F(JobManagerTest, StopWhileTheEntrypointStartsStopsItOnItsNode) {
  RecordingOutbox::Record start;
  auto job = Submit({"sleep", "100"}, &start);
  ASSERT_EQ(leases_.lease_count(), 1u);
  auto stopped = jobs_.Stop(job.submission_id);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(protocol::Name(stopped->state), "STOPPED");
  EXPECT_EQ(leases_.lease_count(), 0u);
  auto kills = outbox_.OfKind(Kind::kKillWorkers);
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].peer, kAgent);
  EXPECT_EQ(kills[0].kill.lease_ids, (std::vector<LeaseId>{start.start.lease_id}));
  outbox_.Take();
  Started(start, 9);
  kills = outbox_.OfKind(Kind::kKillWorkers);
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].kill.lease_ids, (std::vector<LeaseId>{start.start.lease_id}));
  EXPECT_EQ(protocol::Name(Get(job.submission_id).state), "STOPPED");
  EXPECT_EQ(leases_.lease_count(), 0u);
}

TEST_F(JobManagerTest, BadSubmissionsAreRefusedWithoutALease) {
  protocol::SubmitJobRequest req;
  EXPECT_EQ(jobs_.Submit(req).status().code(), StatusCode::kInvalidArgument);
  req.entrypoint = {"true"};
  req.submission_id = "../etc";
  EXPECT_EQ(jobs_.Submit(req).status().code(), StatusCode::kInvalidArgument);
  req.submission_id = "same";
  ASSERT_TRUE(jobs_.Submit(req).ok());
  EXPECT_EQ(jobs_.Submit(req).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(outbox_.OfKind(Kind::kStartWorker).size(), 1u);
}

// Packages kept by Train runs: deleted once every keeper let go, unless a job
// that has not ended runs in it (then when it ends); a package nobody kept (a
// working directory) is never deleted by a let-go.
TEST_F(JobManagerTest, APackageGoesWhenEveryKeeperLetsGoAndNoLiveJobRunsInIt) {
  char dir[] = "/tmp/rayx-packages-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  JobManager::Options options;
  options.package_dir = dir;
  JobManager jobs(options, leases_, nodes_, clock_);
  auto put = [&](const std::string& bytes) {
    protocol::PutPackageRequest req;
    req.hash = ContentHashHex(bytes);
    req.total_size = bytes.size();
    auto done = jobs.PutPackage(req, bytes);
    EXPECT_TRUE(done.ok() && *done) << done.status();
    return req.hash;
  };
  const std::string checkpoint = put("a checkpoint"), workdir = put("a working directory");
  ASSERT_TRUE(jobs.KeepPackage(checkpoint, "train:one", true).ok());
  ASSERT_TRUE(jobs.KeepPackage(checkpoint, "train:two", true).ok());
  EXPECT_FALSE(*jobs.KeepPackage(checkpoint, "train:one", false));
  EXPECT_TRUE(jobs.HasPackage(checkpoint)) << "deleted while run two keeps it";
  EXPECT_TRUE(*jobs.KeepPackage(checkpoint, "train:two", false));
  EXPECT_FALSE(jobs.HasPackage(checkpoint));
  EXPECT_EQ(jobs.KeepPackage(checkpoint, "train:one", true).status().code(),
            StatusCode::kNotFound);

  EXPECT_FALSE(*jobs.KeepPackage(workdir, "train:one", false));
  EXPECT_TRUE(jobs.HasPackage(workdir)) << "a package nobody kept was deleted";
  protocol::SubmitJobRequest req;
  req.entrypoint = {"true"};
  req.package_hash = workdir;
  auto job = jobs.Submit(req);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(jobs.KeepPackage(workdir, "train:one", true).ok());
  EXPECT_FALSE(*jobs.KeepPackage(workdir, "train:one", false));
  EXPECT_TRUE(jobs.HasPackage(workdir)) << "deleted under a job that runs in it";
  ASSERT_TRUE(jobs.Stop(job->submission_id).ok());
  EXPECT_FALSE(jobs.HasPackage(workdir)) << "let go of while a job ran in it, kept after it ended";

  // Kept again while its job runs: the job's end leaves it.
  const std::string again = put("another checkpoint");
  req.package_hash = again;
  auto second = jobs.Submit(req);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(jobs.KeepPackage(again, "train:one", true).ok());
  EXPECT_FALSE(*jobs.KeepPackage(again, "train:one", false));
  ASSERT_TRUE(jobs.KeepPackage(again, "train:two", true).ok());
  ASSERT_TRUE(jobs.Stop(second->submission_id).ok());
  EXPECT_TRUE(jobs.HasPackage(again)) << "deleted at its job's end while run two keeps it";

  EXPECT_EQ(jobs.KeepPackage("not-a-hash", "o", true).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs.KeepPackage(workdir, "", true).status().code(), StatusCode::kInvalidArgument);
  outbox_.Take();
  std::filesystem::remove_all(dir);
}


// The package store is bounded: the least recently used packages nobody keeps
// and no running job uses make room; when they cannot, the upload is refused
// with the figures.
class PackageStoreTest : public JobManagerTest {
 protected:
  PackageStoreTest() {
    char pattern[] = "/tmp/rayx-package-store-XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  ~PackageStoreTest() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<JobManager> Make(uint64_t max_store_bytes) {
    JobManager::Options options;
    options.package_dir = dir_;
    options.max_store_bytes = max_store_bytes;
    options.upload_expiry_ms = 60000;
    return std::make_unique<JobManager>(options, leases_, nodes_, clock_);
  }
  // Uploads `bytes` in one chunk.
  static Result<bool> Put(JobManager& jobs, const std::string& bytes) {
    protocol::PutPackageRequest req;
    req.hash = ContentHashHex(bytes);
    req.total_size = bytes.size();
    return jobs.PutPackage(req, bytes);
  }
  static std::string Package(char c) { return std::string(400, c); }

  std::string dir_;
};

TEST_F(PackageStoreTest, TheLeastRecentlyUsedUnkeptPackageMakesRoom) {
  auto jobs = Make(1000);
  ASSERT_TRUE(Put(*jobs, Package('a')).ok());
  clock_.Advance(10);
  ASSERT_TRUE(Put(*jobs, Package('b')).ok());
  clock_.Advance(10);
  // Reading a counts as a use: b is now the least recently used.
  ASSERT_TRUE(jobs->ReadPackage(ContentHashHex(Package('a')), 0, 10).ok());
  clock_.Advance(10);
  auto c = Put(*jobs, Package('c'));
  ASSERT_TRUE(c.ok() && *c) << c.status();
  EXPECT_TRUE(jobs->HasPackage(ContentHashHex(Package('a'))));
  EXPECT_FALSE(jobs->HasPackage(ContentHashHex(Package('b'))));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + ContentHashHex(Package('b')) + ".tar"));
  EXPECT_TRUE(jobs->HasPackage(ContentHashHex(Package('c'))));
  EXPECT_EQ(jobs->store_bytes(), 800u);
}

TEST_F(PackageStoreTest, KeptAndInUsePackagesStayAndAFullStoreSaysWhy) {
  auto jobs = Make(1000);
  ASSERT_TRUE(Put(*jobs, Package('a')).ok());
  ASSERT_TRUE(Put(*jobs, Package('b')).ok());
  ASSERT_TRUE(jobs->KeepPackage(ContentHashHex(Package('a')), "train:run", true).ok());
  protocol::SubmitJobRequest req;
  req.entrypoint = {"true"};
  req.package_hash = ContentHashHex(Package('b'));
  auto job = jobs->Submit(req);
  ASSERT_TRUE(job.ok()) << job.status();
  auto c = Put(*jobs, Package('c'));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("holds 800 B of its 1000 B"), std::string::npos)
      << c.status();
  EXPECT_NE(c.status().message().find("--max-package-store-bytes"), std::string::npos);
  EXPECT_TRUE(jobs->HasPackage(ContentHashHex(Package('a'))));
  EXPECT_TRUE(jobs->HasPackage(ContentHashHex(Package('b'))));
  // Once the job ended, its package may go.
  ASSERT_TRUE(jobs->Stop(job->submission_id).ok());
  c = Put(*jobs, Package('c'));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(jobs->HasPackage(ContentHashHex(Package('b'))));
  EXPECT_TRUE(jobs->HasPackage(ContentHashHex(Package('a'))));
  outbox_.Take();
}

// Uploads count by what they sent, not what they declare; one that stops
// sending is dropped after the expiry, and a restarted head drops them all.
TEST_F(PackageStoreTest, AbandonedUploadsAreDropped) {
  auto jobs = Make(1000);
  const std::string big = std::string(900, 'z');
  protocol::PutPackageRequest req;
  req.hash = ContentHashHex(big);
  req.total_size = big.size();
  auto first = jobs->PutPackage(req, std::string_view(big).substr(0, 100));
  ASSERT_TRUE(first.ok() && !*first) << first.status();
  EXPECT_EQ(jobs->store_bytes(), 100u);
  const std::string part = dir_ + "/" + req.hash + ".part";
  EXPECT_TRUE(std::filesystem::exists(part));
  // A declared size reserves nothing: another package fits beside it.
  ASSERT_TRUE(Put(*jobs, Package('a')).ok());
  clock_.Advance(60000);
  jobs->ExpireUploads();
  EXPECT_FALSE(std::filesystem::exists(part));
  EXPECT_EQ(jobs->store_bytes(), 400u);
  req.offset = 100;
  auto late = jobs->PutPackage(req, std::string_view(big).substr(100, 100));
  EXPECT_EQ(late.status().code(), StatusCode::kInvalidArgument) << "a dropped upload goes on";

  req.offset = 0;
  ASSERT_TRUE(jobs->PutPackage(req, std::string_view(big).substr(0, 100)).ok());
  jobs.reset();
  auto restarted = Make(1000);
  EXPECT_FALSE(std::filesystem::exists(part)) << "a restarted head keeps no parts";
  EXPECT_TRUE(restarted->HasPackage(ContentHashHex(Package('a'))));
  EXPECT_EQ(restarted->store_bytes(), 400u);
}

}  // namespace
}  // namespace rayx::scheduler
