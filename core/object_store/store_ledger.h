// A node store's capacity and its running usage, shared by every process of
// the node through one page of memory.
//
// Design: every process of a node writes large objects straight into the
// store directory (a Put by its owner, a result by its worker), so a capacity
// cannot be enforced by one process alone unless every write asks it first (a
// round trip per object). Instead the agent keeps a one-page file `.ledger` in
// the store directory, mapped by every writer: the capacity, the bytes in use
// as the agent last counted them plus what writers reserved since, the spill
// directory, and a spill epoch. A write first reserves its size in the page
// (one atomic add: the fast path); only when that would pass the capacity does
// the writer ask the agent to make room (MakeRoomRequest), which counts the
// store again, spills what it must to disk and reserves the size for it, or
// answers that the store is full.
//
// The page is a running estimate, not a ledger of record: writers add, and
// only the agent's count (StoreSpiller) sets it to what the directory holds
// plus the reservations made while it counted. A freed object's bytes return
// at the agent's next count (at every heartbeat, and at every
// MakeRoomRequest). A write that raced a count may be counted twice until the
// next one (the estimate errs high); one is missed only if it was reserved
// before the count began and its file was not yet created (writers create
// and size the file right after reserving: microseconds).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "rayx/status.h"

namespace rayx {

class StoreLedger {
 public:
  // The page's file inside the store directory (not of the object form, so
  // no request from the network can name it).
  static constexpr char kFileName[] = ".ledger";
  static constexpr size_t kMaxSpillDir = 2048;

  ~StoreLedger();
  StoreLedger(const StoreLedger&) = delete;
  StoreLedger& operator=(const StoreLedger&) = delete;

  // The agent: makes `store_dir`'s page (replacing any), with `capacity` bytes
  // (0: unbounded) and spilled objects going to `spill_dir` (empty: none).
  static Result<std::shared_ptr<StoreLedger>> Create(const std::string& store_dir,
                                                     uint64_t capacity,
                                                     const std::string& spill_dir);
  // Any process of the node: maps `store_dir`'s page. NotFound when the store
  // has none (an agent of an older rayx: no capacity, nothing spilled).
  static Result<std::shared_ptr<StoreLedger>> Open(const std::string& store_dir);

  // Reserves `bytes` when they fit within the capacity (always, when
  // unbounded). False: nothing was reserved; ask the agent to make room.
  bool TryReserve(uint64_t bytes);
  // The agent: reserves `bytes` whatever the capacity (for a writer it made
  // room for).
  void Reserve(uint64_t bytes);
  // Every byte ever reserved: read by the agent before it counts the store.
  uint64_t reserved_total() const;
  // The agent's count: the store held `counted` bytes, counted after
  // reserved_total() was `reserved_before`. The reservations made since are
  // kept (their files may or may not have been counted: the estimate errs
  // high until the next count); those made before had their files in the
  // store (writers size a file as soon as they create it), so the count
  // holds them.
  void SetCounted(uint64_t counted, uint64_t reserved_before);
  // Objects were spilled: readers that keep mappings of stored objects let go
  // of those whose files left the store (their memory returns only then).
  void BumpSpillEpoch();
  void SetSpilledBytes(uint64_t bytes);

  uint64_t capacity() const;
  uint64_t used() const;
  uint64_t spill_epoch() const;
  uint64_t spilled_bytes() const;
  const std::string& spill_dir() const { return spill_dir_; }

 private:
  struct Page;
  explicit StoreLedger(Page* page);
  Page* page_;
  std::string spill_dir_;  // read once: fixed for the page's life
};

}  // namespace rayx
