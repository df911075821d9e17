// The head's key-value store: namespaced keys, parked waits, job-scoped keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "head/head_store.h"
#include "rayx/status.h"

namespace rayx::scheduler {

// One stored value. `job_id` non-empty: removed when that job ends.
struct KvEntry {
  std::string value;
  JobId job_id;
};

// What a set of entries holds: bytes count each key and its value.
struct KvUsage {
  uint64_t bytes = 0;
  uint64_t keys = 0;
};

// Where keys and values are kept, apart from waits and limits, so that a later
// version can keep them on disk. It also keeps the ledger of what each
// namespace and each job holds, which the limits are checked against.
// Implementations need not be thread-safe.
class KvStorage {
 public:
  virtual ~KvStorage() = default;
  virtual std::optional<KvEntry> Get(const std::string& ns, const std::string& key) const = 0;
  // Inserts or replaces.
  virtual void Put(const std::string& ns, const std::string& key, KvEntry entry) = 0;
  // False when there was no such key.
  virtual bool Delete(const std::string& ns, const std::string& key) = 0;
  // Keys of `ns` starting with `prefix` (and after `start_after` when it is
  // not empty), in byte order, at most `limit`; `*truncated` says whether more
  // matched.
  virtual std::vector<std::string> List(const std::string& ns, const std::string& prefix,
                                        const std::string& start_after, size_t limit,
                                        bool* truncated) const = 0;
  // Removes every key put with `job_id`; returns how many.
  virtual size_t DeleteJob(const JobId& job_id) = 0;
  virtual size_t size() const = 0;
  // What namespace `ns`, the keys put with `job_id`, and everything hold.
  virtual KvUsage NamespaceUsage(const std::string& ns) const = 0;
  virtual KvUsage JobUsage(const JobId& job_id) const = 0;
  virtual KvUsage TotalUsage() const = 0;
};

// Keeps everything in memory: lost when the head stops.
class InMemoryKvStorage final : public KvStorage {
 public:
  std::optional<KvEntry> Get(const std::string& ns, const std::string& key) const override;
  void Put(const std::string& ns, const std::string& key, KvEntry entry) override;
  bool Delete(const std::string& ns, const std::string& key) override;
  std::vector<std::string> List(const std::string& ns, const std::string& prefix,
                                const std::string& start_after, size_t limit,
                                bool* truncated) const override;
  size_t DeleteJob(const JobId& job_id) override;
  size_t size() const override { return entries_.size(); }
  KvUsage NamespaceUsage(const std::string& ns) const override;
  KvUsage JobUsage(const JobId& job_id) const override;
  KvUsage TotalUsage() const override { return total_; }

 private:
  using Key = std::pair<std::string, std::string>;  // (namespace, key)
  // Adds (sign +1) or removes (-1) one entry from the ledgers.
  void Count(const Key& key, const KvEntry& entry, int sign);

  std::map<Key, KvEntry> entries_;
  std::unordered_map<JobId, std::set<Key>> by_job_;
  std::unordered_map<std::string, KvUsage> ns_usage_;
  std::unordered_map<JobId, KvUsage> job_usage_;
  KvUsage total_;
};

// Keeps everything in memory and writes each change through to the head's
// state file, so a restarted head has its keys back. Reads come from memory.
// The HeadStore must outlive it.
class PersistentKvStorage final : public KvStorage {
 public:
  // Starts with `entries` (as loaded from `store`).
  PersistentKvStorage(HeadStore& store, const std::vector<StoredKv>& entries);
  std::optional<KvEntry> Get(const std::string& ns, const std::string& key) const override {
    return memory_.Get(ns, key);
  }
  void Put(const std::string& ns, const std::string& key, KvEntry entry) override;
  bool Delete(const std::string& ns, const std::string& key) override;
  std::vector<std::string> List(const std::string& ns, const std::string& prefix,
                                const std::string& start_after, size_t limit,
                                bool* truncated) const override {
    return memory_.List(ns, prefix, start_after, limit, truncated);
  }
  size_t DeleteJob(const JobId& job_id) override;
  size_t size() const override { return memory_.size(); }
  KvUsage NamespaceUsage(const std::string& ns) const override {
    return memory_.NamespaceUsage(ns);
  }
  KvUsage JobUsage(const JobId& job_id) const override { return memory_.JobUsage(job_id); }
  KvUsage TotalUsage() const override { return memory_.TotalUsage(); }

