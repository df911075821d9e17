// A store is its agent's while the agent lives: a store whose owner is gone
// (SIGKILLed here) is removed, a live one's and an old rayx's (no lock file)
// are not.
#include "object_store/store_owner.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "util/status_matchers.h"

namespace rayx {
namespace store_owner_test {  // this file's own (unit tests compile in batches)

namespace fs = std::filesystem;

class StoreOwnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/rayx-store-root-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    root_ = pattern;
  }
  void TearDown() override {
    if (owner_ > 0) {
      ::kill(owner_, SIGKILL);
      ::waitpid(owner_, nullptr, 0);
    }
    fs::remove_all(root_);
  }
  // A store directory with an object in it.
  std::string MakeStore(const std::string& name) {
    std::string dir = root_ + "/" + name;
    fs::create_directories(dir);
    std::ofstream(dir + "/job-object") << "bytes";
    return dir;
  }
  // A child process that claims `dir` and lives until killed.
  void ClaimInChild(const std::string& dir) {
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    owner_ = fork();
    if (owner_ == 0) {
      char ok = ClaimStore(dir).ok() ? 1 : 0;
      (void)!write(ready[1], &ok, 1);
      while (true) pause();
    }
    ::close(ready[1]);
    char ok = 0;
    ASSERT_EQ(read(ready[0], &ok, 1), 1);
    ::close(ready[0]);
    ASSERT_EQ(ok, 1) << "the child could not claim " << dir;
  }
  std::string root_;
  pid_t owner_ = -1;
};

TEST_F(StoreOwnerTest, AStoreGoesOnlyOnceItsOwnerIsGone) {
  std::string store = MakeStore("rayx-store-aaaaaaaaaaaa");
  ClaimInChild(store);
  EXPECT_TRUE(RemoveDeadStores(root_).empty()) << "a live agent's store was removed";
  EXPECT_TRUE(fs::exists(store + "/job-object"));
  // Nobody else can claim it meanwhile.
  EXPECT_FALSE(ClaimStore(store).ok());

  ASSERT_EQ(::kill(owner_, SIGKILL), 0);
  ASSERT_EQ(::waitpid(owner_, nullptr, 0), owner_);
  owner_ = -1;
  EXPECT_EQ(RemoveDeadStores(root_), std::vector<std::string>{store});
  EXPECT_FALSE(fs::exists(store));
  EXPECT_FALSE(fs::exists(store + ".lock"));
}

TEST_F(StoreOwnerTest, OldVersionStoresAndOtherFilesStay) {
  // An agent of an older rayx: no lock file, so no way to tell it is gone.
  std::string legacy = MakeStore("rayx-store-cccccccccccc");
  // Not a store at all.
  std::string other = MakeStore("something-else");
  std::ofstream(other + ".lock") << "";
  // A claim an agent died making (never renamed into place).
  std::string half = MakeStore("rayx-store-bbbbbbbbbbbb");
  std::ofstream(half + ".lock.making") << "";
  EXPECT_TRUE(RemoveDeadStores(root_).empty());
  EXPECT_TRUE(fs::exists(legacy + "/job-object"));
  EXPECT_TRUE(fs::exists(other + "/job-object"));
  EXPECT_TRUE(fs::exists(half + "/job-object"));
  // A claim fails where a lock file is already.
  std::ofstream(legacy + ".lock") << "";
  EXPECT_FALSE(ClaimStore(legacy).ok());
  EXPECT_EQ(RemoveDeadStores(root_), std::vector<std::string>{legacy});
}

TEST_F(StoreOwnerTest, AClaimIsThisProcesssOwn) {
  std::string store = MakeStore("rayx-store-dddddddddddd");
  ASSERT_OK(ClaimStore(store));
  EXPECT_TRUE(RemoveDeadStores(root_).empty());
  EXPECT_TRUE(fs::exists(store));
  // A root that cannot be read removes nothing and does not throw.
  EXPECT_TRUE(RemoveDeadStores(root_ + "/missing").empty());
}

// Train's checkpoint directories outlive their agent: the next agent adopts
// one whose owner is gone (its files stay), never a live agent's, and no two
// processes adopt the same one.
TEST_F(StoreOwnerTest, ADirectoryWhoseOwnerIsGoneIsAdoptedWithItsFilesOnce) {
  const std::string prefix = "rayx-ckpt-";
  std::string live = MakeStore(prefix + "aaaaaaaaaaaa");
  ClaimInChild(live);
  EXPECT_EQ(AdoptDeadStore(root_, prefix), std::nullopt) << "a live agent's directory was adopted";
  // Neither a directory without a lock file (an older rayx's), a half-made
  // claim, nor a lock file whose directory is gone.
  MakeStore(prefix + "bbbbbbbbbbbb");
  std::ofstream(MakeStore(prefix + "cccccccccccc") + ".lock.making") << "";
  std::ofstream(root_ + "/" + prefix + "dddddddddddd.lock") << "";
  EXPECT_EQ(AdoptDeadStore(root_, prefix), std::nullopt);

  ASSERT_EQ(::kill(owner_, SIGKILL), 0);
  ASSERT_EQ(::waitpid(owner_, nullptr, 0), owner_);
  owner_ = -1;
  // A dead one stays where the caller says it must (a checkpoint directory
  // that is not empty).
  EXPECT_TRUE(RemoveDeadStores(root_, prefix, [](const std::string&) { return false; }).empty());
  EXPECT_EQ(AdoptDeadStore(root_, prefix), live);
  EXPECT_TRUE(fs::exists(live + "/job-object")) << "adopting removed the checkpoints";
  // Held now: not adopted again, not removed as a dead one's, not claimable.
  EXPECT_EQ(AdoptDeadStore(root_, prefix), std::nullopt);
  EXPECT_EQ(RemoveDeadStores(root_, prefix),
            std::vector<std::string>{root_ + "/" + prefix + "dddddddddddd"})
      << "only the lock file without a directory goes";
  EXPECT_TRUE(fs::exists(live + "/job-object"));
  EXPECT_FALSE(ClaimStore(live).ok());
}

}  // namespace store_owner_test
}  // namespace rayx
