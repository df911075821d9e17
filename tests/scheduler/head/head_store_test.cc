// HeadStore: what the head writes survives closing and reopening the file; a
// damaged file is refused with an error that names it and says what to do.
#include "head/head_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "protocol/codec.h"

namespace rayx::scheduler {
namespace head_store_test {  // this file's own (unit tests compile in batches)

namespace fs = std::filesystem;

class HeadStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "rayx-head-store-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/head_state.sqlite3";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::unique_ptr<HeadStore> Open() {
    auto store = HeadStore::Open(path_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }
  static NodeInfo MakeNode(const std::string& address) {
    NodeInfo info;
    info.node_id = NodeId::FromRandom();
    info.address = address;
    info.total = {{"CPU", 4}, {"GPU", 2}};
    info.labels = {{"zone", "a"}};
    return info;
  }
  std::string dir_;
  std::string path_;
};

TEST_F(HeadStoreTest, WhatWasWrittenIsReadBackAfterReopening) {
  NodeInfo kept = MakeNode("10.0.0.1");
  NodeInfo gone = MakeNode("10.0.0.2");
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    store->PutMeta("cluster_id", "abc123");
    store->PutNode(kept, 7);
    store->PutNode(gone, 8);
    store->DeleteNode(gone.node_id);
    store->PutKv("ns", "key", std::string("v\0alue", 6), JobId());
    store->PutKv("ns", "job-key", "x", JobId::FromWire("job1"));
    store->PutKv("ns", "deleted", "x", JobId());
    store->DeleteKv("ns", "deleted");
    store->PutKv("other", "k", "old", JobId());
    store->PutKv("other", "k", "new", JobId());
    protocol::ActorInfo actor;
    actor.name = "counter";
    actor.lease_id = LeaseId::FromWire("L1");
    actor.detached = true;
    actor.worker_address = "tcp://10.0.0.1:5000";
    store->PutActor(actor);
    StoredPlacementGroup group;
    group.info.placement_group_id = PlacementGroupId::FromWire("pg1");
    group.info.strategy = protocol::PlacementStrategy::kStrictSpread;
    group.info.bundles = {{{"GPU", 1}}, {{"GPU", 1}}};
    group.info.state = protocol::PlacementGroupState::kCreated;
    group.bundles = {{kept.node_id.Hex(), {1}}, {"", {}}};
    store->PutPlacementGroup(group);
    store->PutJob({JobId::FromWire("job1"), false});
    store->PutJob({JobId::FromWire("job2"), true});
    store->DeleteJob(JobId::FromWire("job1"));
    protocol::JobInfo submitted;
    submitted.submission_id = "raysubmit_1";
    submitted.state = protocol::JobState::kRunning;
    submitted.entrypoint = {"sleep", "1"};
    submitted.lease_id = LeaseId::FromWire("L2");
    store->PutSubmittedJob(submitted);
    StoredLease lease;
    lease.lease_id = LeaseId::FromWire("L1");
    lease.node_id = kept.node_id.Hex();
    lease.resources = {{"GPU", 1}};
    lease.gpu_ids = {1};
    lease.group_id = PlacementGroupId::FromWire("pg1");
    lease.bundle_index = 0;
    lease.running = true;
    store->PutLease(lease);
    StoredLease ended = lease;
    ended.lease_id = LeaseId::FromWire("L3");
    store->PutLease(ended);
    store->DeleteLease(LeaseId::FromWire("L3"));
    store->DeleteKvOfJob(JobId::FromWire("job1"));
    EXPECT_EQ(store->write_errors(), 0u);
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto state = store->Load();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->meta["cluster_id"], "abc123");
  ASSERT_EQ(state->nodes.size(), 1u);
  EXPECT_EQ(state->nodes[0].info.node_id, kept.node_id);
  EXPECT_EQ(state->nodes[0].epoch, 7u);
  EXPECT_EQ(state->nodes[0].info.total, kept.total);
  EXPECT_EQ(state->nodes[0].info.labels, kept.labels);
  ASSERT_EQ(state->kv.size(), 2u);
  for (const auto& entry : state->kv) {
    if (entry.ns == "ns") {
      EXPECT_EQ(entry.key, "key");
      EXPECT_EQ(entry.value, std::string("v\0alue", 6));
    } else {
      EXPECT_EQ(entry.value, "new");
    }
  }
  ASSERT_EQ(state->actors.size(), 1u);
  EXPECT_EQ(state->actors[0].name, "counter");
  EXPECT_TRUE(state->actors[0].detached);
  EXPECT_EQ(state->actors[0].worker_address, "tcp://10.0.0.1:5000");
  ASSERT_EQ(state->placement_groups.size(), 1u);
  EXPECT_EQ(state->placement_groups[0].info.strategy, protocol::PlacementStrategy::kStrictSpread);
  ASSERT_EQ(state->placement_groups[0].bundles.size(), 2u);
  EXPECT_EQ(state->placement_groups[0].bundles[0].node_id, kept.node_id.Hex());
  EXPECT_EQ(state->placement_groups[0].bundles[0].devices, std::vector<int>{1});
  EXPECT_TRUE(state->placement_groups[0].bundles[1].node_id.empty());
  ASSERT_EQ(state->jobs.size(), 1u);
  EXPECT_EQ(state->jobs[0].job_id.Hex(), "job2");
  EXPECT_TRUE(state->jobs[0].supervised);
  ASSERT_EQ(state->submitted_jobs.size(), 1u);
  EXPECT_EQ(state->submitted_jobs[0].entrypoint, (std::vector<std::string>{"sleep", "1"}));
  ASSERT_EQ(state->leases.size(), 1u);
  EXPECT_EQ(state->leases[0].gpu_ids, std::vector<int>{1});
  EXPECT_EQ(state->leases[0].group_id.Hex(), "pg1");
  EXPECT_TRUE(state->leases[0].running);
}

// A rayx from before ids were packed as str wrote a NodeId as a one-element
// array ([hex]); a head state file it left still loads.
TEST_F(HeadStoreTest, ANodeIdWrittenAsALegacyArrayIsReadBack) {
  NodeInfo node = MakeNode("10.0.0.1");
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    store->PutNode(node, 3);
  }
  std::string blob = protocol::Encode(node);
  std::string id = protocol::Encode(node.node_id.Hex());
  size_t at = blob.find(id);
  ASSERT_NE(at, std::string::npos);
  blob.insert(at, "\x91");  // fixarray of 1, as MSGPACK_DEFINE(hex_) packed it
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "UPDATE nodes SET info = ?", -1, &stmt, nullptr), SQLITE_OK);
  sqlite3_bind_blob(stmt, 1, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
  EXPECT_EQ(sqlite3_step(stmt), SQLITE_DONE);
  sqlite3_finalize(stmt);
  sqlite3_close(db);

  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto state = store->Load();
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->nodes.size(), 1u);
  EXPECT_EQ(state->nodes[0].info.node_id, node.node_id);
  EXPECT_EQ(state->nodes[0].info.address, "10.0.0.1");
  EXPECT_EQ(state->nodes[0].epoch, 3u);
}

