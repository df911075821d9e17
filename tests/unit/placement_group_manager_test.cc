// PlacementGroupManager driven call by call with a real NodeTable and a recording outbox.
#include "head/placement_group_manager.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "head/node_table.h"
#include "recording_outbox.h"

namespace rayx::scheduler {
namespace {

using Kind = RecordingOutbox::Kind;
constexpr int64_t kT0 = 10'000;

class PlacementGroupManagerTest : public ::testing::Test {
 protected:
  // No wait is left unanswered when the test ends.
  void TearDown() override {
    groups_.ExpireWaits(kT0 + 1'000'000);
    for (const auto& r : outbox_.Take()) {
      ADD_FAILURE() << "a wait was still parked at the end: request " << r.request_id;
    }
  }

  NodeId AddNode(ResourceMap total) {
    NodeInfo info;
    info.address = "10.0.0." + std::to_string(++nodes_added_);
    info.total = std::move(total);
    return nodes_.Register(info, kT0, 0);
  }

  protocol::PlacementGroupInfo Create(std::vector<ResourceMap> bundles,
                                      std::string strategy = "PACK") {
    protocol::CreatePlacementGroupRequest req;
    req.job_id = "job-1";
    req.strategy = std::move(strategy);
    req.bundles = std::move(bundles);
    auto group = groups_.Create(req);
    EXPECT_TRUE(group.ok()) << group.status();
    return group.ok() ? *group : protocol::PlacementGroupInfo{};
  }

  // Takes exactly one record, which must be a wait answer to `request_id`.
  protocol::PlacementGroupInfo TakeWaitAnswer(uint64_t request_id) {
    auto records = outbox_.Take();
    EXPECT_EQ(records.size(), 1u);
    if (records.size() != 1) return {};
    EXPECT_EQ(records[0].kind, Kind::kPlacementGroupWaitDone);
    EXPECT_EQ(records[0].peer, "driver");
    EXPECT_EQ(records[0].request_id, request_id);
    return records[0].group_wait.group;
  }

  NodeTable nodes_{NodeTable::Options{}};
  RecordingOutbox outbox_;
  PlacementGroupManager groups_{nodes_, outbox_};
  int nodes_added_ = 0;
};

TEST_F(PlacementGroupManagerTest, GroupThatFitsIsCreatedAndWaitIsAnsweredAtOnce) {
  NodeId node = AddNode({{"CPU", 4}});
  auto group = Create({{{"CPU", 1}}, {{"CPU", 2}}});
  EXPECT_EQ(group.state, "CREATED");
  ASSERT_EQ(group.locations.size(), 2u);
  EXPECT_EQ(group.locations[0].node_id, node.Hex());
  groups_.Wait("driver", 5, group.placement_group_id, 1000, kT0);
  EXPECT_EQ(TakeWaitAnswer(5).state, "CREATED");
}

TEST_F(PlacementGroupManagerTest, PendingGroupWaitIsAnsweredWhenResourcesFree) {
  NodeId node = AddNode({{"CPU", 2}});
  auto first = Create({{{"CPU", 2}}});
  ASSERT_EQ(first.state, "CREATED");
  auto second = Create({{{"CPU", 2}}});
  EXPECT_EQ(second.state, "PENDING");
  groups_.Wait("driver", 6, second.placement_group_id, 5000, kT0);
  EXPECT_TRUE(outbox_.Take().empty());
  ASSERT_TRUE(groups_.Remove(first.placement_group_id));
  groups_.SchedulePending();
  auto answered = TakeWaitAnswer(6);
  EXPECT_EQ(answered.state, "CREATED");
  EXPECT_EQ(answered.locations.at(0).node_id, node.Hex());
}

TEST_F(PlacementGroupManagerTest, PendingGroupWaitTimesOutWithTheReason) {
  AddNode({{"CPU", 1}});
  ASSERT_EQ(Create({{{"CPU", 1}}}).state, "CREATED");
  auto waiting = Create({{{"CPU", 1}}});
  ASSERT_EQ(waiting.state, "PENDING");
  groups_.Wait("driver", 7, waiting.placement_group_id, 500, kT0);
  groups_.ExpireWaits(kT0 + 499);
  EXPECT_TRUE(outbox_.Take().empty());
  groups_.ExpireWaits(kT0 + 500);
  auto answered = TakeWaitAnswer(7);
  EXPECT_EQ(answered.state, "PENDING");
  EXPECT_FALSE(answered.reason.empty());
}

TEST_F(PlacementGroupManagerTest, InfeasibleGroupIsAnsweredAtOnceWithTheReason) {
  AddNode({{"CPU", 2}});
  auto group = Create({{{"CPU", 8}}});
  EXPECT_EQ(group.state, "INFEASIBLE");
  groups_.Wait("driver", 8, group.placement_group_id, 5000, kT0);
  auto answered = TakeWaitAnswer(8);
  EXPECT_EQ(answered.state, "INFEASIBLE");
  EXPECT_FALSE(answered.reason.empty());
}

TEST_F(PlacementGroupManagerTest, WaitForUnknownGroupFailsWithNotFound) {
  groups_.Wait("driver", 9, "no-such-group", 1000, kT0);
  auto records = outbox_.Take();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].kind, Kind::kFail);
  EXPECT_EQ(records[0].request_id, 9u);
  EXPECT_EQ(records[0].status.code(), StatusCode::kNotFound);
}

TEST_F(PlacementGroupManagerTest, UnknownStrategyIsInvalidArgument) {
  AddNode({{"CPU", 2}});
  protocol::CreatePlacementGroupRequest req;
  req.job_id = "job-1";
  req.strategy = "SCATTER";
  req.bundles = {{{"CPU", 1}}};
  EXPECT_EQ(groups_.Create(req).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(groups_.size(), 0u);
}

}  // namespace
}  // namespace rayx::scheduler
