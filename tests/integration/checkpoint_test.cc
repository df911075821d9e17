// Train's checkpoints kept by the nodes, on a real three-node loopback
// cluster: four ranks each report a shard every step, kept on their node's
// disk and copied to another node; the agent of one node is SIGKILLed; the run
// restarts on the two nodes left and every rank restores its own shard,
// byte-exact, from a copy; old checkpoints are gone from every node's disk.
// This binary is also its workers' program (RAYX_WORKER_MODE).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <set>
#include <string>

#include "rayx/kv.h"
#include "rayx/rayx.h"
#include "rayx/train.h"
#include "train/checkpoint_shards.h"
#include "util/local_cluster.h"
#include "util/subprocess.h"
#include "util/test_helpers.h"

namespace {

namespace train = rayx::train;
namespace fs = std::filesystem;

struct ShardConfig {
  int steps = 5;
  int64_t shard_bytes = 0;
  int wait_after_step = -1;  // attempt 0 waits here (to be killed)
  MSGPACK_DEFINE_MAP(steps, shard_bytes, wait_after_step)
};

// A shard's bytes: rank and step in every 4 KiB page.
std::string ShardBytes(int64_t size, int rank, int step) {
  std::string out(static_cast<size_t>(size), static_cast<char>(rank * 16 + step));
  for (int64_t i = 0; i + 8 <= size; i += 4096) {
    const int64_t tag = (int64_t{rank} << 40) | (int64_t{step} << 32) | (i >> 12);
    std::memcpy(out.data() + i, &tag, 8);
  }
  return out;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void ShardedLoop(ShardConfig c) {
  auto ctx = train::GetContext();
  const int rank = ctx.GetWorldRank();
  const std::string prefix = "ckpt-test/" + ctx.GetRunName() + "/";
  int start = 0;
  if (auto ckpt = train::GetCheckpoint()) {
    // This rank's own shard: its file and the step, nothing of the others'.
    const fs::path dir = ckpt->path();
    const int step = std::stoi(ReadFile(dir / "step"));
    const bool exact = ReadFile(dir / ("shard-" + std::to_string(rank))) ==
                       ShardBytes(c.shard_bytes, rank, step);
    int others = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      others += name.rfind("shard-", 0) == 0 && name != "shard-" + std::to_string(rank);
    }
    rayx::kv::Put(prefix + "restored/" + std::to_string(rank),
                  std::to_string(step) + (exact && others == 0 ? " exact" : " WRONG"));
    start = step + 1;
  }
  for (int step = start; step < c.steps; ++step) {
    const fs::path dir = fs::temp_directory_path() /
                         ("ckpt-test-" + std::to_string(getpid()) + "-" + std::to_string(step));
    fs::create_directories(dir);
    std::ofstream(dir / ("shard-" + std::to_string(rank)), std::ios::binary)
        << ShardBytes(c.shard_bytes, rank, step);
    std::ofstream(dir / "step") << step;
    train::Report({{"step", static_cast<double>(step)}}, train::Checkpoint::FromDirectory(dir.string()));
    fs::remove_all(dir);
    if (ctx.GetAttempt() == 0 && step == c.wait_after_step) {
      if (rank == 0) rayx::kv::Put(prefix + "committed", std::to_string(step));
      // Until this node is killed (or the group is, for another rank's).
      try {
        rayx::kv::Wait(prefix + "never", 120000);
      } catch (const std::exception&) {
      }
    }
  }
}

RAYX_REMOTE(ShardedLoop);

using rayx::testing::LocalCluster;
using rayx::testing::NodeHandle;

// The checkpoint directories (rayx-ckpt-*) of this cluster's nodes.
std::vector<fs::path> CheckpointDirs(const std::string& temp_dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(temp_dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && it->path().filename().string().rfind("rayx-ckpt-", 0) == 0) {
      out.push_back(it->path());
      it.disable_recursion_pending();
    }
  }
  return out;
}

// The checkpoint ids ("a0-s3") whose shards a node's directory holds for a run.
std::set<std::string> CheckpointsOn(const fs::path& dir, const std::string& run) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& job : fs::directory_iterator(dir, ec)) {
    for (const auto& ckpt : fs::directory_iterator(job.path() / run, ec)) {
      out.insert(ckpt.path().filename().string());
    }
  }
  return out;
}

int64_t ShardBytesFromEnv() {
  const char* mib = std::getenv("RAYX_TEST_SHARD_MIB");
  return (mib != nullptr ? std::atoll(mib) : 32) << 20;
}

