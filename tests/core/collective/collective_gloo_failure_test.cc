// Gloo collective groups never hang: silent ranks, aborts, dropped peers and
// bad arguments end in a CollectiveError that names what happened.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "collective/attempt_agreement.h"
#include "collective/group_registry.h"
#include "collective_test_util.h"
#include "util/test_helpers.h"

namespace rayx::collective {
namespace collective_gloo_failure_test {  // this file's own (unit tests compile in batches)

using Clock = std::chrono::steady_clock;
using testing::AllEmpty;
using testing::ConnectGloo;
using testing::MakeSpec;
using testing::OnEveryRank;
using ::rayx::testing::MsSince;

// Ranks 0 and 1 run an AllReduce while rank 2 does `rank2` instead; returns
// their errors, failed ranks and how long each call took.
struct Outcome {
  std::vector<std::string> errors{3};
  std::vector<int> failed_rank{-1, -1, -1};
  std::vector<int64_t> ms{0, 0, 0};
};

Outcome AllReduceWithout2(std::vector<std::shared_ptr<GlooGroup>>& groups,
                          const std::function<void()>& rank2) {
  Outcome out;
  OnEveryRank(3, [&](int r) {
    if (r == 2) {
      rank2();
      return;
    }
    std::vector<float> v(1 << 20, 1.0f);
    auto start = Clock::now();
    try {
      groups[r]->AllReduce(v.data(), v.size(), DataType::kFloat, ReduceOp::kSum, nullptr);
    } catch (const CollectiveError& e) {
      out.errors[r] = e.what();
      out.failed_rank[r] = e.failed_rank();
    }
    out.ms[r] = MsSince(start);
  });
  return out;
}

TEST(GlooFailure, ARankThatNeverCallsTimesOutTheOthersNamingIt) {
  auto store = std::make_shared<InMemoryRendezvousStore>();
  auto groups = ConnectGloo(3, store, "g", /*timeout_ms=*/1500);
  Outcome out = AllReduceWithout2(groups, [] {});
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(out.errors[r].find("'g' AllReduce on rank " + std::to_string(r) + " of 3"),
              std::string::npos)
        << out.errors[r];
    EXPECT_NE(out.errors[r].find("timed out after 1500 ms waiting for rank 2"),
              std::string::npos)
        << out.errors[r];
    EXPECT_EQ(out.failed_rank[r], 2);
    EXPECT_GE(out.ms[r], 1400);
    EXPECT_LE(out.ms[r], 1500 + 1000);
  }
  // Every later operation fails at once.
  std::vector<int32_t> v(1);
  auto start = Clock::now();
  try {
    groups[0]->AllReduce(v.data(), 1, DataType::kInt32, ReduceOp::kSum, nullptr);
    ADD_FAILURE() << "an aborted group ran an operation";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("aborted earlier"), std::string::npos) << e.what();
  }
  EXPECT_LT(MsSince(start), 500);  // no wait: the timeout was 1500 ms
}

// The watchdog is not woken by each op: it waits for the deadline of the op it
// saw and then for the op running at that time. An op that starts 700 ms after
// a successful one still times out after its own full timeout, not at the
// earlier op's deadline (too soon) nor never.
TEST(GlooFailure, AnOpAfterSuccessfulOnesTimesOutAfterItsOwnTimeout) {
  auto store = std::make_shared<InMemoryRendezvousStore>();
  auto groups = ConnectGloo(3, store, "g", /*timeout_ms=*/1500);
  OnEveryRank(3, [&](int r) {
    for (int i = 0; i < 20; ++i) {
      std::vector<int32_t> v(3, r);
      groups[r]->AllReduce(v.data(), v.size(), DataType::kInt32, ReduceOp::kSum, nullptr);
      EXPECT_EQ(v, std::vector<int32_t>(3, 0 + 1 + 2));
    }
  });
  // Not a wait for a condition: it places the next op's start 700 ms into the
  // watchdog's wait for the first op's deadline.
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  Outcome out = AllReduceWithout2(groups, [] {});
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(out.errors[r].find("timed out after 1500 ms waiting for rank 2"),
              std::string::npos)
        << out.errors[r];
    EXPECT_GE(out.ms[r], 1400) << "timed out at an earlier op's deadline";
    EXPECT_LE(out.ms[r], 1500 + 1000);
  }
}

