// The head's key-value store from this process (rayx/kv.h and the internal
// calls of collectives, actor groups and Train).
#include "runtime/kv_client.h"

#include <algorithm>
#include <stdexcept>

#include "common/clock.h"
#include "protocol/kv_messages.h"
#include "rayx/errors.h"
#include "rayx/kv.h"
#include "runtime/runtime.h"

namespace rayx::detail {
namespace {

// A head call that answers at once; generous for a loaded head.
constexpr int64_t kCallTimeoutMs = 30000;
// The head answers a wait's timeout on its timer tick: allow for it.
constexpr int64_t kWaitSlackMs = 2000;

void CheckLimits(const std::string& ns, const std::string& key, const std::string* value) {
  if (ns.size() > kv::kMaxNamespaceBytes) {
    throw std::invalid_argument("KV namespace of " + std::to_string(ns.size()) +
                                " bytes is over the limit of " +
                                std::to_string(kv::kMaxNamespaceBytes) + " bytes");
  }
  if (key.empty()) throw std::invalid_argument("KV key is empty: give a key of 1 to 1024 bytes");
  if (key.size() > kv::kMaxKeyBytes) {
    throw std::invalid_argument("KV key of " + std::to_string(key.size()) +
                                " bytes is over the limit of " + std::to_string(kv::kMaxKeyBytes) +
                                " bytes");
  }
  if (value != nullptr && value->size() > kv::kMaxValueBytes) {
    throw std::invalid_argument("KV value of " + std::to_string(value->size()) +
                                " bytes is over the limit of " +
                                std::to_string(kv::kMaxValueBytes) +
                                " bytes (1 MiB): keep large data in objects (rayx::Put)");
  }
}

[[noreturn]] void Throw(const char* what, const std::string& key, const Status& status) {
  std::string message = std::string("KV ") + what + " of '" + key + "': " + status.message();
  if (status.code() == StatusCode::kInvalidArgument) throw std::invalid_argument(message);
  throw std::runtime_error(message);
}

}  // namespace

bool KvPut(const std::string& ns, const std::string& key, const std::string& value,
           bool overwrite, bool job_scoped) {
  CheckLimits(ns, key, &value);
  Runtime& runtime = RequireRuntime();
  protocol::KvPutRequest req;
  req.ns = ns;
  req.key = key;
  req.value = value;
  req.overwrite = overwrite;
  if (job_scoped) req.job_id = runtime.job_id();
  auto reply = runtime.CallHead<protocol::KvPutReply>(req, kCallTimeoutMs);
  if (!reply.ok()) {
    if (!overwrite && reply.status().code() == StatusCode::kAlreadyExists) return false;
    Throw("put", key, reply.status());
  }
  return reply->added;
}

std::optional<std::string> KvGet(const std::string& ns, const std::string& key) {
  CheckLimits(ns, key, nullptr);
  protocol::KvGetRequest req;
  req.ns = ns;
  req.key = key;
  auto reply = RequireRuntime().CallHead<protocol::KvGetReply>(req, kCallTimeoutMs);
  if (!reply.ok()) Throw("get", key, reply.status());
  if (!reply->found) return std::nullopt;
  return std::move(reply->value);
}

Result<std::string> KvWait(const std::string& ns, const std::string& key, int64_t timeout_ms) {
  CheckLimits(ns, key, nullptr);
  protocol::KvWaitRequest req;
  req.ns = ns;
  req.key = key;
  req.timeout_ms = std::clamp<int64_t>(timeout_ms, 0, kLongestWaitMs);
  auto reply = RequireRuntime().CallHead<protocol::KvWaitReply>(req, req.timeout_ms + kWaitSlackMs);
  if (!reply.ok()) return reply.status();
  return std::move(reply->value);
}

bool KvDelete(const std::string& ns, const std::string& key) {
  CheckLimits(ns, key, nullptr);
  protocol::KvDeleteRequest req;
  req.ns = ns;
  req.key = key;
  auto reply = RequireRuntime().CallHead<protocol::KvDeleteReply>(req, kCallTimeoutMs);
  if (!reply.ok()) Throw("delete", key, reply.status());
  return reply->deleted;
}

size_t KvDeletePrefix(const std::string& ns, const std::string& prefix) {
  if (prefix.empty()) {
    throw std::invalid_argument(
        "KV delete by prefix: the prefix is empty, which would delete every key of the "
        "namespace: give a prefix");
  }
  CheckLimits(ns, prefix, nullptr);
  protocol::KvDeleteRequest req;
  req.ns = ns;
  req.key = prefix;
  req.prefix = true;
  size_t deleted = 0;
  while (true) {
    auto reply = RequireRuntime().CallHead<protocol::KvDeleteReply>(req, kCallTimeoutMs);
    if (!reply.ok()) Throw("delete by prefix", prefix, reply.status());
    deleted += reply->count;
    // A reply that deleted nothing yet says more are left would loop forever.
    if (!reply->more || reply->count == 0) return deleted;
  }
}

std::vector<std::string> KvList(const std::string& ns, const std::string& prefix, size_t limit) {
  protocol::KvListRequest req;
  req.ns = ns;
  req.prefix = prefix;
  std::vector<std::string> keys;
  while (keys.size() < limit) {
    req.limit = static_cast<uint32_t>(std::min<size_t>(limit - keys.size(), 1000));
    auto reply = RequireRuntime().CallHead<protocol::KvListReply>(req, kCallTimeoutMs);
    if (!reply.ok()) Throw("list", prefix, reply.status());
    for (auto& key : reply->keys) keys.push_back(std::move(key));
    if (!reply->truncated || reply->keys.empty()) break;
    req.start_after = keys.back();
  }
  return keys;
}

std::string CurrentHeadAddress() { return RequireRuntime().config().head.ToString(); }
transport::ClientSecurity CurrentHeadSecurity() { return RequireRuntime().HeadSecurity(); }

transport::ClientSecurity CurrentObjectServerSecurity() {
  return RequireRuntime().ObjectServerSecurity();
}

Result<ClusterStatus> CurrentClusterStatus(int64_t timeout_ms) {
  auto reply = RequireRuntime().CallHead<protocol::GetClusterStatusReply>(
      protocol::GetClusterStatusRequest{}, timeout_ms);
  if (!reply.ok()) return reply.status();
  return std::move(reply->status);
}
std::string CurrentNodeIp() { return RequireRuntime().config().node_ip; }

}  // namespace rayx::detail

