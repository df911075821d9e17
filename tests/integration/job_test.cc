// `rayx job` on a real two-node loopback cluster: a C++ driver uploaded in a
// working directory, job stop, driver crash, detached actors across jobs.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "util/local_cluster.h"
#include "util/test_helpers.h"

namespace rayx::testing {
namespace {

namespace fs = std::filesystem;

::testing::AssertionResult GoneWithin(pid_t pid, int64_t timeout_ms) {
  if (WaitUntil([&] { return !PidAlive(pid); }, timeout_ms)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "pid " << pid << " still runs";
}

class Job : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalCluster::Options options;
    options.head_node.num_cpus = 2;
    auto cluster = LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    // Only this node has tpu; its agent has never seen the driver's file.
    auto node = cluster_->AddNode({.num_cpus = 2,
                                   .resources = R"({"tpu": 1})",
                                   .extra_args = {"--node-ip-address", "127.0.0.2"}});
    ASSERT_TRUE(node.ok()) << node.status();
    // The working directory: the driver and the library it loads ($ORIGIN/../lib).
    work_ = cluster_->temp_dir() + "/my_job";
    fs::create_directories(work_ + "/bin");
    fs::create_directories(work_ + "/lib");
    fs::create_directories(work_ + "/CMakeFiles");
    fs::copy_file(JOB_DRIVER_PATH, work_ + "/bin/job_driver");
    fs::copy_file(RAYX_LIB_PATH, work_ + "/lib/librayx.so.0");
    std::ofstream(work_ + "/CMakeFiles/left-out.o") << "an intermediate build product";
  }

  void TearDown() override {
    if (!cluster_) return;
    // Nothing of any job is left: no workers or processes, all CPUs free, an
    // empty object store.
    auto workers = cluster_->RunCli({"list", "workers"});
    EXPECT_EQ(workers.exit_code, 0) << workers.Describe();
    size_t rows = std::count(workers.out.begin(), workers.out.end(), '\n');
    EXPECT_EQ(rows, 1u + expected_detached_) << workers.out;
    Status free = cluster_->WaitFor(
        [&](const ClusterStatus& s) {
          for (const auto& n : s.nodes) {
            if (n.alive && n.object_store_bytes != 0) return false;
          }
          // A detached actor keeps what it holds; every other CPU is free.
          return expected_detached_ > 0 ||
                 s.AvailableResources()["CPU"] == s.TotalResources()["CPU"];
        },
        10000);
    EXPECT_TRUE(free.ok()) << free;
  }

  CommandResult Rayx(std::vector<std::string> args, int64_t timeout_ms = 120000) {
    return cluster_->RunCli(std::move(args), true, {}, timeout_ms);
  }
  // `rayx job submit ... -- ENTRYPOINT` (the temp dir flag goes before `--`).
  CommandResult Submit(std::vector<std::string> flags, std::vector<std::string> entrypoint) {
    std::vector<std::string> args = {RayxCliPath(), "job", "submit", "--temp-dir",
                                     cluster_->temp_dir()};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), entrypoint.begin(), entrypoint.end());
    return RunCommand(args, {{"RAYX_EXIT_WITH_PID", std::to_string(getpid())}}, 120000);
  }
  // Waits until `rayx job logs ID` shows `needle`; returns the logs.
  std::string WaitForLog(const std::string& id, const std::string& needle) {
    std::string out;
    WaitUntil([&] { return Contains(out = Rayx({"job", "logs", id}).out, needle); }, 60000);
    return out;
  }
  std::string WaitForState(const std::string& id, const std::string& state) {
    std::string out;
    WaitUntil([&] { return Contains(out = Rayx({"job", "status", id}).out, ": " + state); }, 30000);
    return out;
  }
  static pid_t PidAfter(const std::string& text, const std::string& label) {
    std::smatch m;
    if (!std::regex_search(text, m, std::regex(label + " (\\d+)"))) return -1;
    return static_cast<pid_t>(std::stol(m[1]));
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::string work_;
  size_t expected_detached_ = 0;  // detached actors that rightly outlive their jobs
};

