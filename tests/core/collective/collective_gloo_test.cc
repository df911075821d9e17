// Gloo collective groups: exact results of every operation, for every type
// and size, with ranks as threads over TCP loopback.
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <numeric>

#include "collective_test_util.h"

namespace rayx::collective {
namespace collective_gloo_test {  // this file's own (unit tests compile in batches)

using testing::AllEmpty;
using testing::ConnectGloo;
using testing::MakeSpec;
using testing::OnEveryRank;

constexpr int kRanks = 4;
constexpr size_t k16MiB = 16 * 1024 * 1024;

// Small integers, exact in every type: element i of rank r.
template <typename T>
T Value(int r, size_t i) {
  return static_cast<T>(static_cast<int64_t>((i * 7 + r * 3) % 11) + 1);
}

template <typename T>
T Combine(T a, T b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return a + b;
    case ReduceOp::kProduct: return a * b;
    case ReduceOp::kMin: return std::min(a, b);
    case ReduceOp::kMax: return std::max(a, b);
  }
  return a;
}

template <typename T>
T Expected(size_t i, ReduceOp op, int n) {
  T acc = Value<T>(0, i);
  for (int r = 1; r < n; ++r) acc = Combine(acc, Value<T>(r, i), op);
  return acc;
}

template <typename T>
std::vector<T> Filled(int r, size_t count) {
  std::vector<T> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = Value<T>(r, i);
  return v;
}

class GlooCollectives : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_shared<InMemoryRendezvousStore>();
    groups_ = ConnectGloo(kRanks, store_);
  }

  template <typename T>
  void CheckAllReduce(size_t count, ReduceOp op) {
    std::vector<std::vector<T>> data(kRanks);
    auto errors = OnEveryRank(kRanks, [&](int r) {
      data[r] = Filled<T>(r, count);
      groups_[r]->AllReduce(data[r].data(), count, detail::DataTypeOf<T>(), op, nullptr);
    });
    ASSERT_TRUE(AllEmpty(errors)) << errors[0] << errors[1];
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_EQ(data[r].size(), count);
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(data[r][i], Expected<T>(i, op, kRanks))
            << "rank " << r << " element " << i << " op " << ReduceOpName(op) << " count "
            << count;
      }
    }
  }

  template <typename T>
  void CheckEveryOpAndSize() {
    for (size_t count : {size_t{0}, size_t{1}, size_t{1001}}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax}) {
        CheckAllReduce<T>(count, op);
      }
    }
    CheckAllReduce<T>(k16MiB / sizeof(T), ReduceOp::kSum);
  }

  std::shared_ptr<InMemoryRendezvousStore> store_;
  std::vector<std::shared_ptr<GlooGroup>> groups_;
};

TEST_F(GlooCollectives, AllReduceIsExactForInt32) { CheckEveryOpAndSize<int32_t>(); }
TEST_F(GlooCollectives, AllReduceIsExactForInt64) { CheckEveryOpAndSize<int64_t>(); }
TEST_F(GlooCollectives, AllReduceIsExactForFloat) { CheckEveryOpAndSize<float>(); }
TEST_F(GlooCollectives, AllReduceIsExactForDouble) { CheckEveryOpAndSize<double>(); }

TEST_F(GlooCollectives, AllGatherConcatenatesInRankOrderEvenWithDifferentLengths) {
  for (bool same_length : {true, false}) {
    std::vector<std::vector<char>> out(kRanks);
    auto length = [&](int r) { return same_length ? size_t{1001} : size_t(r * 3); };
    auto errors = OnEveryRank(kRanks, [&](int r) {
      std::vector<int64_t> mine(length(r));
      for (size_t i = 0; i < mine.size(); ++i) mine[i] = r * 100000 + static_cast<int64_t>(i);
      groups_[r]->AllGather(
          mine.data(), mine.size(), DataType::kInt64,
          [&](const std::vector<size_t>& counts) -> void* {
            size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
            out[r].resize(total * sizeof(int64_t));
            return out[r].data();
          },
          nullptr);
    });
    ASSERT_TRUE(AllEmpty(errors)) << errors[0];
    std::vector<int64_t> expected;
    for (int r = 0; r < kRanks; ++r) {
      for (size_t i = 0; i < length(r); ++i) expected.push_back(r * 100000 + int64_t(i));
    }
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_EQ(out[r].size(), expected.size() * sizeof(int64_t));
      EXPECT_EQ(0, std::memcmp(out[r].data(), expected.data(), out[r].size())) << "rank " << r;
    }
  }
}

