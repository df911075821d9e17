// The head takes back the checkpoint records an agent's adopted directory
// holds: those of runs the cluster does not know, from every agent that hands
// them in (a whole cluster restarting); for a run the cluster committed
// checkpoints of, a record it lacks was dropped while the node was away.
#include "head/checkpoint_adoption.h"

#include <gtest/gtest.h>

#include <string>

namespace rayx::scheduler {
namespace checkpoint_adoption_test {  // this file's own (unit tests compile in batches)

constexpr char kNs[] = "rayx";

std::string Key(const std::string& id, const std::string& run) {
  return "train/ckpt/0123456789abcdef/" + id + "/" + run;
}

protocol::AdoptCheckpointsRequest Hand(std::vector<std::string> keys) {
  protocol::AdoptCheckpointsRequest req;
  for (const auto& key : keys) req.records.push_back("record of " + key);
  req.keys = std::move(keys);
  return req;
}

TEST(CheckpointAdoption, RecordKeysNameTheirRun) {
  EXPECT_EQ(protocol::CheckpointRecordRun(Key("a0-s1", "my/run")), "my/run");
  EXPECT_EQ(protocol::CheckpointRecordRun("train/ckpt/job/a0-s1/"), "");
  EXPECT_EQ(protocol::CheckpointRecordRun("train/ckpt/job/a0-s1"), "");
  EXPECT_EQ(protocol::CheckpointRecordRun("train/ckpt//a0-s1/run"), "");
  EXPECT_EQ(protocol::CheckpointRecordRun("train/other/job/a0-s1/run"), "");
}

TEST(CheckpointAdoption, AfterAWholeClusterRestartEveryAgentsRecordsAreTakenBack) {
  KvStore kv;
  CheckpointAdoption adoption(kv);
  // Node A held steps 1 and 2 of run r, node B steps 2 and 3: B's step 3 is
  // the run's too, though A's records came first.
  auto a = adoption.Adopt(Hand({Key("a0-s1", "r"), Key("a0-s2", "r"), "not/a/record"}));
  EXPECT_EQ(a.reply.adopted, (std::vector<std::string>{Key("a0-s1", "r"), Key("a0-s2", "r")}));
  EXPECT_TRUE(a.reply.dropped.empty());
  auto b = adoption.Adopt(Hand({Key("a0-s2", "r"), Key("a0-s3", "r")}));
  EXPECT_EQ(b.reply.adopted, std::vector<std::string>{Key("a0-s3", "r")});
  EXPECT_TRUE(b.reply.dropped.empty()) << "a record of a run only adoption knows was dropped";
  EXPECT_EQ(kv.Get(kNs, Key("a0-s2", "r"))->value_or(""), "record of " + Key("a0-s2", "r"));
  EXPECT_FALSE(kv.Get(kNs, "not/a/record")->has_value());
}

TEST(CheckpointAdoption, ARecordARunningRunNoLongerHasWasDroppedWhileItsNodeWasAway) {
  KvStore kv;
  CheckpointAdoption adoption(kv);
  // The run committed step 5 (and dropped steps 1-3) while node C was down.
  ASSERT_TRUE(kv.Put(kNs, Key("a1-s5", "r"), "committed", false, JobId()).ok());
  auto c = adoption.Adopt(Hand({Key("a0-s3", "r"), Key("a1-s5", "r"), Key("a0-s1", "other")}));
  EXPECT_EQ(c.reply.dropped, std::vector<std::string>{Key("a0-s3", "r")});
  EXPECT_EQ(c.reply.adopted, std::vector<std::string>{Key("a0-s1", "other")});
  EXPECT_EQ(kv.Get(kNs, Key("a1-s5", "r"))->value_or(""), "committed") << "the KV's record stays";
  EXPECT_FALSE(kv.Get(kNs, Key("a0-s3", "r"))->has_value());
}

// `rayx train delete` while node C was down: C's copies come back with their
// records when an agent adopts its directory, and the run is unknown by then
// (every record of it went): they are removed, not listed again.
TEST(CheckpointAdoption, ARecordDeletedWhileItsNodeWasAwayStaysDeleted) {
  KvStore kv;
  CheckpointAdoption adoption(kv);
  for (const char* id : {"a0-s1", "a0-s2"}) {
    ASSERT_TRUE(kv.Put(kNs, Key(id, "r"), "committed", false, JobId()).ok());
  }
  adoption.Drop({Key("a0-s1", "r"), Key("a0-s2", "r"), "not/a/record"});
  EXPECT_FALSE(kv.Get(kNs, Key("a0-s1", "r"))->has_value());
  EXPECT_TRUE(kv.Get(kNs, protocol::DroppedCheckpointKey(Key("a0-s1", "r")))->has_value());
  EXPECT_EQ(protocol::DroppedCheckpointKey("not/a/record"), "");
  auto c = adoption.Adopt(Hand({Key("a0-s2", "r"), Key("a0-s1", "other")}));
  EXPECT_EQ(c.reply.dropped, std::vector<std::string>{Key("a0-s2", "r")});
  EXPECT_EQ(c.reply.adopted, std::vector<std::string>{Key("a0-s1", "other")});
  EXPECT_FALSE(kv.Get(kNs, Key("a0-s2", "r"))->has_value());
  // A new run of that name is the cluster's as any other.
  auto later = adoption.Adopt(Hand({Key("a1-s1", "r")}));
  EXPECT_EQ(later.reply.adopted, std::vector<std::string>{Key("a1-s1", "r")});
}

}  // namespace checkpoint_adoption_test
}  // namespace rayx::scheduler