// A loopback cluster whose driver this process is: a head node of
// `head_cpus` CPUs (and `head_args`), and a node of 1 CPU at each of `others`
// (their handles in `*nodes`, `node_args` added to theirs). Null, with the
// failure reported, when it cannot start.
std::unique_ptr<LocalCluster> StartCluster(double head_cpus, std::vector<std::string> head_args,
                                           const std::vector<std::string>& others = {},
                                           std::vector<NodeHandle>* nodes = nullptr,
                                           const std::vector<std::string>& node_args = {}) {
  LocalCluster::Options options;
  options.head_node.num_cpus = head_cpus;
  options.head_node.extra_args = std::move(head_args);
  auto started = LocalCluster::Start(options);
  if (!started.ok()) {
    ADD_FAILURE() << started.status();
    return nullptr;
  }
  std::unique_ptr<LocalCluster> cluster = std::move(*started);
  for (const std::string& ip : others) {
    std::vector<std::string> args = {"--node-ip-address", ip};
    args.insert(args.end(), node_args.begin(), node_args.end());
    auto node = cluster->AddNode({.num_cpus = 1, .extra_args = args});
    if (!node.ok()) {
      ADD_FAILURE() << node.status();
      return nullptr;
    }
    if (nodes) nodes->push_back(*node);
  }
  rayx::Options init;
  init.address = cluster->address();
  init.token = cluster->token();
  rayx::Init(init);
  return cluster;
}

