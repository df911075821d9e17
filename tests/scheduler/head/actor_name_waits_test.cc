// The head's parked actor lookups: taken by name, expired by deadline, bounded.
#include "head/actor_name_waits.h"

#include <gtest/gtest.h>

namespace rayx::scheduler {
namespace actor_name_waits_test {  // this file's own (unit tests compile in batches)

ActorWaiter From(const std::string& peer, uint64_t id) { return ActorWaiter{{peer, id}, ""}; }

std::vector<uint64_t> Ids(const std::vector<ActorWaiter>& waiters) {
  std::vector<uint64_t> out;
  for (const auto& w : waiters) out.push_back(w.to.request_id);
  return out;
}

TEST(ActorNameWaitsTest, TakeEndsEveryWaitOnTheNameAndNoOther) {
  ActorNameWaits waits;
  ASSERT_TRUE(waits.Park("svc", From("a", 1), 100).ok());
  ASSERT_TRUE(waits.Park("svc", From("b", 2), 200).ok());
  ASSERT_TRUE(waits.Park("other", From("a", 3), 100).ok());
  EXPECT_EQ(Ids(waits.Take("svc")), (std::vector<uint64_t>{1, 2}));
  EXPECT_TRUE(waits.Take("svc").empty());
  EXPECT_EQ(waits.size(), 1u);
  // A taken wait does not expire later.
  auto expired = waits.Expire(1000);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].first, "other");
  EXPECT_EQ(expired[0].second.to.request_id, 3u);
  EXPECT_EQ(waits.size(), 0u);
}

TEST(ActorNameWaitsTest, ExpireEndsTheWaitsDueInDeadlineOrder) {
  ActorNameWaits waits;
  ASSERT_TRUE(waits.Park("svc", From("a", 1), 300).ok());
  ASSERT_TRUE(waits.Park("svc", From("a", 2), 100).ok());
  ASSERT_TRUE(waits.Park("svc", From("a", 3), 200).ok());
  EXPECT_TRUE(waits.Expire(99).empty());
  auto due = waits.Expire(200);
  ASSERT_EQ(due.size(), 2u);
  EXPECT_EQ(due[0].second.to.request_id, 2u);
  EXPECT_EQ(due[1].second.to.request_id, 3u);
  // The expired ones left the name's index too.
  EXPECT_EQ(Ids(waits.Take("svc")), std::vector<uint64_t>{1});
}

TEST(ActorNameWaitsTest, APeerCannotParkMoreThanItsShare) {
  ActorNameWaits waits(ActorNameWaits::Limits{/*max_per_peer=*/2, /*max_total=*/3});
  ASSERT_TRUE(waits.Park("x", From("greedy", 1), 100).ok());
  ASSERT_TRUE(waits.Park("y", From("greedy", 2), 100).ok());
  Status refused = waits.Park("z", From("greedy", 3), 100);
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("at most 2 per client"), std::string::npos) << refused;
  ASSERT_TRUE(waits.Park("z", From("other", 4), 100).ok());
  EXPECT_EQ(waits.Park("z", From("third", 5), 100).code(), StatusCode::kUnavailable)
      << "the total is bounded too";
  // Answered waits give their share back.
  waits.Take("x");
  EXPECT_TRUE(waits.Park("w", From("greedy", 6), 100).ok());
}

}  // namespace
}  // namespace rayx::scheduler
