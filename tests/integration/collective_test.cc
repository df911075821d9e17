// Collective groups over actors on a real two-node loopback cluster: Gloo over
// TCP between worker processes, rendezvous through the head's KV. Exact results
// for every operation and type, rank order, two groups at once, re-creation,
// failures (a SIGKILLed rank, a rank that never calls) and bad input. This
// binary is also its workers' program (RAYX_WORKER_MODE).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <thread>

#include "rayx/collective.h"
#include "rayx/kv.h"
#include "rayx/rayx.h"
#include "util/local_cluster.h"
#include "util/subprocess.h"
#include "util/test_helpers.h"

namespace {

namespace col = rayx::collective;

using rayx::testing::Env;

// Rank r's element i: small integers, so sums and products are exact in every type.
template <typename T>
T Value(int rank, size_t i) {
  return static_cast<T>((rank + 1) * static_cast<int>(i % 5 + 1));
}

template <typename T>
std::vector<T> Input(int rank, size_t n) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = Value<T>(rank, i);
  return v;
}

std::string Fail(const std::string& what, size_t n, const char* type) {
  return what + " (n=" + std::to_string(n) + ", " + type + ") gave a wrong result; ";
}

// Every operation on `n` elements of T, each checked against the value
// computed here; returns what was wrong (empty when all is right).
template <typename T>
std::string CheckType(const std::string& g, size_t n, const char* type) {
  const int rank = col::GetRank(g), world = col::GetWorldSize(g);
  std::string wrong;
  // AllReduce with each op.
  for (auto op : {col::ReduceOp::kSum, col::ReduceOp::kProduct, col::ReduceOp::kMin,
                  col::ReduceOp::kMax}) {
    if (op == col::ReduceOp::kProduct && n > 1000) continue;
    std::vector<T> v = Input<T>(rank, n);
    col::AllReduce(v, op, g);
    for (size_t i = 0; i < n; ++i) {
      T want = Value<T>(0, i);
      for (int r = 1; r < world; ++r) {
        T x = Value<T>(r, i);
        if (op == col::ReduceOp::kSum) want = static_cast<T>(want + x);
        if (op == col::ReduceOp::kProduct) want = static_cast<T>(want * x);
        if (op == col::ReduceOp::kMin) want = std::min(want, x);
        if (op == col::ReduceOp::kMax) want = std::max(want, x);
      }
      if (v[i] != want) {
        wrong += Fail(std::string("AllReduce ") + col::ReduceOpName(op), n, type);
        break;
      }
    }
  }
  // AllGather: rank order.
  std::vector<T> all = col::AllGather(Input<T>(rank, n), g);
  if (all.size() != n * static_cast<size_t>(world)) wrong += Fail("AllGather size", n, type);
  for (int r = 0; r < world && all.size() == n * static_cast<size_t>(world); ++r) {
    if (n > 0 && all[static_cast<size_t>(r) * n] != Value<T>(r, 0)) {
      wrong += Fail("AllGather order", n, type);
      break;
    }
  }
  // Broadcast from the last rank.
  std::vector<T> b = rank == world - 1 ? Input<T>(world - 1, n) : std::vector<T>(n, T{});
  col::Broadcast(b, world - 1, g);
  if (b != Input<T>(world - 1, n)) wrong += Fail("Broadcast", n, type);
  // Reduce to rank 0.
  std::vector<T> red = Input<T>(rank, n);
  col::Reduce(red, col::ReduceOp::kSum, 0, g);
  if (rank == 0) {
    for (size_t i = 0; i < n; ++i) {
      T want{};
      for (int r = 0; r < world; ++r) want = static_cast<T>(want + Value<T>(r, i));
      if (red[i] != want) {
        wrong += Fail("Reduce", n, type);
        break;
      }
    }
  } else if (red != Input<T>(rank, n)) {
    wrong += Fail("Reduce (non-root changed)", n, type);
  }
  // ReduceScatter: rank r gets its slice of the sum.
  std::vector<T> scattered = col::ReduceScatter(Input<T>(rank, n), col::ReduceOp::kSum, g);
  size_t base = n / static_cast<size_t>(world), extra = n % static_cast<size_t>(world);
  size_t begin = static_cast<size_t>(rank) * base + std::min<size_t>(static_cast<size_t>(rank), extra);
  size_t len = base + (static_cast<size_t>(rank) < extra ? 1 : 0);
  if (scattered.size() != len) {
    wrong += Fail("ReduceScatter size", n, type);
  } else {
    for (size_t i = 0; i < len; ++i) {
      T want{};
      for (int r = 0; r < world; ++r) want = static_cast<T>(want + Value<T>(r, begin + i));
      if (scattered[i] != want) {
        wrong += Fail("ReduceScatter", n, type);
        break;
      }
    }
  }
  // Send/Recv around the ring.
  if (world > 1) {
    int to = (rank + 1) % world, from = (rank + world - 1) % world;
    std::vector<T> got(n);
    if (rank % 2 == 0) {
      col::Send(Input<T>(rank, n), to, g);
      col::Recv(got, from, g);
    } else {
      col::Recv(got, from, g);
      col::Send(Input<T>(rank, n), to, g);
    }
    if (got != Input<T>(from, n)) wrong += Fail("Send/Recv", n, type);
  }
  col::Barrier(g);
  return wrong;
}

