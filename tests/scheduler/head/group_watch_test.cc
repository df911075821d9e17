// The head's collective group member watches: GroupWatch on its own, then
// through a real HeadService (leases granted, returned, lost with their node).
#include "head/group_watch.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "head_fixture.h"

namespace rayx::scheduler {
namespace group_watch_test {  // this file's own (unit tests compile in batches)

protocol::WatchGroupRequest Watch(const std::string& group, int rank, const std::string& lease,
                                  int world_size = 3, const std::string& attempt = "a1") {
  protocol::WatchGroupRequest req;
  req.group = group;
  req.attempt_id = attempt;
  req.world_size = world_size;
  req.rank = rank;
  req.lease_id = LeaseId::FromWire(lease);
  return req;
}
protocol::WatchGroupRequest Watch(const std::string& group, int rank, const LeaseId& lease,
                                  int world_size = 3, const std::string& attempt = "a1") {
  return Watch(group, rank, lease.Hex(), world_size, attempt);
}

std::set<std::string> PeersOf(const GroupWatch::Notices& notices) {
  std::set<std::string> out;
  for (const auto& n : notices) out.insert(n.peer);
  return out;
}

TEST(GroupWatchTest, ALeaseEndingTellsEveryOtherRankOnceNamingTheRankAndCause) {
  GroupWatch watch;
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(watch.Add("peer-" + std::to_string(r), Watch("g", r, "lease-" + std::to_string(r))).ok());
  }
  EXPECT_EQ(watch.member_count(), 3u);
  auto notices =
      watch.OnLeaseEnded(LeaseId::FromWire("lease-1"), "node 10.0.0.2 was declared dead");
  EXPECT_EQ(PeersOf(notices), (std::set<std::string>{"peer-0", "peer-2"}));
  for (const auto& [peer, lease, notice] : notices) {
    EXPECT_NE(lease.Hex(), "lease-1") << "the dead rank is not told";
    EXPECT_EQ(notice.group, "g");
    EXPECT_EQ(notice.attempt_id, "a1");
    EXPECT_EQ(notice.failed_rank, 1);
    EXPECT_EQ(notice.lease_id.Hex(), "lease-1");
    EXPECT_EQ(notice.cause, "node 10.0.0.2 was declared dead");
  }
  // The group is forgotten: the next death says nothing more.
  EXPECT_EQ(watch.member_count(), 0u);
  EXPECT_EQ(watch.group_count(), 0u);
  EXPECT_TRUE(watch.OnLeaseEnded(LeaseId::FromWire("lease-0"), "later").empty());
}

TEST(GroupWatchTest, ListShowsLiveGroupsWithTheirRanksThenTheNewestEndedOnes) {
  GroupWatch watch;
  ASSERT_TRUE(watch.Add("p0", Watch("live", 0, "lease-a", 2)).ok());
  ASSERT_TRUE(watch.Add("p1", Watch("live", 1, "lease-b", 2)).ok());
  for (int g = 0; g < 3; ++g) {
    const std::string name = "gone-" + std::to_string(g);
    ASSERT_TRUE(watch.Add("q", Watch(name, 0, "lease-" + name, 2)).ok());
    ASSERT_TRUE(watch.Add("r", Watch(name, 1, "other-" + name, 2)).ok());
    watch.OnLeaseEnded(LeaseId::FromWire("other-" + name), "killed");
  }
  auto listed = watch.List(10, 2);
  ASSERT_EQ(listed.size(), 3u) << "the live group and the 2 newest ended ones";
  EXPECT_EQ(listed[0].group, "live");
  EXPECT_EQ(listed[0].world_size, 2);
  EXPECT_EQ(listed[0].ended, "");
  ASSERT_EQ(listed[0].members.size(), 2u);
  EXPECT_EQ(listed[0].members[1].rank, 1);
  EXPECT_EQ(listed[0].members[1].lease_id.Hex(), "lease-b");
  EXPECT_EQ(listed[1].group, "gone-2");
  EXPECT_EQ(listed[1].ended, "rank 1: killed");
  EXPECT_EQ(listed[2].group, "gone-1");
  EXPECT_EQ(watch.List(1, 50).size(), 1u) << "the limit holds over both";
}

TEST(GroupWatchTest, OneLeaseInTwoGroupsEndsBoth) {
  GroupWatch watch;
  ASSERT_TRUE(watch.Add("p0", Watch("g", 0, "shared", 2)).ok());
  ASSERT_TRUE(watch.Add("p1", Watch("g", 1, "other-1", 2)).ok());
  ASSERT_TRUE(watch.Add("p0", Watch("h", 0, "shared", 2)).ok());
  ASSERT_TRUE(watch.Add("p2", Watch("h", 1, "other-2", 2)).ok());
  auto notices = watch.OnLeaseEnded(LeaseId::FromWire("shared"), "gone");
  EXPECT_EQ(PeersOf(notices), (std::set<std::string>{"p1", "p2"}));
  EXPECT_EQ(watch.group_count(), 0u);
  EXPECT_EQ(watch.member_count(), 0u);
}

TEST(GroupWatchTest, AttemptsOfOneNameAreSeparateGroups) {
  GroupWatch watch;
  ASSERT_TRUE(watch.Add("old-0", Watch("g", 0, "l0", 2, "a1")).ok());
  ASSERT_TRUE(watch.Add("old-1", Watch("g", 1, "l1", 2, "a1")).ok());
  ASSERT_TRUE(watch.Add("new-0", Watch("g", 0, "m0", 2, "a2")).ok());
  ASSERT_TRUE(watch.Add("new-1", Watch("g", 1, "m1", 2, "a2")).ok());
  auto notices = watch.OnLeaseEnded(LeaseId::FromWire("l1"), "gone");
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0].peer, "old-0");
  EXPECT_EQ(notices[0].member_lease_id.Hex(), "l0");
  EXPECT_EQ(notices[0].notice.attempt_id, "a1");
  EXPECT_EQ(watch.member_count(), 2u) << "attempt a2 is still watched";
}

