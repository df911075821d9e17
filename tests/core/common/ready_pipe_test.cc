// The READY/ERROR start-up handshake.
#include "common/ready_pipe.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace rayx {
namespace ready_pipe_test {  // this file's own (unit tests compile in batches)

// Reads the pipe until EOF, which comes only once every write end is closed.
std::string ReadAll(int fd) {
  std::string data;
  char buf[256];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) data.append(buf, static_cast<size_t>(n));
  close(fd);
  return data;
}

TEST(ParseReadyLine, ParsesFields) {
  std::map<std::string, std::string> fields;
  ASSERT_TRUE(ParseReadyLine("READY port=6380 node_id=abc", &fields));
  EXPECT_EQ(fields, (std::map<std::string, std::string>{{"port", "6380"}, {"node_id", "abc"}}));
}

TEST(ParseReadyLine, ReadyWithoutFieldsIsReady) {
  std::map<std::string, std::string> fields;
  EXPECT_TRUE(ParseReadyLine("READY", &fields));
  EXPECT_TRUE(fields.empty());
}

TEST(ParseReadyLine, ValueMayContainEquals) {
  std::map<std::string, std::string> fields;
  ASSERT_TRUE(ParseReadyLine("READY k=a=b", &fields));
  EXPECT_EQ(fields["k"], "a=b");
}

TEST(ParseReadyLine, RejectsEverythingElse) {
  for (const std::string line : {"", "ERROR port in use", "READYX", "ready", "READY bare",
                                 " NOTREADY a=b"}) {
    std::map<std::string, std::string> fields;
    EXPECT_FALSE(ParseReadyLine(line, &fields)) << "'" << line << "'";
  }
}

TEST(ReadyPipe, ReadyWritesOneParsableLineAndCloses) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  {
    ReadyPipe ready(fds[1]);
    ready.Ready({{"port", "6380"}, {"address", "127.0.0.1"}});
    ready.Fail("too late");  // ignored: the one line is written
  }
  std::string data = ReadAll(fds[0]);
  EXPECT_EQ(data, "READY address=127.0.0.1 port=6380\n");
  std::map<std::string, std::string> fields;
  ASSERT_TRUE(ParseReadyLine(data.substr(0, data.find('\n')), &fields));
  EXPECT_EQ(fields["port"], "6380");
  EXPECT_EQ(fields["address"], "127.0.0.1");
}

TEST(ReadyPipe, ClosesPipeRightAfterWriting) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ReadyPipe ready(fds[1]);
  ready.Ready({});
  // EOF arrives while `ready` is still alive: the write end was closed.
  EXPECT_EQ(ReadAll(fds[0]), "READY\n");
}

TEST(ReadyPipe, FailWritesOneErrorLineWithNewlinesFlattened) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  {
    ReadyPipe ready(fds[1]);
    ready.Fail("port 6380 in use\nchoose another\nwith --port");
  }
  std::string data = ReadAll(fds[0]);
  EXPECT_EQ(data, "ERROR port 6380 in use choose another with --port\n");
  std::map<std::string, std::string> fields;
  EXPECT_FALSE(ParseReadyLine(data, &fields));
}

TEST(ReadyPipe, KeptOpenAfterReadyItReportsMoreLinesUntilDestroyed) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  {
    ReadyPipe ready(fds[1]);
    ready.Ready({{"address", "tcp://127.0.0.1:9"}}, /*keep_open=*/true);
    EXPECT_EQ(fcntl(fds[1], F_GETFD), -1) << "the low descriptor is the program's again";
    EXPECT_GE(ready.fd(), ReadyPipe::kReportFdFloor);
    EXPECT_NE(fcntl(ready.fd(), F_GETFD) & FD_CLOEXEC, 0) << "a program it starts would hold it";
    ready.Report(kConstructorBeganLine);
    ready.Report(std::string(kConstructorFailedPrefix) + "bad\nweights");
  }
  EXPECT_EQ(ReadAll(fds[0]),
            "READY address=tcp://127.0.0.1:9\nCONSTRUCTOR BEGAN\nCONSTRUCTOR FAILED bad weights\n");
}

TEST(ReadyPipe, AReportNobodyReadsDoesNotKillTheWriter) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);  // the agent is gone
  ReadyPipe ready(fds[1]);
  ready.Ready({}, /*keep_open=*/true);
  ready.Report(kConstructorSucceededLine);  // SIGPIPE at its default would end this test
  sigset_t pending;
  sigpending(&pending);
  EXPECT_FALSE(sigismember(&pending, SIGPIPE)) << "a SIGPIPE was left pending";
}

TEST(ReadyPipe, DestroyedWithoutWritingGivesEofWithNoLine) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  { ReadyPipe ready(fds[1]); }
  EXPECT_EQ(ReadAll(fds[0]), "");
}

}  // namespace
}  // namespace rayx
