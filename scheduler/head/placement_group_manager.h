// The head's placement groups: bundles of resources reserved together.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "head/head_outbox.h"
#include "head/node_table.h"
#include "policy/composite_bundle_policy.h"
#include "protocol/placement_messages.h"

namespace rayx::scheduler {

// Design: a placement group reserves every bundle at once or none (a group is
// never half-reserved): bundles are taken from the node table one by one and
// all are given back when one does not fit. A group that does not fit now waits
// (PENDING) and is re-examined whenever resources free up or a node joins, in
// creation order. Whether a group that is not placed is PENDING or INFEASIBLE,
// and why, is the policy library's decision (CompositeBundlePolicy, worded in
// policy/reasons.h), taken as it is: a group whose bundle (for STRICT_PACK, the
// whole group) fits no alive node the selector admits is INFEASIBLE: Wait
// answers at once with the reason, and it is re-examined when nodes join. A
// group that only needs more nodes (STRICT_SPREAD with fewer able nodes than
// bundles, PACK or SPREAD needing more in all than the nodes have) is PENDING:
// a node may join.
//
// Leases placed in a group draw from its bundles' reservations, never from the
// node's free resources, so a group's members cannot be starved by others.
// When a node dies only the bundles it held are lost: the group goes back to
// PENDING and only those bundles are placed again; the bundles on surviving
// nodes keep their reservations and the leases running in them, and new leases
// may still be placed in them meanwhile. Re-placing respects the strategy
// against the surviving bundles: STRICT_PACK onto the survivors' node,
// STRICT_SPREAD onto nodes none of them uses, PACK and SPREAD by the policy.
// A group that lost every bundle is placed again as a whole.
//
// Restart: with a HeadStore, a group is written through when it is created,
// placed, loses bundles or is removed. A restarted head Restores each group
// with its bundles where they were; a bundle on a node that has not rejoined
// yet holds nothing and takes no lease until OnNodeRejoined takes its exact
// reservation (the same devices) again, or the node dies (OnNodeDead: lost).
//
// Owned by the head's event loop through LeaseManager; not thread-safe.
class PlacementGroupManager {
 public:
  // Answers waits through `outbox`, which must outlive this manager.
  PlacementGroupManager(NodeTable& nodes, HeadOutbox& outbox);

  // Validates and records a group, placing it now when it fits. Returns
  // InvalidArgument for an unknown strategy, no bundles, an empty bundle or a
  // bad amount.
  Result<protocol::PlacementGroupInfo> Create(const protocol::CreatePlacementGroupRequest& req);
  // Answers `peer` now when the group is not PENDING (or timeout_ms <= 0), else
  // when it leaves PENDING or at the deadline (ExpireWaits).
  void Wait(const std::string& peer, uint64_t request_id, const PlacementGroupId& group_id,
            int64_t timeout_ms, int64_t now_ms);
  // Frees the group's bundles and forgets it. False when unknown. REQUIRES: the
  // caller ended the leases placed in it.
  bool Remove(const PlacementGroupId& group_id);
  // Places waiting groups that fit now, oldest first.
  void SchedulePending();
  // Bundles on `node` are lost; their groups go back to PENDING until those
  // bundles are placed again. REQUIRES: the leases on `node` were ended first.
  // The nodes restored bundles are on (for the head's restart path).
  std::set<NodeId> NodesOfRestoredBundles() const;
  void OnNodeDead(const NodeId& node);
  void ExpireWaits(int64_t now_ms);

  // Writes groups through to `store` (nullptr: none); it must outlive this.
  void SetStore(HeadStore* store) { store_ = store; }
  // Loads the groups of a previous head life (after NodeTable::Restore).
  void Restore(const std::vector<StoredPlacementGroup>& groups);
  // Answers waits of INFEASIBLE groups parked while nodes were rejoining.
  void AfterRejoins();
  // Takes the reservations of the restored bundles on `node`, which rejoined.
  void OnNodeRejoined(const NodeId& node);
  // Takes exactly `gpu_ids` and `demand` from bundle `bundle_index` of the
  // group (a live lease reported on rejoin). False, taking nothing, when the
  // group, the bundle or the room is not there.
  // `overdraw_cpu`: as NodeTable::AcquireExact, within the bundle.
  bool AcquireExact(const PlacementGroupId& group_id, int32_t bundle_index,
                    const ResourceMap& demand, const std::vector<int>& gpu_ids,
                    bool overdraw_cpu = false);

