// WorkerPool with real processes: start-up concurrency is bounded, queued
// starts run in order as slots free, and a queued lease can be cancelled.
#include "agent/worker_pool.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <boost/asio/io_context.hpp>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace rayx::worker {
namespace worker_pool_test {  // this file's own (unit tests compile in batches)

class WorkerPoolTest : public ::testing::Test {
 protected:
  WorkerPoolTest() {
    dir_ = std::filesystem::temp_directory_path() /
           ("rayx-worker-pool-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    WorkerPool::Options options;
    options.node_ip = "127.0.0.1";
    options.log_dir = dir_.string();
    options.max_starting = 2;
    pool_ = std::make_unique<WorkerPool>(io_, options);
  }
  ~WorkerPoolTest() override {
    pool_.reset();  // kills every worker
    while (waitpid(-1, nullptr, 0) > 0) {
    }
    std::filesystem::remove_all(dir_);
  }

  // A "worker" that never reports READY (by default): it holds its start-up slot.
  void Start(const std::string& lease, const std::string& script = "exec sleep 60") {
    protocol::StartWorkerRequest req;
    req.lease_id = LeaseId::FromWire(lease);
    req.executable = "/bin/sh";
    req.worker_args = {"-c", script};
    pool_->Start(req, [this, lease](Result<protocol::StartWorkerReply> r) {
      results_[lease] = r.ok() ? "ok" : r.status().message();
    });
  }
  void Step() {
    io_.restart();
    io_.poll();
  }
  // Runs the pool's loop until `done` or `timeout_ms` passes; returns done().
  bool RunUntil(const std::function<bool()>& done, int64_t timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.restart();
      io_.run_for(std::chrono::milliseconds(20));
    }
    return done();
  }

