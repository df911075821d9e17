// BlockedCalls and BlockedScope alone, with the I/O thread played by the test
// (posted work and the delay timer run when the test says): which waits the
// head hears of, and when.
#include "runtime/blocked_calls.h"

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "rayx/detail/runtime_api.h"
#include "rayx/errors.h"
#include "runtime/object_table.h"

namespace rayx::detail {
namespace blocked_calls_test {

class BlockedCallsTest : public ::testing::Test {
 protected:
  BlockedCallsTest() {
    BlockedCalls::Deps deps;
    deps.post = [this](std::function<void()> fn) { posted_.push_back(std::move(fn)); };
    deps.after = [this](int64_t delay_ms, std::function<void()> fn) {
      delay_ms_ = delay_ms;
      timer_ = std::move(fn);  // replaces the one before, as a re-armed timer does
    };
    deps.notify = [this](bool blocked) { told_.push_back(blocked); };
    calls_ = std::make_shared<BlockedCalls>(std::move(deps), 10);
  }
  // The I/O thread runs what was posted to it.
  void RunPosted() {
    while (!posted_.empty()) {
      auto fn = std::move(posted_.front());
      posted_.pop_front();
      fn();
    }
  }
  // The delay passes.
  void Fire() {
    RunPosted();
    auto fn = std::move(timer_);
    timer_ = nullptr;
    if (fn) fn();
    RunPosted();
  }

