// An adopted checkpoint directory's records go to the head in bounded
// batches, once; the head's answer removes the checkpoints it dropped.
#include "agent/adopted_checkpoints.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "protocol/codec.h"
#include "protocol/data_messages.h"

namespace rayx::worker {
namespace adopted_checkpoints_test {  // this file's own (unit tests compile in batches)

namespace fs = std::filesystem;

class AdoptedCheckpointsTest : public ::testing::Test {
 protected:
  AdoptedCheckpointsTest() {
    char pattern[] = "/tmp/rayx-adopted-test-XXXXXX";
    root_ = mkdtemp(pattern);
  }
  ~AdoptedCheckpointsTest() override { fs::remove_all(root_); }

  // Checkpoint `id` of run `run` with one shard here and its record (as a
  // committing rank leaves it) of `record_bytes` bytes.
  std::string Commit(const std::string& run, const std::string& id, size_t record_bytes = 10) {
    const std::string dir = "0123456789abcdef/" + run + "/" + id;
    fs::create_directories(root_ + "/" + dir + "/rank-0");
    std::ofstream(root_ + "/" + dir + "/rank-0/model") << "weights";
    protocol::KeepCheckpointRecordRequest keep;
    keep.checkpoint_dir = dir;
    keep.key = "train/ckpt/0123456789abcdef/" + id + "/" + run;
    keep.record = std::string(record_bytes, 'r');
    EXPECT_TRUE(CheckpointFiles(root_).KeepRecord(dir, protocol::Encode(keep)).ok());
    return keep.key;
  }
  std::string root_;
};

TEST_F(AdoptedCheckpointsTest, RecordsGoInBoundedBatchesOnceAndDroppedOnesAreRemoved) {
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) keys.push_back(Commit("small", "a0-s" + std::to_string(i)));
  // Two records that fill a batch's bytes between them.
  const size_t big = AdoptedCheckpoints::kMaxBatchBytes / 2 + 1;
  const std::string big1 = Commit("big", "a0-s1", big);
  const std::string big2 = Commit("big", "a0-s2", big);
  // A record file that is not one is passed over.
  fs::create_directories(root_ + "/0123456789abcdef/bad/a0-s1");
  std::ofstream(root_ + "/0123456789abcdef/bad/a0-s1/" + CheckpointFiles::kRecordFile) << "junk";

  AdoptedCheckpoints adopted{CheckpointFiles(root_)};
  auto requests = adopted.Requests();
  size_t records = 0;
  for (const auto& req : requests) {
    ASSERT_EQ(req.keys.size(), req.records.size());
    EXPECT_LE(req.keys.size(), protocol::AdoptCheckpointsRequest::kMaxRecords);
    size_t bytes = 0;
    for (size_t i = 0; i < req.keys.size(); ++i) bytes += req.keys[i].size() + req.records[i].size();
    EXPECT_LE(bytes, AdoptedCheckpoints::kMaxBatchBytes);
    records += req.keys.size();
  }
  EXPECT_EQ(records, 302u) << "every readable record, the junk one passed over";
  EXPECT_GE(requests.size(), 3u) << "300 small records need two batches, the big ones their own";
  EXPECT_TRUE(adopted.Requests().empty()) << "the directory is read once";

  // The head dropped one of each run while no agent held the directory.
  protocol::AdoptCheckpointsReply reply;
  reply.dropped = {keys[7], big2, "train/ckpt/ffffffffffffffff/a0-s1/unknown"};
  reply.adopted = {big1};
  EXPECT_EQ(adopted.OnReply(reply), 2u);
  EXPECT_FALSE(fs::exists(root_ + "/0123456789abcdef/small/a0-s7"));
  EXPECT_FALSE(fs::exists(root_ + "/0123456789abcdef/big/a0-s2"));
  EXPECT_TRUE(fs::exists(root_ + "/0123456789abcdef/small/a0-s8/rank-0/model"));
  EXPECT_TRUE(fs::exists(root_ + "/0123456789abcdef/big/a0-s1/rank-0/model"));
}

}  // namespace adopted_checkpoints_test
}  // namespace rayx::worker
