// RequestDedup: a registered runtime's repeated request is answered from what
// the head answered the first time, dropped while its first copy is parked,
// and handled as new when it was never seen; agents are never tracked.
#include "head/request_dedup.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rayx::scheduler {
namespace request_dedup_test {  // this file's own (unit tests compile in batches)

transport::Frames Reply(const std::string& envelope, const std::string& body) {
  transport::Frames frames;
  frames.push_back(transport::MakeFrame(envelope));
  frames.push_back(transport::MakeFrame(body));
  return frames;
}

std::vector<std::string> Texts(const transport::Frames& frames) {
  std::vector<std::string> out;
  for (const auto& f : frames) out.emplace_back(transport::FrameView(f));
  return out;
}

TEST(RequestDedup, AnAnsweredRequestIsAnsweredAgainWithTheSameFrames) {
  RequestDedup dedup;
  dedup.AddPeer("driver");
  transport::Frames again;
  EXPECT_EQ(dedup.Check("driver", 7, &again), RequestDedup::Seen::kNew);
  transport::Frames reply = Reply("env-7", "lease granted");
  dedup.Handled("driver", 7, &reply);
  ASSERT_EQ(dedup.Check("driver", 7, &again), RequestDedup::Seen::kAnswered);
  EXPECT_EQ(Texts(again), (std::vector<std::string>{"env-7", "lease granted"}));
  // Another id of the same peer, and the same id of another peer, are new.
  EXPECT_EQ(dedup.Check("driver", 8, &again), RequestDedup::Seen::kNew);
  dedup.AddPeer("other");
  EXPECT_EQ(dedup.Check("other", 7, &again), RequestDedup::Seen::kNew);
}

TEST(RequestDedup, AParkedRequestIsDroppedUntilItsAnswerComesThroughTheOutbox) {
  RequestDedup dedup;
  dedup.AddPeer("driver");
  dedup.Handled("driver", 3, nullptr);
  transport::Frames again;
  EXPECT_EQ(dedup.Check("driver", 3, &again), RequestDedup::Seen::kParked);
  dedup.AnsweredLater("driver", 3, Reply("env-3", "granted later"));
  ASSERT_EQ(dedup.Check("driver", 3, &again), RequestDedup::Seen::kAnswered);
  EXPECT_EQ(Texts(again), (std::vector<std::string>{"env-3", "granted later"}));
}

// A handler that answers through the outbox before returning NoReply: the
// answer is kept, not overwritten by "parked".
TEST(RequestDedup, AnAnswerSentBeforeTheHandlerReturnedIsKept) {
  RequestDedup dedup;
  dedup.AddPeer("driver");
  dedup.AnsweredLater("driver", 5, Reply("env-5", "granted at once"));
  dedup.Handled("driver", 5, nullptr);
  transport::Frames again;
  EXPECT_EQ(dedup.Check("driver", 5, &again), RequestDedup::Seen::kAnswered);
}

TEST(RequestDedup, UntrackedPeersAreNeverRemembered) {
  RequestDedup dedup;
  transport::Frames reply = Reply("env", "body");
  dedup.Handled("agent", 1, &reply);
  dedup.AnsweredLater("agent", 2, reply);
  transport::Frames again;
  EXPECT_EQ(dedup.Check("agent", 1, &again), RequestDedup::Seen::kNew);
  EXPECT_EQ(dedup.Check("agent", 2, &again), RequestDedup::Seen::kNew);
  EXPECT_EQ(dedup.peer_count(), 0u);
}

TEST(RequestDedup, OnlyTheNewestAnswersAreKeptAndAGonePeerIsForgotten) {
  RequestDedup dedup;
  dedup.AddPeer("driver");
  dedup.Handled("driver", 1, nullptr);  // parked: kept whatever the answers
  for (uint64_t id = 2; id < 2 + RequestDedup::kMaxAnsweredPerPeer + 10; ++id) {
    transport::Frames reply = Reply("env", std::to_string(id));
    dedup.Handled("driver", id, &reply);
  }
  EXPECT_EQ(dedup.remembered("driver"), RequestDedup::kMaxAnsweredPerPeer + 1);
  transport::Frames again;
  EXPECT_EQ(dedup.Check("driver", 2, &again), RequestDedup::Seen::kNew) << "the oldest answer goes";
  EXPECT_EQ(dedup.Check("driver", 1, &again), RequestDedup::Seen::kParked);
  EXPECT_EQ(dedup.Check("driver", 2 + RequestDedup::kMaxAnsweredPerPeer + 9, &again),
            RequestDedup::Seen::kAnswered);
  dedup.RemovePeer("driver");
  EXPECT_EQ(dedup.Check("driver", 1, &again), RequestDedup::Seen::kNew);
  EXPECT_EQ(dedup.remembered("driver"), 0u);
}

}  // namespace
}  // namespace rayx::scheduler