class Member {
 public:
  static Member* Create() { return new Member(); }
  int Pid() { return getpid(); }
  std::string Node() { return Env("RAYX_NODE_IP"); }
  int Rank(std::string g) { return col::GetRank(g); }
  int WorldSize(std::string g) { return col::GetWorldSize(g); }

  // Every op, type and size (0, 1, odd); 16 MiB once.
  std::string CheckAll(std::string g) {
    std::string wrong;
    for (size_t n : {size_t{0}, size_t{1}, size_t{1001}}) {
      wrong += CheckType<int32_t>(g, n, "int32");
      wrong += CheckType<int64_t>(g, n, "int64");
      wrong += CheckType<float>(g, n, "float");
      wrong += CheckType<double>(g, n, "double");
    }
    std::vector<float> big(4 << 20, 1.0f);  // 16 MiB
    col::AllReduce(big, col::ReduceOp::kSum, g);
    const float world = static_cast<float>(col::GetWorldSize(g));
    for (float x : big) {
      if (x != world) {
        wrong += "AllReduce of 16 MiB gave a wrong result; ";
        break;
      }
    }
    return wrong;
  }

  // Marks in the KV that it entered, then allreduces; returns the error text
  // ("" when it succeeded) and how long the call took in ms.
  std::pair<std::string, int64_t> EnterAllReduce(std::string g, std::string marker) {
    std::vector<float> v(1024, 1.0f);
    rayx::kv::Put(marker + "/" + std::to_string(col::GetRank(g)), "in");
    auto start = std::chrono::steady_clock::now();
    std::string error;
    try {
      col::AllReduce(v, col::ReduceOp::kSum, g);
    } catch (const col::CollectiveError& e) {
      error = e.what();
    }
    return {error, std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count()};
  }

  // An AllReduce whose length depends on the rank.
  std::string MismatchedAllReduce(std::string g) {
    std::vector<double> v(static_cast<size_t>(10 + col::GetRank(g)), 1.0);
    try {
      col::AllReduce(v, col::ReduceOp::kSum, g);
    } catch (const col::CollectiveError& e) {
      return e.what();
    }
    return "";
  }

  // Makes group `g` from inside this actor; an AllReduce over it gives the
  // world's sum of (rank + 1), returned.
  int JoinAndSum(int world, int rank, std::string g) {
    col::InitCollectiveGroup(world, rank, {.name = g, .timeout_ms = 30000});
    std::vector<int32_t> v{rank + 1};
    col::AllReduce(v, col::ReduceOp::kSum, g);
    return v[0];
  }

  bool Leave(std::string g) {
    col::DestroyCollectiveGroup(g);
    return col::IsGroupInitialized(g);
  }

  std::string InitOutOfRange() {
    try {
      col::InitCollectiveGroup(2, 5, {.name = "out-of-range"});
    } catch (const col::CollectiveError& e) {
      return e.what();
    }
    return "";
  }
};

RAYX_REMOTE(Member::Create, &Member::Pid, &Member::Node, &Member::Rank, &Member::WorldSize,
            &Member::CheckAll, &Member::EnterAllReduce, &Member::MismatchedAllReduce,
            &Member::JoinAndSum, &Member::Leave, &Member::InitOutOfRange);

using rayx::testing::Contains;
using rayx::testing::LocalCluster;

using rayx::testing::WaitUntil;

