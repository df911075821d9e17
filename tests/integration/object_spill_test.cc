// A node's object store has a capacity: on a real loopback cluster, Puts and
// task results past it are spilled to the node's disk and read back
// byte-exact, an object a call is reading is not spilled under it, the spill
// limit reached fails with ObjectStoreFullError and the figures, and a killed
// agent's spilled objects go with it. This test binary
// is also the workers' program (RAYX_WORKER_MODE).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "rayx/rayx.h"
#include "util/local_cluster.h"
#include "util/test_helpers.h"

namespace {

constexpr int64_t kMiB = 1 << 20;

// Object `seed`'s bytes: a pattern of its own, so a mix-up cannot pass.
std::string Pattern(int64_t size, int seed) {
  std::string out(static_cast<size_t>(size), static_cast<char>(seed * 7 + 1));
  for (int64_t i = 0; i < size; i += 4096) {
    out[static_cast<size_t>(i)] = static_cast<char>(seed);
    out[static_cast<size_t>(i + 1)] = static_cast<char>(i / 4096);
  }
  return out;
}
size_t HashOf(std::string_view bytes) { return std::hash<std::string_view>()(bytes); }

rayx::Bytes MakePattern(int64_t size, int seed) { return rayx::Bytes{Pattern(size, seed)}; }
RAYX_REMOTE(MakePattern);

// Puts a copy of its argument, which its node's store has room for only if
// the argument (mapped in place, read by this call) were spilled. The Put's
// error, or "" when it was stored.
std::string PutWhileReading(rayx::Bytes arg) {
  try {
    rayx::Put(rayx::Bytes{std::move(arg.data)});
    return "";
  } catch (const rayx::ObjectStoreFullError& e) {
    return e.what();
  }
}
RAYX_REMOTE(PutWhileReading);

}  // namespace

namespace rayx::object_spill_test {

using rayx::testing::LocalCluster;
namespace fs = std::filesystem;

constexpr int64_t kHeadStore = 256 * kMiB;
constexpr int64_t kHeadSpillLimit = 1024 * kMiB;
constexpr int64_t kSmallStore = 64 * kMiB;
constexpr int64_t kSmallSpillLimit = 128 * kMiB;

class ObjectSpill : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    LocalCluster::Options options;
    options.head_node.num_cpus = 1;
    options.head_node.extra_args = {"--object-store-memory", std::to_string(kHeadStore),
                                    "--object-spill-limit", std::to_string(kHeadSpillLimit)};
    auto cluster = LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
    // A node with a small store, and the only "small" resource.
    auto small = cluster_->AddNode(
        {.num_cpus = 1,
         .resources = R"({"small": 1})",
         .extra_args = {"--object-store-memory", std::to_string(kSmallStore),
                        "--object-spill-limit", std::to_string(kSmallSpillLimit)}});
    ASSERT_TRUE(small.ok()) << small.status();
    small_ = new rayx::testing::NodeHandle(*small);
  }
  static void TearDownTestSuite() {
    delete small_;
    delete cluster_;
  }
  void SetUp() override {
    ASSERT_TRUE(cluster_);
    rayx::Options options;
    options.address = cluster_->address();
    options.token = cluster_->token();
    rayx::Init(options);
  }
  void TearDown() override { rayx::Shutdown(); }

  static const NodeInfo* NodeOf(const ClusterStatus& s, const std::string& node_id) {
    for (const auto& n : s.nodes) {
      if (n.alive && n.node_id.Hex() == node_id) return &n;
    }
    return nullptr;
  }
  // A node's store figures, for failure messages.
  static std::string Figures(const std::string& node_id) {
    auto s = cluster_->GetStatus();
    if (!s.ok()) return s.status().ToString();
    const NodeInfo* n = NodeOf(*s, node_id);
    if (n == nullptr) return "node " + node_id + " is not alive";
    return "stored " + std::to_string(n->object_store_bytes) + " in " +
           std::to_string(n->object_store_objects) + " of " +
           std::to_string(n->object_store_capacity) + ", spilled " +
           std::to_string(n->object_spilled_bytes) + " in " +
           std::to_string(n->object_spilled_objects);
  }
  // The spill directories (rayx-spill-*) of this cluster's nodes.
  static std::vector<fs::path> SpillDirs() {
    std::vector<fs::path> out;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(cluster_->temp_dir(), ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory() && it->path().filename().string().rfind("rayx-spill-", 0) == 0) {
        out.push_back(it->path());
        it.disable_recursion_pending();
      }
    }
    return out;
  }

  static LocalCluster* cluster_;
  static rayx::testing::NodeHandle* small_;
};
LocalCluster* ObjectSpill::cluster_ = nullptr;
rayx::testing::NodeHandle* ObjectSpill::small_ = nullptr;

