// Directories as deterministic tar archives, and their transfer to and from the
// head's content-addressed package store (working directories, checkpoints).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/tar_check.h"

#include "rayx/status.h"
#include "transport/sync_client.h"

namespace rayx {

// Packs `dir` as a tar archive with sorted names, zero mtimes and owners, so
// the same content always packs to the same bytes (and hash). Patterns in
// `excludes` are tar --exclude patterns. InvalidArgument naming the size and
// the limit when it would exceed `limit` bytes, or naming an entry nodes would
// refuse to unpack (a device, a FIFO, a set-id bit, a link out of the
// directory: CheckTarArchive); Internal when tar fails.
Result<std::string> PackDirectory(const std::string& dir, const std::vector<std::string>& excludes,
                                  uint64_t limit);

// Checks `archive` (CheckTarArchive with `limits`: plain tar, every entry
// inside, bounded) and unpacks it into the existing directory `dir` with tar,
// applying no owners or permission bits from it. Blocking. InvalidArgument
// naming the rule an archive breaks; Internal when tar fails.
Status ExtractArchive(std::string_view archive, const std::string& dir, const TarLimits& limits);

// Unpacks `archive` into `dest` atomically: into a sibling staging folder that
// is renamed to `dest` once complete (ExtractArchive's checks first). A
// non-empty `dest` that exists already is kept (callers name destinations by
// content hash, so it holds the same files).
Status UnpackArchive(const std::string& archive, const std::string& dest,
                     const TarLimits& limits = TarLimits());

// Uploads `archive` to the head's package store unless it holds it already;
// returns its content hash. Fails with the head's reason (e.g. over its size
// limit, naming both). `on_sent(bytes sent, archive size)` runs after each
// chunk (4 MiB) of an upload.
Result<std::string> UploadPackage(
    transport::SyncClient& head, const std::string& token, const std::string& archive,
    int64_t timeout_ms, const std::function<void(uint64_t, uint64_t)>& on_sent = {});

// Tells the head that `owner` keeps package `hash` (keep) or lets go of it;
// the head deletes a package every keeper let go of. Returns whether it did.
Result<bool> KeepPackage(transport::SyncClient& head, const std::string& token,
                         const std::string& hash, const std::string& owner, bool keep,
                         int64_t timeout_ms);

// Downloads the package `hash` from the head, in chunks, and checks its hash.
Result<std::string> DownloadPackage(transport::SyncClient& head, const std::string& token,
                                    const std::string& hash, int64_t timeout_ms);

}  // namespace rayx
