// A registered runtime sends its unanswered calls again after its connection
// to the head dropped (HeadClient::ResendAfterReconnect). The head answers
// each repeat as it answered the first copy: a lease is granted once, a
// placement group made once; a repeat of a parked request waits for its
// answer, which always comes; agents' messages are never taken for repeats.
#include <gtest/gtest.h>

#include <string>

#include "head_fixture.h"

namespace rayx::scheduler {
namespace head_repeat_test {  // this file's own (unit tests compile in batches)

using namespace testing_fixture;  // NOLINT: the fixture's names and constants

class HeadRepeatTest : public HeadFixture {
 protected:
  // Sends `body` from `peer` under exactly `wire_id` (no renumbering).
  template <typename Req>
  std::optional<Frames> Raw(const Req& body, const std::string& peer, uint64_t wire_id) {
    Frames frames = transport::MakeMessage(body, wire_id);
    return head_->Handle(frames, peer);
  }
  // A node and a driver registered; the driver's request for group "group-1"
  // (one {CPU: 1} bundle), not sent.
  protocol::CreatePlacementGroupRequest NodeDriverAndGroup() {
    Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
    protocol::CreatePlacementGroupRequest pg;
    pg.job_id = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
    pg.placement_group_id = PlacementGroupId::FromWire("group-1");
    pg.bundles = {{{"CPU", 1}}};
    return pg;
  }
  size_t CountSent(MessageType type) const {
    size_t n = 0;
    for (const auto& s : sent_) n += s.type == static_cast<uint16_t>(type);
    return n;
  }
};

TEST_F(HeadRepeatTest, ARepeatedLeaseRequestGetsTheSameGrantAndNoSecondLease) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  JobId job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  protocol::RequestLeaseRequest req;
  req.job_id = job;
  req.resources = {{"GPU", 1}};
  req.for_actor = true;
  EXPECT_FALSE(Raw(req, kDriver, 1000).has_value()) << "answered through the outbox";
  // A repeat while the worker starts: dropped (the grant will answer both).
  EXPECT_FALSE(Raw(req, kDriver, 1000).has_value());
  EXPECT_EQ(CountSent(MessageType::kStartWorkerRequest), 1u);
  StartTheWorker();
  auto [to_driver, grant] = Take<protocol::RequestLeaseReply>();
  EXPECT_EQ(to_driver.peer, kDriver);

  // The grant was lost with the connection: the repeat gets the same one.
  auto again = Raw(req, kDriver, 1000);
  ASSERT_TRUE(again.has_value());
  auto env = protocol::Decode<protocol::Envelope>(transport::FrameView((*again)[0]));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->id, 1000u);
  auto repeated = protocol::Decode<protocol::RequestLeaseReply>(transport::FrameView((*again)[1]));
  ASSERT_TRUE(repeated.ok());
  EXPECT_EQ(repeated->lease_id, grant.lease_id);
  EXPECT_EQ(CountSent(MessageType::kStartWorkerRequest), 0u) << "no second worker";
  EXPECT_EQ(Status().nodes.at(0).available.at("GPU"), 1.0) << "one of two GPUs leased";
  EXPECT_EQ(head_->repeated_request_count(), 2u);
}

TEST_F(HeadRepeatTest, ARepeatedPlacementGroupCreationMakesOneGroup) {
  protocol::CreatePlacementGroupRequest pg = NodeDriverAndGroup();
  auto first = Raw(pg, kDriver, 77);
  auto second = Raw(pg, kDriver, 77);
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_EQ(transport::FrameView((*first)[1]), transport::FrameView((*second)[1]));
  EXPECT_EQ(Status().nodes.at(0).available.at("CPU"), 3.0) << "one bundle reserved, not two";
}

// Agents are not runtimes: the same id from an agent is a new message (its
// ids and the head's requests to it share one space).
TEST_F(HeadRepeatTest, AnAgentsMessagesAreNeverTakenForRepeats) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  EXPECT_FALSE(head_->dedup().Tracks(kAgent));
  Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2);
  EXPECT_TRUE(head_->dedup().Tracks(kDriver));
  EXPECT_EQ(head_->repeated_request_count(), 0u);
}

