// Actor groups and Train on a real two-node loopback cluster: trained weights
// equal one process's, a SIGKILLed rank resumes from the cluster-kept
// checkpoint, an elastic run grows when a node joins and shrinks when one dies,
// a detached group serves two jobs, and bad configs are refused. This binary is
// also its workers' program (RAYX_WORKER_MODE).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "rayx/actor_group.h"
#include "rayx/collective.h"
#include "rayx/kv.h"
#include "rayx/rayx.h"
#include "rayx/train.h"
#include "train/train_session.h"
#include "train_linear/linear_sgd.h"
#include "util/local_cluster.h"
#include "util/subprocess.h"
#include "util/test_helpers.h"

namespace {

namespace train = rayx::train;

// The example's loop, plus each rank's pid in the KV so a test can kill it.
// A test that put "<run>/hold-at/<size>" finds rank 0 of an attempt of that
// size waiting after its first report (until the attempt is killed, or 60 s),
// so the run cannot end before the test acted.
void TrainLinear(linear_sgd::Config c) {
  auto ctx = train::GetContext();
  const std::string prefix = "train-test/" + ctx.GetRunName();
  rayx::kv::Put(prefix + "/pid/" + std::to_string(ctx.GetWorldRank()), std::to_string(getpid()));
  const std::string size = std::to_string(ctx.GetWorldSize());
  const bool hold = ctx.GetWorldRank() == 0 && rayx::kv::Get(prefix + "/hold-at/" + size);
  linear_sgd::RunRank(c, [&](int) {
    if (ctx.GetWorldRank() == 0) rayx::kv::Put(prefix + "/reported-size/" + size, "yes");
    if (hold) rayx::kv::Wait(prefix + "/hold-at/" + size + "/released", 60000);
  });
}

void ThrowingLoop(linear_sgd::Config) {
  if (train::GetContext().GetWorldRank() == 1) throw std::runtime_error("rank one gives up");
  train::Report({{"x", 1.0}});
}

void NotRegistered(linear_sgd::Config) {}

class Model {
 public:
  static Model* Create(int base) { return new Model(base); }
  explicit Model(int base) : base_(base) {}
  int Add(int x) {
    state_ += x;
    return state_ + base_;
  }
  int State() const { return state_; }
  int Pid() const { return getpid(); }
  std::string Env(std::string name) const {
    const char* v = std::getenv(name.c_str());
    return v ? v : "";
  }
  int Device() const { return rayx::GetRankInfo().device; }
  int64_t Sum(int64_t x) {
    std::vector<int64_t> v{x};
    rayx::collective::AllReduce(v, rayx::collective::ReduceOp::kSum,
                                rayx::GetRankInfo().collective_group);
    return v[0];
  }