TEST(GroupWatchTest, ARankThatLeftIsNeitherToldNorToldAbout) {
  GroupWatch watch;
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(watch.Add("p" + std::to_string(r), Watch("g", r, "l" + std::to_string(r))).ok());
  }
  protocol::UnwatchGroupRequest leave{"g", "a1", 0};
  EXPECT_TRUE(watch.Remove(leave));
  EXPECT_FALSE(watch.Remove(leave)) << "not watched any more";
  EXPECT_TRUE(watch.OnLeaseEnded(LeaseId::FromWire("l0"), "its worker exited").empty())
      << "a rank that left is not reported";
  auto notices = watch.OnLeaseEnded(LeaseId::FromWire("l2"), "gone");
  EXPECT_EQ(PeersOf(notices), (std::set<std::string>{"p1"}));
}

TEST(GroupWatchTest, ARankWatchingAfterADeathIsToldAtOnce) {
  GroupWatch watch;
  ASSERT_TRUE(watch.Add("p0", Watch("g", 0, "l0")).ok());
  ASSERT_TRUE(watch.Add("p1", Watch("g", 1, "l1")).ok());
  ASSERT_EQ(watch.OnLeaseEnded(LeaseId::FromWire("l1"), "node died").size(), 1u);
  auto late = watch.Add("p2", Watch("g", 2, "l2"));
  ASSERT_TRUE(late.ok()) << late.status();
  ASSERT_TRUE(late->has_value()) << "the late rank must hear of the death now";
  EXPECT_EQ((*late)->failed_rank, 1);
  EXPECT_EQ((*late)->cause, "node died");
  EXPECT_EQ(watch.member_count(), 0u) << "a failed group is not watched again";
  // The dead rank itself cannot watch its group again.
  EXPECT_EQ(watch.Add("p1", Watch("g", 1, "l1-again")).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(GroupWatchTest, BadRequestsAreRefusedNamingWhatIsWrong) {
  GroupWatch watch({.max_members = 2, .max_world_size = 8, .max_groups_per_lease = 1});
  auto bad = [&](protocol::WatchGroupRequest req, const std::string& part) {
    Status s = watch.Add("p", req).status();
    EXPECT_FALSE(s.ok()) << part;
    EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
  };
  bad(Watch("", 0, "l"), "name is empty");
  bad(Watch("g", 0, ""), "no lease");
  bad(Watch("g", 0, "l", 0), "world size 0");
  bad(Watch("g", 0, "l", 9), "world size 9");
  bad(Watch("g", 3, "l", 3), "not in 0..2");
  bad(Watch("g", -1, "l", 3), "not in 0..2");
  ASSERT_TRUE(watch.Add("p", Watch("g", 0, "l0")).ok());
  bad(Watch("g", 1, "l1", 4), "world size 3, not 4");
  bad(Watch("h", 0, "l0"), "holds ranks of 1 groups");
  ASSERT_TRUE(watch.Add("p", Watch("g", 1, "l1")).ok());
  bad(Watch("g", 2, "l2"), "its limit");
  // Watching a rank again replaces it (its new lease is what is watched).
  ASSERT_TRUE(watch.Add("p-new", Watch("g", 1, "l1b")).ok());
  EXPECT_EQ(watch.member_count(), 2u);
  EXPECT_TRUE(watch.OnLeaseEnded(LeaseId::FromWire("l1"), "old lease").empty());
  EXPECT_EQ(watch.OnLeaseEnded(LeaseId::FromWire("l1b"), "new lease").size(), 1u);
}

TEST(GroupWatchTest, RememberedFailuresAreBounded) {
  GroupWatch watch({.remembered_failures = 2});
  for (int g = 0; g < 3; ++g) {
    std::string name = "g" + std::to_string(g);
    ASSERT_TRUE(watch.Add("p", Watch(name, 0, name + "-l0", 2)).ok());
    ASSERT_TRUE(watch.Add("q", Watch(name, 1, name + "-l1", 2)).ok());
    watch.OnLeaseEnded(LeaseId::FromWire(name + "-l1"), "gone");
  }
  // g0's failure is forgotten (the oldest): a late rank is simply watched.
  auto g0 = watch.Add("r", Watch("g0", 0, "late", 2));
  ASSERT_TRUE(g0.ok());
  EXPECT_FALSE(g0->has_value());
  auto g2 = watch.Add("r", Watch("g2", 0, "late2", 2));
  ASSERT_TRUE(g2.ok());
  EXPECT_TRUE(g2->has_value());
}

// Through the head: ranks in leased workers watch their group; the head tells
// the others when a rank's lease ends, however it ends.
using namespace testing_fixture;  // NOLINT: the fixture's names and constants

class HeadGroupWatchTest : public HeadFixture {
 protected:
  void SetUp() override {
    HeadFixture::SetUp();
    auto joined = Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
    node_ = joined.node_id;
    epoch_ = joined.epoch;
    job_ = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
    // Each rank's worker runtime registers with the job, like a driver.
    for (const char* peer : {"rank-0", "rank-1", "rank-2"}) {
      Call<protocol::RegisterDriverReply>(Driver(job_), peer, 3);
    }
    for (int r = 0; r < 3; ++r) leases_.push_back(Lease(job_, {{"CPU", 1}}).lease_id);
    for (int r = 0; r < 3; ++r) {
      Call<protocol::WatchGroupReply>(Watch("g", r, leases_[r]), "rank-" + std::to_string(r));
    }
    sent_.clear();
  }
  // The GroupMemberDiedNotices sent, by peer.
  std::map<std::string, protocol::GroupMemberDiedNotice> Notices() {
    std::map<std::string, protocol::GroupMemberDiedNotice> out;
    for (const auto& s : sent_) {
      if (s.type != static_cast<uint16_t>(MessageType::kGroupMemberDiedNotice)) continue;
      auto notice = protocol::Decode<protocol::GroupMemberDiedNotice>(s.body);
      EXPECT_TRUE(notice.ok());
      EXPECT_TRUE(out.emplace(s.peer, *notice).second) << "two notices to " << s.peer;
    }
    return out;
  }
  // The node's agent rejoins the restarted head, still running `live`.
  void Rejoin(const std::vector<LeaseId>& live) {
    protocol::RegisterNodeRequest rejoin = Hello();
    rejoin.rejoin = true;
    rejoin.previous_node_id = node_;
    rejoin.previous_epoch = epoch_;
    for (const auto& lease : live) {
      rejoin.live_leases.push_back({lease, job_, {{"CPU", 1}}, {}, 4242, false});
    }
    auto rejoined = Call<protocol::RegisterNodeReply>(rejoin, kAgent, 40);
    EXPECT_EQ(rejoined.node_id, node_);
  }
  NodeId node_;
  uint64_t epoch_ = 0;
  JobId job_;
  std::vector<LeaseId> leases_;
};

TEST_F(HeadGroupWatchTest, AReturnedLeaseAbortsTheOtherRanks) {
  protocol::ReturnLeaseRequest ret;
  ret.lease_id = leases_[2];
  Call<protocol::ReturnLeaseReply>(ret, kDriver, 20);
  auto notices = Notices();
  ASSERT_EQ(notices.size(), 2u);
  for (const char* peer : {"rank-0", "rank-1"}) {
    ASSERT_TRUE(notices.count(peer)) << peer;
    EXPECT_EQ(notices[peer].failed_rank, 2);
    EXPECT_EQ(notices[peer].lease_id, leases_[2]);
    EXPECT_NE(notices[peer].cause.find("returned the lease"), std::string::npos)
        << notices[peer].cause;
  }
  EXPECT_EQ(head_->group_watch().group_count(), 0u);
}

TEST_F(HeadGroupWatchTest, ANodeDeclaredDeadAbortsTheGroupNamingTheNode) {
  // All three ranks' leases are on the silent node: the first lease to end
  // makes the head tell the other two ranks, once each.
  clock_.Advance(701);
  head_->ExpireSilentNodes();
  auto notices = Notices();
  ASSERT_EQ(notices.size(), 2u) << "one lease ends first; the other two ranks hear of it";
  for (const auto& [peer, notice] : notices) {
    EXPECT_NE(notice.cause.find("declared dead"), std::string::npos) << notice.cause;
    EXPECT_NE(notice.cause.find("10.0.0.7"), std::string::npos) << notice.cause;
  }
}

TEST_F(HeadGroupWatchTest, ALeaseThatIsNotLiveCannotBeWatched) {
  auto error = CallError(Watch("h", 0, "no-such-lease"), "rank-0");
  EXPECT_EQ(error.code, static_cast<uint8_t>(StatusCode::kNotFound));
  EXPECT_NE(error.message.find("not live"), std::string::npos) << error.message;
  // And a peer that never registered is refused before anything is kept.
  auto stranger = CallError(Watch("h", 0, leases_[0]), "stranger");
  EXPECT_NE(stranger.code, 0);
  EXPECT_EQ(head_->group_watch().member_count(), 3u);
}

TEST_F(HeadGroupWatchTest, RanksThatLeftHearNothing) {
  for (int r = 0; r < 3; ++r) {
    protocol::UnwatchGroupRequest leave{"g", "a1", r};
    EXPECT_TRUE(Call<protocol::UnwatchGroupReply>(leave, "rank-" + std::to_string(r)).removed);
  }
  protocol::ReturnLeaseRequest ret;
  ret.lease_id = leases_[0];
  Call<protocol::ReturnLeaseReply>(ret, kDriver, 20);
  EXPECT_TRUE(Notices().empty());
}

// A detached rank outlives its job: when the job's other ranks are stopped,
// it is told (and it alone).
TEST_F(HeadGroupWatchTest, AJobEndingTellsADetachedRankThatOutlivesIt) {
  LeaseId detached = Lease(job_, {{"CPU", 1}}, "", kDriver, /*detached=*/true).lease_id;
  Call<protocol::RegisterDriverReply>(Driver(job_), "rank-3", 3);
  Call<protocol::WatchGroupReply>(Watch("h", 0, detached, 2), "rank-3");
  Call<protocol::WatchGroupReply>(Watch("h", 1, leases_[0], 2), "rank-0");
  sent_.clear();
  protocol::FinishJobRequest finish;
  finish.job_id = job_;
  Call<protocol::FinishJobReply>(finish, kDriver, 30);
  auto notices = Notices();
  ASSERT_EQ(notices.size(), 1u) << "only the detached rank outlives the job";
  ASSERT_TRUE(notices.count("rank-3"));
  EXPECT_EQ(notices["rank-3"].group, "h");
  EXPECT_EQ(notices["rank-3"].failed_rank, 1);
}

TEST_F(HeadGroupWatchTest, AJobEndingEndsItsGroupsWatchesWithoutNotices) {
  protocol::FinishJobRequest finish;
  finish.job_id = job_;
  Call<protocol::FinishJobReply>(finish, kDriver, 30);
  EXPECT_TRUE(Notices().empty()) << "every rank of the job is being stopped: nothing to abort";
  EXPECT_EQ(head_->group_watch().member_count(), 0u);
  EXPECT_EQ(head_->group_watch().group_count(), 0u);
}

// The watches are in the head's state file: after a restart, a rank whose
// worker ended while the head was down (its agent rejoins without it) is
// reported to the others, and later deaths are too.
TEST_F(HeadGroupWatchTest, ARestartedHeadStillTellsTheRanks) {
  StartHead();
  Rejoin({leases_[0], leases_[1]});
  auto notices = Notices();
  ASSERT_EQ(notices.size(), 2u);
  for (const char* peer : {"rank-0", "rank-1"}) {
    ASSERT_TRUE(notices.count(peer)) << peer;
    EXPECT_EQ(notices[peer].failed_rank, 2);
    EXPECT_NE(notices[peer].cause.find("ended while the head was down"), std::string::npos)
        << notices[peer].cause;
  }
  EXPECT_EQ(head_->group_watch().group_count(), 0u);
}

// A lease the rejoining node still runs but the restarted head stops (its job
// ended while the head was down) ends its watches too, in memory and on disk.
TEST_F(HeadGroupWatchTest, LeasesStoppedWhenTheirNodeRejoinsEndTheirWatches) {
  StartHead();
  clock_.Advance(job_timeout_ms_ + 1);  // the driver does not come back
  head_->ExpireSilentNodes();
  Rejoin(leases_);
  EXPECT_EQ(head_->group_watch().member_count(), 0u);
  StartHead();
  EXPECT_EQ(head_->group_watch().member_count(), 0u) << "nor are they restored again";
}

// A group made right after a head restart, before the ranks' node rejoined.
TEST_F(HeadGroupWatchTest, ARankMayWatchWhileItsLeaseWaitsForItsNodeToRejoin) {
  StartHead();
  Call<protocol::RegisterDriverReply>(Driver(job_), "rank-0", 50);
  Call<protocol::WatchGroupReply>(Watch("fresh", 0, leases_[0], 2, "a2"), "rank-0");
  EXPECT_EQ(head_->group_watch().member_count(), 4u);
}

TEST_F(HeadGroupWatchTest, WatchesLeftAfterARestartStillReportLaterDeaths) {
  StartHead();
  EXPECT_EQ(head_->group_watch().member_count(), 3u) << "restored from the state file";
  Rejoin(leases_);
  EXPECT_TRUE(Notices().empty());
  Call<protocol::RegisterDriverReply>(Driver(job_), kDriver, 41);
  protocol::ReturnLeaseRequest ret;
  ret.lease_id = leases_[0];
  Call<protocol::ReturnLeaseReply>(ret, kDriver, 42);
  auto notices = Notices();
  ASSERT_EQ(notices.size(), 2u);
  EXPECT_EQ(notices["rank-1"].failed_rank, 0);
  EXPECT_EQ(notices["rank-2"].failed_rank, 0);
}

}  // namespace
}  // namespace rayx::scheduler
