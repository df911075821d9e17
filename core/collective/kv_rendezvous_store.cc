// RendezvousStore on the head's KV.
#include "collective/kv_rendezvous_store.h"

#include <stdexcept>

#include "runtime/kv_client.h"

namespace rayx::collective {

Status KvRendezvousStore::Set(const std::string& key, const std::string& value) {
  try {
    rayx::detail::KvPut(kNamespace, key, value, /*overwrite=*/true, /*job_scoped=*/true);
    return Status::OK();
  } catch (const std::exception& e) {
    return Status::Unavailable(std::string("rendezvous: cannot set ") + key + ": " + e.what());
  }
}

Result<bool> KvRendezvousStore::SetIfAbsent(const std::string& key, const std::string& value) {
  try {
    return rayx::detail::KvPut(kNamespace, key, value, /*overwrite=*/false, /*job_scoped=*/true);
  } catch (const std::exception& e) {
    return Status::Unavailable(std::string("rendezvous: cannot set ") + key + ": " + e.what());
  }
}

Status KvRendezvousStore::DeletePrefix(const std::string& prefix) {
  try {
    rayx::detail::KvDeletePrefix(kNamespace, prefix);
    return Status::OK();
  } catch (const std::exception& e) {
    return Status::Unavailable(std::string("rendezvous: cannot delete ") + prefix + "*: " +
                               e.what());
  }
}

std::optional<std::string> KvRendezvousStore::Get(const std::string& key) {
  try {
    return rayx::detail::KvGet(kNamespace, key);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

Status KvRendezvousStore::Wait(const std::vector<std::string>& keys,
                               std::chrono::steady_clock::time_point deadline) {
  for (const auto& key : keys) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    auto got = rayx::detail::KvWait(kNamespace, key, left > 0 ? left : 0);
    if (!got.ok()) {
      if (got.status().code() == StatusCode::kTimedOut) {
        return Status::TimedOut("rendezvous: key " + key + " was not set in time");
      }
      return got.status();
    }
  }
  return Status::OK();
}

}  // namespace rayx::collective