 private:
  int base_;
  int state_ = 0;
};

RAYX_REMOTE(TrainLinear, ThrowingLoop, Model::Create, &Model::Add, &Model::State, &Model::Pid,
            &Model::Env, &Model::Sum, &Model::Device);

using rayx::testing::Contains;
using rayx::testing::LocalCluster;
using rayx::testing::NodeHandle;

using rayx::testing::WaitUntil;

double WorstDifference(const train::Result& r, const linear_sgd::Config& c) {
  std::vector<double> expected = linear_sgd::Reference(c);
  double worst = 0;
  for (size_t j = 0; j < expected.size(); ++j) {
    auto it = r.metrics.find("w" + std::to_string(j));
    if (it == r.metrics.end()) return 1e300;
    worst = std::max(worst, std::abs(it->second - expected[j]) / (1 + std::abs(expected[j])));
  }
  return worst;
}

class Train : public ::testing::Test {
 protected:
  void StartCluster(double head_cpus, double second_cpus) {
    LocalCluster::Options options;
    options.head_node.num_cpus = head_cpus;
    auto cluster = LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    if (second_cpus > 0) {
      auto node = cluster_->AddNode(
          {.num_cpus = second_cpus, .extra_args = {"--node-ip-address", "127.0.0.2"}});
      ASSERT_TRUE(node.ok()) << node.status();
      second_ = *node;
    }
    Init();
  }
  void Init() {
    rayx::Options init;
    init.address = cluster_->address();
    init.token = cluster_->token();
    rayx::Init(init);
  }
  int RankPid(const std::string& run, int rank) {
    std::string v = rayx::kv::Wait("train-test/" + run + "/pid/" + std::to_string(rank), 60000);
    return std::stoi(v);
  }
  // True once rank 0 reported (the run's latest report is in the KV).
  bool HasReported(const std::string& run) {
    return rayx::kv::Get("train/" + run + "/latest", "rayx").has_value();
  }
  void TearDown() override {
    if (rayx::IsInitialized()) rayx::Shutdown();
    if (!cluster_) return;
    rayx::Status free = cluster_->WaitFor(
        [](const rayx::ClusterStatus& s) {
          return s.AvailableResources()["CPU"] == s.TotalResources()["CPU"] &&
                 s.pending_demands.empty();
        },
        15000);
    EXPECT_TRUE(free.ok()) << "resources or demands left after the job: " << free;
  }
  std::unique_ptr<LocalCluster> cluster_;
  NodeHandle second_;
};

// Rank 0's record of a run (the latest report and the history) stays well under
// the KV's 1 MiB value limit however many metrics a report has, so Report never
// fails for it: the oldest reports go first. (No cluster: the record's encoding.)
TEST(TrainHistory, StaysUnderTheKvValueLimitByDroppingTheOldestReports) {
  namespace td = train::detail;
  auto report = [](td::LatestReport& latest, const train::Metrics& metrics) {
    latest.metrics = metrics;
    latest.reports++;
    latest.history.push_back(metrics);
    return td::PackLatestReport(latest);
  };
  td::LatestReport latest;
  train::Metrics wide;  // about 70 KB packed
  for (int m = 0; m < 2000; ++m) wide["layer_" + std::to_string(m) + "/grad_norm"] = m;
  std::string packed;
  for (int step = 0; step < 100; ++step) {
    wide["step"] = step;
    packed = report(latest, wide);
    ASSERT_LE(packed.size(), rayx::kv::kMaxValueBytes / 2) << "step " << step;
  }
  ASSERT_GE(latest.history.size(), 2u);
  EXPECT_LT(latest.history.size(), 100u);
  auto stored = rayx::detail::Unpack<td::LatestReport>(packed);
  ASSERT_EQ(stored.history.size(), latest.history.size());
  for (size_t i = 0; i < stored.history.size(); ++i) {  // the newest, oldest first
    EXPECT_EQ(stored.history[i].at("step"), 100 - stored.history.size() + i);
  }
  EXPECT_EQ(stored.metrics.at("step"), 99);
  EXPECT_EQ(stored.reports, 100);

  td::LatestReport narrow;  // small reports: the last kMaxHistory
  for (int step = 0; step < 1500; ++step) {
    report(narrow, {{"loss", 1.0 / (step + 1)}, {"step", step}});
  }
  ASSERT_EQ(narrow.history.size(), td::kMaxHistory);
  EXPECT_EQ(narrow.history.front().at("step"), 500);
}

TEST_F(Train, WeightsEqualOneProcessForOneTwoAndFourRanks) {
  StartCluster(2, 2);
  for (int n : {1, 2, 4}) {
    linear_sgd::Config config;
    config.epochs = 10;
    train::ScalingConfig scaling;
    scaling.num_workers = n;
    scaling.placement_strategy = rayx::PlacementStrategy::SPREAD;
    train::RunConfig run;
    run.name = "exact-" + std::to_string(n);
    train::Result r = train::DataParallelTrainer(TrainLinear, config, scaling, run).Fit();
    ASSERT_EQ(r.error, "") << n << " ranks";
    EXPECT_EQ(r.num_workers, n);
    EXPECT_EQ(r.num_restarts, 0);
    EXPECT_LT(WorstDifference(r, config), 1e-9) << n << " ranks";
    ASSERT_EQ(r.metrics_history.size(), 10u);
    EXPECT_LT(r.metrics_history.back().at("loss"), r.metrics_history.front().at("loss"));
    ASSERT_TRUE(r.checkpoint.has_value());
    EXPECT_FALSE(r.checkpoint->id().empty());
  }
}

TEST_F(Train, KilledRankResumesFromTheLatestCheckpointWithTheSameWeights) {
  StartCluster(2, 2);
  linear_sgd::Config config;
  config.epochs = 12;
  config.epoch_ms = 250;
  train::ScalingConfig scaling;
  scaling.num_workers = 2;
  scaling.placement_strategy = rayx::PlacementStrategy::SPREAD;
  train::RunConfig run;
  run.name = "resume";
  train::FailureConfig failure;
  failure.max_failures = 2;
  auto fit = std::async(std::launch::async, [&] {
    return train::DataParallelTrainer(TrainLinear, config, scaling, run, failure).Fit();
  });
  int victim = RankPid("resume", 1);
  // Let a few epochs (and checkpoints) pass, then kill rank 1 mid-epoch.
  ASSERT_TRUE(WaitUntil([&] { return HasReported("resume"); }, 30000));
  std::this_thread::sleep_for(std::chrono::milliseconds(3 * config.epoch_ms));
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  train::Result r = fit.get();
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.num_restarts, 1);
  EXPECT_LT(WorstDifference(r, config), 1e-9);
  EXPECT_TRUE(WaitUntil([&] { return !rayx::testing::PidAlive(victim); }, 5000));
  // It resumed rather than starting over: fewer reports than two full runs.
  EXPECT_LT(r.metrics_history.size(), 2u * config.epochs);
}

