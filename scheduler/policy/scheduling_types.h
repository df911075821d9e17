// What the policy library is asked and what it answers: requests, strategies
// and decisions, as plain data.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "protocol/enum_names.h"
#include "rayx/ids.h"
#include "rayx/resources.h"

namespace rayx::scheduler::policy {

// Ray's hybrid default: pack onto nodes in a stable order while they are below a
// utilization threshold, then prefer the least loaded.
struct DefaultStrategy {
  bool operator==(const DefaultStrategy&) const = default;
};

// Spread requests over nodes: the least loaded node, round robin among equals.
struct SpreadStrategy {
  bool operator==(const SpreadStrategy&) const = default;
};

// Run on `node`. Hard (soft = false): only there; infeasible when that node is
// gone or could never hold the request. Soft: there when it fits now, otherwise
// wherever the default strategy puts it.
struct NodeAffinityStrategy {
  NodeId node;
  bool soft = false;
  bool operator==(const NodeAffinityStrategy&) const = default;
};

using SchedulingStrategy = std::variant<DefaultStrategy, SpreadStrategy, NodeAffinityStrategy>;

// One task, actor or lease to place on a single node.
struct SchedulingRequest {
  ResourceMap demand;
  SchedulingStrategy strategy;
  // Only nodes whose labels include every key with the same value qualify
  // (e.g. {"accelerator": "H100"}), whatever the strategy. Empty: every node.
  LabelMap label_selector;
};

// Placed: run on `node` with exactly these GPU devices (empty without GPUs).
struct Scheduled {
  NodeId node;
  std::vector<int> gpu_ids;
  bool operator==(const Scheduled&) const = default;
};

// Some node could hold the request, but none has it free now: wait and ask
// again when resources are released or a node joins.
struct Pending {
  std::string reason;
};

// No node in the cluster could ever hold the request (or it is malformed):
// `reason` says what is missing. Ask again only when a node joins.
struct Infeasible {
  std::string reason;
};

using SchedulingDecision = std::variant<Scheduled, Pending, Infeasible>;

// How the bundles of a placement group are laid over nodes: kPack (as few
// nodes as possible, best effort), kSpread (distinct nodes where possible,
// best effort), kStrictPack (all on one node), kStrictSpread (each on its
// own). The wire's enum, named in its one table (protocol::Name).
using PlacementStrategy = protocol::PlacementStrategy;

// A placement group: bundles of resources reserved together, all or none.
struct PlacementGroupRequest {
  std::vector<ResourceMap> bundles;
  PlacementStrategy strategy = PlacementStrategy::kPack;
  // Applies to every bundle, as in SchedulingRequest.
  LabelMap label_selector;
  // When placing the lost bundles of a group whose other bundles survive a
  // node's death: the node they must all join (STRICT_PACK: the survivors'),
  // or the nodes none may use (STRICT_SPREAD: the survivors'). Nil / empty:
  // no such constraint. The other strategies ignore them.
  NodeId only_node;
  std::vector<NodeId> avoid_nodes;
};

// Where each bundle goes: bundles[i] holds request.bundles[i], whose resources
// are copied into demands[i] so the decision can be committed on its own
// (ClusterResourceView::AcquireGroup).
struct GroupScheduled {
  std::vector<Scheduled> bundles;
  std::vector<ResourceMap> demands;
};

using GroupDecision = std::variant<GroupScheduled, Pending, Infeasible>;

}  // namespace rayx::scheduler::policy
