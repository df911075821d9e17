// Checking a tar archive from elsewhere before tar unpacks it: plain ustar
// only, every entry inside the target, bounded in size and count.
#pragma once

#include <cstdint>
#include <string_view>

#include "rayx/status.h"

namespace rayx {

// What an archive may unpack to.
struct TarLimits {
  uint64_t max_unpacked_bytes = uint64_t{1} << 30;  // Default: 1 GiB of file data in all
  uint64_t max_entries = 100000;                    // Default: 100,000 entries
};

// What a checked archive holds.
struct TarSummary {
  uint64_t entries = 0;         // files, directories and links
  uint64_t unpacked_bytes = 0;  // the sum of the regular files' sizes
};

// Design: rayx unpacks archives that other jobs uploaded (working
// directories, checkpoints) with the system's tar, which trusts its input:
// it decompresses whatever it recognises, follows links it made itself,
// creates devices and keeps set-id bits. So every archive is read here first,
// header by header, and tar runs only on one that holds nothing but:
//   - ustar headers (POSIX "ustar\0" or GNU "ustar  ") with valid checksums,
//     so compressed input (gzip, xz, zstd, ...) is refused, not auto-detected;
//   - regular files, directories, symbolic links and hard links, with GNU
//     long-name and pax path/size records (no sparse files, no devices, no
//     FIFOs, no global pax headers, no other pax keys that change an entry);
//   - relative names without "..", each named once, none below a symbolic
//     link of the archive;
//   - symbolic links whose target is relative, climbs with leading ".." only
//     and no higher than the link's own directory: a link resolves inside the
//     target however the links are combined; hard links only to regular files
//     earlier in the archive;
//   - no set-user-id or set-group-id bits;
//   - file data present in full, at most `limits` in sum and count, and only
//     zero bytes after the end-of-archive block.
// Anything else is InvalidArgument, naming the entry and the rule. The check
// reads the archive once; nothing is allocated by a declared size.
Result<TarSummary> CheckTarArchive(std::string_view archive, const TarLimits& limits);

}  // namespace rayx
