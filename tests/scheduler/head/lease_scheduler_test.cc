// LeaseScheduler alone: requests checked as asked, placed by the policy on the
// node table's view, queued in FIFO order, and each kind of demand tried once
// per pass.
#include "head/lease_scheduler.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

namespace rayx::scheduler {
namespace lease_scheduler_test {  // this file's own (unit tests compile in batches)

protocol::RequestLeaseRequest Ask(ResourceMap resources) {
  protocol::RequestLeaseRequest req;
  req.resources = std::move(resources);
  return req;
}

PendingLease From(const std::string& peer, uint64_t id, ResourceMap resources) {
  return PendingLease{LeaseOwner{Requester{peer, id}, LeaseOwner::Kind::kCaller},
                      Ask(std::move(resources))};
}

TEST(LeaseScheduler, ARequestAskedWronglyIsRefusedNamingWhat) {
  EXPECT_TRUE(LeaseScheduler::Check(Ask({{"CPU", 1}, {"GPU", 0.5}})).ok());
  Status negative = LeaseScheduler::Check(Ask({{"CPU", -1}}));
  EXPECT_EQ(negative.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(negative.message().find("invalid amount of \"CPU\""), std::string::npos) << negative;
  EXPECT_EQ(LeaseScheduler::Check(Ask({{"GPU", 1.5}})).code(), StatusCode::kInvalidArgument);
  auto affinity = Ask({{"CPU", 1}});
  affinity.strategy = protocol::LeaseStrategy::kNodeAffinity;
  affinity.affinity_node_id = "not-a-node";
  Status bad_node = LeaseScheduler::Check(affinity);
  EXPECT_NE(bad_node.message().find("'not-a-node' is not a node id"), std::string::npos)
      << bad_node;
  affinity.strategy = static_cast<protocol::LeaseStrategy>(9);
  EXPECT_EQ(LeaseScheduler::Check(affinity).code(), StatusCode::kInvalidArgument);
}

TEST(LeaseScheduler, TheDecisionIsThePolicysOnTheNodeTablesView) {
  NodeTable nodes(NodeTable::Options{});
  LeaseScheduler scheduler(nodes);
  EXPECT_TRUE(std::holds_alternative<policy::Infeasible>(scheduler.Decide(Ask({{"CPU", 1}}))))
      << "no node at all";
  NodeInfo info;
  info.address = "10.0.0.2";
  info.total = {{"CPU", 2}, {"GPU", 2}};
  NodeId node = nodes.Register(info, 0, 0);
  auto decision = scheduler.Decide(Ask({{"GPU", 1}}));
  const auto* scheduled = std::get_if<policy::Scheduled>(&decision);
  ASSERT_NE(scheduled, nullptr);
  EXPECT_EQ(scheduled->node, node);
  EXPECT_EQ(scheduled->gpu_ids.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<policy::Infeasible>(scheduler.Decide(Ask({{"GPU", 3}}))));
  ASSERT_TRUE(nodes.AcquireExact(node, {{"CPU", 2}}, {}));
  EXPECT_TRUE(std::holds_alternative<policy::Pending>(scheduler.Decide(Ask({{"CPU", 1}}))))
      << "fits the node once it is free";
  EXPECT_EQ(scheduler.decisions(), 4u);
}

TEST(LeaseScheduler, APassOffersEachKindOfDemandOnceInOrder) {
  NodeTable nodes(NodeTable::Options{});
  LeaseScheduler scheduler(nodes);
  scheduler.Enqueue(From("a", 1, {{"CPU", 4}}));
  scheduler.Enqueue(From("b", 2, {{"CPU", 4}}));  // the same demand: not offered after a's no
  scheduler.Enqueue(From("c", 3, {{"CPU", 1}}));
  scheduler.Enqueue(From("ended", 4, {{"CPU", 1}}));
  scheduler.Enqueue(From("d", 5, {{"CPU", 1}}));
  std::vector<std::string> offered;
  scheduler.Pass([](const PendingLease& p) { return p.owner.requester.peer != "ended"; },
                 [&](PendingLease& p) {
                   offered.push_back(p.owner.requester.peer);
                   return p.req.resources.at("CPU") < 2;  // the small ones fit
                 });
  EXPECT_EQ(offered, (std::vector<std::string>{"a", "c", "d"}));
  EXPECT_EQ(scheduler.size(), 3u) << "a, b and the ended job's wait";
  std::map<std::string, int> shapes;
  scheduler.CountShapes(&shapes);
  EXPECT_EQ(shapes.size(), 2u);

  EXPECT_TRUE(scheduler.DropFirst([](const PendingLease& p) { return p.owner.requester.peer == "b"; }));
  EXPECT_FALSE(scheduler.DropFirst([](const PendingLease& p) { return p.owner.requester.peer == "b"; }));
  std::vector<uint64_t> answered;
  EXPECT_EQ(scheduler.Drop([&](PendingLease& p) {
              answered.push_back(p.owner.requester.request_id);
              return true;
            }),
            2u);
  EXPECT_EQ(answered, (std::vector<uint64_t>{1, 4}));
  EXPECT_EQ(scheduler.size(), 0u);
}

}  // namespace lease_scheduler_test
}  // namespace rayx::scheduler
