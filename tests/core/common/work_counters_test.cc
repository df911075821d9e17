// WorkCounters: a worker process counts into a page its agent reads; counts
// add up across lives and reports.
#include "common/work_counters.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include <gtest/gtest.h>

namespace rayx {
namespace work_counters_test {  // this file's own (unit tests compile in batches)

using Op = WorkCounters::Op;
constexpr size_t kAllReduce = static_cast<size_t>(Op::kAllReduce);

TEST(WorkCounters, AnotherProcessCountsIntoTheSharedPage) {
  auto page = WorkCounters::CreateShared();
  ASSERT_TRUE(page.ok()) << page.status();
  const int fd = (*page)->fd();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // As a worker does: map the inherited descriptor and count.
    int inherited = ::dup(fd);
    if (!WorkCounters::UseSharedPage(inherited).ok()) _exit(2);
    WorkCounters& counters = WorkCounters::Process();
    counters.TaskSubmitted();
    counters.TaskSubmitted();
    counters.TaskEnded(true);
    counters.TaskRetried();
    counters.CollectiveOpDone(Op::kAllReduce, std::chrono::milliseconds(3), false);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  WorkCounts counts = (*page)->Read();
  EXPECT_EQ(counts.tasks.submitted, 2u);
  EXPECT_EQ(counts.tasks.failed, 1u);
  EXPECT_EQ(counts.tasks.finished, 0u);
  EXPECT_EQ(counts.tasks.retried, 1u);
  EXPECT_EQ(counts.ops[kAllReduce].count, 1u);
  EXPECT_EQ(counts.ops[kAllReduce].micros, 3000u);
  EXPECT_EQ(counts.ops[kAllReduce].buckets[2], 1u) << "3 ms is within the 10 ms bucket";
  // This process's own counters saw none of it.
  EXPECT_EQ(WorkCounters::Process().Read().tasks.submitted, 0u);
}

TEST(WorkCounters, APageCannotBeShrunkUnderItsReader) {
  auto page = WorkCounters::CreateShared();
  ASSERT_TRUE(page.ok()) << page.status();
  // A worker that truncated its page would fault the agent's reads.
  EXPECT_NE(::ftruncate((*page)->fd(), 0), 0);
  (*page)->TaskSubmitted();
  EXPECT_EQ((*page)->Read().tasks.submitted, 1u);
}

TEST(WorkCounters, OnlyAnAgentsPageIsMapped) {
  EXPECT_FALSE(WorkCounters::MapShared(-1).ok());
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  auto from_pipe = WorkCounters::MapShared(pipe_fds[0]);
  EXPECT_FALSE(from_pipe.ok());
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  // A regular file of the page's size but without the marker.
  FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(::ftruncate(fileno(file), 4096), 0);
  auto unmarked = WorkCounters::MapShared(::dup(fileno(file)));
  ASSERT_FALSE(unmarked.ok());
  EXPECT_NE(unmarked.status().message().find("not a rayx counter page"), std::string::npos);
  std::fclose(file);
  // UseSharedPage refuses it too and counting stays in memory.
  EXPECT_FALSE(WorkCounters::UseSharedPage(-1).ok());
}

TEST(WorkCounters, LatencyBucketsSplitAtTheirBounds) {
  WorkCounters counters;
  counters.CollectiveOpDone(Op::kBarrier, std::chrono::microseconds(100), false);  // == bound
  counters.CollectiveOpDone(Op::kBarrier, std::chrono::microseconds(101), false);
  counters.CollectiveOpDone(Op::kBarrier, std::chrono::hours(1), true);
  const WorkCounts::Op& op = counters.Read().ops[static_cast<size_t>(Op::kBarrier)];
  EXPECT_EQ(op.buckets[0], 1u);
  EXPECT_EQ(op.buckets[1], 1u);
  EXPECT_EQ(op.buckets[WorkCounts::kBuckets - 1], 1u);
  EXPECT_EQ(op.count, 3u);
  EXPECT_EQ(op.failed, 1u);
}

TEST(WorkCounts, GrowthAddsUpAcrossReportsAndANewLifeCountsWhole) {
  WorkCounts totals, before, now;
  now.tasks.submitted = 10;
  now.ops[kAllReduce].count = 4;
  now.ops[kAllReduce].buckets[1] = 4;
  totals.AddGrowth(now, before);
  before = now;
  now.tasks.submitted = 15;  // counts, not increments
  now.ops[kAllReduce].count = 5;
  now.ops[kAllReduce].buckets[1] = 5;
  totals.AddGrowth(now, before);
  EXPECT_EQ(totals.tasks.submitted, 15u);
  EXPECT_EQ(totals.ops[kAllReduce].buckets[1], 5u);
  // The source started again under its old name: its counts restart low.
  before = now;
  WorkCounts restarted;
  restarted.tasks.submitted = 3;
  totals.AddGrowth(restarted, before);
  EXPECT_EQ(totals.tasks.submitted, 18u);
  EXPECT_EQ(totals.ops[kAllReduce].count, 5u);
}

TEST(WorkCounts, TheWireFormRoundTripsAndIgnoresWhatItDoesNotKnow) {
  WorkCounters counters;
  counters.CollectiveOpDone(Op::kRecv, std::chrono::milliseconds(1), false);
  WorkCounts counts = counters.Read();
  auto wire = counts.Collectives();
  ASSERT_EQ(wire.size(), 1u) << "only the ops that ran";
  EXPECT_EQ(wire[0].op, "recv");
  wire.push_back({"recv", 99, 0, 0, std::vector<uint64_t>(WorkCounts::kBuckets, 9)});  // twice
  wire.push_back({"gather", 7, 0, 0, std::vector<uint64_t>(WorkCounts::kBuckets, 1)});
  wire.push_back({"send", 7, 0, 0, {1, 2}});  // a histogram of another size
  WorkCounts back = WorkCounts::FromWire({}, wire);
  EXPECT_EQ(back.ops[static_cast<size_t>(Op::kRecv)].count, 1u);
  EXPECT_EQ(back.ops[static_cast<size_t>(Op::kSend)].count, 0u);
  size_t ran = 0;
  for (const auto& op : back.ops) ran += op.count;
  EXPECT_EQ(ran, 1u);
}

}  // namespace work_counters_test
}  // namespace rayx