TEST_F(Train, WithoutRestartsAKilledRankFailsTheRunNamingIt) {
  StartCluster(2, 2);
  linear_sgd::Config config;
  config.epochs = 40;
  config.epoch_ms = 200;
  train::ScalingConfig scaling;
  scaling.num_workers = 2;
  train::RunConfig run;
  run.name = "no-restarts";
  auto fit = std::async(std::launch::async, [&] {
    return train::DataParallelTrainer(TrainLinear, config, scaling, run).Fit();
  });
  int victim = RankPid("no-restarts", 1);
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  train::Result r = fit.get();
  EXPECT_TRUE(Contains(r.error, "rank 1")) << r.error;
  EXPECT_EQ(r.num_restarts, 0);
}

TEST_F(Train, ALoopThatThrowsIsReportedWithItsRankAndMessage) {
  StartCluster(2, 0);
  train::ScalingConfig scaling;
  scaling.num_workers = 2;
  train::Result r =
      train::DataParallelTrainer(ThrowingLoop, linear_sgd::Config{}, scaling).Fit();
  EXPECT_TRUE(Contains(r.error, "rank 1")) << r.error;
  EXPECT_TRUE(Contains(r.error, "rank one gives up")) << r.error;
}

// STRICT_PACK puts every rank on one node: two nodes of 2 CPUs hold 2 ranks,
// not 4, and the run trains with 2 (it ended as infeasible when the free CPUs
// of all nodes were added up).
TEST_F(Train, AnElasticStrictPackRunSizesItselfToOneNode) {
  StartCluster(2, 2);
  linear_sgd::Config config;
  config.epochs = 3;
  train::ScalingConfig scaling;
  scaling.min_workers = 2;
  scaling.max_workers = 4;
  scaling.placement_strategy = rayx::PlacementStrategy::STRICT_PACK;
  train::RunConfig run;
  run.name = "strict-pack";
  train::Result r =
      train::DataParallelTrainer(TrainLinear, config, scaling, run, {.max_failures = 0}).Fit();
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.num_workers, 2);
  EXPECT_EQ(r.num_restarts, 0);
  EXPECT_EQ(r.metrics.at("world_size"), 2);
  EXPECT_LT(WorstDifference(r, config), 1e-9);
}

TEST_F(Train, ElasticRunGrowsWhenANodeJoinsAndShrinksWhenOneDies) {
  StartCluster(2, 0);
  linear_sgd::Config config;
  config.epochs = 60;
  config.epoch_ms = 100;
  train::ScalingConfig scaling;
  scaling.min_workers = 2;
  scaling.max_workers = 4;
  train::RunConfig run;
  run.name = "elastic";
  // Four ranks wait after their first report for this test to kill a node.
  rayx::kv::Put("train-test/elastic/hold-at/4", "yes");
  auto fit = std::async(std::launch::async, [&] {
    return train::DataParallelTrainer(TrainLinear, config, scaling, run, {.max_failures = 3}).Fit();
  });
  RankPid("elastic", 1);
  // The two missing workers are the run's demand (what `rayx status` shows).
  rayx::Status demanded = cluster_->WaitFor(
      [](const rayx::ClusterStatus& s) {
        for (const auto& [shape, count] : s.pending_demands) {
          if (Contains(shape, "placement group") && Contains(shape, " x 2]")) return true;
        }
        return false;
      },
      10000);
  EXPECT_TRUE(demanded.ok()) << "no demand for the missing workers: " << demanded;
  auto joined = cluster_->AddNode({.num_cpus = 2, .extra_args = {"--node-ip-address", "127.0.0.2"}});
  ASSERT_TRUE(joined.ok()) << joined.status();
  // The run restarts with four ranks from its checkpoint...
  rayx::kv::Wait("train-test/elastic/reported-size/4", 60000);
  // ...and when that node dies, goes on with the two that fit.
  ASSERT_TRUE(cluster_->KillNode(*joined).ok());
  train::Result r = fit.get();
  ASSERT_EQ(r.error, "");
  bool saw_four = false;
  for (const auto& m : r.metrics_history) saw_four = saw_four || m.at("world_size") == 4;
  EXPECT_TRUE(saw_four) << "the run never grew to 4 ranks";
  EXPECT_EQ(r.num_workers, 2);
  EXPECT_EQ(r.metrics.at("world_size"), 2);
  EXPECT_LT(WorstDifference(r, config), 1e-9);
}