TEST_F(Job, SubmitRunsACppDriverWhoseWorkersFetchTheWorkingDirectory) {
  auto r = Submit({"--working-dir", work_, "--submission-id", "first"}, {"./bin/job_driver", "tpu"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "Uploaded the working directory")) << r.out;
  // The tpu task ran on 127.0.0.2, from that node's copy of the package.
  EXPECT_TRUE(Contains(r.out, "tpu task ran on 127.0.0.2")) << r.out;
  EXPECT_TRUE(Contains(r.out, "Job 'first' SUCCEEDED")) << r.out;
  auto status = Rayx({"job", "status", "first"});
  EXPECT_TRUE(Contains(status.out, "Job 'first': SUCCEEDED")) << status.Describe();
  EXPECT_TRUE(Contains(status.out, "exit code: 0")) << status.out;
  // Build intermediates were left out of the package on every node.
  int copies = 0;
  for (const auto& entry : fs::recursive_directory_iterator(cluster_->temp_dir())) {
    if (entry.path().filename() == "job_driver" &&
        Contains(entry.path().string(), "node-packages")) {
      ++copies;
      EXPECT_FALSE(fs::exists(entry.path().parent_path().parent_path() / "CMakeFiles/left-out.o"));
    }
  }
  EXPECT_EQ(copies, 2) << "each node unpacks the working directory once";
  // Same content: not uploaded again; a taken id is refused.
  r = Submit({"--working-dir", work_}, {"./bin/job_driver", "tpu"});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "has the working directory already")) << r.out;
  r = Submit({"--working-dir", work_, "--submission-id", "first"}, {"./bin/job_driver", "tpu"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "exists already")) << r.err;
  auto list = Rayx({"job", "list"});
  EXPECT_TRUE(Contains(list.out, "first  SUCCEEDED")) << list.out;
}

TEST_F(Job, FailingEntrypointGivesItsExitCodeAndATooLargeDirectoryIsRefused) {
  auto r = Submit({}, {"sh", "-c", "echo about to fail; exit 7"});
  EXPECT_EQ(r.exit_code, 7) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "about to fail")) << r.out;
  EXPECT_TRUE(Contains(r.out, "FAILED: the entrypoint exited with status 7")) << r.out;
  std::string big = cluster_->temp_dir() + "/big";
  fs::create_directories(big);
  fs::resize_file((std::ofstream(big + "/data.bin"), big + "/data.bin"), (uint64_t{101} << 20));
  r = Submit({"--working-dir", big}, {"true"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "holds 101.00 MiB, over the limit of 100.00 MiB")) << r.err;
}

TEST_F(Job, StopAndDriverCrashRemoveEverythingOfTheJob) {
  auto r = Submit({"--working-dir", work_, "--submission-id", "sleeper", "--no-wait"},
                  {"./bin/job_driver", "sleep"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::string logs = WaitForLog("sleeper", "driver pid");
  pid_t actor = PidAfter(logs, "actor pid"), driver = PidAfter(logs, "driver pid");
  ASSERT_GT(actor, 0) << logs;
  ASSERT_GT(driver, 0) << logs;
  auto stop = Rayx({"job", "stop", "sleeper"});
  EXPECT_TRUE(Contains(stop.out, "STOPPED")) << stop.Describe();
  EXPECT_TRUE(GoneWithin(driver, 10000));
  EXPECT_TRUE(GoneWithin(actor, 10000));
  EXPECT_TRUE(Contains(Rayx({"job", "status", "sleeper"}).out, "STOPPED"));

  r = Submit({"--working-dir", work_, "--submission-id", "crasher", "--no-wait"},
             {"./bin/job_driver", "sleep"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  logs = WaitForLog("crasher", "driver pid");
  actor = PidAfter(logs, "actor pid");
  driver = PidAfter(logs, "driver pid");
  ASSERT_GT(driver, 0) << logs;
  ASSERT_EQ(::kill(driver, SIGKILL), 0);
  std::string status = WaitForState("crasher", "FAILED");
  EXPECT_TRUE(Contains(status, "killed by signal 9")) << status;
  EXPECT_TRUE(GoneWithin(actor, 10000));
}

TEST_F(Job, ADetachedActorServesTheNextJob) {
  auto r = Submit({"--working-dir", work_}, {"./bin/job_driver", "keep"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "model value 42")) << r.out;
  r = Submit({"--working-dir", work_}, {"./bin/job_driver", "use"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "model value 43")) << r.out;
  expected_detached_ = 1;
}

TEST_F(Job, TwentyJobsInARowLeaveNothingBehind) {
  for (int i = 0; i < 20; ++i) {
    auto r = Submit({"--working-dir", work_, "--submission-id", "run" + std::to_string(i)},
                    {"./bin/job_driver", "tpu"});
    ASSERT_EQ(r.exit_code, 0) << "job " << i << ": " << r.Describe();
    ASSERT_TRUE(Contains(r.out, "tpu task ran on 127.0.0.2")) << r.out;
  }
  auto list = Rayx({"job", "list"});
  size_t succeeded = 0;
  for (size_t p = list.out.find("SUCCEEDED"); p != std::string::npos;
       p = list.out.find("SUCCEEDED", p + 1)) {
    ++succeeded;
  }
  EXPECT_EQ(succeeded, 20u) << list.out;
  // TearDown checks: no workers, CPUs free, object stores empty.
}

}  // namespace
}  // namespace rayx::testing
