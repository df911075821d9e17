// OutputForwarder: workers' output files read into notices for their jobs'
// drivers, over real files in a temporary directory.
#include "agent/output_forwarder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace rayx::worker {
namespace {

namespace fs = std::filesystem;

class OutputForwarderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rayx-output-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  OutputForwarder::Worker MakeWorker(const std::string& name, const JobId& job, pid_t pid) {
    return {LeaseId::FromRandom(), job, pid, (dir_ / (name + ".log")).string()};
  }
  static void Write(const OutputForwarder::Worker& w, const std::string& text) {
    std::ofstream(w.log_path, std::ios::app | std::ios::binary) << text;
  }
  // Every line of every notice, as the driver prints it.
  static std::vector<std::string> Printed(const std::vector<protocol::WorkerOutputNotice>& out) {
    std::vector<std::string> lines;
    for (const auto& n : out) {
      for (const auto& b : n.batches) {
        for (const auto& l : b.lines) lines.push_back("(" + b.source + ") " + l);
      }
    }
    return lines;
  }

  fs::path dir_;
  const JobId job_a_ = JobId::FromHex("00000000000000aa").value();
  const JobId job_b_ = JobId::FromHex("00000000000000bb").value();
};

TEST_F(OutputForwarderTest, NewWholeLinesGoOutNamedByTheLastMarker) {
  OutputForwarder forwarder({.node_ip = "10.0.0.7"});
  auto w = MakeWorker("w", job_a_, 4242);
  Write(w, "before any call\n");
  Write(w, std::string(protocol::kOutputNameMarker) + "train_step\nloss 0.31\nloss 0.2");
  auto out = forwarder.Poll({w});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].job_id, job_a_);
  EXPECT_EQ(Printed(out), (std::vector<std::string>{"(pid=4242, ip=10.0.0.7) before any call",
                                                    "(train_step pid=4242, ip=10.0.0.7) loss 0.31"}))
      << "the marker is taken out and an unended line waits";
  EXPECT_TRUE(forwarder.Poll({w}).empty()) << "nothing new";
  Write(w, "5\n");
  EXPECT_EQ(Printed(forwarder.Poll({w})),
            std::vector<std::string>{"(train_step pid=4242, ip=10.0.0.7) loss 0.25"});
}

TEST_F(OutputForwarderTest, AnExitedWorkersLastBytesGoOutThenItIsForgotten) {
  OutputForwarder forwarder({.node_ip = "10.0.0.7"});
  auto w = MakeWorker("w", job_a_, 7);
  Write(w, "first\n");
  ASSERT_EQ(Printed(forwarder.Poll({w})).size(), 1u);
  Write(w, "Traceback (most recent call last):\nRuntimeError: boom");  // then it died
  EXPECT_EQ(Printed(forwarder.Poll({})),
            (std::vector<std::string>{"(pid=7, ip=10.0.0.7) Traceback (most recent call last):",
                                      "(pid=7, ip=10.0.0.7) RuntimeError: boom"}));
  EXPECT_EQ(forwarder.followed(), 0u);
}

TEST_F(OutputForwarderTest, AWorkerThatExitedBeforeAnyReadIsReadOnce) {
  OutputForwarder forwarder({.node_ip = "10.0.0.7"});
  auto w = MakeWorker("w", job_a_, 11);
  Write(w, "quick\nlast words");
  EXPECT_EQ(Printed(forwarder.Poll({}, {w})),
            (std::vector<std::string>{"(pid=11, ip=10.0.0.7) quick",
                                      "(pid=11, ip=10.0.0.7) last words"}));
  EXPECT_EQ(forwarder.followed(), 0u);
  EXPECT_TRUE(forwarder.Poll({}).empty());
}

TEST_F(OutputForwarderTest, EachJobGetsItsOwnWorkersLinesInOrder) {
  OutputForwarder forwarder({.node_ip = "10.0.0.7"});
  auto a = MakeWorker("a", job_a_, 1);
  auto b = MakeWorker("b", job_b_, 2);
  for (int i = 0; i < 100; ++i) Write(a, "a" + std::to_string(i) + "\n");
  Write(b, "b0\n");
  auto out = forwarder.Poll({a, b});
  ASSERT_EQ(out.size(), 2u);
  for (const auto& n : out) {
    std::vector<std::string> lines = Printed({n});
    if (n.job_id == job_a_) {
      ASSERT_EQ(lines.size(), 100u);
      for (int i = 0; i < 100; ++i) {
        EXPECT_EQ(lines[i], "(pid=1, ip=10.0.0.7) a" + std::to_string(i));
      }
    } else {
      EXPECT_EQ(n.job_id, job_b_);
      EXPECT_EQ(lines, std::vector<std::string>{"(pid=2, ip=10.0.0.7) b0"});
    }
  }
}