// Files named *`suffix` (or folders, `dirs`) directly in `dir`.
size_t CountEntries(const std::filesystem::path& dir, const std::string& suffix, bool dirs) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (dirs ? entry.is_directory() && name.rfind(suffix, 0) == 0
             : name.size() >= suffix.size() &&
                   name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      ++n;
    }
  }
  return n;
}

// A run keeps its last num_to_keep checkpoints: the head deletes the packages
// of older ones (num_replicas 0: the head's package store; a shared
// storage_path's copies likewise), and the latest still resumes a run. (Kept
// by the nodes, the default: checkpoint_test.)
TEST_F(Train, OnlyTheLastCheckpointsAreKept) {
  StartCluster(2, 0);
  linear_sgd::Config config;
  config.epochs = 6;  // a checkpoint (with other weights) every epoch
  train::ScalingConfig scaling;
  scaling.num_workers = 2;
  train::RunConfig run{.name = "keep-two", .num_to_keep = 2, .num_replicas = 0};
  train::Result r = train::DataParallelTrainer(TrainLinear, config, scaling, run).Fit();
  ASSERT_EQ(r.error, "");
  std::filesystem::path packages;
  for (const auto& entry : std::filesystem::directory_iterator(cluster_->temp_dir())) {
    if (entry.path().filename().string().rfind("session_", 0) == 0) {
      packages = entry.path() / "packages";
    }
  }
  ASSERT_FALSE(packages.empty()) << "no session under " << cluster_->temp_dir();
  EXPECT_EQ(CountEntries(packages, ".tar", false), 2u)
      << "6 checkpoints reported, 2 to keep, in " << packages;

  // On a shared mount: the copies of the run's older checkpoints go too.
  std::filesystem::path storage = std::filesystem::path(cluster_->temp_dir()) / "shared";
  train::RunConfig shared{.name = "keep-one", .storage_path = storage.string(), .num_to_keep = 1};
  r = train::DataParallelTrainer(TrainLinear, config, scaling, shared).Fit();
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(CountEntries(storage / "keep-one", "checkpoint_", true), 1u);
  // The one kept is the latest.
  ASSERT_TRUE(r.checkpoint.has_value());
  const std::string& id = r.checkpoint->id();
  ASSERT_EQ(id.rfind("path:", 0), 0u) << id;
  EXPECT_TRUE(std::filesystem::is_directory(id.substr(5))) << id;

  // num_to_keep = 0 keeps every checkpoint (Python's None).
  train::RunConfig all{.name = "keep-all", .storage_path = storage.string(), .num_to_keep = 0};
  r = train::DataParallelTrainer(TrainLinear, config, scaling, all).Fit();
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(CountEntries(storage / "keep-all", "checkpoint_", true), 6u)
      << "6 checkpoints with different weights reported, all to keep";
}

TEST_F(Train, BadConfigsAreRefusedClearly) {
  StartCluster(2, 0);
  train::ScalingConfig zero;
  zero.num_workers = 0;
  try {
    train::DataParallelTrainer(TrainLinear, linear_sgd::Config{}, zero).Fit();
    ADD_FAILURE() << "num_workers = 0 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "num_workers")) << e.what();
  }
  train::ScalingConfig two;
  two.num_workers = 2;
  train::RunConfig negative{.num_to_keep = -1};
  try {
    train::DataParallelTrainer(TrainLinear, linear_sgd::Config{}, two, negative).Fit();
    ADD_FAILURE() << "num_to_keep = -1 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "num_to_keep")) << e.what();
  }
  train::ScalingConfig inverted;
  inverted.min_workers = 3;
  inverted.max_workers = 2;
  try {
    train::DataParallelTrainer(TrainLinear, linear_sgd::Config{}, inverted).Fit();
    ADD_FAILURE() << "min_workers > max_workers was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "max_workers")) << e.what();
  }
  train::ScalingConfig impossible;
  impossible.num_workers = 2;
  impossible.resources_per_worker = {{"CPU", 1}, {"tpu", 1}};
  auto start = std::chrono::steady_clock::now();
  train::Result r =
      train::DataParallelTrainer(TrainLinear, linear_sgd::Config{}, impossible).Fit();
  EXPECT_TRUE(Contains(r.error, "tpu")) << r.error;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20))
      << "an infeasible run must fail at once";
  EXPECT_THROW(train::DataParallelTrainer(NotRegistered, linear_sgd::Config{}), std::invalid_argument);
}