TEST(GlooFailure, AbortOnOneRankFailsTheOthersPromptlyNamingIt) {
  auto store = std::make_shared<InMemoryRendezvousStore>();
  auto groups = ConnectGloo(3, store, "g", /*timeout_ms=*/20000);
  Outcome out = AllReduceWithout2(groups, [&] { groups[2]->Abort("head reported rank 2 dead"); });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(out.errors[r].find("rank 2 (actor actor-2, node node-2)"), std::string::npos)
        << out.errors[r];
    EXPECT_NE(out.errors[r].find("head reported rank 2 dead"), std::string::npos)
        << out.errors[r];
    EXPECT_EQ(out.failed_rank[r], 2);
    EXPECT_LT(out.ms[r], 5000);  // promptly: far from the 20 s timeout
  }
}

TEST(GlooFailure, DestroyingOneRankFailsTheOthersPromptlyNamingIt) {
  auto store = std::make_shared<InMemoryRendezvousStore>();
  auto groups = ConnectGloo(3, store, "g", /*timeout_ms=*/20000);
  Outcome out = AllReduceWithout2(groups, [&] { groups[2].reset(); });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(out.errors[r].find("rank 2 (actor actor-2, node node-2) destroyed the group"),
              std::string::npos)
        << out.errors[r];
    EXPECT_EQ(out.failed_rank[r], 2);
    EXPECT_LT(out.ms[r], 5000);  // promptly: far from the 20 s timeout
  }
}

TEST(GlooFailure, APeerWhoseConnectionsDropIsNamedAsLost) {
  auto store = std::make_shared<InMemoryRendezvousStore>();
  auto groups = ConnectGloo(3, store, "g", /*timeout_ms=*/20000);
  Outcome out = AllReduceWithout2(groups, [&] { groups[2]->TEST_DropConnections(); });
  for (int r = 0; r < 2; ++r) {
    // Rank 0 or 1 may learn it from the other's notice; both name rank 2.
    EXPECT_NE(out.errors[r].find("lost the connection to rank 2"), std::string::npos)
        << out.errors[r];
    EXPECT_EQ(out.failed_rank[r], 2);
    EXPECT_LT(out.ms[r], 5000);  // promptly: far from the 20 s timeout
  }
}

TEST(GlooFailure, AbortDuringAnOperationOnTheSameRankEndsItWithinASecond) {
  auto store = std::make_shared<InMemoryRendezvousStore>();
  auto groups = ConnectGloo(2, store, "g", /*timeout_ms=*/20000);
  std::string error;
  int64_t ms = 0;
  OnEveryRank(2, [&](int r) {
    if (r == 1) {
      groups[1]->Abort("stop");
      return;
    }
    auto start = Clock::now();
    try {
      groups[0]->Barrier();
      groups[0]->Barrier();
    } catch (const CollectiveError& e) {
      error = e.what();
    }
    ms = MsSince(start);
  });
  EXPECT_NE(error.find("'g' Barrier on rank 0 of 2"), std::string::npos) << error;
  EXPECT_NE(error.find("stop"), std::string::npos) << error;
  EXPECT_LT(ms, 5000);  // far from the 20 s timeout
}

// A rendezvous store whose Set takes `delay` once slowed down: a head that is
// slow to answer.
class SlowSetStore : public RendezvousStore {
 public:
  void SlowDown(std::chrono::milliseconds delay) { delay_ms_ = delay.count(); }
  Status Set(const std::string& key, const std::string& value) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_.load()));
    return inner_.Set(key, value);
  }
  std::optional<std::string> Get(const std::string& key) override { return inner_.Get(key); }
  Status Wait(const std::vector<std::string>& keys, Clock::time_point deadline) override {
    return inner_.Wait(keys, deadline);
  }

 private:
  InMemoryRendezvousStore inner_;
  std::atomic<int64_t> delay_ms_{0};
};

