// NCCL collective groups on a real GPU (CTest label `gpu`): a one-rank group's
// allreduce, broadcast, allgather and reduce-scatter, refused peers, an abort
// on timeout, and the device a rank picks.
// The GPU tests skip without a GPU; the device choice is checked everywhere.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <string>

#ifdef RAYX_HAVE_NCCL
#include <cuda_runtime.h>
#endif

#include "collective/group_registry.h"
#include "collective/nccl_group.h"
#include "collective/poll_pacer.h"
#include "collective/rendezvous_store.h"

namespace rayx::collective {
namespace {

GroupSpec OneRankSpec(const std::string& name, int64_t timeout_ms) {
  GroupSpec spec;
  spec.options.name = name;
  spec.options.backend = Backend::kNccl;
  spec.options.timeout_ms = timeout_ms;
  spec.world_size = 1;
  spec.rank = 0;
  spec.attempt_id = "1";
  return spec;
}

class NcclGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (CudaDeviceCount(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
#ifdef RAYX_HAVE_NCCL
    // The CUDA context exists before any timed step (its creation can take
    // seconds), also when a test runs alone.
    ASSERT_EQ(cudaFree(nullptr), cudaSuccess);
#endif
    store_ = std::make_shared<InMemoryRendezvousStore>();
  }
  std::shared_ptr<InMemoryRendezvousStore> store_;
};

TEST_F(NcclGroupTest, OneRankAllReduceAndBroadcastAreExact) {
  detail::InitCollectiveGroup(OneRankSpec("nccl", 30000), store_);
  EXPECT_TRUE(store_->Get("nccl/1/nccl_id").has_value());
  std::vector<float> v{1.0f, 2.0f, 3.0f};
  AllReduce(v, ReduceOp::kSum, "nccl");
  EXPECT_EQ(v, (std::vector<float>{1.0f, 2.0f, 3.0f}));
  std::vector<int64_t> big(1 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<int64_t>(i);
  std::vector<int64_t> copy = big;
  AllReduce(big, ReduceOp::kMax, "nccl");
  Broadcast(big, 0, "nccl");
  EXPECT_EQ(big, copy);
  std::vector<uint16_t> halves(8, 0x3c00);  // 1.0 in IEEE half
  AllReduce(halves.data(), halves.size(), DataType::kHalf, ReduceOp::kSum, "nccl");
  EXPECT_EQ(halves, std::vector<uint16_t>(8, 0x3c00));
  Barrier("nccl");
  DestroyCollectiveGroup("nccl");
}

// Host buffers of one-way operations (AllGather's and ReduceScatter's input
// and output) are staged in the one direction needed, and the results are
// exact; a root or peer outside the group is refused before NCCL sees it,
// so the group stays usable (an NCCL enqueue error would end it).
TEST_F(NcclGroupTest, OneWayBuffersAndBadPeersLeaveTheGroupUsable) {
  detail::InitCollectiveGroup(OneRankSpec("nccl-oneway", 30000), store_);
  const std::vector<double> in{1.5, -2.0, 3.25};
  EXPECT_EQ(AllGather(in, "nccl-oneway"), in);
  EXPECT_EQ(ReduceScatter(in, ReduceOp::kSum, "nccl-oneway"), in);
  std::vector<float> v{4.0f};
  EXPECT_THROW(Broadcast(v, 3, "nccl-oneway"), CollectiveError);
  EXPECT_THROW(Send(v, 0, "nccl-oneway"), CollectiveError);  // itself
  EXPECT_THROW(Recv(v, -1, "nccl-oneway"), CollectiveError);
  AllReduce(v, ReduceOp::kSum, "nccl-oneway");
  EXPECT_EQ(v, std::vector<float>{4.0f});
  DestroyCollectiveGroup("nccl-oneway");
}

TEST_F(NcclGroupTest, AbortEndsTheGroupAndLaterOperationsFail) {
  detail::InitCollectiveGroup(OneRankSpec("nccl-abort", 30000), store_);
  ASSERT_TRUE(detail::AbortCollectiveGroup("nccl-abort", "head reported a member dead"));
  std::vector<float> v{1.0f};
  auto start = std::chrono::steady_clock::now();
  try {
    AllReduce(v, ReduceOp::kSum, "nccl-abort");
    ADD_FAILURE() << "an aborted NCCL group ran an allreduce";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("head reported a member dead"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  DestroyCollectiveGroup("nccl-abort");
}

TEST_F(NcclGroupTest, ARankThatNeverJoinsTimesOutInsteadOfHanging) {
  // Rank 1 of 2 waits for rank 0's id, which never comes.
  GroupSpec spec = OneRankSpec("nccl-late", 1000);
  spec.world_size = 2;
  spec.rank = 1;
  auto start = std::chrono::steady_clock::now();
  try {
    detail::InitCollectiveGroup(spec, store_);
    ADD_FAILURE() << "joined a group whose rank 0 never came";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 did not publish the NCCL id"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_FALSE(IsGroupInitialized("nccl-late"));
}

// A rank that sees its group's devices on the node (RAYX_LOCAL_RANK set) uses
// its own; two ranks on one node otherwise both took device 0.
TEST(NcclDevice, ARankToldItsDevicePositionUsesItAndOthersKeepTheCurrentDevice) {
  const GroupSpec spec = OneRankSpec("devices", 1000);
  EXPECT_EQ(NcclDeviceFor(spec, nullptr, 4, 2), 2);
  EXPECT_EQ(NcclDeviceFor(spec, "", 4, 2), 2);
  EXPECT_EQ(NcclDeviceFor(spec, "0", 4, 2), 0);
  EXPECT_EQ(NcclDeviceFor(spec, "3", 4, 0), 3);
  for (const char* bad : {"4", "-1", "x", "1x", "99999999999999999999"}) {
    try {
      NcclDeviceFor(spec, bad, 4, 0);
      ADD_FAILURE() << "accepted RAYX_LOCAL_RANK=" << bad;
    } catch (const CollectiveError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string("RAYX_LOCAL_RANK='") + bad + "'"), std::string::npos)
          << what;
      EXPECT_NE(what.find("4 CUDA devices"), std::string::npos) << what;
      EXPECT_NE(what.find("collective group 'devices'"), std::string::npos) << what;
    }
  }
}

// Sets RAYX_LOCAL_RANK for one test and removes it again, also when it throws.
class ScopedLocalRank {
 public:
  explicit ScopedLocalRank(const std::string& value) {
    ::setenv("RAYX_LOCAL_RANK", value.c_str(), 1);
  }
  ~ScopedLocalRank() { ::unsetenv("RAYX_LOCAL_RANK"); }
};

// The same through a real group: a position CUDA does not have fails the join,
// naming it, with nothing left; a rank told the last position connects there
// and leaves the calling thread on that device (on one GPU, the last is also
// the current device, so only a machine with two or more tells them apart).
TEST_F(NcclGroupTest, ARankUsesTheDevicePositionItIsTold) {
  std::string why;
  const int devices = CudaDeviceCount(&why);
  {
    ScopedLocalRank bad(std::to_string(devices));
    try {
      detail::InitCollectiveGroup(OneRankSpec("nccl-position-bad", 5000), store_);
      ADD_FAILURE() << "joined on a device position CUDA does not have";
    } catch (const CollectiveError& e) {
      EXPECT_NE(std::string(e.what()).find("RAYX_LOCAL_RANK"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(IsGroupInitialized("nccl-position-bad"));
#ifdef RAYX_HAVE_NCCL
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  {
    ScopedLocalRank last(std::to_string(devices - 1));
    detail::InitCollectiveGroup(OneRankSpec("nccl-position", 30000), store_);
  }
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, devices - 1);
  std::vector<float> v{4.0f};
  AllReduce(v, ReduceOp::kMax, "nccl-position");
  EXPECT_EQ(v, std::vector<float>{4.0f});
  if (devices > 1) {
    // Device memory of another GPU is refused with a clear error.
    void* elsewhere = nullptr;
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&elsewhere, sizeof(float)), cudaSuccess);
    try {
      AllReduce(elsewhere, 1, DataType::kFloat, ReduceOp::kSum, "nccl-position");
      ADD_FAILURE() << "an allreduce on another device's memory";
    } catch (const CollectiveError& e) {
      EXPECT_NE(std::string(e.what()).find("the buffer is on CUDA device 0"), std::string::npos)
          << e.what();
    }
    cudaFree(elsewhere);
  }
  DestroyCollectiveGroup("nccl-position");
#endif
}

// How an NCCL wait polls: yields first (a small allreduce is seen done at
// once), then sleeps 1% of the time waited so far, capped so an abort or the
// deadline is noticed within a millisecond.
TEST(NcclPolling, YieldsFirstThenSleepsAHundredthOfTheWaitUpToTheCap) {
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  const auto start = PollPacer::Clock::time_point{} + std::chrono::hours(1);
  const PollPacer pacer(start);
  EXPECT_EQ(pacer.Pause(start), microseconds(0));
  EXPECT_EQ(pacer.Pause(start + microseconds(1999)), microseconds(0));
  EXPECT_EQ(pacer.Pause(start + milliseconds(2)), microseconds(20));
  EXPECT_EQ(pacer.Pause(start + milliseconds(10)), microseconds(100));
  EXPECT_EQ(pacer.Pause(start + milliseconds(100)), milliseconds(1));
  EXPECT_EQ(pacer.Pause(start + std::chrono::seconds(30)), milliseconds(1));
  const PollPacer no_spin(start, microseconds(0), microseconds(500));
  EXPECT_EQ(no_spin.Pause(start), microseconds(1));
  EXPECT_EQ(no_spin.Pause(start + milliseconds(100)), microseconds(500));
}

TEST(NcclWithoutGpu, InitSaysWhyWhenThereIsNoGpu) {
  std::string why;
  if (CudaDeviceCount(&why) > 0) GTEST_SKIP() << "a GPU is present; covered above";
  auto store = std::make_shared<InMemoryRendezvousStore>();
  try {
    detail::InitCollectiveGroup(OneRankSpec("nccl-none", 1000), store);
    ADD_FAILURE() << "an NCCL group without a GPU";
  } catch (const CollectiveError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("no GPU") != std::string::npos ||
                what.find("built without NCCL") != std::string::npos)
        << what;
  }
  EXPECT_FALSE(IsGroupInitialized("nccl-none"));
}

}  // namespace
}  // namespace rayx::collective