TEST_F(OutputForwarderTest, AJobsProcessesGoInNoticesOfTheirOwnOneFollowedPerPid) {
  OutputForwarder forwarder({.node_ip = "10.0.0.7"});
  auto worker = MakeWorker("w", job_a_, 10);
  // Two processes of one process lease (`rayx launch` runs several).
  LeaseId lease = LeaseId::FromRandom();
  OutputForwarder::Worker entry{lease, job_a_, 20, (dir_ / "p0.log").string(), true, "python3"};
  OutputForwarder::Worker second{lease, job_a_, 21, (dir_ / "p1.log").string(), true, "train"};
  Write(worker, "from a task\n");
  Write(entry, "from the entrypoint\n");
  Write(second, "from a second command\n");
  auto out = forwarder.Poll({worker, entry, second});
  ASSERT_EQ(out.size(), 2u) << "the workers' lines and the processes' apart";
  const auto& workers = out[0].processes ? out[1] : out[0];
  const auto& processes = out[0].processes ? out[0] : out[1];
  EXPECT_FALSE(workers.processes);
  EXPECT_EQ(Printed({workers}), (std::vector<std::string>{"(pid=10, ip=10.0.0.7) from a task"}));
  EXPECT_EQ(processes.job_id, job_a_);
  EXPECT_EQ(Printed({processes}),
            (std::vector<std::string>{"(python3 pid=20, ip=10.0.0.7) from the entrypoint",
                                      "(train pid=21, ip=10.0.0.7) from a second command"}));
  EXPECT_EQ(forwarder.followed(), 3u);
  // The entrypoint exits: its last, unended line goes out, then it is forgotten.
  Write(entry, "bye");
  out = forwarder.Poll({worker, second}, {entry});
  EXPECT_EQ(Printed(out), (std::vector<std::string>{"(python3 pid=20, ip=10.0.0.7) bye"}));
  EXPECT_EQ(forwarder.followed(), 2u);
}

TEST_F(OutputForwarderTest, AFloodIsSkippedWithANoteThatSaysWhereAllOfItIs) {
  OutputForwarder forwarder({.node_ip = "10.0.0.7", .max_bytes_per_period = 1000});
  auto w = MakeWorker("w", job_a_, 9);
  std::string flood;
  for (int i = 0; i < 1000; ++i) flood += "line " + std::to_string(i) + "\n";
  Write(w, flood);
  auto lines = Printed(forwarder.Poll({w}));
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[0], "(pid=9, ip=10.0.0.7) line 0");
  EXPECT_LT(lines.size(), 200u) << "a period reads at most 1000 bytes";
  const std::string& note = lines.back();
  EXPECT_NE(note.find("bytes of this worker's output skipped"), std::string::npos) << note;
  EXPECT_NE(note.find(w.log_path), std::string::npos) << note;
  EXPECT_NE(note.find(std::to_string(flood.size() - 1000)), std::string::npos) << note;
  // What comes after the flood arrives whole; the cut line before it does not.
  Write(w, "after\n");
  EXPECT_EQ(Printed(forwarder.Poll({w})), std::vector<std::string>{"(pid=9, ip=10.0.0.7) after"});
}

TEST_F(OutputForwarderTest, AnEndlessLineIsCut) {
  OutputForwarder forwarder({.node_ip = "10.0.0.7", .max_line_bytes = 100});
  auto w = MakeWorker("w", job_a_, 3);
  Write(w, std::string(250, 'x'));
  auto lines = Printed(forwarder.Poll({w}));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(std::string(100, 'x') + " [rayx: line cut at 100 bytes]"),
            std::string::npos);
  Write(w, "yyy\nnext\n");  // the rest of the cut line is dropped
  EXPECT_EQ(Printed(forwarder.Poll({w})), std::vector<std::string>{"(pid=3, ip=10.0.0.7) next"});
}

TEST_F(OutputForwarderTest, ANoticeStaysUnderItsSize) {
  OutputForwarder forwarder({.node_ip = "10.0.0.7", .max_notice_bytes = 4096});
  auto w = MakeWorker("w", job_a_, 5);
  for (int i = 0; i < 1000; ++i) Write(w, std::string(40, 'z') + "\n");
  auto out = forwarder.Poll({w});
  ASSERT_GT(out.size(), 5u);
  size_t lines = 0;
  for (const auto& n : out) {
    size_t bytes = 0;
    for (const auto& b : n.batches) {
      for (const auto& l : b.lines) bytes += l.size();
    }
    EXPECT_LE(bytes, 4096u);
    lines += Printed({n}).size();
  }
  EXPECT_EQ(lines, 1000u);
}

}  // namespace
}  // namespace rayx::worker
