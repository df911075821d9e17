// Whose node store a directory is, and the stores nobody owns any more.
//
// Design: a node agent's store directory D (ROOT/rayx-store-XXXX, in /dev/shm:
// RAM until reboot) has a sibling file D.lock that the agent holds locked
// (flock, close-on-exec) for as long as it lives. The kernel drops the lock
// the moment the agent is gone, however it ended (SIGKILL, the OOM killer), so
// "no one holds D.lock" means "D's agent is gone", with no pid that could have
// been reused. The agent's reaper removes D when the agent dies; a store whose
// reaper died too is removed by the next agent started on the machine
// (RemoveDeadStores, before it makes its own). A live agent's store is never
// touched; a directory without a lock file (an agent of an older rayx) is left
// alone.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rayx/status.h"

namespace rayx {

// Makes `dir`'s lock file (dir + ".lock") locked by this process for the rest
// of its life: made under another name, locked, then renamed into place, so a
// lock file that can be seen is locked until its owner is gone. Fails when it
// exists already.
Status ClaimStore(const std::string& dir);

// The name prefixes of stores (in /dev/shm) and spill directories (on disk,
// named rayx-spill-XXXX after the store rayx-store-XXXX, and claimed the same
// way).
inline constexpr char kStoreDirPrefix[] = "rayx-store-";
inline constexpr char kSpillDirPrefix[] = "rayx-spill-";

// Removes ROOT/PREFIX* directories, and their lock files, whose lock no
// process holds (and for which `removable`, when given, holds: checkpoint
// directories go only when empty). Returns the directories removed.
std::vector<std::string> RemoveDeadStores(
    const std::string& root, const std::string& prefix = kStoreDirPrefix,
    const std::function<bool(const std::string& dir)>& removable = nullptr);

// Claims a ROOT/PREFIX* directory whose lock no process holds (its owner is
// gone), for this process's life, as ClaimStore does: the directory a node
// agent that stopped or died left (Train's checkpoints outlive their agent,
// and the next agent on the machine adopts them). Returns its path, or
// nullopt when there is none. Two processes never adopt the same one.
std::optional<std::string> AdoptDeadStore(const std::string& root, const std::string& prefix);

// The default capacity of a node's store under `store_root`: 30% of the
// machine's memory, at most the size of the file system under `store_root`
// (Ray's default).
uint64_t DefaultObjectStoreMemory(const std::string& store_root);

}  // namespace rayx