TEST_F(HeadStoreTest, PackageKeepersAreReadBackAfterReopening) {
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    store->PutPackageKeeper("h1", "train:a");
    store->PutPackageKeeper("h1", "train:a");  // twice: one row
    store->PutPackageKeeper("h1", "train:b");
    store->PutPackageKeeper("h2", "train:a");
    store->DeletePackageKeeper("h2", "train:a");
    EXPECT_EQ(store->write_errors(), 0u);
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto state = store->Load();
  ASSERT_TRUE(state.ok()) << state.status();
  std::vector<std::pair<std::string, std::string>> want = {{"h1", "train:a"}, {"h1", "train:b"}};
  auto got = state->package_keepers;
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
  EXPECT_FALSE(state->empty());
}

TEST_F(HeadStoreTest, ANewFileIsEmptyAndInWalMode) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto state = store->Load();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_TRUE(state->empty());
  store->PutMeta("k", "v");
  EXPECT_TRUE(fs::exists(path_ + "-wal")) << "the store should write ahead (WAL)";
}

// Rows of the kv table another connection sees (as a restarted head would).
int64_t CommittedKvRows(const std::string& path) {
  sqlite3* db = nullptr;
  int64_t rows = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM kv", -1, &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
      rows = sqlite3_column_int64(stmt, 0);
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return rows;
}

