// Decision reasons.
#include "policy/reasons.h"

#include <limits>
#include <optional>

#include "policy/resource_units.h"

namespace rayx::scheduler::policy {

std::string FormatDemand(const ResourceMap& demand) { return FormatResourceShape(demand); }

std::string CountNodes(size_t n) {
  return std::to_string(n) + (n == 1 ? " alive node" : " alive nodes");
}

std::string NodeCount(const NodeSearch& search, const LabelSelector& selector) {
  size_t all = search.view().node_count();
  if (selector.empty()) return "(" + CountNodes(all) + ")";
  return "(" + std::to_string(search.matching_nodes()) + " of " + CountNodes(all) +
         " have those labels)";
}

std::string NeverFitsReason(const NodeSearch& search, const LabelSelector& selector,
                            const ResourceMap& demand) {
  const ClusterResourceView& view = search.view();
  std::string needs = "needs " + FormatDemand(demand) + " on one node";
  if (view.node_count() == 0) return needs + "; the cluster has no alive nodes";
  if (!selector.empty()) {
    needs += " with labels " + selector.ToString();
    if (search.matching_nodes() == 0) return needs + "; " + selector.WhyNoNodeMatches(view);
  }
  std::string missing, have;
  for (const auto& [name, amount] : demand) {
    if (!(amount > 0)) continue;
    std::optional<uint32_t> dim = view.dims().Find(name);
    int64_t largest = dim ? search.LargestTotal(*dim) : 0;
    std::optional<int64_t> units = ToUnits(amount);
    if (units && largest >= *units) continue;
    missing += (missing.empty() ? "" : ", ") + name + ": " + FormatAmount(amount);
    have += (have.empty() ? "" : ", ") + name + " " + FormatAmount(FromUnits(largest));
  }
  std::string such = selector.empty() ? "alive node" : "such node";
  if (missing.empty()) {
    return needs + "; each exists on some " + such + ", but no single " + such + " has all of it " +
           NodeCount(search, selector);
  }
  return "needs {" + missing + "} on one node" +
         (selector.empty() ? "" : " with labels " + selector.ToString()) + "; the largest " + such +
         " has " + have + " " + NodeCount(search, selector);
}

std::string WaitReason(const LabelSelector& selector, const ResourceMap& demand,
                       const ResourceDemand& parsed) {
  std::string where = selector.empty() ? "no node" : "no node with labels " + selector.ToString();
  std::string out = where + " has " + FormatDemand(demand) + " free now";
  if (parsed.whole_gpus() > 0) out += " (a whole GPU needs an entirely free device)";
  return out + "; it waits until resources are released or a node joins";
}

std::string BundleNeverFitsReason(const NodeSearch& search, const LabelSelector& selector,
                                  size_t index, const ResourceMap& bundle) {
  return "bundle " + std::to_string(index) + " " + NeverFitsReason(search, selector, bundle);
}

std::string NeedsMoreNodesReason(const std::string& what) {
  return what + ": waiting for more nodes to join";
}

std::string GroupWaitReason(const std::string& what, const NodeSearch& search,
                            const std::vector<ResourceMap>& bundles) {
  constexpr size_t kShown = 5;
  const ClusterResourceView& view = search.view();
  std::vector<uint32_t> first = search.InOrder(ResourceDemand(), NodeSearchTree::Basis::kTotal,
                                               std::numeric_limits<double>::infinity(), kShown + 1,
                                               NodeSearch::Gpus::kAny, AcceptAll);
  std::string have;
  for (size_t k = 0; k < first.size() && k < kShown; ++k) {
    const NodeRecord& node = view.node(first[k]);
    ResourceMap free;
    for (const ResourceMap& bundle : bundles) {
      for (const auto& [name, amount] : bundle) {
        if (!(amount > 0)) continue;
        std::optional<uint32_t> dim = view.dims().Find(name);
        free[name] = dim ? FromUnits(node.available(*dim)) : 0;
      }
    }
    std::string shape = FormatDemand(free);
    if (shape == "{}") shape = "none of it";
    have += (k ? "; node " : "node ") +
            (node.address().empty() ? node.id().Short()
                                    : node.address() + " (" + node.id().Short() + ")") +
            " has " + shape + " free";
  }
  if (first.size() > kShown) have += "; ...";
  return what + "; " + (have.empty() ? "no node matches" : have) +
         "; the group waits until resources are released or a node joins";
}

}  // namespace rayx::scheduler::policy
