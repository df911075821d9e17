// MemoryMonitor with made-up readings and workers: which worker it asks,
// when it kills, and that it never has two victims at once.
#include "agent/memory_monitor.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace rayx::worker {
namespace memory_monitor_test {  // this file's own (unit tests compile in batches)

class MemoryMonitorTest : public ::testing::Test {
 protected:
  MemoryMonitor& Monitor(MemoryMonitor::Options options = {.threshold = 0.9,
                                                            .period_ms = 250,
                                                            .grace_ms = 2000}) {
    MemoryMonitor::Deps deps;
    deps.read_usage = [this]() -> Result<MemoryMonitor::Usage> {
      if (!readable_) return Status::Unavailable("cannot read /proc/meminfo");
      return MemoryMonitor::Usage{100, used_};
    };
    deps.candidates = [this] { return workers_; };
    deps.alive = [this](pid_t pid) { return alive_.count(pid) > 0; };
    deps.ask = [this](pid_t pid) { asked_.push_back(pid); };
    deps.kill = [this](const LeaseId& lease, const std::string& why) {
      killed_.push_back(lease.Hex());
      why_ = why;
    };
    deps.log = [this](const std::string& line) { log_.push_back(line); };
    monitor_ = std::make_unique<MemoryMonitor>(options, std::move(deps));
    return *monitor_;
  }
  void AddWorker(pid_t pid, bool actor, uint64_t started) {
    workers_.push_back({pid, LeaseId::FromWire("lease-" + std::to_string(pid)), actor, started});
    alive_.insert(pid);
  }
  void Exit(pid_t pid) {
    alive_.erase(pid);
    std::erase_if(workers_, [pid](const MemoryMonitor::Candidate& c) { return c.pid == pid; });
  }

