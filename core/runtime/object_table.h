// The objects a process owns: their values or locations, and who waits on them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/work_counters.h"
#include "object_store/shared_memory_store.h"
#include "object_store/store_writer.h"
#include "protocol/messages.h"
#include "protocol/enum_names.h"
#include "rayx/detail/runtime_api.h"
#include "rayx/ids.h"
#include "rayx/status.h"

namespace rayx::detail {

// Why a task (or an object) failed; thrown to the user as a TaskError by Get.
// `type`: the exception's type for kException, else the kind's name.
struct ErrorInfo {
  protocol::TaskErrorKind kind = protocol::TaskErrorKind::kException;
  std::string type, message, function, node;
  // One of rayx's kinds (not an exception of the call's code).
  static ErrorInfo Of(protocol::TaskErrorKind kind, std::string message, std::string function = "",
                      std::string node = "") {
    return {kind, std::string(protocol::Name(kind)), std::move(message), std::move(function),
            std::move(node)};
  }
};

// A handle to an object this process owns (what an ObjectHandle points to).
// The value lives in this process (the owner); its entry is released
// (Runtime::Release) when the last ObjectRef to it is gone.
// A borrowed object (a ref that came inside a value) has an entry of its own
// here under a new local id; `origin` is the object's id (empty for this
// process's own objects). See Runtime::ImportRef.
struct ObjectCore {
  ObjectId id;
  std::string origin;
  ~ObjectCore();
};

// The table of this process's objects: each entry is pending (a task's result
// on its way), ready (a value in memory or a location in a node's store) or
// failed (an ErrorInfo). User threads block in Get/Wait until entries leave
// the pending state; the I/O thread completes them (CompleteAll) and runs the
// continuations registered on them (AddWaiter).
//
// Thread safety: every method may be called from any thread; one mutex guards
// the entries, and a condition variable, notified only while a Get or Wait
// blocks, wakes user threads. Continuations and the `on_unwanted` callback run
// on the thread that calls CompleteAll, outside the lock.
//
// Ownership: the table owns the entries and the values in them; a value handed
// out by Get is shared (ObjectBytes::keepalive), so it outlives its entry.
class ObjectTable {
 public:
  // How often a blocked Get or Wait runs its `on_block` again (a worker hands
  // back the calls queued behind a waiting one each time).
  static constexpr int64_t kOnBlockPeriodMs = 100;
  // A result to record.
  struct Completion {
    ObjectId id;
    std::shared_ptr<const std::string> value;
    std::shared_ptr<ErrorInfo> error;
    std::shared_ptr<const protocol::ObjectLocation> location;
    // For a stored result whose task has retries left (lineage): runs that
    // task again (its owner posts it to the I/O thread), which completes the
    // object anew. Get calls it when the stored copy cannot be read any more.
    std::function<void()> recompute;
    // Not nil: item `id` of the generator call whose result is `stream`
    // (see ClaimStreamItem).
    ObjectId stream;
  };
  struct Options {
    // Objects stored on this address are mapped in place (map_local) instead
    // of pulled.
    std::string node_ip;
    // Maps a stored object of this node in place; a failure (not one of this
    // node's store's objects, or gone) pulls it instead. Default: pulls.
    std::function<Result<std::shared_ptr<MappedObject>>(const protocol::ObjectLocation&)> map_local;
    // Fetches a stored object's bytes from another node. Default: fails.
    std::function<Result<std::string>(const protocol::ObjectLocation&)> pull;
    // A stored result that was released before it arrived: nobody holds it,
    // so its file should go. Runs inside CompleteAll. Default: nothing.
    std::function<void(const protocol::ObjectLocation&)> on_unwanted;
    // Spin-then-block: Get watches a pending object this long (yielding the
    // CPU each round) before it sleeps on the condition variable. 0: sleep at
    // once. See Get.
    int64_t spin_us = 0;
    // Where the tasks this process submits are counted (the process's:
    // WorkCounters::Process()); nullptr: counters of the table's own.
    WorkCounters* counters = nullptr;
  };
  // How a task's argument stands (ResolveArg).
  enum class ArgState { kUnknown, kFailed, kPending, kValue, kStored };
  // What can be done for an argument whose stored copy a worker could not read
  // (OnStoredCopyLost).
  enum class CopyLost {
    kResolveAgain,  // resolving the argument again finds it (pending, a new copy, or failed)
    kLost,          // nothing brings it back: a Put, or no retries left to compute it
  };
  // What Release took out of the table, for the caller to free.
  struct Released {
    std::shared_ptr<const protocol::ObjectLocation> location;
    std::shared_ptr<StoreWriter::Buffer> written;
    bool shared_out = false;  // `location` was handed to another process
    // `location` is held at its node's agent (refs inside values): releasing
    // lets go of one hold there (a delete through its object server), even
    // for this process's own Put.
    bool pinned = false;
    // A generator's result released: its items nobody claimed, stored.
    std::vector<std::shared_ptr<const protocol::ObjectLocation>> unclaimed_items;
  };

