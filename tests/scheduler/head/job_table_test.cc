// JobTable: jobs added, heartbeating, ending and silent.
#include "head/job_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace rayx::scheduler {
namespace job_table_test {  // this file's own (unit tests compile in batches)

constexpr int64_t kT0 = 1'000'000;
constexpr int64_t kTimeout = 5000;

JobId Job(char c) { return JobId::FromHex(std::string(16, c)).value(); }

TEST(JobTable, AJobIsLiveFromItsRegistrationUntilItsEndBegins) {
  JobTable jobs;
  EXPECT_FALSE(jobs.Live(Job('a')));
  EXPECT_TRUE(jobs.Add(Job('a'), kT0));
  EXPECT_FALSE(jobs.Add(Job('a'), kT0 + 1)) << "added twice";
  EXPECT_TRUE(jobs.Live(Job('a')));
  EXPECT_TRUE(jobs.BeginFinish(Job('a')));
  EXPECT_FALSE(jobs.Live(Job('a')));
  EXPECT_FALSE(jobs.BeginFinish(Job('a'))) << "a job's end began twice";
  EXPECT_FALSE(jobs.Heartbeat(Job('a'), kT0 + 2)) << "an ending job's driver must stop";
  EXPECT_EQ(jobs.size(), 1u);  // known until its end is done
  jobs.Erase(Job('a'));
  EXPECT_EQ(jobs.size(), 0u);
  EXPECT_FALSE(jobs.Heartbeat(Job('a'), kT0 + 3));
}

TEST(JobTable, OnlyUnsupervisedDriversFallSilent) {
  JobTable jobs;
  jobs.Add(Job('a'), kT0);                           // a driver that goes quiet
  jobs.Add(Job('b'), kT0);                           // a driver that heartbeats
  jobs.Add(Job('c'), kT0, /*supervised=*/true);      // a submitted job
  jobs.Add(Job('d'), kT0);
  jobs.Add(Job('d'), kT0, /*supervised=*/true);      // supervised later: stays so
  jobs.Add(Job('d'), kT0, /*supervised=*/false);
  EXPECT_TRUE(jobs.Heartbeat(Job('b'), kT0 + kTimeout));
  EXPECT_TRUE(jobs.Silent(kT0 + kTimeout, kTimeout).empty()) << "silent for exactly the timeout";
  EXPECT_EQ(jobs.Silent(kT0 + kTimeout + 1, kTimeout), std::vector<JobId>{Job('a')});
  jobs.BeginFinish(Job('a'));
  EXPECT_TRUE(jobs.Silent(kT0 + kTimeout + 1, kTimeout).empty()) << "an ending job is not silent again";
}

TEST(JobTable, ForEachVisitsEveryKnownJob) {
  JobTable jobs;
  jobs.Add(Job('a'), kT0);
  jobs.Add(Job('b'), kT0);
  jobs.BeginFinish(Job('b'));
  std::vector<JobId> seen;
  jobs.ForEach([&](const JobId& id) { seen.push_back(id); });
  std::sort(seen.begin(), seen.end());
  std::vector<JobId> want{Job('a'), Job('b')};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(seen, want);
}

}  // namespace job_table_test
}  // namespace rayx::scheduler