TEST(NodeKeptCheckpoints, ARankOnAKilledNodeRestoresItsOwnShardFromACopy) {
  std::vector<NodeHandle> nodes;
  auto cluster = StartCluster(3, {}, {"127.0.0.2", "127.0.0.3"}, &nodes);
  ASSERT_TRUE(cluster);
  const NodeHandle* third = &nodes[1];

  ShardConfig config;
  config.shard_bytes = ShardBytesFromEnv();
  config.wait_after_step = 2;
  train::ScalingConfig scaling;
  scaling.num_workers = 4;
  scaling.placement_strategy = rayx::PlacementStrategy::SPREAD;  // a rank on each node
  train::RunConfig run;
  run.name = "sharded";
  run.num_to_keep = 2;
  run.num_replicas = 2;
  // A restart may pick the killed node before the head has declared it dead:
  // that attempt fails to start, and the next one runs.
  train::DataParallelTrainer trainer(ShardedLoop, config, scaling, run, {.max_failures = 3});
  auto fit = std::async(std::launch::async, [&] { return trainer.Fit(); });

  // Three checkpoints committed (steps 0-2), each shard on two nodes.
  ASSERT_EQ(rayx::kv::Wait("ckpt-test/sharded/committed", 180000), "2");
  size_t copies = 0;
  for (const auto& dir : CheckpointDirs(cluster->temp_dir())) {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      copies += it->path().filename().string().rfind("shard-", 0) == 0 &&
                it->path().string().find("/a0-s3/") != std::string::npos;
    }
  }
  EXPECT_EQ(copies, 8u) << "4 shards of the step-2 checkpoint, 2 copies each";

  ASSERT_TRUE(cluster->KillNode(*third).ok());
  train::Result result = fit.get();
  ASSERT_TRUE(result.error.empty()) << result.error;
  EXPECT_GE(result.num_restarts, 1);
  EXPECT_EQ(result.metrics.at("step"), config.steps - 1);
  // Every rank restored its own shard of step 2, byte-exact (one of them from
  // the copy of the killed node's shard).
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(rayx::kv::Get("ckpt-test/sharded/restored/" + std::to_string(rank)), "2 exact")
        << "rank " << rank;
  }
  ASSERT_TRUE(result.checkpoint.has_value());
  EXPECT_EQ(result.checkpoint->id().rfind("nodes:", 0), 0u) << result.checkpoint->id();
  // The killed node's directory stays (its copies outlive its agent) with
  // the checkpoints the run dropped meanwhile. An agent started again on that
  // machine adopts it, hands its records to the head, and removes those the
  // run dropped: only the last two checkpoints (steps 3 and 4, of the last
  // attempt) are left on the nodes' disks.
  EXPECT_EQ(CheckpointDirs(cluster->temp_dir()).size(), 3u) << "the killed node's went";
  auto again = cluster->AddNode({.num_cpus = 1, .extra_args = {"--node-ip-address", "127.0.0.3"}});
  ASSERT_TRUE(again.ok()) << again.status();
  const std::string last = "a" + std::to_string(result.num_restarts);
  const std::set<std::string> kept = {last + "-s1", last + "-s2"};
  std::set<std::string> seen;
  EXPECT_TRUE(rayx::testing::WaitUntil(
      [&] {
        seen.clear();
        for (const auto& dir : CheckpointDirs(cluster->temp_dir())) {
          for (const auto& id : CheckpointsOn(dir, "sharded")) seen.insert(id);
        }
        return seen == kept;
      },
      10000))
      << [&] {
           std::string s;
           for (const auto& id : seen) s += id + " ";
           return s;
         }();
  EXPECT_EQ(CheckpointDirs(cluster->temp_dir()).size(), 3u) << "the new agent made its own";

  // `rayx train`: the two checkpoints are listed; the newest exported as one
  // directory (every rank's shard, byte-exact); deleted from every node.
  auto listed = cluster->RunCli({"train", "list"});
  ASSERT_EQ(listed.exit_code, 0) << listed.Describe();
  EXPECT_TRUE(rayx::testing::Contains(listed.out, "nodes:")) << listed.out;
  EXPECT_TRUE(rayx::testing::Contains(listed.out, last + "-s2/sharded")) << listed.out;
  EXPECT_TRUE(rayx::testing::Contains(listed.out, "restorable")) << listed.out;
  const fs::path exported = fs::path(cluster->temp_dir()) / "exported";
  auto exported_run = cluster->RunCli({"train", "export", "sharded", exported.string()});
  ASSERT_EQ(exported_run.exit_code, 0) << exported_run.Describe();
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(ReadFile(exported / ("shard-" + std::to_string(rank))),
              ShardBytes(config.shard_bytes, rank, config.steps - 1))
        << "rank " << rank;
  }
  EXPECT_EQ(ReadFile(exported / "step"), std::to_string(config.steps - 1));

  // Deleted while node 127.0.0.2 (a holder of the last attempt's copies) is
  // down: its copies stay on its disk until an agent adopts its directory
  // again, which then removes them (the run is unknown by then).
  const NodeHandle* second = &nodes[0];
  std::string second_dir;
  {
    auto status = cluster->GetStatus();
    ASSERT_TRUE(status.ok()) << status.status();
    for (const auto& n : status->nodes) {
      if (n.node_id.Hex() == second->node_id) second_dir = n.checkpoint_dir;
    }
  }
  ASSERT_FALSE(second_dir.empty());
  ASSERT_FALSE(CheckpointsOn(second_dir, "sharded").empty()) << "no copies on " << second_dir;
  ASSERT_TRUE(cluster->KillNode(*second).ok());
  ASSERT_TRUE(cluster
                  ->WaitFor(
                      [&](const rayx::ClusterStatus& s) {
                        for (const auto& n : s.nodes) {
                          if (n.node_id.Hex() == second->node_id) return !n.alive;
                        }
                        return false;
                      },
                      15000)
                  .ok());
  auto deleted = cluster->RunCli({"train", "delete", "sharded"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.Describe();
  auto left_on = [&](bool with_second) {
    std::set<std::string> left;
    for (const auto& dir : CheckpointDirs(cluster->temp_dir())) {
      if (!with_second && dir == fs::path(second_dir)) continue;
      for (const auto& id : CheckpointsOn(dir, "sharded")) left.insert(dir.string() + ":" + id);
    }
    return left;
  };
  EXPECT_TRUE(rayx::testing::WaitUntil([&] { return left_on(false).empty(); }, 10000))
      << "checkpoints left on the live nodes after `rayx train delete`";
  EXPECT_FALSE(CheckpointsOn(second_dir, "sharded").empty()) << "a dead node's disk was touched";
  auto back = cluster->AddNode({.num_cpus = 1, .extra_args = {"--node-ip-address", "127.0.0.2"}});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(rayx::testing::WaitUntil([&] { return left_on(true).empty(); }, 10000))
      << "the deleted run's copies came back with the node: " << [&] {
           std::string s;
           for (const auto& c : left_on(true)) s += c + " ";
           return s;
         }();
  listed = cluster->RunCli({"train", "list"});
  EXPECT_TRUE(rayx::testing::Contains(listed.out, "No checkpoints")) << listed.out;
  auto missing = cluster->RunCli({"train", "export", "sharded", exported.string()});
  EXPECT_EQ(missing.exit_code, 1) << missing.Describe();
  EXPECT_TRUE(rayx::testing::Contains(missing.err, "no checkpoints of run 'sharded'"))
      << missing.err;
  rayx::Shutdown();
}

// A node keeps at most --checkpoint-disk-limit bytes of shards: the report
// that would pass it fails the run with the figures, and the checkpoint before
// it stays the latest, intact.
TEST(NodeKeptCheckpoints, AReportPastTheNodesDiskLimitFailsWithTheFiguresAndKeepsThePrevious) {
  auto cluster = StartCluster(1, {"--checkpoint-disk-limit", std::to_string(40 << 20)});
  ASSERT_TRUE(cluster);
  ShardConfig config;
  config.steps = 3;
  config.shard_bytes = 32 << 20;
  train::RunConfig run;
  run.name = "over";
  run.num_to_keep = 2;
  run.num_replicas = 1;
  train::Result result =
      train::DataParallelTrainer(ShardedLoop, config, {.num_workers = 1}, run).Fit();
  EXPECT_TRUE(rayx::testing::Contains(result.error, "rank 0's checkpoint")) << result.error;
  EXPECT_TRUE(rayx::testing::Contains(result.error,
                                      "of its limit 40.00 MiB (--checkpoint-disk-limit)"))
      << result.error;
  ASSERT_TRUE(result.checkpoint.has_value()) << "the first checkpoint stays the latest";
  EXPECT_TRUE(rayx::testing::Contains(result.checkpoint->id(), "/a0-s1/over"))
      << result.checkpoint->id();
  const fs::path exported = fs::path(cluster->temp_dir()) / "exported";
  auto exported_run = cluster->RunCli({"train", "export", "over", exported.string()});
  ASSERT_EQ(exported_run.exit_code, 0) << exported_run.Describe();
  EXPECT_EQ(ReadFile(exported / "shard-0"), ShardBytes(config.shard_bytes, 0, 0));
  rayx::Shutdown();
}

// One copy of each shard (num_replicas 1): when the node holding a rank's
// shards dies, no checkpoint can be restored; the run says so and starts over
// on the nodes left instead of failing or waiting.
TEST(NodeKeptCheckpoints, ACheckpointThatLostEveryCopyOfAShardIsPassedOverNamingWhy) {
  std::vector<NodeHandle> nodes;
  auto cluster = StartCluster(1, {}, {"127.0.0.2"}, &nodes);
  ASSERT_TRUE(cluster);
  const NodeHandle* second = &nodes[0];
  ShardConfig config;
  config.steps = 3;
  config.shard_bytes = 1 << 20;
  config.wait_after_step = 1;
  train::ScalingConfig scaling;
  scaling.min_workers = 1;
  scaling.max_workers = 2;
  scaling.placement_strategy = rayx::PlacementStrategy::SPREAD;
  train::RunConfig run;
  run.name = "one-copy";
  run.num_replicas = 1;
  train::DataParallelTrainer trainer(ShardedLoop, config, scaling, run, {.max_failures = 3});
  auto fit = std::async(std::launch::async, [&] { return trainer.Fit(); });
  ASSERT_EQ(rayx::kv::Wait("ckpt-test/one-copy/committed", 60000), "1");
  ASSERT_TRUE(cluster->KillNode(*second).ok());  // rank 1's shards had their only copy there
  train::Result result = fit.get();
  ASSERT_TRUE(result.error.empty()) << result.error;
  EXPECT_GE(result.num_restarts, 1);
  EXPECT_EQ(result.metrics.at("step"), config.steps - 1);
  // Nothing was restored: the run started over (rank 0 reads no checkpoint).
  EXPECT_FALSE(rayx::kv::Get("ckpt-test/one-copy/restored/0").has_value());
  rayx::Shutdown();
}

// Checkpoints kept by the nodes outlive the whole cluster: stopped with `rayx
// stop` and started again with the same --checkpoint-dir, the new agents
// adopt the directories and hand their records to the new head; `rayx train
// list` shows the run's checkpoints, a later job resumes the run by its name
// from the newest one (every rank restoring its own shard, byte-exact, from
// the copies the first job wrote), and as it reports, num_to_keep drops the
// first job's checkpoints from every node.
TEST(NodeKeptCheckpoints, CheckpointsOutliveAWholeClusterStopAndTheRunResumes) {
  const fs::path root =
      fs::temp_directory_path() / ("rayx-ckpt-root-" + std::to_string(getpid()));
  fs::create_directories(root);
  struct RemoveRoot {
    fs::path path;
    ~RemoveRoot() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } remove_root{root};
  const std::vector<std::string> args = {"--checkpoint-dir", root.string()};
  ShardConfig config;
  config.steps = 3;
  config.shard_bytes = 1 << 20;
  train::ScalingConfig scaling;
  scaling.num_workers = 2;
  scaling.placement_strategy = rayx::PlacementStrategy::SPREAD;  // a rank on each node
  train::RunConfig run;
  run.name = "outlives";
  run.num_to_keep = 2;
  run.num_replicas = 2;
  std::string first_job;
  {
    auto cluster = StartCluster(1, args, {"127.0.0.2"}, nullptr, args);
    ASSERT_TRUE(cluster);
    train::Result result = train::DataParallelTrainer(ShardedLoop, config, scaling, run).Fit();
    ASSERT_TRUE(result.error.empty()) << result.error;
    ASSERT_TRUE(result.checkpoint.has_value());
    EXPECT_TRUE(rayx::testing::Contains(result.checkpoint->id(), "/a0-s3/outlives"))
        << result.checkpoint->id();
    first_job = rayx::detail::CurrentJobId();
    rayx::Shutdown();
    ASSERT_TRUE(cluster->Stop().ok());
  }
  // Both nodes' directories stayed, each with the two checkpoints' records.
  size_t records = 0;
  for (const auto& dir : CheckpointDirs(root.string())) {
    for (const std::string id : {"a0-s2", "a0-s3"}) {
      records += fs::exists(dir / first_job / "outlives" / id / "checkpoint.record");
    }
  }
  EXPECT_EQ(records, 4u) << "every node holding a shard keeps its checkpoint's record";

  auto cluster = StartCluster(1, args, {"127.0.0.2"}, nullptr, args);
  ASSERT_TRUE(cluster);
  rayx::testing::CommandResult listed;
  EXPECT_TRUE(rayx::testing::WaitUntil(
      [&] {
        listed = cluster->RunCli({"train", "list"});
        return listed.exit_code == 0 &&
               rayx::testing::Contains(listed.out, first_job + "/a0-s2/outlives") &&
               rayx::testing::Contains(listed.out, first_job + "/a0-s3/outlives");
      },
      20000))
      << "the new head did not learn the checkpoints back: " << listed.Describe();
  EXPECT_TRUE(rayx::testing::Contains(listed.out, "restorable")) << listed.out;
  // This driver (another job: the first one ended with its cluster) pulls the
  // whole checkpoint from the nodes that adopted the copies.
  const fs::path whole =
      train::detail::FetchShards("nodes:" + first_job + "/a0-s3/outlives", /*rank=*/-1);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(ReadFile(whole / ("shard-" + std::to_string(rank))), ShardBytes(1 << 20, rank, 2))
        << "rank " << rank;
  }
  fs::remove_all(whole.parent_path());

  config.steps = 5;
  train::Result resumed = train::DataParallelTrainer(ShardedLoop, config, scaling, run).Fit();
  ASSERT_TRUE(resumed.error.empty()) << resumed.error;
  EXPECT_EQ(resumed.metrics.at("step"), 4);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(rayx::kv::Get("ckpt-test/outlives/restored/" + std::to_string(rank)), "2 exact")
        << "rank " << rank << " did not resume from the first cluster's last checkpoint";
  }
  // Steps 3 and 4 are the kept two now: the first job's went from every node.
  EXPECT_TRUE(rayx::testing::WaitUntil(
      [&] {
        for (const auto& dir : CheckpointDirs(root.string())) {
          if (fs::exists(dir / first_job / "outlives" / "a0-s2") ||
              fs::exists(dir / first_job / "outlives" / "a0-s3")) {
            return false;
          }
        }
        return true;
      },
      10000))
      << "the first job's checkpoints were not dropped from the nodes";
  listed = cluster->RunCli({"train", "list"});
  EXPECT_FALSE(rayx::testing::Contains(listed.out, first_job)) << listed.out;
  rayx::Shutdown();
}