// The rank whose length is the total (every other rank has none) still sends.
TEST_F(GlooCollectives, AllGatherWhereOneRankHoldsEveryElement) {
  for (int holder : {0, 2}) {
    const size_t held = holder == 0 ? 5 : 3;
    std::vector<std::vector<int32_t>> out(kRanks);
    auto errors = OnEveryRank(kRanks, [&](int r) {
      std::vector<int32_t> mine;
      if (r == holder) {
        for (size_t i = 0; i < held; ++i) mine.push_back(100 * r + static_cast<int32_t>(i));
      }
      groups_[r]->AllGather(
          mine.data(), mine.size(), DataType::kInt32,
          [&](const std::vector<size_t>& counts) -> void* {
            out[r].resize(std::accumulate(counts.begin(), counts.end(), size_t{0}));
            return out[r].data();
          },
          nullptr);
    });
    ASSERT_TRUE(AllEmpty(errors)) << errors[0] << errors[1] << errors[2] << errors[3];
    std::vector<int32_t> expected;
    for (size_t i = 0; i < held; ++i) expected.push_back(100 * holder + static_cast<int32_t>(i));
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(out[r], expected) << "rank " << r;
  }
}

TEST_F(GlooCollectives, ReduceScatterGivesEachRankItsSliceOfTheReduction) {
  for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, k16MiB / sizeof(float)}) {
    std::vector<std::vector<float>> out(kRanks);
    auto errors = OnEveryRank(kRanks, [&](int r) {
      std::vector<float> in = Filled<float>(r, count);
      out[r].resize(SliceOf(count, kRanks, r).second);
      groups_[r]->ReduceScatter(in.data(), count, out[r].data(), DataType::kFloat, ReduceOp::kSum,
                                nullptr);
    });
    ASSERT_TRUE(AllEmpty(errors)) << errors[0];
    for (int r = 0; r < kRanks; ++r) {
      auto [offset, length] = SliceOf(count, kRanks, r);
      for (size_t i = 0; i < length; ++i) {
        ASSERT_EQ(out[r][i], Expected<float>(offset + i, ReduceOp::kSum, kRanks));
      }
    }
  }
}

TEST_F(GlooCollectives, BroadcastCopiesTheRootsDataToEveryRank) {
  for (int root = 0; root < kRanks; ++root) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{1001}}) {
      std::vector<std::vector<double>> data(kRanks);
      auto errors = OnEveryRank(kRanks, [&](int r) {
        data[r] = Filled<double>(r, count);
        groups_[r]->Broadcast(data[r].data(), count, DataType::kDouble, root, nullptr);
      });
      ASSERT_TRUE(AllEmpty(errors)) << errors[0];
      for (int r = 0; r < kRanks; ++r) EXPECT_EQ(data[r], Filled<double>(root, count));
    }
  }
  std::vector<std::vector<int32_t>> big(kRanks);
  auto errors = OnEveryRank(kRanks, [&](int r) {
    big[r] = Filled<int32_t>(r, k16MiB / 4);
    groups_[r]->Broadcast(big[r].data(), big[r].size(), DataType::kInt32, 3, nullptr);
  });
  ASSERT_TRUE(AllEmpty(errors)) << errors[0];
  for (int r = 0; r < kRanks; ++r) EXPECT_TRUE(big[r] == Filled<int32_t>(3, k16MiB / 4));
}

TEST_F(GlooCollectives, ReduceLeavesTheResultOnTheRootOnly) {
  std::vector<std::vector<int64_t>> data(kRanks);
  auto errors = OnEveryRank(kRanks, [&](int r) {
    data[r] = Filled<int64_t>(r, 1001);
    groups_[r]->Reduce(data[r].data(), 1001, DataType::kInt64, ReduceOp::kMax, 2, nullptr);
  });
  ASSERT_TRUE(AllEmpty(errors)) << errors[0];
  for (int r = 0; r < kRanks; ++r) {
    for (size_t i = 0; i < 1001; ++i) {
      ASSERT_EQ(data[r][i], r == 2 ? Expected<int64_t>(i, ReduceOp::kMax, kRanks)
                                   : Value<int64_t>(r, i));
    }
  }
}

TEST_F(GlooCollectives, SendRecvDeliversBetweenPairsAndBarrierCompletes) {
  for (size_t count : {size_t{0}, size_t{1}, size_t{1001}}) {
    std::vector<std::vector<float>> got(kRanks);
    auto errors = OnEveryRank(kRanks, [&](int r) {
      if (r % 2 == 0) {
        std::vector<float> mine = Filled<float>(r, count);
        groups_[r]->Send(mine.data(), count, DataType::kFloat, r + 1, nullptr);
      } else {
        got[r].resize(count);
        groups_[r]->Recv(got[r].data(), count, DataType::kFloat, r - 1, nullptr);
      }
      groups_[r]->Barrier();
    });
    ASSERT_TRUE(AllEmpty(errors)) << errors[0] << errors[1];
    EXPECT_EQ(got[1], Filled<float>(0, count));
    EXPECT_EQ(got[3], Filled<float>(2, count));
  }
}

