// A snapshot of the cluster as the head sees it, and how to ask for one.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "rayx/ids.h"
#include "rayx/resources.h"
#include "rayx/status.h"

namespace rayx {

// One GPU's use as NVML reports it, sampled by its node's agent about once a
// second (the dashboard and /metrics show it).
struct GpuUsage {
  int32_t device = 0;  // NVML's index, as CUDA_VISIBLE_DEVICES numbers devices
  std::string name;    // "NVIDIA H100 80GB HBM3"
  double utilization = 0;  // the fraction of the last sample period a kernel ran, 0-1
  uint64_t memory_used_bytes = 0;
  uint64_t memory_total_bytes = 0;
  double temperature_celsius = 0;
  double power_watts = 0;
  MSGPACK_DEFINE_MAP(device, name, utilization, memory_used_bytes, memory_total_bytes,
                     temperature_celsius, power_watts)
};

// One node as the head records it.
struct NodeInfo {
  NodeId node_id;
  std::string address;   // IP the node is reached at
  std::string hostname;
  int32_t agent_pid = 0;
  bool is_head_node = false;
  bool alive = true;
  std::string death_reason;       // empty while alive
  ResourceMap total;
  ResourceMap available;
  LabelMap labels;
  std::string rayx_version;
  int64_t registered_at_ms = 0;   // head's wall clock, ms since the epoch
  int64_t last_heartbeat_age_ms = 0;
  std::string store_dir;            // the node's shared-memory object store
  std::string object_address;       // its agent's object server
  // Where its Train checkpoint shards are kept (a directory that outlives the
  // agent: the next agent started on that machine adopts it); empty: none.
  std::string checkpoint_dir;
  uint64_t object_store_bytes = 0;  // bytes stored, as of the last heartbeat
  uint64_t object_store_capacity = 0;  // --object-store-memory (0: unbounded)
  uint64_t object_store_objects = 0;
  uint64_t object_spilled_bytes = 0;   // objects spilled to the node's disk
  uint64_t object_spilled_objects = 0;
  // The device each of its GPUs is (the agent's CUDA_VISIBLE_DEVICES entries):
  // GPU i, as leases and bundles number them, is device gpu_devices[i]. Empty:
  // GPU i is device i.
  std::vector<int> gpu_devices;
  // CPU leased beyond `total`: workers that were blocked in get/wait lent
  // their CPU to other work and took it back when they resumed (Ray's rule:
  // they do not wait for it). Paid back first as leases end; 0 mostly.
  double cpu_overcommitted = 0;
  // Its GPUs' use, as of the agent's last sample (empty: no NVML there).
  std::vector<GpuUsage> gpu_usage;

  // The devices of the node's GPUs `gpu_ids`, as its processes see them.
  std::vector<int> DevicesOf(const std::vector<int>& gpu_ids) const;

  MSGPACK_DEFINE_MAP(node_id, address, hostname, agent_pid, is_head_node, alive, death_reason,
                     total, available, labels, rayx_version, registered_at_ms,
                     last_heartbeat_age_ms, store_dir, object_address, object_store_bytes,
                     gpu_devices, cpu_overcommitted, gpu_usage, object_store_capacity,
                     object_store_objects, object_spilled_bytes, object_spilled_objects,
                     checkpoint_dir)
};

// The devices of a node's GPUs `gpu_ids` given its NodeInfo::gpu_devices:
// `gpu_ids` itself when `gpu_devices` is empty.
std::vector<int> GpuDevicesOf(const std::vector<int>& gpu_ids, const std::vector<int>& gpu_devices);

struct ClusterStatus {
  std::string rayx_version;        // the head's
  std::string cluster_id;
  int64_t head_uptime_ms = 0;
  int64_t heartbeat_period_ms = 0;
  int64_t node_timeout_ms = 0;
  std::vector<NodeInfo> nodes;     // alive first, then the most recently dead
  // Work waiting for resources: shape ("{CPU: 1, GPU: 1}") -> count.
  std::map<std::string, int> pending_demands;
  // Work no set of alive nodes could ever hold: shape -> why.
  std::map<std::string, std::string> infeasible_demands;
  // Messages the head has handled since it started (the data path bypasses it).
  uint64_t head_messages = 0;
  // Workers blocked in get/wait for objects, and the CPU they lend to other
  // work meanwhile.
  uint32_t blocked_workers = 0;
  double lent_cpu = 0;
  // How workers' and object servers' connections are protected:
  // "authenticated" (every connection proves a credential) or "encrypted".
  std::string wire_security;
  // The dashboard and Prometheus' /metrics ("http://10.0.0.1:8265"); empty
  // when the head serves none (`rayx start --head --dashboard-port -1`).
  std::string dashboard_url;

  // Sum of `total` (or `available`) over alive nodes.
  ResourceMap TotalResources() const;
  ResourceMap AvailableResources() const;
  size_t AliveNodeCount() const;

  MSGPACK_DEFINE_MAP(rayx_version, cluster_id, head_uptime_ms, heartbeat_period_ms,
                     node_timeout_ms, nodes, pending_demands, infeasible_demands,
                     head_messages, wire_security, blocked_workers, lent_cpu, dashboard_url)
};

// Asks the head at `address` ("host:port") for the cluster's state.
// Returns Unauthenticated when `token` is wrong, Unavailable when no head answers
// within `timeout_ms`, InvalidArgument for a malformed address.
Result<ClusterStatus> QueryClusterStatus(const std::string& address, const std::string& token,
                                         int64_t timeout_ms = 5000);

}  // namespace rayx