// Reads are handled again (their replies, a KV value of up to 1 MiB, are not kept).
TEST_F(HeadRepeatTest, ReadsAreNotRememberedAndRunAgain) {
  Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2);
  protocol::KvGetRequest get{"ns", "key"};
  ASSERT_TRUE(Raw(get, kDriver, 9).has_value());
  EXPECT_EQ(head_->dedup().remembered(kDriver), 0u);
  ASSERT_TRUE(Raw(get, kDriver, 9).has_value());
  EXPECT_EQ(head_->repeated_request_count(), 0u);
}

// A runtime's remembered requests go when its job ends.
TEST_F(HeadRepeatTest, ARuntimesRequestsAreForgottenWhenItsJobEnds) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  JobId job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  protocol::KvPutRequest put;
  put.ns = "ns";
  put.key = "k";
  put.value = "v";
  put.overwrite = true;
  ASSERT_TRUE(Raw(put, kDriver, 5).has_value());
  EXPECT_EQ(head_->dedup().remembered(kDriver), 1u);
  protocol::FinishJobRequest finish;
  finish.job_id = job;
  Call<protocol::FinishJobReply>(finish, kDriver, 3);
  EXPECT_FALSE(head_->dedup().Tracks(kDriver));
  EXPECT_EQ(head_->dedup().peer_count(), 0u);
}

// A detached actor's runtime outlives its job, with its queued lease requests:
// its requests are still remembered after the job ends.
TEST_F(HeadRepeatTest, ADetachedActorsRuntimeIsStillRememberedAfterItsJobEnds) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  JobId job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  LeaseId detached = Lease(job, {{"CPU", 1}}, "", kDriver, /*detached=*/true).lease_id;
  protocol::RegisterDriverRequest worker = Driver(job);
  worker.host_lease_id = detached;
  Call<protocol::RegisterDriverReply>(worker, "detached-worker", 4);
  protocol::FinishJobRequest finish;
  finish.job_id = job;
  Call<protocol::FinishJobReply>(finish, kDriver, 3);
  EXPECT_FALSE(head_->dedup().Tracks(kDriver));
  EXPECT_TRUE(head_->dedup().Tracks("detached-worker"));
}

// Every request a runtime waits for is answered: a lease whose worker is still
// starting when its placement group is removed fails its owner's request
// (before, nobody answered it, and its repeats were dropped as parked).
TEST_F(HeadRepeatTest, ALeaseEndedWhileItsWorkerStartsAnswersItsOwner) {
  protocol::CreatePlacementGroupRequest pg = NodeDriverAndGroup();
  Call<protocol::CreatePlacementGroupReply>(pg, kDriver, 3);
  protocol::RequestLeaseRequest req;
  req.job_id = pg.job_id;
  req.resources = {{"CPU", 1}};
  req.for_actor = true;
  req.placement_group_id = pg.placement_group_id;
  req.bundle_index = 0;
  EXPECT_FALSE(Raw(req, kDriver, 2000).has_value());
  Take<protocol::StartWorkerRequest>();  // the agent starts it; it has not answered yet
  protocol::RemovePlacementGroupRequest remove;
  remove.placement_group_id = pg.placement_group_id;
  EXPECT_TRUE(Call<protocol::RemovePlacementGroupReply>(remove, kDriver, 4).removed);
  bool answered = false;
  for (const auto& s : sent_) {
    if (s.peer != kDriver || s.id != 2000) continue;
    ASSERT_EQ(s.type, static_cast<uint16_t>(MessageType::kErrorReply));
    auto error = protocol::Decode<protocol::ErrorReply>(s.body);
    ASSERT_TRUE(error.ok());
    EXPECT_NE(error->message.find("placement group was removed"), std::string::npos)
        << error->message;
    answered = true;
  }
  EXPECT_TRUE(answered) << "the owner's lease request was never answered";
  transport::Frames again;
  EXPECT_EQ(head_->dedup().Check(kDriver, 2000, &again), RequestDedup::Seen::kAnswered);
}

}  // namespace
}  // namespace rayx::scheduler
