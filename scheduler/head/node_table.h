// The head's table of nodes: who joined, who is alive, who died and why.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "head/head_store.h"
#include "policy/cluster_resource_view.h"
#include "rayx/cluster_status.h"
#include "rayx/ids.h"

namespace rayx::scheduler {

// A node's object store as its agent counted it (heartbeats).
struct NodeStoreUse {
  uint64_t bytes = 0, capacity = 0, objects = 0, spilled_bytes = 0, spilled_objects = 0;
};

// Pure bookkeeping: time is passed in, nothing here does I/O. Owned by the
// head's event loop; not thread-safe.
//
// A node is alive from Register until it misses heartbeats for longer than
// node_timeout_ms or unregisters. A dead node never comes back: an agent that
// returns registers again and gets a new NodeId (as in Ray), so stale state tied
// to the old id can never be confused with the new process. Each registration
// also gets an epoch, unique and increasing for this table's life: agents stamp
// what they send about their processes with it, and the head refuses a message
// whose epoch is not the node's current one (a fenced-off incarnation).
//
// Restart: with a HeadStore, every registration and death is written through.
// A restarted head Restores the nodes it knew as *rejoining*: neither alive
// (no resources to grant, EpochOf 0) nor dead, until their agent Rejoins under
// the same id and epoch (its workers kept running: a head restart is not a
// node death), or rejoin_timeout_ms passes and ExpireSilentNodes buries them.
class NodeTable {
 public:
  struct Options {
    // Silence after which an alive node is declared dead. Default: 1.5 s, so a
    // killed agent shows dead within 2 s at the default 250 ms heartbeat.
    int64_t node_timeout_ms = 1500;
    // Dead nodes kept for display; the oldest are forgotten beyond this.
    size_t max_dead_nodes = 1000;
    // After a head restart, how long a node the head knew has to rejoin before
    // it is declared dead. Default: 10 s.
    int64_t rejoin_timeout_ms = 10000;
  };

  explicit NodeTable(Options options) : options_(options) {}

  // Writes registrations and deaths through to `store` (nullptr: none). The
  // store must outlive this table.
  void SetStore(HeadStore* store) { store_ = store; }
  // Loads the nodes of a previous head life as rejoining (see the class
  // comment), at `now_ms`; later epochs are above every stored one.
  void Restore(const std::vector<StoredNode>& nodes, uint64_t next_epoch, int64_t now_ms);
  // The epoch a rejoining node had, or 0 when `id` is not rejoining.
  uint64_t RejoiningEpochOf(const NodeId& id) const;
  // Makes rejoining node `id` alive again under its id and epoch, with what its
  // agent registered now (`info`; its address may have changed). False when
  // `id` is not rejoining.
  bool Rejoin(const NodeId& id, NodeInfo info, int64_t now_ms, int64_t wall_ms);
  size_t rejoining_count() const { return rejoining_.size(); }

  // Adds an alive node with a fresh id and a fresh epoch (EpochOf) and returns
  // the id. `info.node_id` and `info.alive` are overwritten.
  NodeId Register(NodeInfo info, int64_t now_ms, int64_t wall_ms);
  // The epoch of the alive node `id`; 0 (never an epoch) when it is not alive.
  uint64_t EpochOf(const NodeId& id) const;

  // Records a heartbeat, and its GPU samples when it carries any (at most
  // 256, names cut to 128 bytes). Returns false when the node is
  // not alive (unknown, or already declared dead): the agent must register again.
  // What the node's leases use is this table's own account (TryAcquire,
  // Release): a heartbeat never changes it.
  bool Heartbeat(const NodeId& id, int64_t now_ms,
                 NodeStoreUse store = {}, std::vector<GpuUsage> gpus = {});

  // Declares an alive node dead with `reason`. Returns false when it was not alive.
  bool MarkDead(const NodeId& id, const std::string& reason);

  // Declares dead every alive node silent for longer than the timeout and returns
  // their ids. O(alive nodes); the head calls it once per heartbeat period, not
  // per message.
  std::vector<NodeId> ExpireSilentNodes(int64_t now_ms);

  // Alive nodes (by registration order), then dead ones, newest death first.
  std::vector<NodeInfo> Snapshot(int64_t now_ms) const;

