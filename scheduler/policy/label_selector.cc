// Label selectors.
#include "policy/label_selector.h"

#include "policy/reasons.h"

namespace rayx::scheduler::policy {

bool LabelSelector::Matches(const LabelMap& labels) const {
  for (const auto& [key, value] : selector_) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  return true;
}

std::string LabelSelector::WhyNoNodeMatches(const ClusterResourceView& view) const {
  std::string missing;
  size_t count = 0;
  for (const auto& [key, value] : selector_) {
    if (view.HasLabel(key, value)) continue;
    missing += (count++ ? ", " : "") + key + "=" + value;
  }
  std::string nodes = " (" + CountNodes(view.node_count()) + ")";
  if (count == 1) return "no node has label " + missing + nodes;
  if (count > 1) return "no node has any of the labels " + missing + nodes;
  return "no single node has all of the labels " + ToString() + "; each is on some node" + nodes;
}

std::string LabelSelector::ToString() const {
  std::string out = "{";
  for (const auto& [key, value] : selector_) {
    out += (out.size() > 1 ? ", " : "") + key + "=" + value;
  }
  return out + "}";
}

}  // namespace rayx::scheduler::policy
