// A node's checkpoint directory: shards copied in with their hash, read back,
// served only as regular files beneath it (never through a link), and bounded
// by the node's disk limit.
#include "object_store/checkpoint_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace rayx {
namespace checkpoint_files_test {  // this file's own (unit tests compile in batches)

namespace fs = std::filesystem;

class CheckpointFilesTest : public ::testing::Test {
 protected:
  CheckpointFilesTest() {
    char pattern[] = "/tmp/rayx-ckpt-files-test-XXXXXX";
    root_ = mkdtemp(pattern);
    fs::create_directories(root_ + "/node");
    fs::create_directories(root_ + "/user/sub");
    Write("user/model.bin", std::string(3 << 20, 'm'));
    Write("user/sub/optim.bin", "optimizer state");
  }
  ~CheckpointFilesTest() override { fs::remove_all(root_); }

  void Write(const std::string& relative, const std::string& bytes) {
    std::ofstream(root_ + "/" + relative, std::ios::binary) << bytes;
  }
  std::string root_;
  CheckpointFiles files_{""};
  CheckpointFiles Node() { return CheckpointFiles(root_ + "/node"); }
};

TEST_F(CheckpointFilesTest, AShardIsCopiedInWithItsManifestAndReadBackWithTheSameHash) {
  CheckpointFiles node = Node();
  const std::string shard = CheckpointFiles::ShardDir("0123456789abcdef", "my/run", "a0-s1", 3);
  EXPECT_EQ(shard, "0123456789abcdef/my_run/a0-s1/rank-3");  // the run is one component
  auto copied = node.CopyIn(root_ + "/user", shard);
  ASSERT_TRUE(copied.ok()) << copied.status();
  ASSERT_EQ(copied->files.size(), 2u);
  EXPECT_EQ(copied->files[0].path, "model.bin");  // in path order
  EXPECT_EQ(copied->files[1].path, "sub/optim.bin");
  EXPECT_EQ(copied->bytes, (3u << 20) + 15);
  EXPECT_EQ(copied->hash.size(), 32u);
  auto read = node.Read(shard);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->hash, copied->hash);
  // One changed byte is another hash.
  Write("node/" + shard + "/sub/optim.bin", "optimizer statE");
  EXPECT_NE(node.Read(shard)->hash, copied->hash);
  EXPECT_EQ(node.Read("0123456789abcdef/none/a0-s1/rank-0").status().code(),
            StatusCode::kNotFound);
}

