// The STRICT_SPREAD placement group policy.
#include "policy/bundle_strict_spread_policy.h"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "policy/bundle_plan.h"
#include "policy/reasons.h"

namespace rayx::scheduler::policy {

namespace {

using Basis = NodeSearchTree::Basis;

// A maximum matching of bundles to distinct nodes: `candidates[i]` are the nodes
// bundle i may use, best first; bundles are tried in `order`. Returns the node
// of each bundle, nullopt for bundles left out.
class BundleMatcher {
 public:
  explicit BundleMatcher(const std::vector<const std::vector<uint32_t>*>& candidates)
      : candidates_(candidates), match_(candidates.size()) {}

  size_t Run(const std::vector<size_t>& order) {
    size_t matched = 0;
    for (size_t bundle : order) {
      visited_.clear();
      if (Augment(bundle)) ++matched;
    }
    return matched;
  }
  const std::vector<std::optional<uint32_t>>& match() const { return match_; }

 private:
  bool Augment(size_t bundle) {
    for (uint32_t node : *candidates_[bundle]) {
      if (!visited_.insert(node).second) continue;
      auto owner = owner_.find(node);
      if (owner == owner_.end() || Augment(owner->second)) {
        owner_[node] = bundle;
        match_[bundle] = node;
        return true;
      }
    }
    return false;
  }

  const std::vector<const std::vector<uint32_t>*>& candidates_;
  std::vector<std::optional<uint32_t>> match_;
  std::unordered_map<uint32_t, size_t> owner_;
  std::unordered_set<uint32_t> visited_;
};

// Lists candidate nodes per bundle with `list(demand)`, computing each distinct
// demand once, and matches them. Returns the number of bundles matched.
template <typename List>
size_t MatchBundles(const PlacementGroupRequest& request, const ParsedGroup& parsed, List&& list,
                    std::vector<std::optional<uint32_t>>* match,
                    std::optional<size_t>* bundle_without_candidates) {
  const size_t n = request.bundles.size();
  std::vector<std::vector<uint32_t>> lists;
  std::vector<const std::vector<uint32_t>*> per_bundle(n);
  std::vector<size_t> list_of(n);
  lists.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    size_t same = i;
    for (size_t j = 0; j < i; ++j) {
      if (request.bundles[j] == request.bundles[i]) {
        same = j;
        break;
      }
    }
    if (same == i) {
      lists.push_back(list(parsed.demands[i]));
      list_of[i] = lists.size() - 1;
    } else {
      list_of[i] = list_of[same];
    }
  }
  for (size_t i = 0; i < n; ++i) {
    per_bundle[i] = &lists[list_of[i]];
    if (per_bundle[i]->empty() && bundle_without_candidates && !*bundle_without_candidates) {
      *bundle_without_candidates = i;
    }
  }
  BundleMatcher matcher(per_bundle);
  size_t matched = matcher.Run(parsed.largest_first);
  if (match) *match = matcher.match();
  return matched;
}

}  // namespace

GroupDecision BundleStrictSpreadPolicy::Schedule(const ClusterResourceView& view,
                                                 const PlacementGroupRequest& request) {
  Result<ParsedGroup> parsed = ParseGroup(view, request);
  if (!parsed.ok()) return Infeasible{parsed.status().message()};
  LabelSelector selector(request.label_selector);
  NodeSearch search(view, selector);
  const size_t n = request.bundles.size();

  // Nodes no bundle may use: those the group's surviving bundles are on.
  std::unordered_set<NodeId> avoid(request.avoid_nodes.begin(), request.avoid_nodes.end());
  auto allowed = [&](uint32_t node) { return avoid.empty() || !avoid.count(view.node(node).id()); };
  size_t matched = 0;
  if (search.matching_nodes() >= n) {
    std::vector<std::optional<uint32_t>> match;
    matched = MatchBundles(
        request, *parsed,
        [&](const ResourceDemand& d) { return hybrid_.Candidates(search, d, n, allowed); },
        &match, nullptr);
    if (matched == n) {
      std::vector<uint32_t> nodes(n);
      std::vector<std::vector<int>> gpu_ids(n);
      for (size_t i = 0; i < n; ++i) {
        nodes[i] = *match[i];
        gpu_ids[i] = ScheduledOn(view, nodes[i], parsed->demands[i]).gpu_ids;
      }
      return MakeGroupScheduled(view, request, nodes, std::move(gpu_ids));
    }
  }

  std::optional<size_t> hopeless;
  size_t could = MatchBundles(
      request, *parsed,
      [&](const ResourceDemand& d) {
        return search.InOrder(d, Basis::kTotal, std::numeric_limits<double>::infinity(), n,
                              NodeSearch::Gpus::kAny, AcceptAll);
      },
      nullptr, &hopeless);
  if (hopeless) {
    return Infeasible{
        BundleNeverFitsReason(search, selector, *hopeless, request.bundles[*hopeless])};
  }
  const std::string distinct = "STRICT_SPREAD needs " + std::to_string(n) + " distinct nodes" +
                               (selector.empty() ? "" : " with labels " + selector.ToString());
  if (could < n) {
    // Every bundle fits some node, but too few nodes for one each: a node may join.
    bool equal = std::all_of(request.bundles.begin(), request.bundles.end(),
                             [&](const ResourceMap& b) { return b == request.bundles.front(); });
    return Pending{NeedsMoreNodesReason(
        distinct + " that can each hold " +
        (equal ? FormatDemand(request.bundles.front()) : std::string("its bundle")) +
        "; the cluster has " + std::to_string(could))};
  }
  return Pending{GroupWaitReason(distinct + ", each with its bundle's resources free; only " +
                                     std::to_string(matched) +
                                     " bundles can be placed on distinct nodes now",
                                 search, request.bundles)};
}

}  // namespace rayx::scheduler::policy