class Collective : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    LocalCluster::Options options;
    options.head_node.num_cpus = 4;
    auto cluster = LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster).release();
    auto node = cluster_->AddNode({.num_cpus = 4, .extra_args = {"--node-ip-address", "127.0.0.2"}});
    ASSERT_TRUE(node.ok()) << node.status();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(cluster_, nullptr);
    rayx::Options init;
    init.address = cluster_->address();
    init.token = cluster_->token();
    rayx::Init(init);
  }
  void TearDown() override {
    if (rayx::IsInitialized()) rayx::Shutdown();
    for (int pid : pids_) {
      EXPECT_TRUE(WaitUntil([&] { return !rayx::testing::PidAlive(pid); }, 10000))
          << "worker pid " << pid << " is still running after the job ended";
    }
  }
  // `n` actors, SPREAD over the two nodes.
  std::vector<rayx::ActorHandle<Member>> Members(int n) {
    std::vector<rayx::ActorHandle<Member>> out;
    for (int i = 0; i < n; ++i) {
      out.push_back(rayx::Actor(Member::Create)
                        .SetSchedulingStrategy(rayx::SpreadSchedulingStrategy{})
                        .Remote());
      pids_.push_back(*out.back().Task(&Member::Pid).Remote().Get());
    }
    return out;
  }
  static LocalCluster* cluster_;
  std::vector<int> pids_;
};
LocalCluster* Collective::cluster_ = nullptr;

TEST_F(Collective, EveryOperationIsExactOnFourRanksOverTwoNodes) {
  auto members = Members(4);
  std::set<std::string> nodes;
  for (auto& m : members) nodes.insert(*m.Task(&Member::Node).Remote().Get());
  EXPECT_EQ(nodes.size(), 2u) << "the four actors should span both nodes";
  col::CreateCollectiveGroup(members, {.name = "exact", .timeout_ms = 30000});
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(*members[i].Task(&Member::Rank).Remote(std::string("exact")).Get(), i)
        << "rank order must equal the list order";
    EXPECT_EQ(*members[i].Task(&Member::WorldSize).Remote(std::string("exact")).Get(), 4);
  }
  std::vector<rayx::ObjectRef<std::string>> checks;
  for (auto& m : members) checks.push_back(m.Task(&Member::CheckAll).Remote(std::string("exact")));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(*checks[i].Get(), "") << "rank " << i;
  EXPECT_FALSE(rayx::kv::List("exact/", "collective").empty());
  col::DestroyCollectiveGroup("exact");
  EXPECT_EQ(rayx::kv::List("exact/", "collective"), std::vector<std::string>{})
      << "the group's rendezvous keys outlive it";
}

TEST_F(Collective, TwoGroupsAtOnceAndAGroupMadeAgain) {
  auto members = Members(4);
  col::CreateCollectiveGroup({members[0], members[1]}, {.name = "left"});
  col::CreateCollectiveGroup({members[3], members[2]}, {.name = "right"});
  EXPECT_EQ(*members[3].Task(&Member::Rank).Remote(std::string("right")).Get(), 0);
  std::vector<rayx::ObjectRef<std::string>> checks = {
      members[0].Task(&Member::CheckAll).Remote(std::string("left")),
      members[1].Task(&Member::CheckAll).Remote(std::string("left")),
      members[2].Task(&Member::CheckAll).Remote(std::string("right")),
      members[3].Task(&Member::CheckAll).Remote(std::string("right"))};
  for (auto& c : checks) EXPECT_EQ(*c.Get(), "");
  col::DestroyCollectiveGroup("left");
  // The same name again, with other ranks: a fresh attempt, never the old keys.
  col::CreateCollectiveGroup({members[1], members[0]}, {.name = "left"});
  EXPECT_EQ(*members[1].Task(&Member::Rank).Remote(std::string("left")).Get(), 0);
  auto a = members[0].Task(&Member::CheckAll).Remote(std::string("left"));
  auto b = members[1].Task(&Member::CheckAll).Remote(std::string("left"));
  EXPECT_EQ(*a.Get(), "");
  EXPECT_EQ(*b.Get(), "");
}