  explicit ObjectTable(Options options);
  ObjectTable(const ObjectTable&) = delete;
  ObjectTable& operator=(const ObjectTable&) = delete;

  // Adds a pending entry (no-op when `id` exists).
  void AddPending(const ObjectId& id);
  // Adds the pending result of a task or actor call this process submitted:
  // counted (counters()) when added and when it completes.
  void AddPendingTask(const ObjectId& id);
  // A task or call goes again (a retry, or lineage that remakes its result).
  void CountRetry() { counters_.TaskRetried(); }
  // What this table's submitted tasks counted into (reported with heartbeats,
  // never per task): Options::counters or the table's own.
  WorkCounters& counters() const { return counters_; }
  // Adds a ready entry holding `value` in memory.
  void AddValue(const ObjectId& id, std::shared_ptr<const std::string> value);
  // Adds a ready entry for this process's Put into the local store.
  void AddStored(const ObjectId& id, std::shared_ptr<const protocol::ObjectLocation> location,
                 std::shared_ptr<StoreWriter::Buffer> written);

  // Adds a ready entry for an object held at `location` for this process (a
  // borrowed ref, Runtime::ImportRef): pinned, never computed again.
  void AddBorrowed(const ObjectId& id, std::shared_ptr<const protocol::ObjectLocation> location);
  // Adds a failed entry.
  void AddFailed(const ObjectId& id, ErrorInfo error);
  // The ready entry `id` is about to be held at its node's agent (a ref to
  // it goes inside a value): marks it pinned and shared when it is stored
  // (then returns its location, and `*written` says whether this process's
  // Put wrote it); nullptr when its value is in memory only.
  std::shared_ptr<const protocol::ObjectLocation> PinForExport(const ObjectId& id, bool* written);

  // Drops the entry. A pending one is marked and dropped when its result
  // arrives (then the result's location goes to `on_unwanted`); nothing is
  // returned for it, nor for an unknown id.
  Released Release(const ObjectId& id);

  // Generator items (Completion::stream). An item that arrives before
  // anyone asked for it gets an entry held by its stream (the generator
  // call's result entry) until claimed; one that arrives after its stream's
  // entry was released is unwanted. ClaimStreamItem hands the item's entry
  // to the caller, who then holds a handle to it: the entry of an item that
  // arrived, or a pending one its arrival completes. Releasing the stream's
  // entry releases the items it still holds.
  void ClaimStreamItem(const ObjectId& stream, const ObjectId& item);
  // Items held by streams, unclaimed (tests).
  size_t TEST_unclaimed_items();

  // Records every completion of `batch` under one lock, wakes waiting Gets
  // once, hands released stored results to `on_unwanted`, then runs the
  // entries' continuations. Unknown ids are ignored. Clears `batch`.
  void CompleteAll(std::vector<Completion>& batch);
  void Complete(Completion completion);

  // Waits up to `timeout_ms` (< 0: forever) for the object and returns its
  // bytes: in memory, mapped from this node's store, or pulled (then kept).
  // Throws GetTimeoutError on timeout, TaskError for a failed object (or a
  // lost stored one), std::runtime_error when the entry is unknown (freed).
  // `on_block` (may be null) runs, outside the table's lock, when the call
  // has to block: before it sleeps (the object still pending after the spin;
  // never with timeout_ms 0), again every kOnBlockPeriodMs while it sleeps,
  // and before it pulls the object from another node.
  ObjectBytes Get(const ObjectId& id, int64_t timeout_ms,
                  const std::function<void()>* on_block = nullptr);
  // Waits up to `timeout_ms` (< 0: forever) until `num_returns` of `objects`
  // are no longer pending; returns which are (unknown ones count as ready).
  // `on_block` as for Get: before it sleeps and every kOnBlockPeriodMs after.
  std::vector<bool> Wait(const std::vector<ObjectHandle>& objects, size_t num_returns,
                         int64_t timeout_ms, const std::function<void()>* on_block = nullptr);

  // Looks up a task argument. kValue: `*bytes` holds a copy of the value.
  // kStored: `*location` is set and the entry is marked as shared with another
  // process. kFailed: `*error` is set. kPending, kUnknown: nothing is set.
  ArgState ResolveArg(const ObjectId& id, std::string* bytes, protocol::ObjectLocation* location,
                      ErrorInfo* error);
  // A worker could not read the stored copy of `id` at `path` (its node
  // died). When that is still the entry's only copy and the task that made it
  // can run again (lineage), the entry becomes pending and `*recompute` is set
  // for the caller to run outside any lock; the new copy completes it. kLost,
  // leaving the entry as it is, when nothing can; kResolveAgain, with
  // `*recompute` left empty, when the entry no longer holds that copy.
  CopyLost OnStoredCopyLost(const ObjectId& id, const std::string& path,
                            std::function<void()>* recompute);
  // Runs `fn` (from CompleteAll) once the pending entry completes. Returns
  // false, and keeps nothing, when the entry is not pending.
  bool AddWaiter(const ObjectId& id, std::function<void()> fn);

