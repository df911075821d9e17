// Writing Puts into the store: files of the right size, freed files reused
// only when nobody can still read them, and bounded in number and age.
#include "object_store/store_writer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace rayx {
namespace store_writer_test {  // this file's own (unit tests compile in batches)

constexpr size_t kSize = 256 * 1024;

class StoreWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/rayx-store-writer-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    writer_.reset();
    // Invariant: a destroyed writer leaves no free file behind.
    EXPECT_TRUE(std::filesystem::is_empty(dir_)) << "files left in " << dir_;
    std::filesystem::remove_all(dir_);
  }

  StoreWriter& Writer(StoreWriter::Options options = {}) {
    writer_ = std::make_unique<StoreWriter>(dir_, options);
    return *writer_;
  }
  std::shared_ptr<StoreWriter::Buffer> Make(const std::string& name, size_t size, char fill) {
    auto buffer = writer_->Create(name, size);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    if (!buffer.ok()) return nullptr;
    std::memset((*buffer)->data(), fill, size);
    EXPECT_TRUE(writer_->Publish(**buffer).ok());
    return *buffer;
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  static bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }
  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  static ino_t Inode(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
  }

  std::string dir_;
  std::unique_ptr<StoreWriter> writer_;
};

TEST_F(StoreWriterTest, WritesTheObjectIntoAFileOfItsSize) {
  Writer();
  auto a = Make("job-a", kSize, 'a');
  ASSERT_TRUE(a);
  EXPECT_EQ(a->path(), Path("job-a"));
  EXPECT_EQ(Read(Path("job-a")), std::string(kSize, 'a'));
  writer_->Free(std::move(a), /*reusable=*/false, 0);
  EXPECT_FALSE(Exists(Path("job-a")));
}

TEST_F(StoreWriterTest, ReusesAFreedFileForTheNextObject) {
  Writer();
  auto a = Make("job-a", kSize, 'a');
  ino_t inode = Inode(Path("job-a"));
  const char* memory = a->data();
  writer_->Free(std::move(a), /*reusable=*/true, 0);
  EXPECT_EQ(writer_->free_files(), 1u);
  auto b = Make("job-b", kSize, 'b');
  EXPECT_EQ(b->data(), memory);  // the same mapping: no new pages
  EXPECT_EQ(Inode(Path("job-b")), inode);
  EXPECT_FALSE(Exists(Path("job-a")));
  EXPECT_EQ(Read(Path("job-b")), std::string(kSize, 'b'));
  EXPECT_EQ(writer_->free_files(), 0u);
  writer_->Free(std::move(b), false, 0);
}

TEST_F(StoreWriterTest, AReusedFileTakesTheNewObjectsSize) {
  Writer();
  auto a = Make("job-a", kSize, 'a');
  writer_->Free(std::move(a), true, 0);
  auto b = Make("job-b", kSize / 2, 'b');
  EXPECT_EQ(Read(Path("job-b")), std::string(kSize / 2, 'b'));
  writer_->Free(std::move(b), true, 0);
  // Grown again, within the mapping it had.
  auto c = Make("job-c", kSize, 'c');
  EXPECT_EQ(Read(Path("job-c")), std::string(kSize, 'c'));
  // Larger than any free file: a new one.
  writer_->Free(std::move(c), true, 0);
  auto d = Make("job-d", 2 * kSize, 'd');
  EXPECT_EQ(Read(Path("job-d")), std::string(2 * kSize, 'd'));
  EXPECT_EQ(writer_->free_files(), 1u);
  writer_->Free(std::move(d), false, 0);
}

TEST_F(StoreWriterTest, AFileStillViewedHereOrSharedIsDeletedNotReused) {
  Writer();
  auto a = Make("job-a", kSize, 'a');
  auto view = a;  // e.g. a Get's keepalive
  writer_->Free(std::move(a), /*reusable=*/true, 0);
  EXPECT_EQ(writer_->free_files(), 0u);
  EXPECT_FALSE(Exists(Path("job-a")));
  EXPECT_EQ(view->view(), std::string(kSize, 'a'));  // the mapping outlives the file
  auto b = Make("job-b", kSize, 'b');
  writer_->Free(std::move(b), /*reusable=*/false, 0);  // another process may read it
  EXPECT_EQ(writer_->free_files(), 0u);
  EXPECT_FALSE(Exists(Path("job-b")));
}