// Rank 0 sweeps only reports before the one it commits: later ones may be in
// progress on the other ranks. (No cluster.)
TEST(ReportIds, EarlierReportsAreEarlierAttemptsOrEarlierReportsOfOne) {
  using rayx::train::detail::EarlierReport;
  EXPECT_TRUE(EarlierReport("a0-s5", "a1-s1"));
  EXPECT_TRUE(EarlierReport("a1-s2", "a1-s10"));  // numbers, not text
  EXPECT_FALSE(EarlierReport("a1-s10", "a1-s2"));
  EXPECT_FALSE(EarlierReport("a1-s2", "a1-s2"));
  EXPECT_FALSE(EarlierReport("a2-s1", "a1-s9"));
  EXPECT_FALSE(EarlierReport("hash0123", "a1-s2"));  // not a report's: never swept
}

// A fit starts past every attempt of its own job's kept checkpoints of the run
// (and of storage folders), so it never reports over one it keeps.
TEST(ReportIds, AFitStartsPastTheAttemptsItKeeps) {
  using rayx::train::detail::FirstAttempt;
  EXPECT_EQ(FirstAttempt({}, "job1", "r"), 0);
  EXPECT_EQ(FirstAttempt({"nodes:job1/a0-s4/r", "nodes:job1/a2-s1/r"}, "job1", "r"), 3);
  // Another job's, another run's (a prefix of this one's name too), a package.
  EXPECT_EQ(FirstAttempt({"nodes:job0/a5-s1/r", "nodes:job1/a7-s1/r2", "nodes:job1/a7-s1/x/r",
                          "package:0123abcd"},
                         "job1", "r"),
            0);
  EXPECT_EQ(FirstAttempt({"nodes:job1/a1-s3/my/run"}, "job1", "my/run"), 2);
  EXPECT_EQ(FirstAttempt({"path:/mnt/store/r/checkpoint_a4-s2", "path:/mnt/store/r/other"},
                         "job1", "r"),
            5);
  EXPECT_EQ(FirstAttempt({"nodes:job1/garbage/r", "nodes:job1/a-1-s1/r"}, "job1", "r"), 0);
  // Under a storage path, every report folder counts, kept or not (an
  // uncommitted one's files would mix with a new report's).
  const fs::path storage = fs::temp_directory_path() / ("first-attempt-" + std::to_string(getpid()));
  fs::create_directories(storage / "r" / "checkpoint_a3-s1");
  fs::create_directories(storage / "r" / "not-a-report");
  EXPECT_EQ(FirstAttempt({"path:" + (storage / "r" / "checkpoint_a1-s2").string()}, "job1", "r",
                         storage.string()),
            4);
  EXPECT_EQ(FirstAttempt({}, "job1", "other", storage.string()), 0);
  fs::remove_all(storage);
}