// The abort notice goes to the store after the connections close: a slow store
// delays neither the op that timed out nor a peer's op that sees it end, and
// the peer still learns from the notice who failed.
TEST(GlooFailure, ASlowStoreDelaysNeitherTheTimeoutNorThePeersFailure) {
  auto store = std::make_shared<SlowSetStore>();
  auto groups = ConnectGloo(2, store, "g", /*timeout_ms=*/1000);
  store->SlowDown(std::chrono::milliseconds(3000));
  std::vector<int32_t> v(4, 1);
  auto start = Clock::now();
  try {
    groups[0]->AllReduce(v.data(), v.size(), DataType::kInt32, ReduceOp::kSum, nullptr);
    ADD_FAILURE() << "an AllReduce without rank 1 succeeded";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("timed out after 1000 ms waiting for rank 1"),
              std::string::npos)
        << e.what();
    EXPECT_EQ(e.failed_rank(), 1);
  }
  EXPECT_LE(MsSince(start), 1000 + 2000);  // not the store's 3 s on top
  // Rank 1 calls once rank 0's notice is there (the store is slow, not lost).
  ASSERT_TRUE(store->Wait({"g/1/abort/0"}, Clock::now() + std::chrono::seconds(10)).ok());
  start = Clock::now();
  try {
    groups[1]->AllReduce(v.data(), v.size(), DataType::kInt32, ReduceOp::kSum, nullptr);
    ADD_FAILURE() << "an AllReduce with a closed peer succeeded";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 (actor actor-0, node node-0) ended the group: "
                                         "timed out after 1000 ms waiting for rank 1"),
              std::string::npos)
        << e.what();
    EXPECT_EQ(e.failed_rank(), 1);
  }
  EXPECT_LT(MsSince(start), 2500);  // not the store's 3 s
}

TEST(GlooFailure, ARankThatNeverJoinsIsNamedByTheOthers) {
  auto store = std::make_shared<InMemoryRendezvousStore>();
  auto errors = OnEveryRank(2, [&](int r) {
    GlooGroup::Connect(MakeSpec(3, r, "late", 1000, "1"), store);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("'late' rank " + std::to_string(r) + " of 3"), std::string::npos)
        << errors[r];
    EXPECT_NE(errors[r].find("rank 2 (actor actor-2, node node-2) did not join within 1000 ms"),
              std::string::npos)
        << errors[r];
  }
}

// A rendezvous store through which a rank publishes its address but never reads
// the others': a Wait for an address blocks until Release() (or its deadline).
// Gloo's connectFullMesh first exchanges host names ("rank_<i>" keys), then
// addresses ("<i>"); the names pass.
class DeafStore : public RendezvousStore {
 public:
  explicit DeafStore(std::shared_ptr<RendezvousStore> inner) : inner_(std::move(inner)) {}
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }
  Status Set(const std::string& key, const std::string& value) override {
    return inner_->Set(key, value);
  }
  std::optional<std::string> Get(const std::string& key) override { return inner_->Get(key); }
  Status Wait(const std::vector<std::string>& keys, Clock::time_point deadline) override {
    bool names = true;
    for (const auto& key : keys) names = names && key.find("/rank_") != std::string::npos;
    if (names) return inner_->Wait(keys, deadline);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_until(lock, deadline, [&] { return released_; });
    return Status::TimedOut("deaf");
  }

 private:
  const std::shared_ptr<RendezvousStore> inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
};