TEST_F(HeadStoreTest, ABatchsWritesAreCommittedTogetherByEndBatch) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  store->BeginBatch();
  store->PutKv("ns", "a", "1", JobId());
  store->PutKv("ns", "b", "2", JobId());
  store->DeleteKv("ns", "a");
  EXPECT_EQ(CommittedKvRows(path_), 0) << "a batch's writes are seen before EndBatch";
  store->EndBatch();
  EXPECT_EQ(CommittedKvRows(path_), 1);
  // Outside a batch each write commits at once; an empty batch commits nothing.
  store->PutKv("ns", "c", "3", JobId());
  EXPECT_EQ(CommittedKvRows(path_), 2);
  store->BeginBatch();
  store->EndBatch();
  EXPECT_EQ(store->write_errors(), 0u);
}

// A statement that fails inside a batch (here: the file may not grow) makes
// SQLite roll the batch back: its writes count as failed, and the rest of the
// pass commits write by write instead of in a transaction that is gone.
TEST_F(HeadStoreTest, ABatchRolledBackByAFailedWriteCountsAllItsWritesAsFailed) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  store->PutKv("ns", "before", "1", JobId());
  ASSERT_TRUE(store->TEST_Exec("PRAGMA wal_checkpoint(TRUNCATE)"));
  sqlite3* db = nullptr;
  int64_t pages = 0;
  ASSERT_EQ(sqlite3_open_v2(path_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, "PRAGMA page_count", -1, &stmt, nullptr) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW) {
    pages = sqlite3_column_int64(stmt, 0);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  ASSERT_GT(pages, 0);
  ASSERT_TRUE(store->TEST_Exec("PRAGMA max_page_count=" + std::to_string(pages)));
  store->BeginBatch();
  store->PutKv("ns", "small-1", "2", JobId());
  store->PutKv("ns", "small-2", "2", JobId());
  store->PutKv("ns", "big", std::string(1 << 20, 'x'), JobId());  // the file is full
  store->PutKv("ns", "after", "3", JobId());
  store->EndBatch();
  EXPECT_EQ(store->write_errors(), 3u) << "small-1, small-2 and big were lost with their batch";
  EXPECT_EQ(CommittedKvRows(path_), 2) << "before and after are in the file";
}

TEST_F(HeadStoreTest, ABatchStillOpenWhenTheStoreClosesIsKept) {
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    store->BeginBatch();
    store->PutKv("ns", "kept", "yes", JobId());
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto state = store->Load();
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->kv.size(), 1u);
  EXPECT_EQ(state->kv[0].key, "kept");
}

TEST_F(HeadStoreTest, AFileThatIsNotADatabaseIsRefusedNamingIt) {
  {
    std::ofstream out(path_, std::ios::binary);
    out << std::string(8192, 'x');
  }
  auto store = HeadStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(path_), std::string::npos) << store.status();
  EXPECT_NE(store.status().message().find("move it away"), std::string::npos) << store.status();
}

TEST_F(HeadStoreTest, ADamagedDatabaseIsRefusedNamingIt) {
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 200; ++i) {
      store->PutKv("ns", "key" + std::to_string(i), std::string(500, 'v'), JobId());
    }
  }
  // Checkpointed into the main file on close; overwrite its middle pages.
  {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096 * 3);
    std::string junk(4096 * 4, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto store = HeadStore::Open(path_);
  Status status = store.ok() ? store.value()->Load().status() : store.status();
  ASSERT_FALSE(status.ok()) << "a damaged file should be refused";
  EXPECT_NE(status.message().find(path_), std::string::npos) << status;
}

TEST_F(HeadStoreTest, AnUnopenablePathSaysWhatToCheck) {
  auto store = HeadStore::Open(dir_ + "/no/such/dir/state.sqlite3");
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("no/such/dir"), std::string::npos) << store.status();
  EXPECT_NE(store.status().message().find("writable"), std::string::npos) << store.status();
}

}  // namespace
}  // namespace rayx::scheduler