  // Fails every pending entry with `error` and wakes every waiter (shutdown).
  void FailAllPending(const ErrorInfo& error);

  // The node's agent spilled objects to disk: entries that map a stored
  // object whose file `in_store(path)` says is no longer in the store let go
  // of their mapping (the spilled file's memory returns once no view of it is
  // left), and read the object again from where it went on their next Get.
  // Returns how many let go. O(entries with a mapping).
  size_t DropMappingsOfSpilled(const std::function<bool(const std::string& path)>& in_store);

  // Entries currently held.
  size_t size();
  // Threads blocked in Get or Wait (for tests that must know one waits).
  size_t TEST_waiting();
  // Threads spinning in Get (tests).
  size_t TEST_spinning() const { return spinning_.load(); }

 private:
  struct Entry;
  // The bytes `view` of the store copy `mapping` (the file at `path`) of the
  // entry at `key` (`key` and `path` are copies: the entry may go, and a Put's
  // buffer be freed, while unlocked), handed to the program with the entry's read claim,
  // claimed now (outside the lock) when nothing holds one.
  // REQUIRES: `lock` holds mu_; it is held again on return.
  ObjectBytes HandOut(std::unique_lock<std::mutex>& lock, std::string key,
                      std::shared_ptr<const void> mapping, std::string_view view,
                      std::string path);
  struct Entry {
    enum class State { kPending, kReady, kFailed } state = State::kPending;
    std::shared_ptr<const std::string> value;                  // inline, or pulled here
    std::shared_ptr<const protocol::ObjectLocation> location;  // in a node's store
    std::shared_ptr<const void> mapped;                        // the store file, mapped
    std::shared_ptr<StoreWriter::Buffer> written;  // this process's Put, in the store
    // The store copy's bytes as handed out by Get, with the claim on its file
    // (ReadClaim) that they carry while the program holds them: one per
    // entry, shared by the Gets that overlap.
    std::weak_ptr<const void> reading;
    bool shared_out = false;  // `location` was handed to another process (a task argument)
    bool pinned = false;      // Released::pinned
    bool task = false;        // the result of a task this process submitted (WorkCounters)
    std::shared_ptr<ErrorInfo> error;
    std::vector<std::function<void()>> waiters;  // nullptr marks "released"
    std::function<void()> recompute;             // Completion::recompute
  };

  // Get and Wait sleep: until `done` holds or the deadline passes (none when
  // timeout_ms < 0); `on_block` (may be null) runs outside the lock before the
  // first sleep and every kOnBlockPeriodMs after. Returns done(), with `lock` held.
  template <typename Done>
  bool Block(std::unique_lock<std::mutex>& lock, Done& done,
             std::chrono::steady_clock::time_point deadline, int64_t timeout_ms,
             const std::function<void()>* on_block);
  // Get's spin (see there): true when `done` held within options_.spin_us
  // (or the deadline); returns with `lock` held either way.
  template <typename Done>
  bool Spin(std::unique_lock<std::mutex>& lock, Done& done,
            std::chrono::steady_clock::time_point deadline, int64_t timeout_ms);

  // Under mu_: releases stream `stream`'s unclaimed items into `released`;
  // items claimed but not arrived fail (their continuations go to `out`).
  void ReleaseStream(const std::string& stream, Released* released,
                     std::vector<std::function<void()>>* out);
  // Under mu_: the stream `stream` ended (its entry completed): items
  // claimed that never arrived will not, and fail with `why`.
  void EndStream(const std::string& stream, const std::string& why,
                 std::vector<std::function<void()>>* out);
  // Under mu_: fails the pending entry `it` (a generator item) with `why`.
  void FailItem(std::unordered_map<std::string, Entry>::iterator it, const std::string& why,
                std::vector<std::function<void()>>* out);
  // Under mu_: an unclaimed item arrived (`c.stream` set, `c.id` unknown):
  // false when its stream's entry is gone or released.
  bool AddStreamItem(Completion& c);

  const Options options_;
  std::mutex mu_;
  std::unique_ptr<WorkCounters> own_counters_;  // when Options::counters is nullptr
  WorkCounters& counters_;
  std::condition_variable cv_;
  // Keyed by the id's hex, under mu_: with a std::string key libstdc++ looks
  // up a small table (up to 20 entries) by comparing keys, without hashing;
  // an ObjectId key made Get and Put measurably slower (docs/performance.md).
  std::unordered_map<std::string, Entry> objects_;
  // Generator items that arrived unclaimed, by their stream's id (hex); an
  // item's entry is in objects_. Under mu_.
  struct Stream {
    std::unordered_set<std::string> unclaimed;  // arrived, held by the stream
    std::vector<std::string> claimed;           // claimed before they arrived
  };
  std::unordered_map<std::string, Stream> streams_;
  size_t waiting_ = 0;  // threads in Get/Wait, under mu_
  // Bumped (under mu_) whenever pending objects may have ended: what a
  // spinning Get watches without the lock.
  std::atomic<uint64_t> ends_{0};
  std::atomic<size_t> spinning_{0};  // threads in Spin
};

}  // namespace rayx::detail
