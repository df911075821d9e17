// The head's key-value store and its in-memory storage.
#include "head/kv_store.h"

#include <string_view>

#include "common/content_hash.h"
#include "rayx/ids.h"

namespace rayx::scheduler {

// ---- InMemoryKvStorage.

std::optional<KvEntry> InMemoryKvStorage::Get(const std::string& ns,
                                              const std::string& key) const {
  auto it = entries_.find({ns, key});
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void InMemoryKvStorage::Count(const Key& key, const KvEntry& entry, int sign) {
  uint64_t bytes = key.second.size() + entry.value.size();
  auto apply = [&](KvUsage& usage) {
    if (sign > 0) {
      usage.bytes += bytes;
      ++usage.keys;
    } else {
      usage.bytes -= bytes;
      --usage.keys;
    }
  };
  apply(total_);
  auto ns = ns_usage_.try_emplace(key.first).first;
  apply(ns->second);
  if (ns->second.keys == 0) ns_usage_.erase(ns);
  if (!entry.job_id.IsNil()) {
    auto job = job_usage_.try_emplace(entry.job_id).first;
    apply(job->second);
    if (job->second.keys == 0) job_usage_.erase(job);
  }
}

KvUsage InMemoryKvStorage::NamespaceUsage(const std::string& ns) const {
  auto it = ns_usage_.find(ns);
  return it == ns_usage_.end() ? KvUsage{} : it->second;
}

KvUsage InMemoryKvStorage::JobUsage(const JobId& job_id) const {
  auto it = job_usage_.find(job_id);
  return it == job_usage_.end() ? KvUsage{} : it->second;
}

void InMemoryKvStorage::Put(const std::string& ns, const std::string& key, KvEntry entry) {
  Key k{ns, key};
  auto it = entries_.find(k);
  if (it != entries_.end()) {
    Count(it->first, it->second, -1);
    if (!it->second.job_id.IsNil()) {
      auto job = by_job_.find(it->second.job_id);
      job->second.erase(k);
      if (job->second.empty()) by_job_.erase(job);
    }
  }
  if (!entry.job_id.IsNil()) by_job_[entry.job_id].insert(k);
  Count(k, entry, +1);
  entries_[std::move(k)] = std::move(entry);
}

bool InMemoryKvStorage::Delete(const std::string& ns, const std::string& key) {
  auto it = entries_.find({ns, key});
  if (it == entries_.end()) return false;
  Count(it->first, it->second, -1);
  if (!it->second.job_id.IsNil()) {
    auto job = by_job_.find(it->second.job_id);
    job->second.erase(it->first);
    if (job->second.empty()) by_job_.erase(job);
  }
  entries_.erase(it);
  return true;
}

std::vector<std::string> InMemoryKvStorage::List(const std::string& ns, const std::string& prefix,
                                                 const std::string& start_after, size_t limit,
                                                 bool* truncated) const {
  std::vector<std::string> keys;
  *truncated = false;
  auto first = start_after > prefix ? entries_.upper_bound({ns, start_after})
                                    : entries_.lower_bound({ns, prefix});
  for (auto it = first;
       it != entries_.end() && it->first.first == ns &&
       it->first.second.compare(0, prefix.size(), prefix) == 0;
       ++it) {
    if (keys.size() == limit) {
      *truncated = true;
      break;
    }
    keys.push_back(it->first.second);
  }
  return keys;
}

size_t InMemoryKvStorage::DeleteJob(const JobId& job_id) {
  auto job = by_job_.find(job_id);
  if (job == by_job_.end()) return 0;
  size_t removed = job->second.size();
  for (const Key& k : job->second) {
    auto it = entries_.find(k);
    if (it == entries_.end()) continue;
    Count(it->first, it->second, -1);
    entries_.erase(it);
  }
  by_job_.erase(job);
  return removed;
}

// ---- PersistentKvStorage.

PersistentKvStorage::PersistentKvStorage(HeadStore& store, const std::vector<StoredKv>& entries)
    : store_(store) {
  for (const auto& e : entries) memory_.Put(e.ns, e.key, KvEntry{e.value, e.job_id});
}

void PersistentKvStorage::Put(const std::string& ns, const std::string& key, KvEntry entry) {
  store_.PutKv(ns, key, entry.value, entry.job_id);
  memory_.Put(ns, key, std::move(entry));
}

bool PersistentKvStorage::Delete(const std::string& ns, const std::string& key) {
  if (!memory_.Delete(ns, key)) return false;
  store_.DeleteKv(ns, key);
  return true;
}

size_t PersistentKvStorage::DeleteJob(const JobId& job_id) {
  size_t removed = memory_.DeleteJob(job_id);
  if (removed > 0) store_.DeleteKvOfJob(job_id);
  return removed;
}

// ---- KvStore.

KvStore::KvStore(KvLimits limits, std::unique_ptr<KvStorage> storage)
    : limits_(limits), storage_(std::move(storage)) {}

namespace {

Status OverLimit(const char* what, size_t size, size_t limit) {
  return Status::InvalidArgument(std::string(what) + " of " + std::to_string(size) +
                                 " bytes is over the limit of " + std::to_string(limit) +
                                 " bytes");
}

}  // namespace

Status KvStore::CheckKey(const std::string& ns, const std::string& key) const {
  if (ns.size() > limits_.max_namespace_bytes) {
    return OverLimit("KV namespace", ns.size(), limits_.max_namespace_bytes);
  }
  if (key.empty()) return Status::InvalidArgument("KV key is empty");
  if (key.size() > limits_.max_key_bytes) {
    return OverLimit("KV key", key.size(), limits_.max_key_bytes);
  }
  return Status::OK();
}

bool KvStore::IsCodeKey(const std::string& ns, const std::string& key) const {
  if (ns != limits_.code_namespace || key.size() < kCodeHashDigits) return false;
  size_t start = key.size() - kCodeHashDigits;
  if (start > 0 && key[start - 1] != '/') return false;
  return detail::IsLowerHex(std::string_view(key).substr(start));
}

Status KvStore::CheckCode(const std::string& ns, const std::string& key, const std::string& value,
                          const std::optional<KvEntry>& old) const {
  if (!IsCodeKey(ns, key)) return Status::OK();
  std::string_view named = std::string_view(key).substr(key.size() - kCodeHashDigits);
  std::string actual = Sha256Hex(value).substr(0, kCodeHashDigits);
  if (old && old->value != value) {
    return Status::AlreadyExists("KV key \"" + key + "\" in namespace \"" + ns +
                                 "\" holds other code already; a code key names its code's hash "
                                 "and is never replaced (the value given hashes to " + actual + ")");
  }
  if (actual != named) {
    return Status::InvalidArgument("KV key \"" + key + "\" in namespace \"" + ns +
                                   "\" names code of hash " + std::string(named) +
                                   ", but the value's SHA-256 begins " + actual +
                                   ": a code key must name its value's hash");
  }
  return Status::OK();
}

namespace {

// "job 12ab holds 3 keys of 1000 bytes; this put (+200 bytes, +1 key) passes
// its limit of 1024 bytes"
Status Full(const std::string& who, const KvUsage& used, int64_t more_bytes, int64_t more_keys,
            uint64_t max_bytes, uint64_t max_keys, const std::string& advice) {
  bool bytes_over = more_bytes > 0 && used.bytes + static_cast<uint64_t>(more_bytes) > max_bytes;
  return Status::Unavailable(
      "KV " + who + " holds " + std::to_string(used.keys) + " keys of " +
      std::to_string(used.bytes) + " bytes; this put (" + (more_bytes >= 0 ? "+" : "") +
      std::to_string(more_bytes) + " bytes, " + (more_keys >= 0 ? "+" : "") +
      std::to_string(more_keys) + " keys) passes its limit of " +
      (bytes_over ? std::to_string(max_bytes) + " bytes" : std::to_string(max_keys) + " keys") +
      ": " + advice);
}

}  // namespace

Status KvStore::CheckRoom(const std::string& ns, const std::string& key, const std::string& value,
                          const JobId& job_id, const std::optional<KvEntry>& old) const {
  const int64_t new_bytes = static_cast<int64_t>(key.size() + value.size());
  const int64_t old_bytes = old ? static_cast<int64_t>(key.size() + old->value.size()) : 0;
  // Over a limit only when a put grows what is held (a smaller value always
  // fits, even past a limit lowered since).
  auto over = [](const KvUsage& used, int64_t bytes, int64_t keys, uint64_t max_bytes,
                 uint64_t max_keys) {
    return (bytes > 0 && used.bytes + static_cast<uint64_t>(bytes) > max_bytes) ||
           (keys > 0 && used.keys + static_cast<uint64_t>(keys) > max_keys);
  };
  const int64_t grow = new_bytes - old_bytes;
  const int64_t keys = old ? 0 : 1;
  KvUsage total = storage_->TotalUsage();
  if (over(total, grow, keys, limits_.max_total_bytes, limits_.max_total_keys)) {
    return Full("store", total, grow, keys, limits_.max_total_bytes, limits_.max_total_keys,
                "delete keys no longer needed");
  }
  KvUsage in_ns = storage_->NamespaceUsage(ns);
  if (over(in_ns, grow, keys, limits_.max_namespace_total_bytes, limits_.max_namespace_keys)) {
    return Full("namespace \"" + ns + "\"", in_ns, grow, keys, limits_.max_namespace_total_bytes,
                limits_.max_namespace_keys, "delete keys of it no longer needed");
  }
  if (!job_id.IsNil()) {
    // What the job holds grows by the whole value unless the key was its own.
    bool its_own = old && old->job_id == job_id;
    int64_t job_grow = its_own ? grow : new_bytes;
    int64_t job_keys = its_own ? 0 : 1;
    KvUsage of_job = storage_->JobUsage(job_id);
    if (over(of_job, job_grow, job_keys, limits_.max_job_bytes, limits_.max_job_keys)) {
      return Full("job " + job_id.Hex(), of_job, job_grow, job_keys, limits_.max_job_bytes,
                  limits_.max_job_keys, "delete the job's keys it no longer needs");
    }
  }
  return Status::OK();
}

Result<KvStore::PutOutcome> KvStore::Put(const std::string& ns, const std::string& key,
                                         std::string value, bool overwrite, const JobId& job_id) {
  RAYX_RETURN_IF_ERROR(CheckKey(ns, key));
  if (value.size() > limits_.max_value_bytes) {
    return OverLimit("KV value", value.size(), limits_.max_value_bytes);
  }
  PutOutcome out;
  std::optional<KvEntry> old = storage_->Get(ns, key);
  out.added = !old.has_value();
  if (!out.added && !overwrite) {
    return Status::AlreadyExists("KV key \"" + key + "\" already exists in namespace \"" + ns +
                                 "\" (put with overwrite to replace it)");
  }
  Status code = CheckCode(ns, key, value, old);
  if (!code.ok()) return code;
  if (old && IsCodeKey(ns, key)) return out;  // the same code: kept as it is, scope included
  RAYX_RETURN_IF_ERROR(CheckRoom(ns, key, value, job_id, old));
  auto [begin, end] = waits_by_key_.equal_range({ns, key});
  std::vector<uint64_t> woken;
  for (auto it = begin; it != end; ++it) woken.push_back(it->second);
  for (uint64_t id : woken) {
    out.answered.push_back({waits_.at(id).waiter, value});
    Unpark(id);
  }
  storage_->Put(ns, key, KvEntry{std::move(value), job_id});
  return out;
}

Result<std::optional<std::string>> KvStore::Get(const std::string& ns,
                                                const std::string& key) const {
  RAYX_RETURN_IF_ERROR(CheckKey(ns, key));
  auto entry = storage_->Get(ns, key);
  if (!entry) return std::optional<std::string>();
  return std::optional<std::string>(std::move(entry->value));
}

Result<std::optional<std::string>> KvStore::Wait(const std::string& ns, const std::string& key,
                                                 KvWaiter waiter, int64_t deadline_ms) {
  auto present = Get(ns, key);
  if (!present.ok() || present->has_value()) return present;
  size_t& mine = waits_per_peer_[waiter.peer];
  if (mine >= limits_.max_waits_per_peer || waits_.size() >= limits_.max_waits) {
    bool peer_limit = mine >= limits_.max_waits_per_peer;
    if (mine == 0) waits_per_peer_.erase(waiter.peer);
    return Status::Unavailable(
        peer_limit ? "too many KV waits parked by this client (limit " +
                         std::to_string(limits_.max_waits_per_peer) + "): wait for fewer keys at once"
                   : "too many KV waits parked in the head (limit " +
                         std::to_string(limits_.max_waits) + "): try again later");
  }
  ++mine;
  uint64_t id = next_wait_id_++;
  waits_by_key_.emplace(std::make_pair(ns, key), id);
  waits_by_deadline_.emplace(deadline_ms, id);
  waits_.emplace(id, Parked{ns, key, std::move(waiter), deadline_ms});
  return std::optional<std::string>();
}

Result<bool> KvStore::Delete(const std::string& ns, const std::string& key) {
  RAYX_RETURN_IF_ERROR(CheckKey(ns, key));
  return storage_->Delete(ns, key);
}

Result<KvStore::DeletePrefixOutcome> KvStore::DeletePrefix(const std::string& ns,
                                                           const std::string& prefix) {
  if (prefix.empty()) {
    return Status::InvalidArgument(
        "KV delete by prefix with an empty prefix would delete the whole namespace: give a "
        "prefix");
  }
  auto listed = List(ns, prefix, limits_.max_list_keys);
  if (!listed.ok()) return listed.status();
  DeletePrefixOutcome out;
  for (const auto& key : listed->keys) out.count += storage_->Delete(ns, key) ? 1 : 0;
  out.more = listed->truncated;
  return out;
}

Result<KvStore::ListOutcome> KvStore::List(const std::string& ns, const std::string& prefix,
                                           size_t limit, const std::string& start_after) const {
  if (ns.size() > limits_.max_namespace_bytes) {
    return OverLimit("KV namespace", ns.size(), limits_.max_namespace_bytes);
  }
  if (prefix.size() > limits_.max_key_bytes) {
    return OverLimit("KV prefix", prefix.size(), limits_.max_key_bytes);
  }
  if (start_after.size() > limits_.max_key_bytes) {
    return OverLimit("KV list start key", start_after.size(), limits_.max_key_bytes);
  }
  if (limit == 0 || limit > limits_.max_list_keys) limit = limits_.max_list_keys;
  ListOutcome out;
  out.keys = storage_->List(ns, prefix, start_after, limit, &out.truncated);
  return out;
}

std::vector<KvWaitAnswer> KvStore::ExpireWaits(int64_t now_ms) {
  std::vector<KvWaitAnswer> out;
  while (!waits_by_deadline_.empty() && waits_by_deadline_.begin()->first <= now_ms) {
    uint64_t id = waits_by_deadline_.begin()->second;
    const Parked& parked = waits_.at(id);
    out.push_back({parked.waiter, Status::TimedOut("KV key \"" + parked.key +
                                                   "\" did not appear in namespace \"" +
                                                   parked.ns + "\" before the wait's deadline")});
    Unpark(id);
  }
  return out;
}

size_t KvStore::OnJobFinished(const JobId& job_id) {
  if (job_id.IsNil()) return 0;
  return storage_->DeleteJob(job_id);
}

void KvStore::Unpark(uint64_t wait_id) {
  auto it = waits_.find(wait_id);
  if (it == waits_.end()) return;
  const Parked& parked = it->second;
  auto [begin, end] = waits_by_key_.equal_range({parked.ns, parked.key});
  for (auto k = begin; k != end; ++k) {
    if (k->second == wait_id) {
      waits_by_key_.erase(k);
      break;
    }
  }
  waits_by_deadline_.erase({parked.deadline_ms, wait_id});
  auto peer = waits_per_peer_.find(parked.waiter.peer);
  if (peer != waits_per_peer_.end() && --peer->second == 0) waits_per_peer_.erase(peer);
  waits_.erase(it);
}

}  // namespace rayx::scheduler
