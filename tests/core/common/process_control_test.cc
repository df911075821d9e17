// Pid records and pid-exact liveness checks.
#include "common/process_control.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "util/status_matchers.h"

namespace rayx::detail {
namespace process_control_test {  // this file's own (unit tests compile in batches)

TEST(ProcessRecord, RoundTripsThroughText) {
  ProcessRecord in{12345, 987654321};
  EXPECT_EQ(in.ToString(), "12345 987654321");
  auto out = ProcessRecord::Parse(in.ToString());
  ASSERT_OK(out);
  EXPECT_EQ(out->pid, 12345);
  EXPECT_EQ(out->start_time, 987654321u);
}

TEST(ProcessRecord, ParseToleratesSurroundingWhitespace) {
  auto out = ProcessRecord::Parse("  42 7\n");
  ASSERT_OK(out);
  EXPECT_EQ(out->pid, 42);
  EXPECT_EQ(out->start_time, 7u);
}

TEST(ProcessRecord, ParseRejectsGarbage) {
  for (const std::string text : {"", "abc", "12", "12 x", "x 12", "  "}) {
    auto r = ProcessRecord::Parse(text);
    ASSERT_FALSE(r.ok()) << "accepted '" << text << "'";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("'" + text + "'"), std::string::npos) << r.status();
  }
}

TEST(ProcessRecord, ParseRejectsPidZeroOneAndNegative) {
  // Never signal init or, via kill(0/-1), whole groups.
  for (const std::string text : {"0 5", "1 5", "-1 5", "-100 5"}) {
    EXPECT_FALSE(ProcessRecord::Parse(text).ok()) << text;
  }
}

TEST(ProcessStartTime, OfSelfIsKnownAndStable) {
  auto a = ProcessStartTime(getpid());
  ASSERT_OK(a);
  auto b = ProcessStartTime(getpid());
  ASSERT_OK(b);
  EXPECT_EQ(*a, *b);
}

TEST(ProcessStartTime, OfMissingProcessIsNotFound) {
  // pid_max is at most 2^22 on Linux, so this pid cannot exist.
  EXPECT_STATUS_CODE(ProcessStartTime(1 << 23), StatusCode::kNotFound);
}

TEST(IsRunning, SelfWithRightStartTimeIsRunning) {
  ASSERT_OK_AND_ASSIGN(uint64_t start, ProcessStartTime(getpid()));
  EXPECT_TRUE(IsRunning({getpid(), start}));
}

TEST(IsRunning, SelfWithWrongStartTimeIsNotRunning) {
  // A reused pid: same number, different process.
  ASSERT_OK_AND_ASSIGN(uint64_t start, ProcessStartTime(getpid()));
  EXPECT_FALSE(IsRunning({getpid(), start + 1}));
  EXPECT_FALSE(IsRunning({getpid(), 0}));
}

// A child that blocks until the returned fd is closed, then exits; with
// `own_group`, it leads a new session and process group (as a lease process).
pid_t ForkBlockedChild(int* release_fd, bool own_group = false) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    if (own_group) setsid();
    close(fds[1]);
    char c;
    while (read(fds[0], &c, 1) > 0) {
    }
    _exit(0);
  }
  close(fds[0]);
  *release_fd = fds[1];
  return pid;
}

TEST(IsRunning, ExitedChildIsNotRunningBeforeOrAfterReaping) {
  int release = -1;
  pid_t child = ForkBlockedChild(&release);
  ASSERT_GT(child, 0);
  auto start = ProcessStartTime(child);
  ASSERT_OK(start);
  ProcessRecord record{child, *start};
  EXPECT_TRUE(IsRunning(record));

  close(release);
  // Wait for the exit without reaping: the child is now a zombie.
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  EXPECT_FALSE(IsRunning(record)) << "a zombie is not running";
  EXPECT_FALSE(SignalGroup(record, SIGTERM));

  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_FALSE(IsRunning(record));
}

TEST(SignalGroup, SignalsRunningChildAndRefusesWrongStartTime) {
  int release = -1;
  pid_t child = ForkBlockedChild(&release);
  ASSERT_GT(child, 0);
  auto start = ProcessStartTime(child);
  ASSERT_OK(start);
  // Wrong start time: not ours, never signalled.
  EXPECT_FALSE(SignalGroup({child, *start + 1}, SIGKILL));
  // The child shares our process group, so only the child itself is signalled.
  EXPECT_TRUE(SignalGroup({child, *start}, SIGKILL));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  close(release);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST(WaitForExit, ReturnsEmptyWhenAllAreGone) {
  int release = -1;
  pid_t child = ForkBlockedChild(&release);
  ASSERT_GT(child, 0);
  auto start = ProcessStartTime(child);
  ASSERT_OK(start);
  close(release);
  EXPECT_TRUE(WaitForExit({{child, *start}}, 10'000).empty());
  // WaitForExit reaped its own child.
  EXPECT_EQ(waitpid(child, nullptr, WNOHANG), -1);
}

TEST(WaitForExit, ReturnsThoseStillRunningAtTheDeadline) {
  auto start = ProcessStartTime(getpid());
  ASSERT_OK(start);
  auto left = WaitForExit({{getpid(), *start}}, 0);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].pid, getpid());
}

TEST(TailFile, ReturnsLastLines) {
  char path[] = "/tmp/rayx_tail_test_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream out(path);
    for (int i = 1; i <= 10; ++i) out << "line " << i << "\n";
  }
  EXPECT_EQ(TailFile(path, 3), "line 8\nline 9\nline 10\n");
  EXPECT_EQ(TailFile(path, 0), "");
  std::remove(path);
  EXPECT_EQ(TailFile(path, 3), "");
}