// The driver's node has a 256 MiB store: 1 GiB of Puts all come back
// byte-exact, most from the spill directory; past the spill limit a Put
// fails with the figures and nothing stored before is lost; freed, they go
// from the store and the disk.
TEST_F(ObjectSpill, PutsPastTheStoreAreSpilledAndReadBackThenTheSpillLimitRefuses) {
  constexpr int kPuts = 16;
  constexpr int64_t kSize = 64 * kMiB;
  std::vector<rayx::ObjectRef<rayx::Bytes>> refs;
  std::vector<size_t> hashes;
  for (int i = 0; i < kPuts; ++i) {
    rayx::Bytes value{Pattern(kSize, i)};
    hashes.push_back(HashOf(value.data));
    refs.push_back(rayx::Put(std::move(value)));
  }
  const std::string head = cluster_->head_node().node_id;
  // The head's figures, once its agent has counted every Put (a count taken
  // while the last one was written sees it as a file being written): within
  // its capacity, the rest spilled.
  NodeInfo counted;
  ASSERT_TRUE(cluster_
                  ->WaitFor(
                      [&](const ClusterStatus& s) {
                        const NodeInfo* n = NodeOf(s, head);
                        if (n == nullptr || n->object_store_objects + n->object_spilled_objects !=
                                                static_cast<uint64_t>(kPuts)) {
                          return false;
                        }
                        counted = *n;
                        return true;
                      },
                      10000)
                  .ok())
      << Figures(head);
  EXPECT_EQ(counted.object_store_capacity, static_cast<uint64_t>(kHeadStore));
  EXPECT_LE(counted.object_store_bytes, static_cast<uint64_t>(kHeadStore));
  EXPECT_GE(counted.object_spilled_bytes, static_cast<uint64_t>(12 * kSize));
  for (int i = 0; i < kPuts; ++i) EXPECT_EQ(HashOf(refs[i].Get()->data), hashes[i]) << i;
  // `rayx list objects` shows it per node.
  auto listed = cluster_->RunCli({"list", "objects"});
  EXPECT_EQ(listed.exit_code, 0) << listed.Describe();
  EXPECT_TRUE(rayx::testing::Contains(listed.out, "256.00 MiB")) << listed.Describe();
  EXPECT_TRUE(rayx::testing::Contains(listed.out, "SPILLED")) << listed.Describe();

  // 256 MiB of store and 1 GiB of spill hold 20 of them: the 21st fails.
  std::string full;
  for (int i = kPuts; i < kPuts + 8 && full.empty(); ++i) {
    try {
      refs.push_back(rayx::Put(rayx::Bytes{Pattern(kSize, i)}));
    } catch (const rayx::ObjectStoreFullError& e) {
      full = e.what();
      EXPECT_EQ(i, 20);
    }
  }
  ASSERT_FALSE(full.empty()) << "no Put failed past the spill limit";
  EXPECT_TRUE(rayx::testing::Contains(full, "no room for 64.00 MiB")) << full;
  EXPECT_TRUE(rayx::testing::Contains(full, "of its limit 1.00 GiB (--object-spill-limit)"))
      << full;
  EXPECT_TRUE(rayx::testing::Contains(full, "job ")) << full;
  for (int i = 0; i < kPuts; ++i) EXPECT_EQ(HashOf(refs[i].Get()->data), hashes[i]) << i;

  // Freed: gone from the store and from the disk.
  refs.clear();
  EXPECT_TRUE(cluster_
                  ->WaitFor(
                      [&](const ClusterStatus& s) {
                        const NodeInfo* n = NodeOf(s, head);
                        return n && n->object_store_objects == 0 &&
                               n->object_spilled_bytes == 0;
                      },
                      15000)
                  .ok())
      << Figures(head);
}

