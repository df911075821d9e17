// WorkerPool with real processes: start-up concurrency is bounded, queued
// starts run in order as slots free, and a queued lease can be cancelled.
#include "agent/worker_pool.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <boost/asio/io_context.hpp>
#include <cstdlib>
#include <filesystem>

namespace rayx::worker {
namespace {

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

  // A "worker" that never reports READY: it holds its start-up slot.
  void Start(const std::string& lease) {
    protocol::StartWorkerRequest req;
    req.lease_id = LeaseId::FromWire(lease);
    req.executable = "/bin/sh";
    req.worker_args = {"-c", "exec sleep 60"};
    pool_->Start(req, [this, lease](Result<protocol::StartWorkerReply> r) {
      results_[lease] = r.ok() ? "ok" : r.status().message();
    });
  }
  void Step() {
    io_.restart();
    io_.poll();
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
