// Session directories: config, pid records, listing and head address matching.
#include "common/session_dir.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "util/status_matchers.h"

namespace rayx::detail {
namespace session_dir_test {  // this file's own (unit tests compile in batches)

namespace fs = std::filesystem;

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rayx_session_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  ProcessRecord Self() const {
    auto start = ProcessStartTime(getpid());
    EXPECT_OK(start);
    return {getpid(), start.ok() ? *start : 0};
  }

  std::string root_;
};

TEST_F(SessionTest, CreateMakesSessionWithPidsAndLogs) {
  std::string temp = root_ + "/nested/tmp";
  auto s = Session::Create(temp);
  ASSERT_OK(s);
  EXPECT_EQ(s->path().rfind(temp + "/session_", 0), 0u) << s->path();
  EXPECT_NE(s->path().find("_" + std::to_string(getpid())), std::string::npos) << s->path();
  EXPECT_TRUE(fs::is_directory(s->path() + "/pids"));
  EXPECT_TRUE(fs::is_directory(s->path() + "/logs"));
  EXPECT_EQ(s->LogPath("head"), s->path() + "/logs/head.log");
  struct stat st{};
  ASSERT_EQ(stat(temp.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(SessionTest, CreateFailsWhenTempDirCannotBeMade) {
  std::string file = root_ + "/a_file";
  std::ofstream(file) << "x";
  auto s = Session::Create(file + "/sub");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find("--temp-dir"), std::string::npos) << s.status();
}

TEST_F(SessionTest, ConfigRoundTripsAndIsPrivate) {
  auto s = Session::Create(root_);
  ASSERT_OK(s);
  EXPECT_TRUE(s->ReadConfig().empty());
  std::map<std::string, std::string> config = {
      {"role", "head"}, {"address", "127.0.0.1:6380"}, {"token", "abc=def"}};
  ASSERT_OK(s->WriteConfig(config));
  EXPECT_EQ(s->ReadConfig(), config);
  struct stat st{};
  ASSERT_EQ(stat((s->path() + "/session.conf").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Rewriting replaces, not appends.
  ASSERT_OK(s->WriteConfig({{"role", "worker"}}));
  EXPECT_EQ(s->ReadConfig(), (std::map<std::string, std::string>{{"role", "worker"}}));
}

TEST_F(SessionTest, RecordsListsAndForgetsProcesses) {
  auto s = Session::Create(root_);
  ASSERT_OK(s);
  EXPECT_TRUE(s->Processes().empty());
  ASSERT_OK(s->RecordProcess("head", {1234, 55}));
  ASSERT_OK(s->RecordProcess("agent", {5678, 66}));
  auto procs = s->Processes();
  ASSERT_EQ(procs.size(), 2u);
  EXPECT_EQ(procs["head"].pid, 1234);
  EXPECT_EQ(procs["head"].start_time, 55u);
  EXPECT_EQ(procs["agent"].pid, 5678);
  s->ForgetProcess("head");
  procs = s->Processes();
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(procs.count("agent"), 1u);
  s->ForgetProcess("no-such");  // harmless
  EXPECT_EQ(s->Processes().size(), 1u);
}

TEST_F(SessionTest, ProcessesSkipsMalformedAndForeignFiles) {
  auto s = Session::Create(root_);
  ASSERT_OK(s);
  std::ofstream(s->path() + "/pids/bad.pid") << "garbage\n";
  std::ofstream(s->path() + "/pids/init.pid") << "1 1\n";
  std::ofstream(s->path() + "/pids/notes.txt") << "1234 5\n";
  ASSERT_OK(s->RecordProcess("good", {4321, 9}));
  auto procs = s->Processes();
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(procs.count("good"), 1u);
}

TEST_F(SessionTest, HasRunningProcessFollowsRecords) {
  auto s = Session::Create(root_);
  ASSERT_OK(s);
  EXPECT_FALSE(s->HasRunningProcess());
  ProcessRecord self = Self();
  ASSERT_OK(s->RecordProcess("stale", {self.pid, self.start_time + 1}));
  EXPECT_FALSE(s->HasRunningProcess());
  ASSERT_OK(s->RecordProcess("me", self));
  EXPECT_TRUE(s->HasRunningProcess());
}

TEST_F(SessionTest, ListIsNewestFirstAndIgnoresOtherEntries) {
  for (const char* name : {"session_2024-05-01_10-00-00_100", "session_2025-01-01_00-00-00_7",
                           "session_2024-12-31_23-59-59_9999"}) {
    fs::create_directories(root_ + "/" + name + "/pids");
  }
  fs::create_directories(root_ + "/other_dir");
  std::ofstream(root_ + "/session_file_not_dir") << "x";
  std::ofstream(root_ + "/latest") << "x";
  auto sessions = Session::List(root_);
  ASSERT_EQ(sessions.size(), 3u);
  EXPECT_EQ(sessions[0].path(), root_ + "/session_2025-01-01_00-00-00_7");
  EXPECT_EQ(sessions[1].path(), root_ + "/session_2024-12-31_23-59-59_9999");
  EXPECT_EQ(sessions[2].path(), root_ + "/session_2024-05-01_10-00-00_100");
}

TEST_F(SessionTest, ListOfMissingDirIsEmpty) {
  EXPECT_TRUE(Session::List(root_ + "/does-not-exist").empty());
}

TEST_F(SessionTest, RemoveDeletesTheSession) {
  auto s = Session::Create(root_);
  ASSERT_OK(s);
  ASSERT_OK(s->RecordProcess("head", {1234, 1}));
  s->Remove();
  EXPECT_FALSE(fs::exists(s->path()));
  EXPECT_TRUE(Session::List(root_).empty());
}

TEST_F(SessionTest, FindLocalClusterWithoutSessionsIsNotFound) {
  auto missing = FindLocalCluster(root_);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("rayx start --head"), std::string::npos);
}

TEST_F(SessionTest, FindLocalClusterPrefersLatestThenNewestLiveSession) {
  fs::create_directories(root_ + "/session_2999-01-01_00-00-00_1/pids");
  Session newest = Session::List(root_)[0];
  ASSERT_OK(newest.WriteConfig({{"address", "10.9.9.9:1"}, {"token", "newest"}}));
  ASSERT_OK(newest.RecordProcess("head", Self()));
  auto marked = Session::Create(root_);
  ASSERT_OK(marked);
  ASSERT_OK(marked->WriteConfig({{"address", "127.0.0.1:6380"}, {"token", "marked"}}));
  ASSERT_OK(marked->RecordProcess("head", Self()));

  // Without a `latest` mark the newest live session wins.
  auto found = FindLocalCluster(root_);
  ASSERT_OK(found);
  EXPECT_EQ(found->token, "newest");

  marked->MarkLatest();
  found = FindLocalCluster(root_);
  ASSERT_OK(found);
  EXPECT_EQ(found->address, "127.0.0.1:6380");
  EXPECT_EQ(found->token, "marked");

  // A latest session whose processes are gone is skipped.
  ASSERT_OK(marked->RecordProcess("head", {Self().pid, Self().start_time + 1}));
  found = FindLocalCluster(root_);
  ASSERT_OK(found);
  EXPECT_EQ(found->token, "newest");
}

TEST_F(SessionTest, FindTokenForMatchesSameHead) {
  auto s = Session::Create(root_);
  ASSERT_OK(s);
  ASSERT_OK(s->WriteConfig({{"address", "127.0.0.1:6380"}, {"token", "tok"}}));
  EXPECT_EQ(FindTokenFor(root_, "localhost:6380"), std::optional<std::string>("tok"));
  EXPECT_EQ(FindTokenFor(root_, "127.0.0.1:6381"), std::nullopt);
}

TEST(SameHead, LoopbackNamesOfOnePortAreTheSameHead) {
  EXPECT_TRUE(SameHead("127.0.0.1:6380", "localhost:6380"));
  EXPECT_TRUE(SameHead("127.0.0.1:6380", "127.0.0.1:6380"));
  EXPECT_TRUE(SameHead("10.1.2.3:6380", "10.1.2.3:6380"));
}

TEST(SameHead, DifferentPortsAreDifferentHeads) {
  EXPECT_FALSE(SameHead("127.0.0.1:6380", "localhost:6381"));
  EXPECT_FALSE(SameHead("127.0.0.1:6380", "127.0.0.1:6381"));
}

TEST(SameHead, MalformedAddressesNeverMatch) {
  EXPECT_FALSE(SameHead("127.0.0.1", "127.0.0.1"));
  EXPECT_FALSE(SameHead("", ""));
  EXPECT_FALSE(SameHead("127.0.0.1:0", "127.0.0.1:0"));
}

TEST(SameHead, ForeignAndLocalAddressDiffer) {
  EXPECT_FALSE(SameHead("192.0.2.1:6380", "127.0.0.1:6380"));
}

}  // namespace
}  // namespace rayx::detail
