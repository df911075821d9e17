// PlacementGroupManager and the life of nodes: groups written through to the
// HeadStore, restored by a restarted head and confirmed as their nodes rejoin,
// and the bundles of a node that dies placed again. Part of
// PlacementGroupManager (placement_group_manager.h).
#include <algorithm>

#include "common/logging.h"
#include "head/placement_group_manager.h"

namespace rayx::scheduler {

using State = protocol::PlacementGroupState;

void PlacementGroupManager::Save(const Group& group) {
  if (!store_) return;
  StoredPlacementGroup stored;
  stored.info = group.info;
  stored.label_selector = group.label_selector;
  for (const Bundle& b : group.bundles) {
    stored.bundles.push_back({b.node.IsNil() ? "" : b.node.Hex(), b.devices});
  }
  store_->PutPlacementGroup(stored);
}

void PlacementGroupManager::Restore(const std::vector<StoredPlacementGroup>& groups) {
  for (const auto& stored : groups) {
    Group group;
    group.info = stored.info;
    group.label_selector = stored.label_selector;
    bool lost = false;
    if (stored.bundles.size() == group.info.bundles.size()) {
      for (size_t i = 0; i < stored.bundles.size(); ++i) {
        Bundle b;
        auto node = NodeId::FromHex(stored.bundles[i].node_id);
        if (!node.ok()) {  // lost with its node before the restart
          lost = true;
          group.bundles.push_back(std::move(b));
          continue;
        }
        b.total = group.info.bundles[i];
        b.available = b.total;
        b.node = *node;
        b.devices = stored.bundles[i].devices;
        double gpu = b.total.count(kGpu) ? b.total.at(kGpu) : 0;
        b.device_free.assign(b.devices.size(), gpu < 1 ? gpu : 1.0);
        b.restoring = true;
        group.bundles.push_back(std::move(b));
      }
    }
    bool any = std::any_of(group.bundles.begin(), group.bundles.end(),
                           [](const Bundle& b) { return !b.node.IsNil(); });
    if (!any) group.bundles.clear();
    PlacementGroupId id = group.info.placement_group_id;
    if (group.bundles.empty() || lost) {
      if (group.info.state == State::kCreated) group.info.state = State::kPending;
      pending_.push_back(id);
    }
    groups_[id] = std::move(group);
  }
}

void PlacementGroupManager::AfterRejoins() {
  std::erase_if(waiters_, [&](const Waiter& w) {
    auto it = groups_.find(w.group_id);
    if (it == groups_.end() || it->second.info.state != State::kInfeasible) return false;
    Explain(it->second);
    if (it->second.info.state != State::kInfeasible) return false;  // waits for resources
    Answer(w, it->second.info);
    return true;
  });
}

void PlacementGroupManager::OnNodeRejoined(const NodeId& node) {
  for (auto& [id, group] : groups_) {
    bool lost = false;
    for (size_t i = 0; i < group.bundles.size(); ++i) {
      Bundle& b = group.bundles[i];
      if (!b.restoring || b.node != node) continue;
      b.restoring = false;
      if (!nodes_.AcquireExact(node, b.total, b.devices)) {
        RAYX_LOG(Warning) << "placement group " << id.Short() << ": bundle " << i
                          << " no longer fits on rejoined node " << node.Short()
                          << "; placing it again";
        b = Bundle{};
        if (i < group.info.locations.size()) group.info.locations[i] = protocol::BundleLocation{};
        lost = true;
      }
    }
    if (lost && group.info.state == State::kCreated) {
      group.info.state = State::kPending;
      pending_.push_back(id);
      Save(group);
    }
  }
}

std::set<NodeId> PlacementGroupManager::NodesOfRestoredBundles() const {
  std::set<NodeId> nodes;
  for (const auto& [id, group] : groups_) {
    for (const auto& b : group.bundles) {
      if (b.restoring) nodes.insert(b.node);
    }
  }
  return nodes;
}

void PlacementGroupManager::OnNodeDead(const NodeId& node) {
  for (auto& [id, group] : groups_) {
    std::string lost;
    size_t survivors = 0;
    for (size_t i = 0; i < group.bundles.size(); ++i) {
      Bundle& b = group.bundles[i];
      if (b.node != node) {
        if (!b.node.IsNil()) ++survivors;
        continue;
      }
      // The node's resources went with it: nothing to give back.
      b = Bundle{};
      lost += (lost.empty() ? "" : ", ") + std::to_string(i);
      if (i < group.info.locations.size()) group.info.locations[i] = protocol::BundleLocation{};
    }
    if (lost.empty()) continue;
    if (survivors == 0) {
      group.bundles.clear();
      group.info.locations.clear();
    }
    bool was_pending = group.info.state != State::kCreated;
    group.info.state = State::kPending;
    group.info.reason = "node " + node.Short() + " died with bundle(s) " + lost +
                        (survivors ? "; placing those again, the other bundles keep theirs"
                                   : "; placing the group again");
    if (!was_pending) pending_.push_back(id);
    Save(group);
  }
}

}  // namespace rayx::scheduler
