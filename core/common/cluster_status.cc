// ClusterStatus helpers and the client call that fetches it.
#include "rayx/cluster_status.h"

#include "common/address.h"
#include "protocol/messages.h"
#include "transport/sync_client.h"

namespace rayx {

namespace {
ResourceMap SumOverAlive(const std::vector<NodeInfo>& nodes, ResourceMap NodeInfo::*field) {
  ResourceMap sum;
  for (const auto& node : nodes) {
    if (!node.alive) continue;
    for (const auto& [name, amount] : node.*field) sum[name] += amount;
  }
  return sum;
}
}  // namespace

std::vector<int> GpuDevicesOf(const std::vector<int>& gpu_ids,
                              const std::vector<int>& gpu_devices) {
  if (gpu_devices.empty()) return gpu_ids;
  std::vector<int> out;
  out.reserve(gpu_ids.size());
  for (int gpu : gpu_ids) {
    bool known = gpu >= 0 && static_cast<size_t>(gpu) < gpu_devices.size();
    out.push_back(known ? gpu_devices[static_cast<size_t>(gpu)] : gpu);
  }
  return out;
}

std::vector<int> NodeInfo::DevicesOf(const std::vector<int>& gpu_ids) const {
  return GpuDevicesOf(gpu_ids, gpu_devices);
}

ResourceMap ClusterStatus::TotalResources() const { return SumOverAlive(nodes, &NodeInfo::total); }
ResourceMap ClusterStatus::AvailableResources() const {
  return SumOverAlive(nodes, &NodeInfo::available);
}
size_t ClusterStatus::AliveNodeCount() const {
  size_t n = 0;
  for (const auto& node : nodes) n += node.alive ? 1 : 0;
  return n;
}

Result<ClusterStatus> QueryClusterStatus(const std::string& address, const std::string& token,
                                         int64_t timeout_ms) {
  if (token.empty()) {
    return Status::Unauthenticated("no cluster token: set RAYX_TOKEN, or run on a machine of the "
                                   "cluster (its session holds the token)");
  }
  protocol::GetClusterStatusRequest request;
  auto reply = transport::CallOnce<protocol::GetClusterStatusReply>(
      address, transport::ClientSecurity::ClusterToHead(token), request, timeout_ms);
  if (!reply.ok()) return reply.status();
  return std::move(reply->status);
}

}  // namespace rayx
