// The words of Pending and Infeasible decisions, shared by every policy so the
// same situation is always described the same way.
#pragma once

#include <string>
#include <vector>

#include "policy/label_selector.h"
#include "policy/node_search.h"
#include "policy/resource_demand.h"
#include "rayx/resources.h"

namespace rayx::scheduler::policy {

// "{CPU: 4, GPU: 0.5}": the positive amounts, ordered by name.
std::string FormatDemand(const ResourceMap& demand);

// Why no alive node admitted by `search` could ever hold `demand` (REQUIRES:
// none could). Leases and placement groups use the same words:
//   "needs {GPU: 8} on one node; the largest alive node has GPU 4 (3 alive nodes)"
//   "needs {CPU: 8, GPU: 1} on one node; each exists on some alive node, but no
//    single alive node has all of it (3 alive nodes)"
// with " with labels {k=v}" and "such node" / "(2 of 5 alive nodes have those
// labels)" under a selector, or the selector's own reason when no node matches it.
std::string NeverFitsReason(const NodeSearch& search, const LabelSelector& selector,
                            const ResourceMap& demand);

// Why a request that some node could hold waits:
//   "no node has {CPU: 4} free now; it waits until resources are released or a
//    node joins"
std::string WaitReason(const LabelSelector& selector, const ResourceMap& demand,
                       const ResourceDemand& parsed);

// Placement groups. A group's reason names its strategy only where the
// strategy is the cause ("STRICT_PACK needs ...", "STRICT_SPREAD needs 3
// distinct nodes ..."): every place that shows a reason (rayx status, rayx list,
// a failed wait, rayx launch) already names the group's strategy and bundles.
// The classification: Infeasible when a bundle (for STRICT_PACK all of them
// together) fits no alive node the selector admits; Pending, waiting for more
// nodes, when the group only needs more nodes than the cluster has (a node may
// join); Pending, waiting for resources, when the nodes exist but are busy.

// Infeasible: "bundle 1 needs {CPU: 8} on one node; the largest alive node has
// CPU 4 (1 alive node)".
std::string BundleNeverFitsReason(const NodeSearch& search, const LabelSelector& selector,
                                  size_t index, const ResourceMap& bundle);

// Pending until a node joins: `what` + ": waiting for more nodes to join".
std::string NeedsMoreNodesReason(const std::string& what);

// Pending until resources free up: `what`, what the first five nodes admitted
// by `search` have free of the resources `bundles` ask for, in registration
// order, and "the group waits until resources are released or a node joins":
//   "...; node 10.0.0.1 (1a2b3c4d) has {CPU: 1, GPU: 2} free; node 10.0.0.2
//    (5e6f7a8b) has none of it free; the group waits until ..."
std::string GroupWaitReason(const std::string& what, const NodeSearch& search,
                            const std::vector<ResourceMap>& bundles);

// "1 alive node", "3 alive nodes".
std::string CountNodes(size_t n);

// "(3 alive nodes)" or "(2 of 5 alive nodes have those labels)".
std::string NodeCount(const NodeSearch& search, const LabelSelector& selector);

}  // namespace rayx::scheduler::policy