  // Takes `demand` from the node's available resources when every amount fits.
  // Returns false (taking nothing) otherwise, or when the node is not alive.
  // Picks the devices itself. The head never does: it takes the policy's
  // decisions with AcquireExact. Kept for the policy benchmark's baseline (a
  // linear scan, FindNodeWithAvailable) and tests of the device rules.
  // GPUs are devices: a whole-GPU demand gets that many distinct free devices,
  // a fractional one (< 1) a share of one device, packed onto the fullest
  // device that still has room; `gpu_ids` receives the device ids.
  bool TryAcquire(const NodeId& id, const ResourceMap& demand,
                  std::vector<int>* gpu_ids = nullptr);
  // Takes exactly `gpu_ids` and `demand` (the policy's decision, or what a
  // live worker holds, as its agent reported on rejoin). False, taking
  // nothing, when they are not free.
  // `overdraw_cpu`: CPU that is not free is overdrawn (ReclaimCpu) instead:
  // a live worker keeps running, as it did before the head restarted.
  bool AcquireExact(const NodeId& id, const ResourceMap& demand, const std::vector<int>& gpu_ids,
                    bool overdraw_cpu = false);
  // Gives back what TryAcquire took; a no-op for a node no longer alive. CPU
  // pays back what the node is overdrawn first.
  void Release(const NodeId& id, const ResourceMap& demand,
               const std::vector<int>& gpu_ids = {});

  // Blocked leases (Ray's rule): a lease whose worker waits in get/wait lends
  // its `cpu` back to the node (as Release does) and takes it back when the
  // worker resumes (ReclaimCpu). Taking it back never waits and never fails:
  // what is not free is overdrawn, so the node runs more CPU work than it has
  // for a while (NodeInfo::cpu_overcommitted), and leases that end pay the
  // overdraft back before anything becomes free again. Only CPU is ever
  // overdrawn: GPUs and memory are never lent. No-ops for a node no longer alive.
  void LendCpu(const NodeId& id, double cpu) { Release(id, {{kCpu, cpu}}); }
  void ReclaimCpu(const NodeId& id, double cpu);
  // The earliest-registered alive node with `demand` available now. O(alive
  // nodes): the policy benchmark's baseline only (the head asks the policy).
  std::optional<NodeId> FindNodeWithAvailable(const ResourceMap& demand) const;

  // The alive node, or nullptr.
  const NodeInfo* FindAlive(const NodeId& id) const;
  // Alive, or among the dead still remembered (newest first; bounded).
  const NodeInfo* FindAny(const NodeId& id) const;
  // An alive node at `address` (O(nodes): once per driver registration).
  const NodeInfo* FindAliveByAddress(const std::string& address) const;
  // The alive nodes' resources as the scheduling policies see them, kept in
  // step with every Register, death, TryAcquire and Release.
  const policy::ClusterResourceView& view() const { return view_; }
  // Alive nodes in registration order. O(n log n): for placement groups, which
  // are rare next to leases (the policy library replaces this scan).
  std::vector<NodeId> AliveInOrder() const;

  // The devices for `amount` GPUs among devices with `free` shares (1.0 = a
  // whole free device), by the rules of TryAcquire; nullopt when they are not
  // free or `amount` is neither below 1 nor whole. (A bundle's devices: the
  // node's are the policy view's, `view()`.)
  static std::optional<std::vector<int>> PickGpuDevices(const std::vector<double>& free,
                                                        double amount);
  // True when every positive amount of `demand` is within `available`.
  static bool Fits(const ResourceMap& available, const ResourceMap& demand);
  size_t alive_count() const { return alive_.size(); }
  size_t dead_count() const { return dead_.size(); }

 private:
  struct Entry {
    NodeInfo info;
    int64_t last_heartbeat_ms = 0;
    uint64_t order = 0;
    uint64_t epoch = 0;
  };
  // The devices the packing rule picks for `demand` on alive node `id` from
  // what the view has free (the one book of devices), or nullopt.
  std::optional<std::vector<int>> FreeGpuDevices(const NodeId& id,
                                                 const ResourceMap& demand) const;
  void Bury(Entry entry, const std::string& reason);
  struct Rejoining {
    NodeInfo info;
    uint64_t epoch = 0;
    int64_t since_ms = 0;
  };

  Options options_;
  HeadStore* store_ = nullptr;
  std::unordered_map<NodeId, Rejoining> rejoining_;
  uint64_t next_order_ = 0;
  uint64_t next_epoch_ = 1;
  std::unordered_map<NodeId, Entry> alive_;
  policy::ClusterResourceView view_;
  std::deque<NodeInfo> dead_;  // newest first, at most options_.max_dead_nodes
};

}  // namespace rayx::scheduler
