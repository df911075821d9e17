// GlooStoreAdapter: Gloo's rendezvous::Store over a rayx RendezvousStore.
#include "collective/gloo_store_adapter.h"

#include <gloo/common/error.h>

namespace rayx::collective {

GlooStoreAdapter::GlooStoreAdapter(RendezvousStore& store, std::string prefix,
                                   std::chrono::steady_clock::time_point deadline,
                                   std::function<void()> after_read)
    : store_(store),
      prefix_(std::move(prefix)),
      deadline_(deadline),
      after_read_(std::move(after_read)) {}

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  Status s = store_.Set(prefix_ + key, std::string(data.begin(), data.end()));
  if (!s.ok()) throw gloo::IoException("rendezvous store: " + s.ToString());
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  wait({key});
  std::optional<std::string> value = store_.Get(prefix_ + key);
  if (!value) throw gloo::IoException("rendezvous store: key " + prefix_ + key + " vanished");
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_read_ = key;
  }
  if (after_read_) after_read_();
  return std::vector<char>(value->begin(), value->end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& key : keys) full.push_back(prefix_ + key);
  Status s = store_.Wait(full, deadline_);
  if (s.ok()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& key : keys) {
      if (!store_.Get(prefix_ + key)) missing_.push_back(key);
    }
  }
  throw gloo::IoException("rendezvous store: " + s.ToString());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& /*timeout*/) {
  wait(keys);  // the group's deadline bounds every wait
}

std::vector<std::string> GlooStoreAdapter::missing_keys() {
  std::lock_guard<std::mutex> lock(mu_);
  return missing_;
}

std::string GlooStoreAdapter::last_read() {
  std::lock_guard<std::mutex> lock(mu_);
  return last_read_;
}

}  // namespace rayx::collective
