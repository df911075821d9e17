// A process that fetches checkpoints outside a node's checkpoint directory (a
// driver) keeps them in a directory of its own, claimed for its life: removed
// when it exits, and, when it died instead, by the next process that makes
// one; a live process's directory is never touched.
#include <gtest/gtest.h>

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "train/train_session.h"

namespace fetch_dir_test {

namespace fs = std::filesystem;

// A child process (its own TMPDIR) that makes its fetch directory, writes its
// path and a file in it to `out`, then waits for a byte on `hold` (when >= 0)
// and ends by `how`: "exit" (normal: its directory goes) or "die" (_exit, as a
// killed process: it stays until the next one is made).
struct Child {
  pid_t pid = -1;
  std::string dir;
  int release = -1;  // write a byte: the child ends
};

Child Start(const std::string& tmp, const std::string& how) {
  int out[2], hold[2];
  if (::pipe(out) != 0 || ::pipe(hold) != 0) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(out[0]);
    ::close(hold[1]);
    ::setenv("TMPDIR", tmp.c_str(), 1);
    std::string dir;
    try {
      dir = rayx::train::detail::ProcessFetchDir();
      std::FILE* f = std::fopen((dir + "/fetched").c_str(), "w");
      if (f != nullptr) std::fclose(f);
    } catch (...) {
      ::_exit(3);
    }
    dir += "\n";
    if (::write(out[1], dir.data(), dir.size()) != static_cast<ssize_t>(dir.size())) ::_exit(4);
    char byte;
    if (::read(hold[0], &byte, 1) < 0) ::_exit(5);
    if (how == "die") ::_exit(0);
    std::exit(0);  // static destructors run: the directory goes
  }
  ::close(out[1]);
  ::close(hold[0]);
  Child c;
  c.pid = pid;
  c.release = hold[1];
  char buf[512];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0) {
    c.dir.append(buf, static_cast<size_t>(n));
    if (!c.dir.empty() && c.dir.back() == '\n') break;
  }
  ::close(out[0]);
  if (!c.dir.empty() && c.dir.back() == '\n') c.dir.pop_back();
  return c;
}

int End(Child& c) {
  char byte = 1;
  if (::write(c.release, &byte, 1) != 1) return -1;
  ::close(c.release);
  int status = 0;
  ::waitpid(c.pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(FetchDir, EachProcessHasItsOwnAndNoneOutlivesItsProcess) {
  char pattern[] = "/tmp/rayx-fetch-test-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const std::string tmp = pattern;
  const fs::path root = fs::path(tmp) / "rayx-checkpoints";

  Child died = Start(tmp, "die");
  ASSERT_FALSE(died.dir.empty());
  EXPECT_EQ(fs::path(died.dir).parent_path(), root);
  EXPECT_EQ(fs::path(died.dir).filename().string().rfind(rayx::train::detail::kFetchDirPrefix, 0),
            0u)
      << died.dir;
  ASSERT_EQ(End(died), 0);
  EXPECT_TRUE(fs::exists(fs::path(died.dir) / "fetched")) << "a killed process cleans nothing";

  Child alive = Start(tmp, "exit");
  ASSERT_FALSE(alive.dir.empty());
  EXPECT_FALSE(fs::exists(died.dir)) << "the dead process's directory was not swept";
  EXPECT_FALSE(fs::exists(died.dir + ".lock"));

  Child other = Start(tmp, "exit");
  ASSERT_FALSE(other.dir.empty());
  EXPECT_NE(other.dir, alive.dir);
  EXPECT_TRUE(fs::exists(fs::path(alive.dir) / "fetched")) << "a live process's was swept";
  ASSERT_EQ(End(other), 0);
  EXPECT_FALSE(fs::exists(other.dir)) << "not removed at exit";
  EXPECT_FALSE(fs::exists(other.dir + ".lock"));
  EXPECT_TRUE(fs::exists(alive.dir));
  ASSERT_EQ(End(alive), 0);
  EXPECT_FALSE(fs::exists(alive.dir));
  EXPECT_TRUE(fs::is_empty(root)) << "left in " << root;
  fs::remove_all(tmp);
}

}  // namespace fetch_dir_test