TEST_F(CheckpointFilesTest, LinksInTheUsersDirectoryAreRefusedNamingThem) {
  fs::create_symlink("/etc/passwd", root_ + "/user/escape");
  auto copied = Node().CopyIn(root_ + "/user", "job/run/a0-s1/rank-0");
  ASSERT_EQ(copied.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(copied.status().message().find("escape"), std::string::npos) << copied.status();
  EXPECT_FALSE(fs::exists(root_ + "/node/job/run/a0-s1/rank-0"));  // nothing half-copied
  EXPECT_EQ(Node().CopyIn(root_ + "/missing", "job/run/a0-s1/rank-0").status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(CheckpointFilesTest, OnlyRegularFilesBeneathTheDirectoryAreOpenedNeverThroughALink) {
  CheckpointFiles node = Node();
  ASSERT_TRUE(node.CopyIn(root_ + "/user", "job/run/a0-s1/rank-0").ok());
  auto fd = node.OpenFile("job/run/a0-s1/rank-0/sub/optim.bin");
  ASSERT_TRUE(fd.ok()) << fd.status();
  ::close(*fd);
  for (const char* bad : {"../user/model.bin", "/etc/passwd", "job/./run", "job//run", ""}) {
    EXPECT_EQ(node.OpenFile(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  // A link planted in the tree (a directory or a file) is not followed.
  fs::create_directory_symlink(root_ + "/user", root_ + "/node/job/linked");
  EXPECT_EQ(node.OpenFile("job/linked/model.bin").status().code(), StatusCode::kInvalidArgument);
  fs::create_symlink(root_ + "/user/model.bin", root_ + "/node/job/file-link");
  EXPECT_EQ(node.OpenFile("job/file-link").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(node.OpenFile("job/run").status().code(), StatusCode::kInvalidArgument);  // a directory
  EXPECT_EQ(node.OpenFile("job/none").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(node.Remove("job/run").ok());
  EXPECT_FALSE(fs::exists(root_ + "/node/job/run"));
}

TEST_F(CheckpointFilesTest, TheNodesDiskLimitRefusesAShardWithTheFigures) {
  CheckpointFiles node = Node();
  EXPECT_TRUE(node.CheckRoom(uint64_t{1} << 40).ok());  // no limit set
  ASSERT_TRUE(node.SetLimit(5 << 20).ok());
  EXPECT_EQ(Node().limit(), 5u << 20);  // read by any process of the node
  ASSERT_TRUE(node.CopyIn(root_ + "/user", "job/run/a0-s1/rank-0").ok());  // 3 MiB
  EXPECT_TRUE(node.CheckRoom(1 << 20).ok());
  Status full = node.CheckRoom(3 << 20);
  ASSERT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("of its limit 5.00 MiB (--checkpoint-disk-limit)"),
            std::string::npos)
      << full;
  EXPECT_NE(full.message().find("rayx train delete"), std::string::npos) << full;
}

// A committed checkpoint's record is kept beside its shards, only where the
// checkpoint's directory is, and read back with the directory it is in; a
// directory holding only its limit and empty directories is empty.
TEST_F(CheckpointFilesTest, ARecordIsKeptBesideItsShardsAndReadBack) {
  CheckpointFiles node = Node();
  ASSERT_TRUE(node.SetLimit(1 << 30).ok());
  EXPECT_TRUE(node.Empty());
  ASSERT_TRUE(node.CopyIn(root_ + "/user", "job/run/a0-s1/rank-0").ok());
  EXPECT_FALSE(node.Empty());
  EXPECT_TRUE(node.Records(10).empty()) << "a shard alone is no committed checkpoint";
  ASSERT_TRUE(node.KeepRecord("job/run/a0-s1", "record one").ok());
  ASSERT_TRUE(node.KeepRecord("job/run/a0-s1", "record one, again").ok());  // replaced
  // Not where this node holds nothing of the checkpoint, nor outside a
  // checkpoint's directory, nor too large.
  EXPECT_EQ(node.KeepRecord("job/run/a0-s2", "x").code(), StatusCode::kNotFound);
  EXPECT_EQ(node.KeepRecord("job/run", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(node.KeepRecord("job/../../a0-s1", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(node.KeepRecord("job/run/a0-s1", std::string(CheckpointFiles::kMaxRecordBytes + 1, 'x'))
                .code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(node.CopyIn(root_ + "/user", "job/other/a1-s3/rank-2").ok());
  ASSERT_TRUE(node.KeepRecord("job/other/a1-s3", "record two").ok());
  auto records = node.Records(10);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].checkpoint_dir, "job/other/a1-s3");  // in path order
  EXPECT_EQ(records[0].bytes, "record two");
  EXPECT_EQ(records[1].checkpoint_dir, "job/run/a0-s1");
  EXPECT_EQ(records[1].bytes, "record one, again");
  EXPECT_EQ(node.Records(1).size(), 1u);
  EXPECT_EQ(node.Records(10, /*max_bytes=*/15).size(), 1u) << "10 bytes, then 17 more";
  // A copy no commit covers goes when the directory is adopted; the
  // committed ones stay.
  ASSERT_TRUE(node.CopyIn(root_ + "/user", "job/run/a0-s2/rank-1").ok());
  EXPECT_EQ(node.RemoveUnrecorded(), std::vector<std::string>{"job/run/a0-s2"});
  EXPECT_EQ(node.Records(10).size(), 2u);
  ASSERT_TRUE(node.Remove("job/run/a0-s1").ok());
  ASSERT_TRUE(node.Remove("job/other/a1-s3").ok());
  EXPECT_TRUE(node.Empty()) << "only empty run directories are left";
}

}  // namespace checkpoint_files_test
}  // namespace rayx
