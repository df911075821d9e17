// SharedMemoryStore's containment: only objects of the store (directly inside
// it, of the object name form, regular files) are opened, written or removed.
#include "object_store/shared_memory_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

namespace rayx {
namespace shared_memory_store_test {  // this file's own (unit tests compile in batches)

constexpr char kJob[] = "0123456789abcdef";
const std::string kObject = "0123456789abcdef0123456789abcdef";

class SharedMemoryStoreTest : public ::testing::Test {
 protected:
  SharedMemoryStoreTest() {
    char pattern[] = "/tmp/rayx-store-test-XXXXXX";
    root_ = mkdtemp(pattern);
    auto store = SharedMemoryStore::Create(root_ + "/store");
    EXPECT_TRUE(store.ok()) << store.status();
    store_ = std::make_unique<SharedMemoryStore>(*store);
  }
  ~SharedMemoryStoreTest() override { std::filesystem::remove_all(root_); }

  std::string Name(char last = 'f') const {
    std::string object = kObject;
    object.back() = last;
    return SharedMemoryStore::ObjectName(kJob, object);
  }

  std::string root_;
  std::unique_ptr<SharedMemoryStore> store_;
};

TEST_F(SharedMemoryStoreTest, ObjectNamesAreAJobIdAndAnObjectIdInHex) {
  EXPECT_TRUE(SharedMemoryStore::IsObjectName(Name()));
  EXPECT_FALSE(SharedMemoryStore::IsObjectName(""));
  EXPECT_FALSE(SharedMemoryStore::IsObjectName("job-1-obj-1"));
  EXPECT_FALSE(SharedMemoryStore::IsObjectName(Name() + ".partial"));
  EXPECT_FALSE(SharedMemoryStore::IsObjectName("../" + Name().substr(3)));
  EXPECT_FALSE(SharedMemoryStore::IsObjectName(std::string(kJob) + "-" + std::string(32, 'G')));
  std::string upper = Name();
  upper[0] = 'A';
  EXPECT_FALSE(SharedMemoryStore::IsObjectName(upper));
}

TEST_F(SharedMemoryStoreTest, AWrittenObjectIsContainedAndOpens) {
  auto path = store_->Write(Name(), "bytes");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, store_->dir() + "/" + Name());
  EXPECT_TRUE(store_->Contains(*path));
  auto mapped = store_->Open(*path);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  EXPECT_EQ((*mapped)->view(), "bytes");
  EXPECT_EQ(store_->Open(store_->dir() + "/" + Name('e')).status().code(), StatusCode::kNotFound);
}

TEST_F(SharedMemoryStoreTest, WriteRefusesNamesNotOfTheObjectForm) {
  for (const std::string& name : {std::string("../escape"), std::string(".hidden"),
                                  std::string("job-1-obj-1"), std::string("a/b"), std::string()}) {
    auto path = store_->Write(name, "x");
    EXPECT_EQ(path.status().code(), StatusCode::kInvalidArgument) << name;
  }
  EXPECT_TRUE(std::filesystem::is_empty(store_->dir()));
}

TEST_F(SharedMemoryStoreTest, PathsOutsideTheStoreAreNotObjects) {
  const std::string secret = root_ + "/secret";
  std::ofstream(secret) << "secret";
  const std::string dir = store_->dir();
  for (const std::string& path :
       {secret, dir + "/../secret", dir + "/" + Name() + "/../../secret", dir, dir + "/",
        dir + "//" + Name(), dir + "/./" + Name(), std::string("/etc/passwd"),
        std::string("relative/") + Name(),
        dir + "x/" + Name()}) {
    EXPECT_FALSE(store_->Contains(path)) << path;
    auto mapped = store_->Open(path);
    EXPECT_EQ(mapped.status().code(), StatusCode::kInvalidArgument) << path;
  }
  // Remove leaves what is not an object alone.
  store_->Remove(dir + "/../secret");
  EXPECT_TRUE(std::filesystem::exists(secret));
}

TEST_F(SharedMemoryStoreTest, ALinkFifoOrDirectoryUnderAnObjectNameIsNotOpened) {
  const std::string secret = root_ + "/secret";
  std::ofstream(secret) << "secret";
  const std::string link = store_->dir() + "/" + Name('1');
  std::filesystem::create_symlink(secret, link);
  const std::string fifo = store_->dir() + "/" + Name('2');
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string dir = store_->dir() + "/" + Name('3');
  std::filesystem::create_directory(dir);
  for (const auto& path : {link, fifo, dir}) {
    auto mapped = store_->Open(path);  // must not block on the FIFO
    EXPECT_EQ(mapped.status().code(), StatusCode::kInvalidArgument) << path << mapped.status();
  }
  EXPECT_NE(store_->Open(link).status().message().find("symbolic link"), std::string::npos);
}

}  // namespace
}  // namespace rayx