// Long-lived actors make a group again and again from inside (an inference
// service re-forming its group): the head's KV keeps the keys of its last
// attempts only, not of every attempt it ever made.
TEST_F(Collective, AGroupMadeAgainInsideActorsLeavesOnlyItsLastAttemptsKeys) {
  auto members = Members(2);
  const int attempts = 5;
  for (int i = 1; i <= attempts; ++i) {
    auto rank1 = members[1].Task(&Member::JoinAndSum).Remote(2, 1, std::string("again"));
    auto rank0 = members[0].Task(&Member::JoinAndSum).Remote(2, 0, std::string("again"));
    ASSERT_EQ(*rank0.Get(), 3) << "attempt " << i;
    ASSERT_EQ(*rank1.Get(), 3) << "attempt " << i;
    for (auto& m : members) ASSERT_FALSE(*m.Task(&Member::Leave).Remote(std::string("again")).Get());
  }
  auto keys = rayx::kv::List("again/", "collective");
  auto under = [&](const std::string& prefix) {
    return std::count_if(keys.begin(), keys.end(),
                         [&](const std::string& k) { return k.rfind(prefix, 0) == 0; });
  };
  for (int old = 1; old <= attempts - 2; ++old) {
    EXPECT_EQ(under("again/a" + std::to_string(old) + "/"), 0)
        << "rendezvous keys of attempt " << old << " are left";
    EXPECT_EQ(under("again/attempts/" + std::to_string(old) + "/"), 0)
        << "agreement keys of attempt " << old << " are left";
  }
  // The last attempts' keys are there (so the count above means something).
  EXPECT_GT(under("again/a" + std::to_string(attempts) + "/"), 0);
  EXPECT_EQ(under("again/attempts/" + std::to_string(attempts) + "/"), 3)  // world, 2 ranks
      << [&] {
           std::string all;
           for (const auto& k : keys) all += k + " ";
           return all;
         }();
}

TEST_F(Collective, KilledRankFailsTheOthersPromptlyNamingIt) {
  auto members = Members(4);
  const int64_t timeout_ms = 10000;
  col::CreateCollectiveGroup(members, {.name = "doomed", .timeout_ms = timeout_ms});
  std::vector<rayx::ObjectRef<std::pair<std::string, int64_t>>> calls;
  for (int i = 1; i < 4; ++i) {
    calls.push_back(members[i].Task(&Member::EnterAllReduce)
                        .Remote(std::string("doomed"), std::string("doomed-entered")));
  }
  for (int i = 1; i < 4; ++i) rayx::kv::Wait("doomed-entered/" + std::to_string(i), 10000);
  ASSERT_EQ(::kill(pids_[0], SIGKILL), 0);
  for (auto& call : calls) {
    auto [error, took_ms] = *call.Get();
    EXPECT_TRUE(Contains(error, "rank 0")) << "the error must name the dead rank: " << error;
    EXPECT_TRUE(Contains(error, "doomed")) << error;
    EXPECT_LT(took_ms, timeout_ms + 1000) << error;
  }
  EXPECT_TRUE(WaitUntil([&] { return !rayx::testing::PidAlive(pids_[0]); }, 5000));
}

TEST_F(Collective, RankThatNeverCallsTimesTheOthersOut) {
  auto members = Members(3);
  const int64_t timeout_ms = 2000;
  col::CreateCollectiveGroup(members, {.name = "silent", .timeout_ms = timeout_ms});
  auto a = members[1].Task(&Member::EnterAllReduce).Remote(std::string("silent"), std::string("silent-in"));
  auto b = members[2].Task(&Member::EnterAllReduce).Remote(std::string("silent"), std::string("silent-in"));
  // The rank that entered first times out; its abort ends the other's call
  // at once, maybe a little before that one's own deadline: the last to end
  // waited the whole timeout.
  int64_t longest_ms = 0;
  for (auto* ref : {&a, &b}) {
    auto [error, took_ms] = *ref->Get();
    EXPECT_TRUE(Contains(error, "silent")) << error;
    EXPECT_TRUE(Contains(error, "AllReduce")) << error;
    EXPECT_LT(took_ms, timeout_ms + 3000) << error;
    longest_ms = std::max(longest_ms, took_ms);
  }
  EXPECT_GE(longest_ms, timeout_ms - 100);
}