namespace rayx::kv {

bool Put(const std::string& key, const std::string& value, bool overwrite, const std::string& ns) {
  return detail::KvPut(ns, key, value, overwrite, /*job_scoped=*/false);
}

std::optional<std::string> Get(const std::string& key, const std::string& ns) {
  return detail::KvGet(ns, key);
}

std::string Wait(const std::string& key, int64_t timeout_ms, const std::string& ns) {
  auto value = detail::KvWait(ns, key, timeout_ms);
  if (value.ok()) return std::move(*value);
  if (value.status().code() == StatusCode::kTimedOut) {
    throw GetTimeoutError("KV key '" + key + "' did not appear within " +
                          std::to_string(timeout_ms) + " ms");
  }
  if (value.status().code() == StatusCode::kInvalidArgument) {
    throw std::invalid_argument("KV wait of '" + key + "': " + value.status().message());
  }
  throw std::runtime_error("KV wait of '" + key + "': " + value.status().message());
}

bool Delete(const std::string& key, const std::string& ns) { return detail::KvDelete(ns, key); }

size_t DeletePrefix(const std::string& prefix, const std::string& ns) {
  return detail::KvDeletePrefix(ns, prefix);
}

std::vector<std::string> List(const std::string& prefix, const std::string& ns) {
  return detail::KvList(ns, prefix);
}

}  // namespace rayx::kv