TEST_F(Train, DetachedActorGroupKeepsItsStateAndCollectiveGroupAcrossJobs) {
  StartCluster(2, 2);
  rayx::ActorGroupOptions options;
  options.name = "served";
  options.num_actors = 3;
  options.lifetime = rayx::Detached;
  auto group = rayx::ActorGroup<Model>::Create(Model::Create, options, 100);
  ASSERT_EQ(group.Size(), 3);
  std::vector<int> pids;
  for (int i = 0; i < 3; ++i) {
    pids.push_back(*group.Rank(i).Task(&Model::Pid).Remote().Get());
    EXPECT_EQ(*group.Rank(i).Task(&Model::Env).Remote(std::string("RANK")).Get(), std::to_string(i));
    EXPECT_EQ(*group.Rank(i).Task(&Model::Env).Remote(std::string("WORLD_SIZE")).Get(), "3");
    EXPECT_FALSE(group.Rank(i).Task(&Model::Env).Remote(std::string("MASTER_PORT")).Get()->empty());
  }
  // Ranks ordered by node: ranks of one node are contiguous.
  EXPECT_EQ(group.Info(0).node_rank, 0);
  EXPECT_LE(group.Info(1).node_rank, group.Info(2).node_rank);
  for (auto& r : group.Task(&Model::Add).Remote(5)) EXPECT_EQ(*r.Get(), 105);
  rayx::Shutdown();  // the job ends; the detached group stays

  Init();  // a second job
  auto again = rayx::GetActorGroup<Model>("served");
  ASSERT_EQ(again.Size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(*again.Rank(i).Task(&Model::Pid).Remote().Get(), pids[static_cast<size_t>(i)]);
    EXPECT_EQ(*again.Rank(i).Task(&Model::State).Remote().Get(), 5) << "state was lost";
  }
  auto sums = again.Task(&Model::Sum).Remote(int64_t{7});
  for (auto& s : sums) EXPECT_EQ(*s.Get(), 21) << "the collective group is not connected";
  again.Kill();
  EXPECT_THROW(rayx::GetActorGroup<Model>("served"), std::runtime_error);
  for (int pid : pids) {
    EXPECT_TRUE(WaitUntil([&] { return !rayx::testing::PidAlive(pid); }, 10000))
        << "rank pid " << pid << " still runs after Kill";
  }
}

// GPU ranks (fake GPUs: --num-gpus) see the group's devices on their node and
// know which is theirs: RankInfo::device is their GPU's position in
// CUDA_VISIBLE_DEVICES, in rank order, the same inside the rank and in the
// driver, and what RAYX_LOCAL_RANK says. (No collective group: NCCL needs a
// real GPU.)
TEST_F(Train, GpuRanksKnowTheirOwnDevice) {
  StartCluster(1, 0);
  auto gpus = cluster_->AddNode(
      {.num_cpus = 2, .num_gpus = 4, .extra_args = {"--node-ip-address", "127.0.0.2"}});
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  rayx::ActorGroupOptions options;
  options.num_actors = 3;
  options.resources = {{"GPU", 1}};
  options.collective = false;
  auto group = rayx::ActorGroup<Model>::Create(Model::Create, options, 0);
  ASSERT_EQ(group.Size(), 3);
  std::string visible;
  for (int i = 0; i < 3; ++i) {
    const rayx::RankInfo& info = group.Info(i);
    EXPECT_EQ(info.device, i) << "rank " << i;
    ASSERT_EQ(info.gpu_ids.size(), 1u);
    EXPECT_EQ(*group.Rank(i).Task(&Model::Device).Remote().Get(), i);
    EXPECT_EQ(*group.Rank(i).Task(&Model::Env).Remote(std::string("RAYX_LOCAL_RANK")).Get(),
              std::to_string(i));
    std::string devices =
        *group.Rank(i).Task(&Model::Env).Remote(std::string("CUDA_VISIBLE_DEVICES")).Get();
    if (i == 0) visible = devices;
    EXPECT_EQ(devices, visible) << "every rank sees the group's devices";
    // Its own GPU id is at its position in the list.
    std::vector<std::string> ids;
    for (size_t start = 0; start <= devices.size();) {
      size_t comma = devices.find(',', start);
      if (comma == std::string::npos) comma = devices.size();
      ids.push_back(devices.substr(start, comma - start));
      start = comma + 1;
    }
    ASSERT_EQ(ids.size(), 3u) << devices;
    EXPECT_EQ(ids[static_cast<size_t>(i)], std::to_string(info.gpu_ids[0])) << devices;
  }
  group.Kill();
}