TEST_F(Collective, BadInputGetsClearErrors) {
  auto members = Members(2);
  // World size 0.
  try {
    col::CreateCollectiveGroup(std::vector<rayx::ActorHandle<Member>>{}, {.name = "empty"});
    ADD_FAILURE() << "an empty group was accepted";
  } catch (const col::CollectiveError& e) {
    EXPECT_TRUE(Contains(e.what(), "world size 0")) << e.what();
  }
  // An actor listed twice.
  try {
    col::CreateCollectiveGroup({members[0], members[0]}, {.name = "twice"});
    ADD_FAILURE() << "an actor listed twice was accepted";
  } catch (const col::CollectiveError& e) {
    EXPECT_TRUE(Contains(e.what(), "listed twice")) << e.what();
  }
  // Nothing half-made: the name is free for a good group.
  col::CreateCollectiveGroup({members[0], members[1]}, {.name = "twice"});
  // Lengths that differ across ranks: both ranks fail, naming the mismatch.
  auto x = members[0].Task(&Member::MismatchedAllReduce).Remote(std::string("twice"));
  auto y = members[1].Task(&Member::MismatchedAllReduce).Remote(std::string("twice"));
  for (auto* r : {&x, &y}) {
    std::string error = *r->Get();
    EXPECT_FALSE(error.empty()) << "a length mismatch went unnoticed";
    EXPECT_TRUE(Contains(error, "10") && Contains(error, "11")) << error;
  }
  // An unknown group.
  try {
    members[0].Task(&Member::Rank).Remote(std::string("nope")).Get();
    ADD_FAILURE() << "an unknown group was accepted";
  } catch (const rayx::TaskError& e) {
    EXPECT_TRUE(Contains(e.what(), "nope")) << e.what();
  }
  // A rank out of range.
  std::string out = *members[0].Task(&Member::InitOutOfRange).Remote().Get();
  EXPECT_TRUE(Contains(out, "rank 5")) << out;
  // KV limits name the limit.
  try {
    rayx::kv::Put(std::string(2000, 'k'), "v");
    ADD_FAILURE() << "a 2000-byte key was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "1024")) << e.what();
  }
  try {
    rayx::kv::Put("big", std::string((1 << 20) + 1, 'v'));
    ADD_FAILURE() << "a value over 1 MiB was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "1048576") || Contains(e.what(), "1 MiB")) << e.what();
  }
}

TEST_F(Collective, KvStoresWaitsListsAndDeletes) {
  EXPECT_TRUE(rayx::kv::Put("kvtest/a", "1"));
  EXPECT_FALSE(rayx::kv::Put("kvtest/a", "2", /*overwrite=*/false));
  EXPECT_EQ(rayx::kv::Get("kvtest/a").value_or(""), "1");
  EXPECT_FALSE(rayx::kv::Put("kvtest/a", "3"));
  EXPECT_EQ(rayx::kv::Get("kvtest/a").value_or(""), "3");
  std::thread later([] { rayx::kv::Put("kvtest/b", "late"); });
  EXPECT_EQ(rayx::kv::Wait("kvtest/b", 10000), "late");
  later.join();
  EXPECT_EQ(rayx::kv::List("kvtest/"), (std::vector<std::string>{"kvtest/a", "kvtest/b"}));
  EXPECT_TRUE(rayx::kv::Delete("kvtest/a"));
  EXPECT_FALSE(rayx::kv::Delete("kvtest/a"));
  EXPECT_FALSE(rayx::kv::Get("kvtest/a").has_value());
  EXPECT_THROW(rayx::kv::Wait("kvtest/never", 200), rayx::GetTimeoutError);
  rayx::kv::Delete("kvtest/b");
}

// List pages through the head (1000 keys a call) and DeletePrefix deletes in
// as many calls as it takes.
TEST_F(Collective, KvListsAndDeletesByPrefixPastOneHeadCallsWorth) {
  const int n = 2500;
  for (int i = 0; i < n; ++i) {
    char key[32];
    std::snprintf(key, sizeof key, "many/%05d", i);
    rayx::kv::Put(key, "", true, "kvtest");
  }
  rayx::kv::Put("many-other", "", true, "kvtest");
  auto keys = rayx::kv::List("many/", "kvtest");
  ASSERT_EQ(keys.size(), static_cast<size_t>(n));
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), keys.size());
  EXPECT_EQ(rayx::kv::DeletePrefix("many/", "kvtest"), static_cast<size_t>(n));
  EXPECT_TRUE(rayx::kv::List("many/", "kvtest").empty());
  EXPECT_TRUE(rayx::kv::Get("many-other", "kvtest").has_value());
  EXPECT_THROW(rayx::kv::DeletePrefix("", "kvtest"), std::invalid_argument);
  EXPECT_TRUE(rayx::kv::Get("many-other", "kvtest").has_value());
  rayx::kv::Delete("many-other", "kvtest");
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("RAYX_WORKER_MODE")) rayx::Init(argc, argv);  // serves calls, never returns
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
