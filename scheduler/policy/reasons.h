// The words of Pending and Infeasible decisions, shared by every policy so the
// same situation is always described the same way.
#pragma once

#include <string>

#include "policy/label_selector.h"
#include "policy/node_search.h"
#include "policy/resource_demand.h"
#include "rayx/resources.h"

namespace rayx::scheduler::policy {

// "{CPU: 4, GPU: 0.5}": the positive amounts, ordered by name.
std::string FormatDemand(const ResourceMap& demand);

// Why no node admitted by `search` could ever hold `demand` (REQUIRES: none
// could), in the style of NodeTable::AnyNodeCouldFit:
//   "needs {GPU: 8} on one node; the largest node has GPU 4 (3 nodes)"
//   "needs {CPU: 8, GPU: 1} on one node; each exists on some node, but no single
//    node has all of it (3 nodes)"
// with " with labels {k=v}" and "such node" / "(2 of 5 nodes have those labels)"
// under a selector, or the selector's own reason when no node matches it.
std::string NeverFitsReason(const NodeSearch& search, const LabelSelector& selector,
                            const ResourceMap& demand);

// Why a request that some node could hold waits:
//   "no node has {CPU: 4} free now; it waits until resources are released or a
//    node joins"
std::string WaitReason(const LabelSelector& selector, const ResourceMap& demand,
                       const ResourceDemand& parsed);

// "1 node", "3 nodes".
std::string CountNodes(size_t n);

// "(3 nodes)" or "(2 of 5 nodes have those labels)".
std::string NodeCount(const NodeSearch& search, const LabelSelector& selector);

}  // namespace rayx::scheduler::policy
