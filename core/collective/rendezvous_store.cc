// The in-memory RendezvousStore.
#include "collective/rendezvous_store.h"

namespace rayx::collective {

Status InMemoryRendezvousStore::Set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    values_[key] = value;
  }
  cv_.notify_all();
  return Status::OK();
}

Result<bool> InMemoryRendezvousStore::SetIfAbsent(const std::string& key,
                                                  const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!values_.emplace(key, value).second) return false;
  }
  cv_.notify_all();
  return true;
}

std::optional<std::string> InMemoryRendezvousStore::Get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

Status InMemoryRendezvousStore::Wait(const std::vector<std::string>& keys,
                                     std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto missing = [&] {
    std::string names;
    for (const auto& key : keys) {
      if (values_.count(key) == 0) names += (names.empty() ? "" : ", ") + key;
    }
    return names;
  };
  if (cv_.wait_until(lock, deadline, [&] { return missing().empty(); })) return Status::OK();
  return Status::TimedOut("keys not set in time: " + missing());
}

Status InMemoryRendezvousStore::DeletePrefix(const std::string& prefix) {
  if (prefix.empty()) return Status::InvalidArgument("DeletePrefix: the prefix is empty");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.lower_bound(prefix);
  while (it != values_.end() && it->first.compare(0, prefix.size(), prefix) == 0) {
    it = values_.erase(it);
  }
  return Status::OK();
}

size_t InMemoryRendezvousStore::CountPrefix(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (auto it = values_.lower_bound(prefix);
       it != values_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    ++n;
  }
  return n;
}

}  // namespace rayx::collective