// With RunConfig::storage_path (a shared mount), every rank's checkpoint goes
// into the report's one folder there (Ray Train's layout), committed once all
// ranks reported; the run keeps num_to_keep of them.
TEST(StoragePathCheckpoints, EveryRanksFilesGoIntoTheReportsFolder) {
  auto cluster = StartCluster(2, {});
  ASSERT_TRUE(cluster);
  ShardConfig config;
  config.steps = 3;
  config.shard_bytes = 1 << 20;
  const fs::path storage = fs::path(cluster->temp_dir()) / "shared";
  train::RunConfig run;
  run.name = "shared";
  run.storage_path = storage.string();
  run.num_to_keep = 2;
  train::Result result =
      train::DataParallelTrainer(ShardedLoop, config, {.num_workers = 2}, run).Fit();
  ASSERT_EQ(result.error, "");
  ASSERT_TRUE(result.checkpoint.has_value());
  const std::string& id = result.checkpoint->id();
  ASSERT_EQ(id.rfind("path:", 0), 0u) << id;
  const fs::path folder = id.substr(5);
  EXPECT_EQ(folder.parent_path(), storage / "shared");
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(ReadFile(folder / ("shard-" + std::to_string(rank))),
              ShardBytes(config.shard_bytes, rank, config.steps - 1))
        << "rank " << rank;
  }
  size_t kept = 0;
  for (const auto& entry : fs::directory_iterator(storage / "shared")) {
    kept += entry.path().filename().string().rfind("checkpoint_", 0) == 0;
  }
  EXPECT_EQ(kept, 2u) << "3 reports, 2 to keep";
  // Listed for a later fit of the run, the latest last.
  std::ifstream index(storage / "shared" / ".rayx-kept");
  std::vector<std::string> listed;
  for (std::string line; std::getline(index, line);) listed.push_back(line);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed.back(), folder.filename().string());
  EXPECT_EQ(rayx::train::detail::StoredCheckpoints(storage.string(), "shared").back(), id);
  rayx::Shutdown();
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("RAYX_WORKER_MODE")) rayx::Init(argc, argv);  // serves tasks, never returns
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
