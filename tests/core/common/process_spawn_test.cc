// The one launcher of child processes, with real children (/bin/sh): their
// environment, descriptors, session, and what they say when they cannot start.
#include "common/process_spawn.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace rayx::detail {
namespace process_spawn_test {  // this file's own (unit tests compile in batches)

struct Pipe {
  int read = -1, write = -1;
  Pipe() {
    int fds[2];
    EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
    read = fds[0];
    write = fds[1];
  }
  ~Pipe() {
    if (read >= 0) ::close(read);
    if (write >= 0) ::close(write);
  }
  void CloseWrite() {
    ::close(write);
    write = -1;
  }
  // Everything until EOF (every writer closed).
  std::string ReadAll() {
    std::string out;
    char buf[512];
    ssize_t n;
    while ((n = ::read(read, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    return out;
  }
};

int Wait(pid_t pid) {
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

SpawnOptions Shell(const std::string& script) {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", script};
  return o;
}

TEST(Spawn, TheEnvironmentIsThisProcessesLessUnsetPlusSet) {
  ::setenv("RAYX_SPAWN_TEST_KEPT", "kept", 1);
  ::setenv("RAYX_SPAWN_TEST_GONE", "secret", 1);
  Pipe out;
  SpawnOptions o = Shell("echo \"$RAYX_SPAWN_TEST_KEPT ${RAYX_SPAWN_TEST_GONE-unset} $NEW\"");
  o.unset_env = {"RAYX_SPAWN_TEST_GONE"};
  o.set_env = {"NEW=first", "NEW=last"};  // the later wins
  o.stdout_fd = out.write;
  auto pid = Spawn(o);
  ASSERT_TRUE(pid.ok()) << pid.status();
  out.CloseWrite();
  EXPECT_EQ(out.ReadAll(), "kept unset last\n");
  EXPECT_EQ(Wait(*pid), 0);
  // clear_env: only what is set.
  Pipe bare;
  SpawnOptions c = Shell("echo \"${RAYX_SPAWN_TEST_KEPT-none} $ONLY\"");
  c.clear_env = true;
  c.set_env = {"ONLY=this"};
  c.stdout_fd = bare.write;
  pid = Spawn(c);
  ASSERT_TRUE(pid.ok());
  bare.CloseWrite();
  EXPECT_EQ(bare.ReadAll(), "none this\n");
  EXPECT_EQ(Wait(*pid), 0);
  ::unsetenv("RAYX_SPAWN_TEST_KEPT");
  ::unsetenv("RAYX_SPAWN_TEST_GONE");
}

TEST(Spawn, PassedDescriptorsLandAtTheirNumbersEvenWhenSourcesAndTargetsCross) {
  Pipe a, b;
  // The two write ends are passed crosswise: a's descriptor number becomes
  // b's and b's becomes a's, so placing them one dup2 after the other would
  // overwrite the second source before it is copied. The child writes
  // through /proc/self/fd, which takes any descriptor number.
  const int fa = a.write, fb = b.write;
  SpawnOptions o = Shell("echo to-a-number > /proc/self/fd/" + std::to_string(fa) +
                         "; echo to-b-number > /proc/self/fd/" + std::to_string(fb));
  o.pass_fds = {{fb, fa}, {fa, fb}};
  auto pid = Spawn(o);
  ASSERT_TRUE(pid.ok());
  a.CloseWrite();
  b.CloseWrite();
  EXPECT_EQ(Wait(*pid), 0);
  EXPECT_EQ(b.ReadAll(), "to-a-number\n");  // b's write end was passed at a's number
  EXPECT_EQ(a.ReadAll(), "to-b-number\n");
}

TEST(Spawn, ANewSessionLeadsItselfAndStdinReadsNothing) {
  Pipe out;
  SpawnOptions o = Shell("cat; cut -d' ' -f6 /proc/$$/stat");  // the session id
  o.group = SpawnOptions::Group::kNewSession;
  o.stdin_fd = SpawnOptions::kDevNull;
  o.stdout_fd = out.write;
  auto pid = Spawn(o);
  ASSERT_TRUE(pid.ok());
  out.CloseWrite();
  EXPECT_EQ(out.ReadAll(), std::to_string(*pid) + "\n");  // `cat` read nothing and ended
  EXPECT_EQ(Wait(*pid), 0);
}

TEST(Spawn, WhatKeepsAChildFromStartingIsToldOnItsErrorDescriptor) {
  Pipe error;
  SpawnOptions o;
  o.argv = {"/nonexistent/program"};
  o.error_fd = error.write;
  o.error_prefix = "ERROR ";
  auto pid = Spawn(o);
  ASSERT_TRUE(pid.ok());
  error.CloseWrite();
  EXPECT_EQ(error.ReadAll(), "ERROR cannot execute /nonexistent/program: No such file or directory\n");
  EXPECT_EQ(Wait(*pid), 127);

  Pipe cwd_error;
  SpawnOptions d = Shell("true");
  d.cwd = "/nonexistent/dir";
  d.error_fd = cwd_error.write;
  pid = Spawn(d);
  ASSERT_TRUE(pid.ok());
  cwd_error.CloseWrite();
  EXPECT_EQ(cwd_error.ReadAll(), "cannot enter /nonexistent/dir: No such file or directory\n");
  EXPECT_EQ(Wait(*pid), 126);

  // A program found on the child's own PATH runs; its error descriptor closes
  // unused (EOF).
  const std::string bin = ::testing::TempDir() + "rayx-spawn-test-bin";
  std::filesystem::create_directories(bin);
  std::ofstream(bin + "/rayx-spawn-test-true") << "#!/bin/sh\nexit 0\n";
  std::filesystem::permissions(bin + "/rayx-spawn-test-true", std::filesystem::perms::owner_all);
  Pipe quiet;
  SpawnOptions p;
  p.argv = {"rayx-spawn-test-true"};
  p.search_path = true;
  p.set_env = {"PATH=" + bin + ":/usr/bin:/bin"};
  p.error_fd = quiet.write;
  pid = Spawn(p);
  ASSERT_TRUE(pid.ok());
  quiet.CloseWrite();
  EXPECT_EQ(quiet.ReadAll(), "");
  EXPECT_EQ(Wait(*pid), 0);
  std::filesystem::remove_all(bin);
  EXPECT_EQ(Spawn(SpawnOptions{}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace process_spawn_test
}  // namespace rayx::detail
