// The cluster's object servers, cached for pulls.
#include "object_store/object_server_directory.h"
#include "transport/sync_client.h"

#include <utility>

namespace rayx {

ObjectServerDirectory::ObjectServerDirectory(Fetch fetch, const Clock& clock, Options options,
                                             std::vector<std::string> known)
    : fetch_(std::move(fetch)), clock_(clock), options_(options), known_(std::move(known)) {
  for (const auto& address : known_) {
    if (!address.empty()) servers_.insert(address);
  }
}

Status ObjectServerDirectory::Check(const std::string& address) {
  auto unknown = [&] {
    return Status::InvalidArgument("'" + address.substr(0, 200) +
                                   "' is not the object server of any alive node of this cluster: "
                                   "a pull connects only to those");
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (servers_.count(address) > 0) return Status::OK();
  }
  if (address.empty()) return unknown();
  std::lock_guard<std::mutex> fetching(fetch_mu_);
  int64_t now = clock_.NowMs();
  {
    // Another caller's fetch may have brought it meanwhile; a recent fetch
    // is not repeated.
    std::lock_guard<std::mutex> lock(mu_);
    if (servers_.count(address) > 0) return Status::OK();
    if (fetched_ && now - fetched_at_ms_ < options_.min_refresh_ms) return unknown();
  }
  auto servers = fetch_ ? fetch_() : Result<std::vector<std::string>>(std::vector<std::string>());
  std::lock_guard<std::mutex> lock(mu_);
  ++fetches_;
  fetched_ = true;
  fetched_at_ms_ = now;
  if (!servers.ok()) {
    return Status(servers.status().code(), "cannot learn the cluster's object servers to check " +
                                               address.substr(0, 200) + ": " +
                                               servers.status().message());
  }
  SetLocked(*servers);
  if (servers_.count(address) > 0) return Status::OK();
  return unknown();
}

bool ObjectServerDirectory::IsKnown(const std::string& address) const {
  std::lock_guard<std::mutex> lock(mu_);
  return servers_.count(address) > 0;
}

void ObjectServerDirectory::Set(const std::vector<std::string>& servers) {
  std::lock_guard<std::mutex> lock(mu_);
  fetched_ = true;
  fetched_at_ms_ = clock_.NowMs();
  SetLocked(servers);
}

void ObjectServerDirectory::SetLocked(const std::vector<std::string>& servers) {
  servers_.clear();
  for (const auto& address : known_) {
    if (!address.empty()) servers_.insert(address);
  }
  for (const auto& address : servers) {
    if (servers_.size() >= options_.max_servers) break;
    if (!address.empty()) servers_.insert(address);
  }
}

size_t ObjectServerDirectory::fetches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fetches_;
}

std::vector<std::string> AliveObjectServers(const ClusterStatus& status) {
  std::vector<std::string> out;
  for (const auto& node : status.nodes) {
    if (node.alive && !node.object_address.empty()) out.push_back(node.object_address);
  }
  return out;
}

ObjectServerDirectory::Fetch FetchObjectServersFromHead(std::string head_address,
                                                        transport::ClientSecurity security,
                                                        int64_t timeout_ms) {
  return [head_address = std::move(head_address), security = std::move(security),
          timeout_ms]() -> Result<std::vector<std::string>> {
    auto reply = transport::CallOnce<protocol::GetClusterStatusReply>(
        head_address, security, protocol::GetClusterStatusRequest{}, timeout_ms);
    if (!reply.ok()) return reply.status();
    return AliveObjectServers(reply->status);
  };
}

}  // namespace rayx
