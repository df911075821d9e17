// The head's key-value store as this process's runtime reaches it (rayx/kv.h
// is the public face), plus where the runtime's cluster is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rayx/cluster_status.h"
#include "rayx/status.h"
#include "transport/security.h"

namespace rayx::detail {

// Each call goes over the runtime's own head connection (RequireRuntime) and
// throws std::runtime_error naming the head's reason when it refuses
// (std::invalid_argument for keys or values over their limits).
// `job_scoped` keys are removed by the head when this job ends.
bool KvPut(const std::string& ns, const std::string& key, const std::string& value,
           bool overwrite, bool job_scoped = false);
std::optional<std::string> KvGet(const std::string& ns, const std::string& key);
// TimedOut when the key does not appear within `timeout_ms`.
Result<std::string> KvWait(const std::string& ns, const std::string& key, int64_t timeout_ms);
bool KvDelete(const std::string& ns, const std::string& key);
// Deletes every key of `ns` starting with `prefix` (not empty), in as many head
// calls as it takes (each deletes at most 1000); returns how many.
size_t KvDeletePrefix(const std::string& ns, const std::string& prefix);
// The keys starting with `prefix`, sorted, at most `limit` (paged through the
// head, which returns at most 1000 per call).
std::vector<std::string> KvList(const std::string& ns, const std::string& prefix,
                                size_t limit = 10000);

// The cluster this process's runtime belongs to: "host:port", how this process
// proves itself to the head and to object servers, and the cluster's state.
std::string CurrentHeadAddress();
transport::ClientSecurity CurrentHeadSecurity();
transport::ClientSecurity CurrentObjectServerSecurity();
Result<ClusterStatus> CurrentClusterStatus(int64_t timeout_ms);
// This process's node address (the one its node registered with).
std::string CurrentNodeIp();

}  // namespace rayx::detail