  std::filesystem::path dir_;
  boost::asio::io_context io_;
  std::unique_ptr<WorkerPool> pool_;
  std::map<std::string, std::string> results_;
};

TEST_F(WorkerPoolTest, AtMostMaxStartingWorkersStartAtOnceTheRestWaitInOrder) {
  Start("lease-a");
  Start("lease-b");
  Start("lease-c");
  Start("lease-d");
  Step();
  EXPECT_EQ(pool_->size(), 2u);
  EXPECT_EQ(pool_->queued(), 2u);
  for (pid_t pid : pool_->Pids()) {
    EXPECT_TRUE(pool_->LeaseOf(pid) == LeaseId::FromWire("lease-a") ||
                pool_->LeaseOf(pid) == LeaseId::FromWire("lease-b"))
        << "a start beyond the limit ran before an earlier one";
  }
  // A starting worker's lease ends: its slot goes to the first waiting start.
  EXPECT_GT(pool_->Kill(LeaseId::FromWire("lease-a")), 0);
  EXPECT_NE(results_["lease-a"].find("while its worker was starting"), std::string::npos);
  Step();
  EXPECT_EQ(pool_->size(), 2u);
  EXPECT_EQ(pool_->queued(), 1u);
  bool c_runs = false;
  for (pid_t pid : pool_->Pids())
    c_runs = c_runs || pool_->LeaseOf(pid) == LeaseId::FromWire("lease-c");
  EXPECT_TRUE(c_runs) << "the first queued start did not take the free slot";
  // A queued lease that ends never starts.
  EXPECT_EQ(pool_->Kill(LeaseId::FromWire("lease-d")), 0);
  EXPECT_NE(results_["lease-d"].find("waited to start"), std::string::npos);
  EXPECT_EQ(pool_->queued(), 0u);
}

// A worker that runs an actor's constructor before it is ready (a detached
// actor the head creates) says CONSTRUCTING first: the constructor may take
// longer than the start limit, and the start slot is free for the next one.
TEST_F(WorkerPoolTest, AWorkerRunningItsActorsConstructorHasNoStartLimitAndFreesItsSlot) {
  WorkerPool::Options options;
  options.node_ip = "127.0.0.1";
  options.log_dir = dir_.string();
  options.max_starting = 1;
  options.start_timeout_ms = 300;
  pool_ = std::make_unique<WorkerPool>(io_, options);
  // Its "constructor" takes 1 s, past the 300 ms limit.
  Start("lease-a",
        "echo CONSTRUCTING >&3; sleep 1; echo READY address=tcp://127.0.0.1:9 >&3; exec sleep 60");
  Start("lease-b");  // waits for the one start slot
  EXPECT_EQ(pool_->queued(), 1u);
  ASSERT_TRUE(RunUntil([&] { return pool_->queued() == 0; }, 5000))
      << "the constructing worker kept its start slot";
  ASSERT_TRUE(RunUntil([&] { return results_.count("lease-a") > 0; }, 5000));
  EXPECT_EQ(results_["lease-a"], "ok") << "a constructor was held to the start limit";
  // The limit still holds for a worker that never says a word.
  ASSERT_TRUE(RunUntil([&] { return results_.count("lease-b") > 0; }, 5000));
  EXPECT_NE(results_["lease-b"].find("did not start within 300 ms"), std::string::npos)
      << results_["lease-b"];
}

TEST_F(WorkerPoolTest, AConstructorThatFailsOrDiesFailsTheStart) {
  Start("lease-a", "echo CONSTRUCTING >&3; echo 'ERROR the constructor threw: no GPU' >&3");
  Start("lease-b", "echo CONSTRUCTING >&3; exit 3");
  ASSERT_TRUE(RunUntil([&] { return results_.size() == 2; }, 5000));
  EXPECT_EQ(results_["lease-a"], "the constructor threw: no GPU");
  EXPECT_NE(results_["lease-b"].find("exited during start-up"), std::string::npos)
      << results_["lease-b"];
}

// A detached actor's worker (report_construction) keeps its start-up pipe
// after READY and says when its owner's constructor call begins and ends;
// the pool relays each line once, and a line it does not know ends the relay.
TEST_F(WorkerPoolTest, AWorkerReportingItsConstructorIsRelayedAfterItIsReady) {
  std::vector<protocol::ActorConstructionNotice> heard;
  pool_->SetConstructionCallback(
      [&](const protocol::ActorConstructionNotice& n) { heard.push_back(n); });
  auto start = [&](const std::string& lease, const std::string& script) {
    protocol::StartWorkerRequest req;
    req.lease_id = LeaseId::FromWire(lease);
    req.executable = "/bin/sh";
    req.worker_args = {"-c", script};
    req.report_construction = true;
    pool_->Start(req, [this, lease](Result<protocol::StartWorkerReply> r) {
      results_[lease] = r.ok() ? "ok" : r.status().message();
    });
  };
  start("lease-ok",
        "test \"$RAYX_WORKER_REPORT_CONSTRUCTION\" = 1 || exit 9; "
        "echo READY address=tcp://127.0.0.1:9 >&3; echo 'CONSTRUCTOR BEGAN' >&3; sleep 0.2; "
        "echo 'CONSTRUCTOR SUCCEEDED' >&3; echo 'CONSTRUCTOR FAILED too late' >&3; exec sleep 60");
  start("lease-bad",
        "printf 'READY address=tcp://127.0.0.1:9\\nCONSTRUCTOR BEGAN\\n"
        "CONSTRUCTOR FAILED ValueError: no weights\\n' >&3; exec sleep 60");
  ASSERT_TRUE(RunUntil([&] { return heard.size() >= 4; }, 5000)) << heard.size();
  EXPECT_EQ(results_["lease-ok"], "ok");
  EXPECT_EQ(results_["lease-bad"], "ok");
  std::map<std::string, std::vector<std::string>> said;
  for (const auto& n : heard) {
    std::string lease = n.lease_id == LeaseId::FromWire("lease-ok") ? "ok" : "bad";
    said[lease].push_back(std::to_string(n.stage) + (n.error.empty() ? "" : " " + n.error));
  }
  EXPECT_EQ(said["ok"], (std::vector<std::string>{"0", "1"}))
      << "a line after the constructor's end is not relayed";
  EXPECT_EQ(said["bad"], (std::vector<std::string>{"0", "2 ValueError: no weights"}));
}

// A worker whose program writes on the pipe, or closes it and lives on, is
// no longer followed, and the head hears so (it must not wait for good).
TEST_F(WorkerPoolTest, AReportingWorkerThatCannotBeFollowedAnyMoreIsSaidToBe) {
  std::map<std::string, std::vector<int>> stages;
  pool_->SetConstructionCallback([&](const protocol::ActorConstructionNotice& n) {
    stages[n.lease_id == LeaseId::FromWire("lease-noise") ? "noise" : "closed"].push_back(
        n.stage);
  });
  for (const auto& [lease, script] : std::vector<std::pair<std::string, std::string>>{
           {"lease-noise",
            "echo READY address=tcp://127.0.0.1:9 >&3; echo 'CONSTRUCTOR BEGAN' >&3; "
            "echo 'progress: 10%' >&3; echo 'CONSTRUCTOR SUCCEEDED' >&3; exec sleep 60"},
           {"lease-closed",
            "echo READY address=tcp://127.0.0.1:9 >&3; exec 3>&-; exec sleep 60"}}) {
    protocol::StartWorkerRequest req;
    req.lease_id = LeaseId::FromWire(lease);
    req.executable = "/bin/sh";
    req.worker_args = {"-c", script};
    req.report_construction = true;
    pool_->Start(req, [](Result<protocol::StartWorkerReply>) {});
  }
  ASSERT_TRUE(RunUntil([&] { return stages["noise"].size() >= 2 && !stages["closed"].empty(); },
                       WorkerPool::kUnfollowedAfterEofMs + 5000));
  EXPECT_EQ(stages["noise"], (std::vector<int>{protocol::ActorConstructionNotice::kBegan,
                                               protocol::ActorConstructionNotice::kUnfollowed}));
  EXPECT_EQ(stages["closed"], std::vector<int>{protocol::ActorConstructionNotice::kUnfollowed});
}

// A worker that exits after READY is not said to be unfollowed: its exit
// tells the head.
TEST_F(WorkerPoolTest, AReportingWorkerThatExitsIsNotSaidToBeUnfollowed) {
  bool heard = false;
  pool_->SetConstructionCallback([&](const protocol::ActorConstructionNotice&) { heard = true; });
  protocol::StartWorkerRequest req;
  req.lease_id = LeaseId::FromWire("lease-a");
  req.executable = "/bin/sh";
  req.worker_args = {"-c", "echo READY address=tcp://127.0.0.1:9 >&3; exit 0"};
  req.report_construction = true;
  pid_t pid = 0;
  pool_->Start(req, [&](Result<protocol::StartWorkerReply> r) {
    if (r.ok()) pid = r->worker_pid;
  });
  ASSERT_TRUE(RunUntil([&] { return pid > 0; }, 5000));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_EQ(pool_->OnChildExit(pid, status), WorkerPool::ChildExit::kRunning);
  RunUntil([&] { return heard; }, WorkerPool::kUnfollowedAfterEofMs + 500);
  EXPECT_FALSE(heard);
}

TEST_F(WorkerPoolTest, AWorkerNotAskedToReportClosesItsPipeAtReady) {
  bool heard = false;
  pool_->SetConstructionCallback([&](const protocol::ActorConstructionNotice&) { heard = true; });
  Start("lease-a",
        "test -z \"$RAYX_WORKER_REPORT_CONSTRUCTION\" || exit 9; "
        "echo READY address=tcp://127.0.0.1:9 >&3; sleep 0.2; "
        "echo 'CONSTRUCTOR BEGAN' >&3 2>/dev/null; exec sleep 60");
  ASSERT_TRUE(RunUntil([&] { return results_.count("lease-a") > 0; }, 5000));
  EXPECT_EQ(results_["lease-a"], "ok");
  RunUntil([&] { return heard; }, 500);
  EXPECT_FALSE(heard);
}

TEST_F(WorkerPoolTest, AQueuedLeaseIsStillADuplicate) {
  Start("lease-a");
  Start("lease-b");
  Start("lease-c");
  Start("lease-c");
  EXPECT_NE(results_["lease-c"].find("already has a worker"), std::string::npos);
  EXPECT_EQ(pool_->queued(), 1u);
}

}  // namespace
}  // namespace rayx::worker