// Two ranks on one GPU (half a GPU each) would fail inside NCCL ("Duplicate GPU
// detected"): a group with an NCCL collective group is refused before it
// connects, naming both ranks and the device, and leaves nothing behind (the
// GPU is free again for the next group). Without a collective group, sharing
// a GPU stays allowed (inference replicas).
TEST_F(Train, RanksSharingAGpuAreRefusedBeforeNccl) {
  StartCluster(1, 0);
  auto gpu = cluster_->AddNode(
      {.num_cpus = 2, .num_gpus = 1, .extra_args = {"--node-ip-address", "127.0.0.2"}});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  rayx::ActorGroupOptions halves;
  halves.num_actors = 2;
  halves.resources = {{"CPU", 0.5}, {"GPU", 0.5}};
  try {
    rayx::ActorGroup<Model>::Create(Model::Create, halves, 0);
    ADD_FAILURE() << "two ranks sharing a GPU were given an NCCL group";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "ranks 0 and 1 both hold GPU 0 of node 127.0.0.2")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "Duplicate GPU detected")) << e.what();
  }
  rayx::ActorGroupOptions whole;
  whole.num_actors = 1;
  whole.resources = {{"GPU", 1}};
  whole.collective = false;
  whole.timeout_ms = 10000;
  auto one = rayx::ActorGroup<Model>::Create(Model::Create, whole, 0);  // the GPU was freed
  one.Kill();
  halves.collective = false;
  auto shared = rayx::ActorGroup<Model>::Create(Model::Create, halves, 0);
  EXPECT_EQ(shared.Info(0).gpu_ids, shared.Info(1).gpu_ids);
  shared.Kill();
}

// The group's collective operations time out after collective_timeout_ms for
// the group's whole life, not after what was left of Create's deadline.
TEST_F(Train, ActorGroupCollectiveOperationsTimeOutAfterTheCollectiveTimeout) {
  StartCluster(2, 0);
  rayx::ActorGroupOptions options;
  options.num_actors = 2;
  options.collective_timeout_ms = 2000;  // Create's own timeout_ms stays 60 s
  auto group = rayx::ActorGroup<Model>::Create(Model::Create, options, 0);
  const auto start = std::chrono::steady_clock::now();
  try {
    group.Rank(0).Task(&Model::Sum).Remote(int64_t{1}).Get(30000);  // rank 1 never calls
    ADD_FAILURE() << "an AllReduce without rank 1 succeeded";
  } catch (const rayx::GetTimeoutError& e) {
    ADD_FAILURE() << "the AllReduce did not time out after 2000 ms: " << e.what();
  } catch (const rayx::TaskError& e) {
    EXPECT_TRUE(Contains(e.what(), "timed out after 2000 ms waiting for rank 1")) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  group.Kill();
}

TEST_F(Train, ActorGroupBadInput) {
  StartCluster(2, 0);
  rayx::ActorGroupOptions none;
  none.num_actors = 0;
  EXPECT_THROW(rayx::ActorGroup<Model>::Create(Model::Create, none, 1), std::invalid_argument);
  rayx::ActorGroupOptions nameless;
  nameless.lifetime = rayx::Detached;
  EXPECT_THROW(rayx::ActorGroup<Model>::Create(Model::Create, nameless, 1), std::invalid_argument);
  rayx::ActorGroupOptions impossible;
  impossible.num_actors = 2;
  impossible.resources = {{"CPU", 1}, {"GPU", 1}};
  try {
    rayx::ActorGroup<Model>::Create(Model::Create, impossible, 1);
    ADD_FAILURE() << "an infeasible group was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(Contains(e.what(), "GPU")) << e.what();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("RAYX_WORKER_MODE")) rayx::Init(argc, argv);  // serves calls, never returns
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