  std::deque<std::function<void()>> posted_;
  std::function<void()> timer_;
  int64_t delay_ms_ = -1;
  std::vector<bool> told_;
  std::shared_ptr<BlockedCalls> calls_;
};

TEST_F(BlockedCallsTest, AWaitPastTheDelayIsToldOnceAndItsEndAtOnce) {
  calls_->Enter();
  RunPosted();
  EXPECT_EQ(delay_ms_, 10);
  EXPECT_TRUE(told_.empty()) << "nothing before the delay";
  Fire();
  EXPECT_EQ(told_, std::vector<bool>{true});
  calls_->Leave();
  RunPosted();
  EXPECT_EQ(told_, (std::vector<bool>{true, false}));
  EXPECT_FALSE(calls_->told_blocked());
}

TEST_F(BlockedCallsTest, AWaitShorterThanTheDelayCostsNoNotice) {
  calls_->Enter();
  RunPosted();
  calls_->Leave();
  EXPECT_TRUE(posted_.empty()) << "the head never heard of it: nothing to undo";
  Fire();  // the delay passes after the wait ended
  EXPECT_TRUE(told_.empty());
  // A wait that ends before its delay is even armed.
  calls_->Enter();
  calls_->Leave();
  Fire();
  EXPECT_TRUE(told_.empty());
}

TEST_F(BlockedCallsTest, AFreshWaitGetsAFullDelay) {
  calls_->Enter();
  calls_->Leave();
  calls_->Enter();  // a second wait starts before the first one's delay passed
  RunPosted();
  Fire();  // only the second wait's delay is left: it counts
  EXPECT_EQ(told_, std::vector<bool>{true});
  calls_->Leave();
  RunPosted();
  EXPECT_EQ(told_, (std::vector<bool>{true, false}));
}

TEST_F(BlockedCallsTest, SeveralWaitingCallsAreToldOnFirstAndLast) {
  calls_->Enter();  // three calls of a threaded actor wait
  calls_->Enter();
  Fire();
  calls_->Enter();
  RunPosted();
  EXPECT_EQ(calls_->waiting(), 3u);
  calls_->Leave();
  calls_->Leave();
  Fire();
  EXPECT_EQ(told_, std::vector<bool>{true}) << "one call still waits";
  calls_->Leave();
  RunPosted();
  EXPECT_EQ(told_, (std::vector<bool>{true, false}));
}

TEST_F(BlockedCallsTest, WaitingAgainBeforeTheEndIsToldKeepsTheLeaseBlocked) {
  calls_->Enter();
  Fire();
  calls_->Leave();  // its end is posted...
  calls_->Enter();  // ...but another wait starts first
  Fire();
  EXPECT_EQ(told_, std::vector<bool>{true}) << "no flapping";
  calls_->Leave();
  RunPosted();
  EXPECT_EQ(told_, (std::vector<bool>{true, false}));
}

TEST_F(BlockedCallsTest, ResyncSendsWhatTheHeadLastHeard) {
  calls_->Resync();
  calls_->Enter();
  Fire();
  calls_->Resync();  // the connection came back: the head may have missed it
  EXPECT_EQ(told_, (std::vector<bool>{false, true, true}));
}

TEST_F(BlockedCallsTest, NothingIsPostedOrSentAfterStop) {
  calls_->Enter();
  RunPosted();
  calls_->Stop();
  Fire();
  calls_->Leave();
  calls_->Enter();
  calls_->Resync();
  EXPECT_TRUE(posted_.empty());
  EXPECT_TRUE(told_.empty());
}

TEST_F(BlockedCallsTest, NestedScopesCountOnceThroughTheOutermost) {
  {
    BlockedScope outer;  // a Python get, waiting in slices
    for (int slice = 0; slice < 3; ++slice) {
      BlockedScope inner;  // each slice's Runtime::Get
      inner.Blocking(calls_);
      inner.Blocking(calls_);
      EXPECT_EQ(calls_->waiting(), 1u);
    }
    EXPECT_EQ(calls_->waiting(), 1u) << "the outer scope still waits";
    Fire();
  }
  EXPECT_EQ(calls_->waiting(), 0u);
  RunPosted();
  EXPECT_EQ(told_, (std::vector<bool>{true, false}));
}

TEST_F(BlockedCallsTest, AScopeThatNeverBlocksCountsNothing) {
  {
    BlockedScope scope;
    BlockedScope driver;  // a driver has no BlockedCalls
    driver.Blocking(nullptr);
  }
  EXPECT_EQ(calls_->waiting(), 0u);
  EXPECT_TRUE(posted_.empty());
}

TEST_F(BlockedCallsTest, AScopeThatIsNoCallsCountsNothingInsideIt) {
  {
    BlockedScope helper(/*counts=*/false);  // the futures thread of `await ref`
    BlockedScope get;                       // the Runtime::Get it makes
    get.Blocking(calls_);
    EXPECT_EQ(calls_->waiting(), 0u);
  }
  EXPECT_TRUE(posted_.empty());
}

TEST_F(BlockedCallsTest, ScopesOnOtherThreadsCountSeparately) {
  BlockedScope mine;
  mine.Blocking(calls_);
  std::thread other([&] {
    BlockedScope theirs;
    theirs.Blocking(calls_);
    EXPECT_EQ(calls_->waiting(), 2u);
  });
  other.join();
  EXPECT_EQ(calls_->waiting(), 1u);
}

// ObjectTable's hook: it runs only when a Get or Wait has to block.
TEST(ObjectTableBlocking, OnBlockRunsOnlyWhenTheWaitBlocks) {
  ObjectTable table(ObjectTable::Options{"10.0.0.1", nullptr, nullptr, nullptr, 200});
  int blocked = 0;
  const std::function<void()> on_block = [&] { ++blocked; };
  table.AddValue(ObjectId::FromWire("ready"), std::make_shared<const std::string>("v"));
  table.Get(ObjectId::FromWire("ready"), -1, &on_block);
  auto ready = std::make_shared<ObjectCore>();
  ready->id = ObjectId::FromWire("ready");
  table.Wait({ready}, 1, -1, &on_block);
  EXPECT_EQ(blocked, 0) << "a ready object never blocks";

  table.AddPending(ObjectId::FromWire("later"));
  auto later = std::make_shared<ObjectCore>();
  later->id = ObjectId::FromWire("later");
  EXPECT_THROW(table.Get(ObjectId::FromWire("later"), 0, &on_block), GetTimeoutError);
  table.Wait({later}, 1, 0, &on_block);
  EXPECT_EQ(blocked, 0) << "a probe (timeout 0) never blocks";

  std::thread completer([&] {
    // Completes once the getter blocked (a condition, not a sleep).
    while (table.TEST_waiting() == 0) std::this_thread::yield();
    table.Complete({ObjectId::FromWire("later"), std::make_shared<const std::string>("x"),
                    nullptr, nullptr});
  });
  EXPECT_EQ(table.Get(ObjectId::FromWire("later"), 10000, &on_block).view, "x");
  completer.join();
  EXPECT_EQ(blocked, 1);
  table.AddPending(ObjectId::FromWire("w"));
  auto w = std::make_shared<ObjectCore>();
  w->id = ObjectId::FromWire("w");
  EXPECT_FALSE(table.Wait({w}, 1, 20, &on_block)[0]);
  EXPECT_EQ(blocked, 2);
}

}  // namespace blocked_calls_test
}  // namespace rayx::detail