 private:
  HeadStore& store_;
  InMemoryKvStorage memory_;
};

// Who waits for a key: the routing id and request id to answer.
struct KvWaiter {
  std::string peer;
  uint64_t request_id = 0;
};

// A parked wait that ends now: with the value, or with TimedOut.
struct KvWaitAnswer {
  KvWaiter waiter;
  Result<std::string> value;
};

// Sizes the KvStore accepts and how many waits it parks.
struct KvLimits {
  size_t max_namespace_bytes = 256;   // Default: 256 B
  size_t max_key_bytes = 1024;        // Default: 1 KiB
  size_t max_value_bytes = 1 << 20;   // Default: 1 MiB
  size_t max_list_keys = 1000;        // Default: 1000 keys per List
  size_t max_waits_per_peer = 1024;   // Default: 1024 parked waits per peer
  size_t max_waits = 65536;           // Default: 65536 parked waits in all
  // What may be stored (bytes count keys and values): the keys put for one
  // job (job-scoped), one namespace, and everything.
  uint64_t max_job_bytes = uint64_t{64} << 20;         // Default: 64 MiB
  uint64_t max_job_keys = 16384;                       // Default: 16,384 keys
  uint64_t max_namespace_total_bytes = uint64_t{256} << 20;  // Default: 256 MiB
  uint64_t max_namespace_keys = 65536;                 // Default: 65,536 keys
  uint64_t max_total_bytes = uint64_t{1} << 30;        // Default: 1 GiB
  uint64_t max_total_keys = 262144;                    // Default: 262,144 keys
  // Exported code (the Python package's functions and classes): a key of
  // this namespace whose last '/'-separated part is 40 hex digits names the
  // SHA-256 of its value (its first 40 digits), so its value is checked
  // against it and can never be replaced by other code.
  std::string code_namespace = "rayx.py.fn";
};

// Design: the store checks every limit, keeps job-scoped keys apart so a job's
// end removes them, and parks waits for absent keys: a Put answers the waits on
// its key, ExpireWaits answers those whose deadline passed. It reads no clock:
// callers pass the time. Waits are bounded per peer and in total, so a client
// cannot fill the head's memory with them. Waits are not persisted. What is
// stored is bounded per job (its job-scoped keys), per namespace and in all,
// in bytes and in keys; code keys (KvLimits::code_namespace) are content-
// addressed, so one job cannot replace the code another job runs.
//
// Owns its storage. Not thread-safe (the head's event loop owns it).
class KvStore {
 public:
  struct PutOutcome {
    bool added = false;                  // the key was new
    std::vector<KvWaitAnswer> answered;  // waits the value ended
  };
  struct ListOutcome {
    std::vector<std::string> keys;
    bool truncated = false;
  };
  struct DeletePrefixOutcome {
    size_t count = 0;   // keys deleted
    bool more = false;  // keys with the prefix are left (over the list limit)
  };

  // An in-memory store with the default limits.
  KvStore() : KvStore(KvLimits(), std::make_unique<InMemoryKvStorage>()) {}
  KvStore(KvLimits limits, std::unique_ptr<KvStorage> storage);

  // Stores the value. Returns InvalidArgument naming the limit and the size for
  // an empty or oversized key, or an oversized namespace or value, and for a
  // code key whose value does not have the hash the key names;
  // AlreadyExists when the key is present and `overwrite` is false (or a code
  // key holds other bytes: a code key is written once, and putting the same
  // bytes again changes nothing, its job scope included); Unavailable, with the figures, when the value
  // would take the job's, the namespace's or the store's holdings past
  // their limit (a put that does not grow them is always taken).
  Result<PutOutcome> Put(const std::string& ns, const std::string& key, std::string value,
                         bool overwrite, const JobId& job_id);
  // nullopt when absent. InvalidArgument as for Put.
  Result<std::optional<std::string>> Get(const std::string& ns, const std::string& key) const;
  // The value when present now; otherwise parks `waiter` until a Put of the key
  // or `deadline_ms`, and returns nullopt. InvalidArgument as for Put;
  // Unavailable when the peer or the store has too many waits parked.
  Result<std::optional<std::string>> Wait(const std::string& ns, const std::string& key,
                                          KvWaiter waiter, int64_t deadline_ms);
  // False when there was no such key. InvalidArgument as for Put.
  Result<bool> Delete(const std::string& ns, const std::string& key);
  // Deletes the keys of `ns` starting with `prefix`, at most
  // KvLimits::max_list_keys of them, so one call's work is bounded.
  // InvalidArgument for an empty prefix (it would empty the namespace) or one
  // over the key limit.
  Result<DeletePrefixOutcome> DeletePrefix(const std::string& ns, const std::string& prefix);
  // At most `limit` keys (0 or over the limit: KvLimits::max_list_keys), after
  // `start_after` when it is not empty.
  Result<ListOutcome> List(const std::string& ns, const std::string& prefix, size_t limit,
                           const std::string& start_after = "") const;
  // Ends the waits whose deadline is at or before `now_ms` with TimedOut.
  std::vector<KvWaitAnswer> ExpireWaits(int64_t now_ms);
  // Removes the keys put for `job_id`; returns how many.
  size_t OnJobFinished(const JobId& job_id);

  size_t size() const { return storage_->size(); }
  size_t wait_count() const { return waits_.size(); }

 private:
  struct Parked {
    std::string ns;
    std::string key;
    KvWaiter waiter;
    int64_t deadline_ms = 0;
  };

  Status CheckKey(const std::string& ns, const std::string& key) const;
  // The limits a put of `value` under (ns, key) for `job_id` must stay within;
  // `old` is the entry it replaces.
  Status CheckRoom(const std::string& ns, const std::string& key, const std::string& value,
                   const JobId& job_id, const std::optional<KvEntry>& old) const;
  // The Python package's code keys end in sha256(code)[:40].
  static constexpr size_t kCodeHashDigits = 40;
  // Whether (ns, key) is a code key: in the code namespace, its last
  // '/'-separated part kCodeHashDigits hex digits.
  bool IsCodeKey(const std::string& ns, const std::string& key) const;
  // A code key's value must have the hash the key names.
  Status CheckCode(const std::string& ns, const std::string& key, const std::string& value,
                   const std::optional<KvEntry>& old) const;
  void Unpark(uint64_t wait_id);

  KvLimits limits_;
  std::unique_ptr<KvStorage> storage_;
  std::map<uint64_t, Parked> waits_;  // by wait id
  std::multimap<std::pair<std::string, std::string>, uint64_t> waits_by_key_;
  std::set<std::pair<int64_t, uint64_t>> waits_by_deadline_;
  std::unordered_map<std::string, size_t> waits_per_peer_;
  uint64_t next_wait_id_ = 1;
};

}  // namespace rayx::scheduler