// On the small node (64 MiB of store): a call whose 48 MiB argument is mapped
// from that store Puts 48 MiB more. Spilling the argument would free nothing
// while the call reads it, so the Put fails and says why; once the call
// ended, the same object is spilled to make room.
TEST_F(ObjectSpill, AnArgumentACallIsReadingIsNotSpilledUnderIt) {
  constexpr int64_t kSize = 48 * kMiB;
  auto held = rayx::Task(MakePattern).SetResources({{"small", 1}}).Remote(kSize, 50);
  std::string refused =
      *rayx::Task(PutWhileReading).SetResources({{"small", 1}}).Remote(held).Get();
  EXPECT_TRUE(rayx::testing::Contains(refused, "no room for 48.00 MiB")) << refused;
  EXPECT_TRUE(rayx::testing::Contains(refused, "1 object(s) of 48.00 MiB that processes are reading"))
      << refused;
  // Read no more: the next result on that node spills it, and both read back.
  auto next = rayx::Task(MakePattern).SetResources({{"small", 1}}).Remote(kSize, 51);
  EXPECT_EQ(HashOf(next.Get()->data), HashOf(Pattern(kSize, 51)));
  EXPECT_EQ(HashOf(held.Get()->data), HashOf(Pattern(kSize, 50)));
  const std::string small = small_->node_id;
  ASSERT_TRUE(cluster_->WaitFor(
                          [&](const ClusterStatus& s) {
                            const NodeInfo* n = NodeOf(s, small);
                            return n && n->object_spilled_objects == 1;
                          },
                          10000)
                  .ok())
      << Figures(small);
  // Freed, before the next test fills the node again.
  held = {};
  next = {};
  EXPECT_TRUE(cluster_
                  ->WaitFor(
                      [&](const ClusterStatus& s) {
                        const NodeInfo* n = NodeOf(s, small);
                        return n && n->object_store_objects == 0 &&
                               n->object_spilled_bytes == 0;
                      },
                      15000)
                  .ok())
      << Figures(small);
}

// Results on the small node (64 MiB of store, 128 of spill): past the store
// they are spilled and pulled from its disk by the driver; the one that finds
// the spill full too fails with ObjectStoreFullError. Then the node's agent is
// killed: its spilled objects and its store go with it.
TEST_F(ObjectSpill, ResultsPastTheStoreAreSpilledAndAKilledAgentsSpillGoesWithIt) {
  constexpr int64_t kSize = 48 * kMiB;
  std::vector<rayx::ObjectRef<rayx::Bytes>> results;
  for (int i = 0; i < 3; ++i) {
    results.push_back(
        rayx::Task(MakePattern).SetResources({{"small", 1}}).Remote(kSize, 100 + i));
    EXPECT_EQ(HashOf(results.back().Get()->data), HashOf(Pattern(kSize, 100 + i))) << i;
  }
  // A fourth fits nowhere: its call fails, typed, with the figures.
  auto fourth = rayx::Task(MakePattern).SetResources({{"small", 1}}).Remote(kSize, 103);
  try {
    fourth.Get();
    ADD_FAILURE() << "a result past the spill limit was stored";
  } catch (const rayx::TaskError& e) {
    EXPECT_EQ(e.type(), "ObjectStoreFullError") << e.what();
    EXPECT_TRUE(rayx::testing::Contains(e.what(), "--object-spill-limit")) << e.what();
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(HashOf(results[i].Get()->data), HashOf(Pattern(kSize, 100 + i))) << i;
  }
  auto status = cluster_->GetStatus();
  ASSERT_TRUE(status.ok());
  const NodeInfo* small = NodeOf(*status, small_->node_id);
  ASSERT_NE(small, nullptr);
  const std::string store_dir = small->store_dir;
  std::vector<fs::path> spilled;
  for (const auto& dir : SpillDirs()) {
    if (!fs::is_empty(dir)) spilled.push_back(dir);
  }
  ASSERT_EQ(spilled.size(), 1u) << "the small node's spill directory holds its results";

  ASSERT_TRUE(cluster_->KillNode(*small_).ok());
  // Its reaper removes the store (RAM), the spill directory (disk) and then
  // their lock files, one after another: wait for the last of them.
  const std::string spill_lock = spilled[0].string() + ".lock";
  rayx::testing::WaitUntil(
      [&] {
        return !fs::exists(store_dir) && !fs::exists(spilled[0]) &&
               !fs::exists(spill_lock);
      },
      10000);
  EXPECT_FALSE(fs::exists(store_dir));
  EXPECT_FALSE(fs::exists(spilled[0]));
  EXPECT_FALSE(fs::exists(spill_lock));
}

}  // namespace rayx::object_spill_test

int main(int argc, char** argv) {
  if (std::getenv("RAYX_WORKER_MODE")) rayx::Init(argc, argv);  // serves tasks, never returns
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