  uint64_t used_ = 50;
  bool readable_ = true;
  std::vector<MemoryMonitor::Candidate> workers_;
  std::set<pid_t> alive_;
  std::vector<pid_t> asked_;
  std::vector<std::string> killed_, log_;
  std::string why_;  // the last kill's reason
  std::unique_ptr<MemoryMonitor> monitor_;
};

TEST_F(MemoryMonitorTest, BelowTheThresholdNothingHappens) {
  MemoryMonitor& m = Monitor();
  AddWorker(10, false, 1);
  used_ = 90;  // at the threshold, not above
  m.Tick(0);
  EXPECT_TRUE(asked_.empty());
  EXPECT_TRUE(log_.empty());
}

TEST_F(MemoryMonitorTest, AsksTheNewestTaskWorkerBeforeAnyActor) {
  MemoryMonitor& m = Monitor();
  AddWorker(10, false, 1);
  AddWorker(11, true, 5);   // an actor, newest of all
  AddWorker(12, false, 3);  // the newest task worker
  used_ = 95;
  m.Tick(0);
  EXPECT_EQ(asked_, std::vector<pid_t>{12});
  ASSERT_FALSE(log_.empty());
  EXPECT_NE(log_.back().find("95.0%"), std::string::npos) << log_.back();
  EXPECT_NE(log_.back().find("task worker pid 12"), std::string::npos) << log_.back();
}

TEST_F(MemoryMonitorTest, AnActorIsAskedWhenNoTaskWorkerRuns) {
  MemoryMonitor& m = Monitor();
  AddWorker(20, true, 1);
  AddWorker(21, true, 2);
  used_ = 99;
  m.Tick(0);
  EXPECT_EQ(asked_, std::vector<pid_t>{21});
}

// The asked worker gives up its call in time: memory is back, it lives on,
// and nobody else is asked meanwhile.
TEST_F(MemoryMonitorTest, AWorkerThatFreedItsMemoryInTimeIsNotKilled) {
  MemoryMonitor& m = Monitor();
  AddWorker(10, false, 1);
  AddWorker(11, false, 2);
  used_ = 95;
  m.Tick(0);
  m.Tick(250);
  m.Tick(500);
  EXPECT_EQ(asked_, std::vector<pid_t>{11}) << "one victim at a time";
  used_ = 60;
  m.Tick(750);
  m.Tick(5000);
  EXPECT_TRUE(killed_.empty());
  EXPECT_EQ(m.asked(), 1u);
  EXPECT_EQ(m.killed(), 0u);
}

// Still short after the grace: killed (once), and the next victim is chosen
// only once it is gone.
TEST_F(MemoryMonitorTest, AWorkerStillShortAfterTheGraceIsKilledThenTheNextIsAsked) {
  MemoryMonitor& m = Monitor();
  AddWorker(10, false, 1);
  AddWorker(11, false, 2);
  used_ = 95;
  m.Tick(0);
  m.Tick(1999);
  EXPECT_TRUE(killed_.empty()) << "within its grace";
  m.Tick(2000);
  EXPECT_EQ(killed_, std::vector<std::string>{"lease-11"});
  // Its callers are told why (OutOfMemoryError), with the figures.
  EXPECT_NE(why_.find("memory monitor killed it"), std::string::npos) << why_;
  EXPECT_NE(why_.find("above the threshold of 90"), std::string::npos) << why_;
  m.Tick(2250);
  m.Tick(2500);
  EXPECT_EQ(killed_.size(), 1u) << "killed once";
  EXPECT_EQ(asked_, std::vector<pid_t>{11}) << "nobody else while it dies";
  Exit(11);
  m.Tick(2750);
  EXPECT_EQ(asked_, (std::vector<pid_t>{11, 10})) << "still short: the next one";
}

TEST_F(MemoryMonitorTest, AVictimThatExitedByItselfIsForgotten) {
  MemoryMonitor& m = Monitor();
  AddWorker(10, false, 1);
  used_ = 95;
  m.Tick(0);
  Exit(10);
  used_ = 50;
  m.Tick(250);
  used_ = 95;
  AddWorker(30, false, 9);
  m.Tick(500);
  EXPECT_EQ(asked_, (std::vector<pid_t>{10, 30}));
  EXPECT_TRUE(killed_.empty());
}

TEST_F(MemoryMonitorTest, NoWorkerToStopOrNoReadingIsSaidOnceNotEveryTick) {
  MemoryMonitor& m = Monitor();
  used_ = 95;
  m.Tick(0);
  m.Tick(250);
  EXPECT_EQ(log_.size(), 1u);
  EXPECT_NE(log_[0].find("runs no worker to stop"), std::string::npos) << log_[0];
  readable_ = false;
  m.Tick(500);
  m.Tick(750);
  EXPECT_EQ(log_.size(), 2u);
  EXPECT_NE(log_[1].find("cannot read"), std::string::npos) << log_[1];
}

TEST_F(MemoryMonitorTest, AThresholdOfOneOrAPeriodOfZeroTurnsItOff) {
  EXPECT_FALSE(Monitor({.threshold = 1.0, .period_ms = 250, .grace_ms = 2000}).enabled());
  EXPECT_FALSE(Monitor({.threshold = 0.5, .period_ms = 0, .grace_ms = 2000}).enabled());
  MemoryMonitor& m = Monitor({.threshold = 1.0, .period_ms = 250, .grace_ms = 2000});
  AddWorker(10, false, 1);
  used_ = 100;
  m.Tick(0);
  EXPECT_TRUE(asked_.empty());
}

TEST(MemoryMonitorMeminfo, ParsesTotalAndAvailableAndRefusesWhatItCannotRead) {
  auto usage = MemoryMonitor::ParseMeminfo(
      "MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    250 kB\n");
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->total, 1000u * 1024);
  EXPECT_EQ(usage->used, 750u * 1024);
  EXPECT_FALSE(MemoryMonitor::ParseMeminfo("MemTotal: 1000 kB\n").ok()) << "no MemAvailable";
  EXPECT_FALSE(MemoryMonitor::ParseMeminfo("garbage").ok());
  EXPECT_FALSE(MemoryMonitor::ParseMeminfo("MemTotal: 0 kB\nMemAvailable: 0 kB\n").ok());
  auto real = MemoryMonitor::ReadMeminfo();
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_GT(real->total, 0u);
  EXPECT_LE(real->used, real->total);
}

}  // namespace memory_monitor_test
}  // namespace rayx::worker
