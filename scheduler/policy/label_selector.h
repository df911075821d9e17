// The label filter every strategy applies: which nodes a request may use.
#pragma once

#include <string>

#include "policy/cluster_resource_view.h"
#include "rayx/resources.h"

namespace rayx::scheduler::policy {

// A node qualifies when, for every key of the selector, it has that label with
// exactly that value (extra node labels do not matter); an empty selector
// admits every node. Applied per node group, so it costs O(groups x selector
// size) per decision, never O(nodes).
class LabelSelector {
 public:
  // REQUIRES: `selector` outlives this object (it is read, not copied).
  explicit LabelSelector(const LabelMap& selector) : selector_(selector) {}

  bool empty() const { return selector_.empty(); }
  bool Matches(const LabelMap& labels) const;

  // Why no node of `view` matches: "no node has label accelerator=H100" (or "any
  // of the labels ..." when several are missing everywhere), or, when
  // each pair exists on some node, "no single node has all of the labels
  // {accelerator=H100, zone=b}". REQUIRES: no node matches.
  std::string WhyNoNodeMatches(const ClusterResourceView& view) const;

  // "{accelerator=H100, zone=b}".
  std::string ToString() const;

 private:
  const LabelMap& selector_;
};

}  // namespace rayx::scheduler::policy
