// Decision reasons.
#include "policy/reasons.h"

#include "policy/resource_units.h"

namespace rayx::scheduler::policy {

std::string FormatDemand(const ResourceMap& demand) { return FormatResourceShape(demand); }

std::string CountNodes(size_t n) { return std::to_string(n) + (n == 1 ? " node" : " nodes"); }

std::string NodeCount(const NodeSearch& search, const LabelSelector& selector) {
  size_t all = search.view().node_count();
  if (selector.empty()) return "(" + CountNodes(all) + ")";
  return "(" + std::to_string(search.matching_nodes()) + " of " + std::to_string(all) +
         " nodes have those labels)";
}

std::string NeverFitsReason(const NodeSearch& search, const LabelSelector& selector,
                            const ResourceMap& demand) {
  const ClusterResourceView& view = search.view();
  std::string needs = "needs " + FormatDemand(demand) + " on one node";
  if (view.node_count() == 0) return needs + "; the cluster has no nodes";
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
  std::string such = selector.empty() ? "node" : "such node";
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

}  // namespace rayx::scheduler::policy