TEST_F(StoreWriterTest, FreeFilesAreBoundedInNumberAndAge) {
  StoreWriter::Options options;
  options.max_free_files = 2;
  options.max_free_age_ms = 1000;
  Writer(options);
  auto a = Make("job-a", kSize, 'a');
  auto b = Make("job-b", kSize, 'b');
  auto c = Make("job-c", kSize, 'c');
  writer_->Free(std::move(a), true, 0);
  writer_->Free(std::move(b), true, 10);
  writer_->Free(std::move(c), true, 20);
  EXPECT_EQ(writer_->free_files(), 2u);
  EXPECT_FALSE(Exists(Path("job-a")));  // the oldest went
  writer_->Trim(1005);
  EXPECT_EQ(writer_->free_files(), 2u);
  writer_->Trim(1015);
  EXPECT_EQ(writer_->free_files(), 1u);
  EXPECT_FALSE(Exists(Path(".free-job-b")));
  EXPECT_TRUE(Exists(Path(".free-job-c")));
  writer_->Clear();
  EXPECT_EQ(writer_->free_files(), 0u);
  EXPECT_FALSE(Exists(Path(".free-job-c")));
}

TEST_F(StoreWriterTest, AFreeFileRemovedMeanwhileMeansANewFile) {
  Writer();
  writer_->Free(Make("job-a", kSize, 'a'), true, 0);
  ASSERT_TRUE(Exists(Path(".free-job-a")));  // kept out of the spiller's sight
  ::unlink(Path(".free-job-a").c_str());      // removed meanwhile
  auto b = Make("job-b", kSize, 'b');
  ASSERT_TRUE(b);
  EXPECT_EQ(Read(Path("job-b")), std::string(kSize, 'b'));
  writer_->Free(std::move(b), false, 0);
}

TEST_F(StoreWriterTest, AnObjectHasItsNameOnlyOnceWritten) {
  Writer();
  auto a = writer_->Create("job-a", kSize);
  ASSERT_TRUE(a.ok()) << a.status();
  // Being written: not of the object form, so the agent never spills it.
  EXPECT_EQ((*a)->path(), Path("job-a.partial"));
  EXPECT_FALSE(Exists(Path("job-a")));
  std::memset((*a)->data(), 'a', kSize);
  ASSERT_TRUE(writer_->Publish(**a).ok());
  EXPECT_EQ((*a)->path(), Path("job-a"));
  EXPECT_EQ(Read(Path("job-a")), std::string(kSize, 'a'));
  EXPECT_FALSE(Exists(Path("job-a.partial")));
  writer_->Free(std::move(*a), false, 0);
}

TEST_F(StoreWriterTest, FreeingASpilledObjectDeletesItsSpilledCopy) {
  std::string spill = dir_ + "-spill";
  std::filesystem::create_directories(spill);
  StoreWriter::Options options;
  options.spill_dir = spill;
  Writer(options);
  for (bool reusable : {false, true}) {
    auto a = Make("job-a", kSize, 'a');
    // What the agent's spiller does: the file moves to the spill directory.
    ASSERT_EQ(::rename(Path("job-a").c_str(), (spill + "/job-a").c_str()), 0);
    writer_->Free(std::move(a), reusable, 0);
    EXPECT_FALSE(Exists(spill + "/job-a")) << "reusable " << reusable;
    EXPECT_EQ(writer_->free_files(), 0u);  // nothing of it is kept for reuse
  }
  EXPECT_TRUE(std::filesystem::is_empty(spill));
  std::filesystem::remove_all(spill);
}

TEST_F(StoreWriterTest, RefusesBadNames) {
  Writer();
  EXPECT_EQ(writer_->Create("../escape", kSize).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(writer_->Create(".hidden", kSize).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(writer_->Create("", kSize).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rayx
