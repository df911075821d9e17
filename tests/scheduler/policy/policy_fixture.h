// Builders, printers and invariant checks shared by the policy library's tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "policy/cluster_resource_view.h"
#include "policy/composite_bundle_policy.h"
#include "policy/composite_policy.h"
#include "policy/scheduling_types.h"

#define ASSERT_OK(expr)                                       \
  do {                                                        \
    ::rayx::Status _assert_ok_status = (expr);                \
    ASSERT_TRUE(_assert_ok_status.ok()) << _assert_ok_status; \
  } while (0)

#define EXPECT_OK(expr)                                       \
  do {                                                        \
    ::rayx::Status _expect_ok_status = (expr);                \
    EXPECT_TRUE(_expect_ok_status.ok()) << _expect_ok_status; \
  } while (0)

namespace rayx::scheduler::policy {

// gtest printers, so a failed expectation shows the decision and its reason.
inline void PrintTo(const Scheduled& s, std::ostream* os) {
  *os << "Scheduled{node " << s.node.Short() << ", gpus [";
  for (size_t i = 0; i < s.gpu_ids.size(); ++i) *os << (i ? "," : "") << s.gpu_ids[i];
  *os << "]}";
}
inline void PrintTo(const SchedulingDecision& d, std::ostream* os) {
  if (const auto* s = std::get_if<Scheduled>(&d)) return PrintTo(*s, os);
  if (const auto* p = std::get_if<Pending>(&d)) *os << "Pending{" << p->reason << "}";
  if (const auto* i = std::get_if<Infeasible>(&d)) *os << "Infeasible{" << i->reason << "}";
}
inline void PrintTo(const GroupDecision& d, std::ostream* os) {
  if (const auto* g = std::get_if<GroupScheduled>(&d)) {
    *os << "GroupScheduled{";
    for (const Scheduled& s : g->bundles) PrintTo(s, os);
    *os << "}";
  }
  if (const auto* p = std::get_if<Pending>(&d)) *os << "Pending{" << p->reason << "}";
  if (const auto* i = std::get_if<Infeasible>(&d)) *os << "Infeasible{" << i->reason << "}";
}
template <typename Decision>
std::string Describe(const Decision& d) {
  std::ostringstream os;
  PrintTo(d, &os);
  return os.str();
}

namespace testing {

// Node ids that read as numbers in failure messages: node 3 is "00000003...".
inline NodeId TestNodeId(int n) {
  char hex[33];
  std::snprintf(hex, sizeof hex, "%08x%024x", n, 0);
  return *NodeId::FromHex(hex);
}

// The Scheduled of `d`, or a failed expectation and an empty Scheduled.
template <typename Decision>
auto ScheduledOf(const Decision& d) {
  using S = std::conditional_t<std::is_same_v<Decision, GroupDecision>, GroupScheduled, Scheduled>;
  const S* s = std::get_if<S>(&d);
  EXPECT_NE(s, nullptr) << "expected a placement, got " << Describe(d);
  return s ? *s : S{};
}
// The reason of a Pending / Infeasible `d`, or a failed expectation and "".
template <typename Decision>
std::string PendingReason(const Decision& d) {
  const Pending* p = std::get_if<Pending>(&d);
  EXPECT_NE(p, nullptr) << "expected Pending, got " << Describe(d);
  return p ? p->reason : "";
}
template <typename Decision>
std::string InfeasibleReason(const Decision& d) {
  const Infeasible* i = std::get_if<Infeasible>(&d);
  EXPECT_NE(i, nullptr) << "expected Infeasible, got " << Describe(d);
  return i ? i->reason : "";
}

// A view, the two front-door policies and builders. Every test ends with the
// view's indexes checked against its records.
class PolicyTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_OK(view_.TEST_CheckInvariants()); }

  // Adds a node with `cpus` CPUs, `gpus` GPU devices, `labels` and any `extra`
  // resources; nodes are numbered in the order they are made.
  NodeId MakeNode(double cpus, double gpus = 0, LabelMap labels = {}, ResourceMap extra = {}) {
    NodeId id = TestNodeId(next_node_++);
    ResourceMap total = std::move(extra);
    total["CPU"] = cpus;
    if (gpus > 0) total["GPU"] = gpus;
    view_.AddNode(id, total, labels);
    return id;
  }

  static SchedulingRequest MakeRequest(ResourceMap demand,
                                       SchedulingStrategy strategy = DefaultStrategy{},
                                       LabelMap selector = {}) {
    return SchedulingRequest{std::move(demand), std::move(strategy), std::move(selector)};
  }
  static PlacementGroupRequest MakeGroup(std::vector<ResourceMap> bundles,
                                         PlacementStrategy strategy, LabelMap selector = {}) {
    return PlacementGroupRequest{std::move(bundles), strategy, std::move(selector)};
  }

  SchedulingDecision Decide(const SchedulingRequest& request) {
    return policy_.Schedule(view_, request);
  }
  GroupDecision DecideGroup(const PlacementGroupRequest& request) {
    return groups_.Schedule(view_, request);
  }

  // Decides and commits; a failed expectation when it is not placed or the
  // commit fails.
  Scheduled Place(const SchedulingRequest& request) {
    Scheduled s = ScheduledOf(Decide(request));
    if (!s.node.IsNil()) {
      EXPECT_TRUE(view_.Acquire(s.node, request.demand, s.gpu_ids)) << Describe(Decide(request));
    }
    return s;
  }
  GroupScheduled PlaceGroup(const PlacementGroupRequest& request) {
    GroupScheduled g = ScheduledOf(DecideGroup(request));
    if (!g.bundles.empty()) EXPECT_OK(view_.AcquireGroup(g));
    return g;
  }

  double Available(const NodeId& id, const std::string& resource) const {
    auto node = view_.Find(id);
    EXPECT_TRUE(node.has_value());
    if (!node || !node->available.count(resource)) return 0;
    return node->available.at(resource);
  }
  std::vector<double> GpuFree(const NodeId& id) const {
    auto node = view_.Find(id);
    EXPECT_TRUE(node.has_value());
    return node ? node->gpu_free : std::vector<double>{};
  }

  ClusterResourceView view_;
  CompositePolicy policy_;
  CompositeBundlePolicy groups_;
  int next_node_ = 0;
};

}  // namespace testing
}  // namespace rayx::scheduler::policy