TEST_F(GlooCollectives, SendRecvLengthMismatchFailsBothSidesAndKeepsTheGroup) {
  auto errors = OnEveryRank(2, [&](int r) {
    std::vector<int32_t> v(r == 0 ? 5 : 6);
    if (r == 0) groups_[0]->Send(v.data(), v.size(), DataType::kInt32, 1, nullptr);
    if (r == 1) groups_[1]->Recv(v.data(), v.size(), DataType::kInt32, 0, nullptr);
  });
  EXPECT_NE(errors[0].find("whose Recv expects 6"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("which sends 5"), std::string::npos) << errors[1];
  errors = OnEveryRank(kRanks, [&](int r) { groups_[r]->Barrier(); });
  EXPECT_TRUE(AllEmpty(errors)) << errors[0];
}

TEST_F(GlooCollectives, MismatchedLengthsFailOnEveryRankAndKeepTheGroupUsable) {
  auto errors = OnEveryRank(kRanks, [&](int r) {
    std::vector<float> v(r == 1 ? 11 : 10, 1.0f);
    groups_[r]->AllReduce(v.data(), v.size(), DataType::kFloat, ReduceOp::kSum, nullptr);
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_NE(errors[r].find("lengths differ across ranks"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("'g' AllReduce on rank " + std::to_string(r)), std::string::npos)
        << errors[r];
  }
  CheckAllReduce<float>(10, ReduceOp::kSum);
}

TEST_F(GlooCollectives, DifferentOperationsAcrossRanksFailOnEveryRank) {
  auto errors = OnEveryRank(kRanks, [&](int r) {
    std::vector<int32_t> v(4, 1);
    if (r == 3) {
      groups_[r]->Barrier();
    } else {
      groups_[r]->AllReduce(v.data(), v.size(), DataType::kInt32, ReduceOp::kSum, nullptr);
    }
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(errors[r].find("rank 3 (actor actor-3, node node-3) called Barrier"),
              std::string::npos)
        << errors[r];
  }
  EXPECT_NE(errors[3].find("called AllReduce"), std::string::npos) << errors[3];
}

TEST(GlooGroups, TwoGroupsRunAtOnceAndANameCanBeCreatedAgain) {
  auto store = std::make_shared<InMemoryRendezvousStore>();
  auto a = ConnectGloo(2, store, "a");
  auto b = ConnectGloo(2, store, "b");
  auto errors = OnEveryRank(2, [&](int r) {
    std::vector<int32_t> x{r + 1}, y{(r + 1) * 10};
    a[r]->AllReduce(x.data(), 1, DataType::kInt32, ReduceOp::kSum, nullptr);
    b[r]->AllReduce(y.data(), 1, DataType::kInt32, ReduceOp::kProduct, nullptr);
    if (x[0] != 3 || y[0] != 200) throw std::runtime_error("wrong result");
  });
  ASSERT_TRUE(AllEmpty(errors)) << errors[0];
  a.clear();
  // Attempt 2 of "a": fresh keys, so nothing of attempt 1 is read.
  auto again = ConnectGloo(2, store, "a", 20000, "2");
  errors = OnEveryRank(2, [&](int r) { again[r]->Barrier(); });
  EXPECT_TRUE(AllEmpty(errors)) << errors[0];
  EXPECT_GT(store->CountPrefix("a/1/"), 0u);
  EXPECT_GT(store->CountPrefix("a/2/"), 0u);
}

// Threads of this process whose scheduling policy is SCHED_BATCH.
int BatchThreads() {
  int n = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    const int tid = std::atoi(task.path().filename().c_str());
    if (sched_getscheduler(tid) == SCHED_BATCH) ++n;
  }
  return n;
}

// Gloo's loop thread must not preempt on wakeup (see ScopedBatchScheduling in
// gloo_group.cc: without it a 4-byte allreduce with more ranks than cores
// waits for scheduler ticks); the thread that connects keeps its own policy.
TEST(GlooGroups, TheTransportThreadIsBatchScheduledAndTheCallerIsNot) {
  auto store = std::make_shared<InMemoryRendezvousStore>();
  const int before = BatchThreads();
  std::vector<std::shared_ptr<GlooGroup>> groups(2);
  std::vector<int> caller_policy(2, -1);
  auto errors = OnEveryRank(2, [&](int r) {
    groups[r] = GlooGroup::Connect(MakeSpec(2, r, "batch", 20000, "1"), store);
    caller_policy[r] = sched_getscheduler(0);
  });
  ASSERT_TRUE(AllEmpty(errors)) << errors[0] << errors[1];
  EXPECT_EQ(caller_policy[0], SCHED_OTHER);
  EXPECT_EQ(caller_policy[1], SCHED_OTHER);
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
  // One device, so one loop thread, per rank.
  EXPECT_EQ(BatchThreads(), before + 2);
  errors = OnEveryRank(2, [&](int r) {
    std::vector<int32_t> x{r + 1};
    groups[r]->AllReduce(x.data(), 1, DataType::kInt32, ReduceOp::kSum, nullptr);
    if (x[0] != 3) throw std::runtime_error("allreduce gave " + std::to_string(x[0]));
  });
  EXPECT_TRUE(AllEmpty(errors)) << errors[0] << errors[1];
}

}  // namespace
}  // namespace rayx::collective
