// DeferredCalls: answers handed across threads to the worker loop, its fd, and
// calls that outlive it.
#include "worker/deferred_calls.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace rayx::detail {
namespace deferred_calls_test {  // this file's own (unit tests compile in batches)

bool Readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

TEST(DeferredCalls, AnAnswerMakesTheFdReadableUntilTaken) {
  DeferredCalls calls;
  DeferredCall call = calls.MakeCall(7);
  EXPECT_FALSE(Readable(calls.fd(), 0));
  std::thread([call] { call.Succeed("value"); }).join();
  ASSERT_TRUE(Readable(calls.fd(), 5000));
  auto answers = calls.Take();
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].token, 7u);
  EXPECT_TRUE(answers[0].ok);
  EXPECT_EQ(answers[0].value, "value");
  EXPECT_FALSE(Readable(calls.fd(), 0));
  EXPECT_TRUE(calls.Take().empty());
}

TEST(DeferredCalls, AFailureCarriesItsTypeAndMessage) {
  DeferredCalls calls;
  calls.MakeCall(1).Fail("ValueError", "bad");
  auto answers = calls.Take();
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_FALSE(answers[0].ok);
  EXPECT_EQ(answers[0].error_type, "ValueError");
  EXPECT_EQ(answers[0].value, "bad");
}

TEST(DeferredCalls, TheLastCopyGoingUnansweredFailsTheCall) {
  DeferredCalls calls;
  {
    DeferredCall call = calls.MakeCall(3);
    DeferredCall copy = call;
  }
  auto answers = calls.Take();
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].token, 3u);
  EXPECT_FALSE(answers[0].ok);
  EXPECT_EQ(answers[0].error_type, "CallDropped");
}

TEST(DeferredCalls, ACallMayBeAnsweredAfterTheQueueIsGone) {
  auto calls = std::make_unique<DeferredCalls>();
  DeferredCall call = calls->MakeCall(1);
  calls.reset();
  call.Succeed("late");  // nobody takes it; nothing breaks
  SUCCEED();
}

TEST(DeferredCalls, AnswersFromManyThreadsAllArriveOnce) {
  DeferredCalls calls;
  constexpr int kPerThread = 2000, kThreads = 4;
  std::vector<DeferredCall> made;
  for (int i = 0; i < kPerThread * kThreads; ++i) made.push_back(calls.MakeCall(i));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&made, t] {
      for (int i = t; i < kPerThread * kThreads; i += kThreads) made[i].Succeed("");
    });
  }
  std::vector<int> seen(kPerThread * kThreads, 0);
  size_t got = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got < seen.size() && std::chrono::steady_clock::now() < deadline) {
    if (!Readable(calls.fd(), 100)) continue;
    for (const auto& a : calls.Take()) {
      ++seen[a.token];
      ++got;
    }
  }
  for (auto& t : threads) t.join();
  // Only the fd woke the reader: a lost wake-up would leave answers untaken.
  EXPECT_EQ(got, seen.size());
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "token " << i;
}

}  // namespace
}  // namespace rayx::detail