TEST(SelfDirectory, ContainsThisTestBinary) {
  std::string dir = SelfDirectory();
  ASSERT_FALSE(dir.empty());
  // The executable this test runs in (the unit tests of core/).
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  EXPECT_EQ(std::filesystem::path(dir), self.parent_path());
  EXPECT_EQ(access((dir + "/" + self.filename().string()).c_str(), X_OK), 0) << dir;
}

}  // namespace
}  // namespace rayx::detail

namespace rayx::detail {
namespace process_control_test {  // this file's own (unit tests compile in batches)
TEST(ProcessRecord, ParseRejectsPidsOutsidePidTRange) {
  for (const std::string text : {"4294967297 5", "4294967296 5", "4294967295 5", "9999999999 1"}) {
    auto r = ProcessRecord::Parse(text);
    EXPECT_FALSE(r.ok()) << text << " parsed as pid " << (r.ok() ? r->pid : 0);
  }
}
TEST(ProcessRecord, ParseRejectsNegativeStartTime) {
  EXPECT_FALSE(ProcessRecord::Parse("123 -5").ok());
}

// Recorded groups are killed; a record whose pid now belongs to another
// process (another start time) is not; every record is gone afterwards.
TEST(KillRecordedGroups, KillsRecordedGroupsAndSparesAReusedPid) {
  char pattern[] = "/tmp/rayx-groups-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  std::string dir = pattern;
  int release_ours = -1, release_other = -1;
  pid_t ours = ForkBlockedChild(&release_ours, /*own_group=*/true);
  pid_t other = ForkBlockedChild(&release_other, /*own_group=*/true);
  ASSERT_GT(ours, 0);
  ASSERT_GT(other, 0);
  // setsid has run once the child's group is its own pid.
  for (int i = 0; i < 1000 && (getpgid(ours) != ours || getpgid(other) != other); ++i) {
    usleep(1000);
  }
  ASSERT_EQ(getpgid(ours), ours);
  ASSERT_EQ(getpgid(other), other);
  auto ours_start = ProcessStartTime(ours);
  auto other_start = ProcessStartTime(other);
  ASSERT_OK(ours_start);
  ASSERT_OK(other_start);
  ASSERT_OK(RecordGroup(dir, {ours, *ours_start}, "RAYX_LEASE_ID=a"));
  ASSERT_OK(RecordGroup(dir, {other, *other_start + 1}, "RAYX_LEASE_ID=b"));  // pid reused
  std::ofstream(dir + "/garbage") << "not a record";

  EXPECT_EQ(KillRecordedGroups(dir), 1);
  int status = 0;
  ASSERT_EQ(waitpid(ours, &status, 0), ours);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_TRUE(IsRunning({other, *other_start})) << "a reused pid was signalled";
  close(release_other);
  ASSERT_EQ(waitpid(other, &status, 0), other);
  close(release_ours);
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  // Forgotten groups are not touched.
  ASSERT_OK(RecordGroup(dir, {12345, 1}, "RAYX_LEASE_ID=c"));
  ForgetGroup(dir, 12345);
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

// A session leader that starts `sleep` in its group (with `env`, NULL-ended)
// and exits: what an agent's killed lease process leaves. Returns the group
// (the leader's pid, free now) and the sleeper's pid.
std::pair<pid_t, pid_t> OrphanedGroup(char* const env[]) {
  int fds[2];
  if (pipe(fds) != 0) return {-1, -1};
  pid_t leader = fork();
  if (leader == 0) {
    setsid();
    pid_t sleeper = fork();
    if (sleeper == 0) {
      execle("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr), env);
      _exit(127);
    }
    (void)!write(fds[1], &sleeper, sizeof sleeper);
    _exit(0);
  }
  close(fds[1]);
  pid_t sleeper = -1;
  if (read(fds[0], &sleeper, sizeof sleeper) != sizeof sleeper) sleeper = -1;
  close(fds[0]);
  waitpid(leader, nullptr, 0);
  return {leader, sleeper};
}

// The leader is gone (its agent died, so did it): the group is killed when a
// member carries the lease's marker, and spared when none does (the number
// may be another group's by now).
TEST(KillRecordedGroups, AnOrphanedGroupIsKilledOnlyWhenItCarriesTheMarker) {
  char pattern[] = "/tmp/rayx-groups-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  std::string dir = pattern;
  // Orphans come to this process (not init), so the test can reap them.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  char marked[] = "RAYX_LEASE_ID=lease-1";
  char other[] = "PATH=/bin";
  char* const with_marker[] = {marked, nullptr};
  char* const without[] = {other, nullptr};
  auto [ours, our_sleeper] = OrphanedGroup(with_marker);
  auto [theirs, their_sleeper] = OrphanedGroup(without);
  ASSERT_GT(our_sleeper, 0);
  ASSERT_GT(their_sleeper, 0);
  // Each sleeper has exec'd (its environment is the new one) once /proc says so.
  auto exec_done = [](pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
    std::string comm;
    return (in >> comm) && comm == "sleep";
  };
  for (int i = 0; i < 2000 && !(exec_done(our_sleeper) && exec_done(their_sleeper)); ++i) {
    usleep(1000);
  }
  ASSERT_TRUE(exec_done(our_sleeper) && exec_done(their_sleeper));
  ASSERT_OK(RecordGroup(dir, {ours, 1}, "RAYX_LEASE_ID=lease-1"));
  ASSERT_OK(RecordGroup(dir, {theirs, 1}, "RAYX_LEASE_ID=lease-2"));
  EXPECT_EQ(KillRecordedGroups(dir), 1);
  int status = 0;
  ASSERT_EQ(waitpid(our_sleeper, &status, 0), our_sleeper) << "not our child?";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(::kill(their_sleeper, 0), 0) << "a group without the marker was signalled";
  ::kill(their_sleeper, SIGKILL);
  waitpid(their_sleeper, nullptr, 0);
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}


// Waits up to `timeout_ms` for child `pid` to end; its wait status, or -1.
int WaitForChild(pid_t pid, int timeout_ms) {
  for (int waited = 0; waited < timeout_ms; ++waited) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    usleep(1000);
  }
  return -1;
}

// An agent's reaper kills the lease groups it recorded the moment the agent
// is gone, even when a signal to the agent's whole process group ended it,
// and removes what it was told to (the agent's object store); it leaves
// them alone while the agent runs.
TEST(StartGroupReaper, KillsTheRecordedGroupsOnceItsOwnerIsGone) {
  char pattern[] = "/tmp/rayx-groups-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  std::string dir = pattern;
  const std::string store = dir + "-store", lock = store + ".lock";
  std::filesystem::create_directories(store);
  std::ofstream(store + "/an-object") << "bytes";
  std::ofstream(lock) << "";
  int release = -1;
  pid_t lease = ForkBlockedChild(&release, /*own_group=*/true);
  ASSERT_GT(lease, 0);
  for (int i = 0; i < 1000 && getpgid(lease) != lease; ++i) usleep(1000);
  ASSERT_EQ(getpgid(lease), lease);
  auto lease_start = ProcessStartTime(lease);
  ASSERT_OK(lease_start);
  ASSERT_OK(RecordGroup(dir, {lease, *lease_start}, "RAYX_LEASE_ID=a"));

  int report[2];
  ASSERT_EQ(pipe(report), 0);
  pid_t owner = fork();
  if (owner == 0) {
    setsid();
    auto reaper = StartGroupReaper(dir, {store, lock});
    pid_t pid = reaper.ok() ? *reaper : -1;
    (void)!write(report[1], &pid, sizeof pid);
    while (true) pause();
  }
  close(report[1]);
  pid_t reaper = -1;
  ASSERT_EQ(read(report[0], &reaper, sizeof reaper), static_cast<ssize_t>(sizeof reaper));
  close(report[0]);
  ASSERT_GT(reaper, 0) << "the reaper did not start";
  EXPECT_EQ(getpgid(reaper), owner) << "the reaper should stay in its owner's process group";

  EXPECT_TRUE(IsRunning({lease, *lease_start})) << "the reaper acted while its owner ran";
  EXPECT_TRUE(std::filesystem::exists(store + "/an-object"));
  ASSERT_EQ(::kill(-owner, SIGTERM), 0);
  int owner_status = WaitForChild(owner, 10000);
  ASSERT_NE(owner_status, -1) << "the owner survived SIGTERM";
  EXPECT_TRUE(WIFSIGNALED(owner_status) && WTERMSIG(owner_status) == SIGTERM);
  int lease_status = WaitForChild(lease, 10000);
  ASSERT_NE(lease_status, -1) << "the recorded group outlived its owner by 10 s";
  EXPECT_TRUE(WIFSIGNALED(lease_status) && WTERMSIG(lease_status) == SIGKILL);
  close(release);
  // It exits once done, its records removed (a zombie until init, or this
  // process when an earlier test made it a subreaper, reaps it).
  bool reaper_gone = false;
  for (int i = 0; i < 10000 && !reaper_gone; ++i) {
    reaper_gone = !ProcessStartTime(reaper).ok();
    if (!reaper_gone) usleep(1000);
  }
  waitpid(reaper, nullptr, WNOHANG);
  EXPECT_TRUE(reaper_gone) << "the reaper still runs 10 s after its owner died";
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  // It exited after removing them.
  EXPECT_FALSE(std::filesystem::exists(store)) << "the owner's store outlived it";
  EXPECT_FALSE(std::filesystem::exists(lock));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rayx::detail
