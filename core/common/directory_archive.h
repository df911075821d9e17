// Directories as deterministic tar archives, and their transfer to and from the
// head's content-addressed package store (working directories, checkpoints).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rayx/status.h"
#include "transport/sync_client.h"

namespace rayx {

// Packs `dir` as a tar archive with sorted names, zero mtimes and owners, so
// the same content always packs to the same bytes (and hash). Patterns in
// `excludes` are tar --exclude patterns. InvalidArgument naming the size and
// the limit when it would exceed `limit` bytes; Internal when tar fails.
Result<std::string> PackDirectory(const std::string& dir, const std::vector<std::string>& excludes,
                                  uint64_t limit);

// Unpacks `archive` into `dest` atomically: into a sibling staging folder that
// is renamed to `dest` once complete. A non-empty `dest` that exists already is
// kept (callers name destinations by content hash, so it holds the same files).
Status UnpackArchive(const std::string& archive, const std::string& dest);

// Uploads `archive` to the head's package store unless it holds it already;
// returns its content hash. Fails with the head's reason (e.g. over its size
// limit, naming both).
Result<std::string> UploadPackage(transport::SyncClient& head, const std::string& token,
                                  const std::string& archive, int64_t timeout_ms);

// Tells the head that `owner` keeps package `hash` (keep) or lets go of it;
// the head deletes a package every keeper let go of. Returns whether it did.
Result<bool> KeepPackage(transport::SyncClient& head, const std::string& token,
                         const std::string& hash, const std::string& owner, bool keep,
                         int64_t timeout_ms);

// Downloads the package `hash` from the head, in chunks, and checks its hash.
Result<std::string> DownloadPackage(transport::SyncClient& head, const std::string& token,
                                    const std::string& hash, int64_t timeout_ms);

}  // namespace rayx
