// Keeping a node's store within its capacity: objects spilled to disk, least
// recently used first, and the store's usage counted.
//
// Design: the agent alone spills (on a thread of its own, StoreSpillThread in
// the object server), when a writer asks it to make room (MakeRoomRequest,
// after StoreLedger::TryReserve failed). A spilled object's file moves to the
// spill directory under the same name: copied there as NAME.partial, renamed
// into place, then unlinked from the store; its path, which every holder
// keeps, stays the same, and SharedMemoryStore::Open finds it in the spill
// directory. A delete that races the spill is never lost: the delete unlinks
// the store's file (or, when it is gone, the spilled one); the spill unlinks
// the store's file after its copy is in place and, when that file is gone
// already, removes its copy.
//
// Objects a process is reading are not spilled: a reader holds a shared
// flock on the file while the program holds the bytes or a call runs with
// them (ReadClaim), and the spiller locks each file exclusively, without
// waiting, before it moves it, passing over those it cannot lock. Mappings no
// reader uses (the runtime's cache of what it mapped) hold no claim: owners
// drop their mappings of spilled objects at their next tick
// (StoreLedger::BumpSpillEpoch).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "object_store/shared_memory_store.h"
#include "object_store/store_ledger.h"
#include "rayx/status.h"

namespace rayx {

class StoreSpiller {
 public:
  struct Options {
    // Bytes the spill directory may hold; 0: no limit but the disk's.
    uint64_t spill_limit = 0;
    // Spilling stops before the spill directory's disk is fuller than this.
    double max_disk_fraction = 0.95;
    // The spill directory's disk: {total, available} bytes (statvfs when
    // unset; tests give a fake).
    std::function<std::pair<uint64_t, uint64_t>(const std::string& dir)> disk_space;
    // Objects of the store held by ObjectRefs inside other values (the agent's
    // ObjectPins), named in the store-full error; unset: not named.
    std::function<uint64_t()> held_objects;
  };

  struct Usage {
    uint64_t stored_bytes = 0;
    uint64_t stored_objects = 0;
    uint64_t spilled_bytes = 0;
    uint64_t spilled_objects = 0;
    // Job id (hex) -> stored bytes, for the store-full error.
    std::map<std::string, uint64_t> by_job;
  };

  // `store` carries its spill directory; `ledger` is the store's page.
  StoreSpiller(SharedMemoryStore store, std::shared_ptr<StoreLedger> ledger, Options options);

  // Counts the store and the spill directory, and sets the ledger's figures
  // to the count plus the reservations made since the previous count began.
  Usage Count();

  // Makes room for `bytes` more and reserves them in the ledger: spills the
  // least recently used objects until the store's count plus `bytes` is
  // within its capacity. ResourceExhausted, with the figures (what the store
  // holds, by job, and the spill directory's use and limit) and what to do,
  // when the object is larger than the store or the spill directory is full;
  // then nothing more is spilled than was needed, and nothing is lost.
  Status MakeRoom(uint64_t bytes);

  const Usage& last() const { return last_; }
  const SharedMemoryStore& store() const { return store_; }

 private:
  struct Candidate;
  enum class Spill {
    kMoved,
    kGone,      // freed meanwhile
    kBeingRead,  // a process holds a ReadClaim on it: left in memory
    kFailed,    // the copy failed (`why`)
  };
  // Moves one object to the spill directory.
  Spill SpillOne(const std::string& name, uint64_t size, std::string* why);
  std::string FullMessage(uint64_t bytes, const std::string& why) const;
  // Counts, keeping the reservations made since reserved_total() was
  // `reserved_before`.
  Usage CountSince(uint64_t reserved_before);

  SharedMemoryStore store_;
  std::shared_ptr<StoreLedger> ledger_;
  Options options_;
  Usage last_;
  // reserved_total() when the previous count (or MakeRoom's) began.
  uint64_t reserved_before_ = 0;
};

}  // namespace rayx