// Rank 1 publishes its address and then never connects (it waits for rank 0's
// address forever): rank 0, which waits for rank 1 to connect to it, gives up
// at its deadline (not at Gloo's 5x the timeout) and names rank 1.
TEST(GlooFailure, ARankThatPublishesButNeverConnectsIsNamedAtTheDeadline) {
  auto store = std::make_shared<InMemoryRendezvousStore>();
  auto deaf = std::make_shared<DeafStore>(store);
  std::thread rank1([&] {
    try {
      GlooGroup::Connect(MakeSpec(2, 1, "mute", 30000, "1"), deaf);
    } catch (const CollectiveError&) {
    }
  });
  std::string error;
  int failed_rank = -1;
  auto start = Clock::now();
  try {
    GlooGroup::Connect(MakeSpec(2, 0, "mute", 1000, "1"), store);
    ADD_FAILURE() << "connected without rank 1";
  } catch (const CollectiveError& e) {
    error = e.what();
    failed_rank = e.failed_rank();
  }
  const int64_t ms = MsSince(start);
  deaf->Release();
  rank1.join();
  EXPECT_LE(ms, 2000);
  EXPECT_NE(error.find("'mute' rank 0 of 2"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 1 (actor actor-1, node node-1) did not connect within 1000 ms"),
            std::string::npos)
      << error;
  EXPECT_EQ(failed_rank, 1);
}

// A group whose connect has its own deadline (an actor group's: what is left of
// Create's) keeps options.timeout_ms for every operation.
TEST(GlooFailure, TheConnectTimeoutBoundsJoiningAndTheTimeoutEveryOperation) {
  auto store = std::make_shared<InMemoryRendezvousStore>();
  auto spec = [](int rank, const std::string& name) {
    GroupSpec s = MakeSpec(2, rank, name, /*timeout_ms=*/30000, "1");
    s.connect_timeout_ms = 1000;
    return s;
  };
  auto start = Clock::now();
  try {
    GlooGroup::Connect(spec(0, "alone"), store);
    ADD_FAILURE() << "connected without rank 1";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("did not join within 1000 ms"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(MsSince(start), 2000);

  std::vector<std::shared_ptr<GlooGroup>> groups(2);
  auto errors = OnEveryRank(2, [&](int r) {
    GroupSpec s = spec(r, "pair");
    s.options.timeout_ms = 1500;
    s.connect_timeout_ms = 20000;
    groups[r] = GlooGroup::Connect(s, store);
  });
  ASSERT_TRUE(AllEmpty(errors)) << errors[0] << errors[1];
  std::vector<int32_t> v(1);
  start = Clock::now();
  try {
    groups[0]->AllReduce(v.data(), v.size(), DataType::kInt32, ReduceOp::kSum, nullptr);
    ADD_FAILURE() << "an AllReduce without rank 1 succeeded";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("timed out after 1500 ms"), std::string::npos) << e.what();
  }
  EXPECT_GE(MsSince(start), 1400);
  EXPECT_LT(MsSince(start), 1500 + 1000);
}

TEST(CollectiveRegistry, RejectsBadArgumentsClearly) {
  auto store = std::make_shared<InMemoryRendezvousStore>();
  auto expect_error = [&](int world_size, int rank, const std::string& text) {
    GroupSpec spec = MakeSpec(1, 0, "bad", 1000, "1");
    spec.world_size = world_size;
    spec.rank = rank;
    spec.members.clear();
    try {
      detail::InitCollectiveGroup(spec, store);
      ADD_FAILURE() << "accepted world_size " << world_size << " rank " << rank;
    } catch (const CollectiveError& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
    EXPECT_FALSE(IsGroupInitialized("bad"));
  };
  expect_error(0, 0, "world_size must be positive, got 0");
  expect_error(2, 2, "rank 2 is out of range [0, 2)");
  expect_error(2, -1, "rank -1 is out of range");
  EXPECT_THROW(GetRank("nope"), CollectiveError);
  EXPECT_THROW(DestroyCollectiveGroup("nope"), CollectiveError);
  try {
    InitCollectiveGroup(1, 0, GroupOptions{"needs-runtime"});
    ADD_FAILURE() << "initialised without a runtime";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("no rendezvous store"), std::string::npos) << e.what();
  }
}

TEST(CollectiveRegistry, OneRankGroupThroughThePublicApi) {
  auto store = std::make_shared<InMemoryRendezvousStore>();
  detail::InitCollectiveGroup(MakeSpec(1, 0, "solo", 5000, "1"), store);
  EXPECT_THROW(detail::InitCollectiveGroup(MakeSpec(1, 0, "solo", 5000, "2"), store),
               CollectiveError);
  EXPECT_EQ(GetRank("solo"), 0);
  EXPECT_EQ(GetWorldSize("solo"), 1);
  std::vector<double> v{1.5, 2.5};
  AllReduce(v, ReduceOp::kSum, "solo");
  EXPECT_EQ(v, (std::vector<double>{1.5, 2.5}));
  EXPECT_EQ(AllGather(std::vector<int32_t>{7, 8}, "solo"), (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(ReduceScatter(std::vector<int64_t>{1, 2, 3}, ReduceOp::kMax, "solo"),
            (std::vector<int64_t>{1, 2, 3}));
  Broadcast(v, 0, "solo");
  Barrier("solo");
  EXPECT_THROW(Broadcast(v, 1, "solo"), CollectiveError);
  EXPECT_THROW(Send(v, 0, "solo"), CollectiveError);
  DestroyCollectiveGroup("solo");
  EXPECT_FALSE(IsGroupInitialized("solo"));
  // Created again under the same name: a new attempt.
  detail::InitCollectiveGroup(MakeSpec(1, 0, "solo", 5000, "2"), store);
  EXPECT_TRUE(IsGroupInitialized("solo"));
  EXPECT_TRUE(detail::AbortCollectiveGroup("solo", "test"));
  try {
    Barrier("solo");
    ADD_FAILURE() << "an aborted group ran a barrier";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("test"), std::string::npos) << e.what();
  }
  DestroyCollectiveGroup("solo");
}

TEST(CollectiveRegistry, EnvironmentHookProvidesStoreAddressAndAttempt) {
  auto store = std::make_shared<InMemoryRendezvousStore>();
  detail::SetCollectiveEnvironment(
      {[store] { return store; }, "127.0.0.1",
       [](const GroupSpec&, RendezvousStore&) { return std::string("7"); }});
  InitCollectiveGroup(1, 0, GroupOptions{"hooked"});
  Barrier("hooked");
  DestroyCollectiveGroup("hooked");
  EXPECT_GT(store->CountPrefix("hooked/7/"), 0u);
  detail::SetCollectiveEnvironment({});
}

// A call refused for its arguments agrees on no attempt (it would claim this
// rank's place in one), so the next good call joins the same attempt as the
// ranks whose calls were fine.
TEST(CollectiveRegistry, ARefusedInitDrawsNoAttempt) {
  auto store = std::make_shared<InMemoryRendezvousStore>();
  int drawn = 0;
  detail::SetCollectiveEnvironment({[store] { return store; }, "127.0.0.1",
                                    [&drawn](const GroupSpec&, RendezvousStore&) {
                                      return "g" + std::to_string(drawn++);
                                    }});
  EXPECT_THROW(InitCollectiveGroup(2, 5, GroupOptions{"counted"}), CollectiveError);
  EXPECT_THROW(InitCollectiveGroup(0, 0, GroupOptions{"counted"}), CollectiveError);
  EXPECT_THROW(InitCollectiveGroup(1, 0, GroupOptions{"bad/name"}), CollectiveError);
  EXPECT_EQ(drawn, 0);
  InitCollectiveGroup(1, 0, GroupOptions{"counted"});
  EXPECT_EQ(drawn, 1);
  EXPECT_THROW(InitCollectiveGroup(1, 0, GroupOptions{"counted"}), CollectiveError)
      << "a second group of one name in one process";
  EXPECT_EQ(drawn, 1);
  EXPECT_GT(store->CountPrefix("counted/g0/"), 0u);
  DestroyCollectiveGroup("counted");
  detail::SetCollectiveEnvironment({});
}

// The attempts of in-actor groups (detail::AgreeOnAttempt).
class AttemptAgreement : public ::testing::Test {
 protected:
  // Rank `rank` of a `world`-rank group "g" agrees on an attempt, on a thread.
  std::future<std::string> Agree(int world, int rank, int64_t timeout_ms = 10000) {
    return std::async(std::launch::async, [this, world, rank, timeout_ms] {
      return detail::AgreeOnAttempt(MakeSpec(world, rank, "g", timeout_ms, ""), store_,
                                    Clock::now() + std::chrono::milliseconds(timeout_ms));
    });
  }
  // Every rank of a `world`-rank group, rank 0 last; their attempt ids.
  std::vector<std::string> AllAgree(int world) {
    std::vector<std::future<std::string>> ranks;
    for (int r = world - 1; r >= 0; --r) ranks.push_back(Agree(world, r));
    std::vector<std::string> out;
    for (auto& f : ranks) out.push_back(f.get());
    return out;
  }
  InMemoryRendezvousStore store_;
};

TEST_F(AttemptAgreement, EveryRankJoinsOneFreshAttemptEachTime) {
  EXPECT_EQ(AllAgree(3), (std::vector<std::string>{"a1", "a1", "a1"}));
  // Made again by the same processes: a new attempt, never the keys of the old.
  EXPECT_EQ(AllAgree(3), (std::vector<std::string>{"a2", "a2", "a2"}));
}

// A rank whose process was replaced (a restarted actor) and calls before rank
// 0 does: its place in the latest attempt is taken, so it waits for the next
// instead of rendezvousing on a finished attempt's keys.
TEST_F(AttemptAgreement, ARankCallingAgainBeforeRankZeroWaitsForTheNextAttempt) {
  ASSERT_EQ(AllAgree(2), (std::vector<std::string>{"a1", "a1"}));
  auto replaced = Agree(2, 1);
  EXPECT_EQ(replaced.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "it joined the finished attempt";
  EXPECT_EQ(Agree(2, 0).get(), "a2");
  EXPECT_EQ(replaced.get(), "a2");
}

// Rank 0 opened attempts the others never joined (its earlier calls timed
// out): the others join the latest one.
TEST_F(AttemptAgreement, RanksJoinTheLatestAttemptRankZeroOpened) {
  ASSERT_EQ(AllAgree(2), (std::vector<std::string>{"a1", "a1"}));
  EXPECT_EQ(Agree(2, 0).get(), "a2");
  auto rank0 = Agree(2, 0);
  EXPECT_EQ(rank0.get(), "a3");
  EXPECT_EQ(Agree(2, 1).get(), "a3");
}

TEST_F(AttemptAgreement, ANewGroupOfTheNameWithAnotherSizeIsNotJoinedByMistake) {
  ASSERT_EQ(AllAgree(2), (std::vector<std::string>{"a1", "a1"}));
  // A rank 2 exists only in the new 3-rank group: attempt 1 is not its.
  auto rank2 = Agree(3, 2);
  EXPECT_EQ(rank2.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  auto rank1 = Agree(3, 1);
  EXPECT_EQ(Agree(3, 0).get(), "a2");
  EXPECT_EQ(rank1.get(), "a2");
  EXPECT_EQ(rank2.get(), "a2");
}

// Rank 0 never opens an attempt twice, even when "latest" reads short (a
// failed read, a lost key): it skips to the first one never opened.
TEST_F(AttemptAgreement, RankZeroNeverReopensAnAttempt) {
  ASSERT_EQ(AllAgree(2), (std::vector<std::string>{"a1", "a1"}));
  ASSERT_TRUE(store_.Set("g/attempts/latest", "0").ok());
  EXPECT_EQ(AllAgree(2), (std::vector<std::string>{"a2", "a2"}));
}

// A group made again and again keeps the keys of its last two attempts only:
// rank 0 opening attempt s forgets attempt s - 2 (agreement and rendezvous
// keys), and keeps s - 1, whose abort notices its ranks may still read.
TEST_F(AttemptAgreement, OpeningAnAttemptForgetsTheOneBeforeThePrevious) {
  const int attempts = 5;
  for (int s = 1; s <= attempts; ++s) {
    ASSERT_EQ(AllAgree(2), (std::vector<std::string>(2, "a" + std::to_string(s))));
    // What a connected attempt leaves behind: its ranks' rendezvous keys.
    ASSERT_TRUE(store_.Set("g/a" + std::to_string(s) + "/gloo/0", "address").ok());
  }
  for (int s = 1; s <= attempts; ++s) {
    bool kept = s > attempts - 2;
    EXPECT_EQ(store_.CountPrefix("g/a" + std::to_string(s) + "/"), kept ? 1u : 0u)
        << "rendezvous keys of attempt " << s;
    EXPECT_EQ(store_.CountPrefix("g/attempts/" + std::to_string(s) + "/"), kept ? 3u : 0u)
        << "agreement keys of attempt " << s << " (world size, two places)";
  }
  // Forgotten attempts are never joined: a replaced rank 1 still waits for the
  // next attempt.
  auto replaced = Agree(2, 1);
  EXPECT_EQ(replaced.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  EXPECT_EQ(Agree(2, 0).get(), "a6");
  EXPECT_EQ(replaced.get(), "a6");
  EXPECT_EQ(store_.CountPrefix("g/a4/"), 0u);
  EXPECT_EQ(store_.CountPrefix("g/attempts/4/"), 0u);
  EXPECT_EQ(store_.CountPrefix("g/a5/"), 1u);
}

TEST_F(AttemptAgreement, WithoutRankZeroARankFailsAtItsDeadlineSayingWhy) {
  ASSERT_EQ(AllAgree(2), (std::vector<std::string>{"a1", "a1"}));
  auto start = Clock::now();
  try {
    Agree(2, 1, /*timeout_ms=*/500).get();
    ADD_FAILURE() << "joined without rank 0";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("InitCollectiveGroup('g') rank 1"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 0 did not open a new attempt"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(MsSince(start), 1500);
}

}  // namespace
}  // namespace rayx::collective