  // Leases in a group. Takes `demand` from bundle `bundle_index` (-1: the first
  // bundle it fits). Returns NotFound for no such group, InvalidArgument for no
  // such bundle, Infeasible for a demand larger than the bundle (or every
  // bundle), nullopt when not now.
  struct BundleGrant {
    int32_t bundle_index = -1;
    NodeId node;
    std::vector<int> gpu_ids;
  };
  Result<std::optional<BundleGrant>> TryAcquire(const PlacementGroupId& group_id,
                                                int32_t bundle_index, const ResourceMap& demand);
  // CPU pays back what the bundle is overdrawn first (ReclaimCpu).
  void Release(const PlacementGroupId& group_id, int32_t bundle_index, const ResourceMap& demand,
               const std::vector<int>& gpu_ids);
  // A blocked lease in bundle `bundle_index` lends its CPU to the bundle and
  // takes it back, as NodeTable::LendCpu and ReclaimCpu do for a node: the
  // CPU stays the group's (its other leases may use it meanwhile), and taking
  // it back overdraws the bundle, never the node. No-ops for a lost bundle.
  void LendCpu(const PlacementGroupId& group_id, int32_t bundle_index, double cpu) {
    Release(group_id, bundle_index, {{kCpu, cpu}}, {});
  }
  void ReclaimCpu(const PlacementGroupId& group_id, int32_t bundle_index, double cpu);
  // Calls `fn` with each reserved bundle (restored ones whose node has not
  // rejoined are skipped): its group, index, node, total, what is free and
  // the CPU it is overdrawn. For the head's accounting checks.
  void ForEachBundle(const std::function<void(const PlacementGroupId& group, int32_t index,
                                              const NodeId& node, const ResourceMap& total,
                                              const ResourceMap& available,
                                              double cpu_overdrawn)>& fn) const;
  // Every device the group holds on `node`, ascending.
  std::vector<int> DevicesOn(const PlacementGroupId& group_id, const NodeId& node) const;

  // The non-detached groups of a job.
  std::vector<PlacementGroupId> GroupsOfJob(const JobId& job_id) const;
  const protocol::PlacementGroupInfo* Find(const PlacementGroupId& group_id) const;
  std::vector<protocol::PlacementGroupInfo> List() const;
  // Waiting groups for `rayx status`: "placement group STRICT_SPREAD
  // [{GPU: 4} x 3]" -> count, and infeasible ones -> reason.
  void AddDemands(std::map<std::string, int>* pending,
                  std::map<std::string, std::string>* infeasible) const;
  size_t size() const { return groups_.size(); }

 private:
  struct Bundle {
    ResourceMap total;
    ResourceMap available;
    NodeId node;                     // nil while lost (its node died)
    std::vector<int> devices;        // the node's device ids this bundle holds
    std::vector<double> device_free; // free share of each, <= the bundle's share
    bool restoring = false;          // restored; its node has not rejoined yet
    double cpu_overdrawn = 0;        // CPU leased beyond `total` (ReclaimCpu)
  };
  struct Group {
    protocol::PlacementGroupInfo info;
    LabelMap label_selector;
    std::vector<Bundle> bundles;  // reserved, once CREATED
  };
  struct Waiter {
    std::string peer;
    uint64_t request_id = 0;
    PlacementGroupId group_id;
    int64_t deadline_ms = 0;
  };

  // Reserves every bundle or none. On failure, when `explain`, sets the group's
  // state and reason from the policy's decision; otherwise leaves them as they
  // were (a scheduling pass changes a group's state only by placing it).
  bool TryPlace(Group& group, bool explain);
  // Places the lost bundles of a group whose other bundles survive, all or none.
  bool PlaceLost(Group& group);
  // Takes `bundle` on `node` on exactly `devices` (the policy's plan) into
  // `out`; false when it does not fit.
  bool Reserve(const NodeId& node, const ResourceMap& bundle, const std::vector<int>& devices,
               Bundle* out);
  // Marks the group CREATED and lists where its bundles are.
  void MarkCreated(Group& group);
  void Unreserve(Group& group);
  // The policy request for bundles `which` of the group.
  policy::PlacementGroupRequest RequestFor(const Group& group,
                                           const std::vector<size_t>& which) const;
  // Indexes of every bundle, and of those lost with their node (none for a
  // group not placed).
  static std::vector<size_t> AllBundles(const Group& group);
  static std::vector<size_t> LostBundles(const Group& group);
  // The state and reason of a group the policy did not place: INFEASIBLE or
  // PENDING with the decision's reason, word for word.
  static void SetOutcome(Group& group, const policy::GroupDecision& decision);
  // Asks the policy why a group that is not placed waits, and sets its state.
  void Explain(Group& group);
  void AnswerWaiters(const PlacementGroupId& group_id);
  // Writes the group through to the store.
  void Save(const Group& group);
  void Answer(const Waiter& waiter, const protocol::PlacementGroupInfo& info);

  NodeTable& nodes_;
  HeadOutbox& outbox_;
  std::map<PlacementGroupId, Group> groups_;
  std::deque<PlacementGroupId> pending_;  // creation order
  std::vector<Waiter> waiters_;      // bounded by the callers' outstanding requests
  policy::CompositeBundlePolicy policy_;
  HeadStore* store_ = nullptr;
};

}  // namespace rayx::scheduler
