// The SPREAD strategy: least loaded node, round robin among equals.
#pragma once

#include <cstdint>
#include <optional>

#include "policy/node_search.h"
#include "policy/scheduling_policy.h"

namespace rayx::scheduler::policy {

// Design: among the nodes that can hold the request now (and match its label
// selector), the least utilized wins, so work spreads by load. Ties go round
// robin: to the first tied node registered after the node this policy chose
// last, wrapping around. Utilization is the most used resource's fraction, so a
// small request may not change a node's figure (a node whose GPUs are all busy
// stays at 1 while its CPUs fill); the round robin still sends consecutive
// requests to different nodes then. Like Ray's SpreadSchedulingPolicy, which is
// round robin over available nodes, the cursor lives in the policy object (the
// only state any policy keeps). Unlike the hybrid policy it does not keep
// CPU-only work off GPU nodes: spreading means every node.
// Cost: per group one least-loaded search and, when the least loaded node is
// not past the cursor, one in-order search for a tie after it: O(groups x log n).
class SpreadPolicy : public SchedulingPolicy {
 public:
  SchedulingDecision Schedule(const ClusterResourceView& view,
                              const SchedulingRequest& request) override;

  // The least utilized node `search` admits with `demand` available that passes
  // `accept`; among equals the first registered after order `after` when given,
  // else the first registered. For other policies (SPREAD placement groups).
  static std::optional<uint32_t> Choose(const NodeSearch& search, const ResourceDemand& demand,
                                        std::optional<uint64_t> after, NodeSearch::Accept accept);

 private:
  std::optional<uint64_t> last_order_;  // the order of the node chosen last
};

}  // namespace rayx::scheduler::policy
