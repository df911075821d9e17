// Reading tar headers to decide whether an archive is safe to unpack.
#include "common/tar_check.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace rayx {
namespace {

constexpr size_t kBlock = 512;
// A GNU long name or pax header larger than this is not a name.
constexpr uint64_t kMaxMetaBytes = 1 << 20;

// Offsets in a ustar header.
constexpr size_t kName = 0, kNameLen = 100;
constexpr size_t kMode = 100;
constexpr size_t kSize = 124, kSizeLen = 12;
constexpr size_t kChecksum = 148, kChecksumLen = 8;
constexpr size_t kType = 156;
constexpr size_t kLink = 157, kLinkLen = 100;
constexpr size_t kMagic = 257;
constexpr size_t kPrefix = 345, kPrefixLen = 155;

Status Refuse(const std::string& what) {
  return Status::InvalidArgument("refusing the archive: " + what);
}

std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 200)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out;
}

// A NUL-terminated field.
std::string_view Field(std::string_view block, size_t offset, size_t length) {
  std::string_view f = block.substr(offset, length);
  size_t nul = f.find('\0');
  return nul == std::string_view::npos ? f : f.substr(0, nul);
}

// An octal number field: optional leading spaces, digits, then NULs or
// spaces. Base-256 (the high bit set) and anything else are refused.
std::optional<uint64_t> Octal(std::string_view block, size_t offset, size_t length) {
  std::string_view f = block.substr(offset, length);
  size_t i = 0;
  while (i < f.size() && f[i] == ' ') ++i;
  uint64_t value = 0;
  size_t digits = 0;
  for (; i < f.size() && f[i] >= '0' && f[i] <= '7'; ++i, ++digits) {
    if (value > (UINT64_MAX >> 3)) return std::nullopt;
    value = value * 8 + static_cast<uint64_t>(f[i] - '0');
  }
  for (; i < f.size(); ++i) {
    if (f[i] != '\0' && f[i] != ' ') return std::nullopt;
  }
  if (digits == 0) return std::nullopt;
  return value;
}

bool ValidChecksum(std::string_view block) {
  auto stored = Octal(block, kChecksum, kChecksumLen);
  if (!stored) return false;
  uint64_t unsigned_sum = 0;
  int64_t signed_sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    bool in_field = i >= kChecksum && i < kChecksum + kChecksumLen;
    unsigned char u = in_field ? ' ' : static_cast<unsigned char>(block[i]);
    signed char s = in_field ? ' ' : static_cast<signed char>(block[i]);
    unsigned_sum += u;
    signed_sum += s;
  }
  return *stored == unsigned_sum || static_cast<int64_t>(*stored) == signed_sum;
}

bool AllZero(std::string_view bytes) {
  for (char c : bytes) {
    if (c != '\0') return false;
  }
  return true;
}

// What compressed input starts with, for a clear refusal.
const char* CompressionOf(std::string_view archive) {
  auto starts = [&](std::string_view magic) { return archive.substr(0, magic.size()) == magic; };
  if (starts("\x1f\x8b")) return "gzip";
  if (starts("BZh")) return "bzip2";
  if (starts(std::string_view("\xfd" "7zXZ\0", 6))) return "xz";
  if (starts("\x28\xb5\x2f\xfd")) return "zstd";
  if (starts("LZIP")) return "lzip";
  if (starts(std::string_view("\x5d\x00\x00", 3))) return "lzma";
  if (starts("\x1f\x9d")) return "compress";
  return nullptr;
}

// `path` split into its components without "." and empty ones; nullopt for
// an absolute path or one with "..".
std::optional<std::vector<std::string>> Components(std::string_view path) {
  if (path.empty() || path[0] == '/') return std::nullopt;
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view part = path.substr(start, slash - start);
    if (part == "..") return std::nullopt;
    if (!part.empty() && part != ".") out.emplace_back(part);
    start = slash + 1;
  }
  return out;
}

std::string Join(const std::vector<std::string>& parts, size_t count) {
  std::string out;
  for (size_t i = 0; i < count && i < parts.size(); ++i) {
    if (i > 0) out += '/';
    out += parts[i];
  }
  return out;
}

// Parses pax records "LEN key=value\n" into `out`. False when malformed.
bool ParsePax(std::string_view data, std::map<std::string, std::string>* out) {
  while (!data.empty()) {
    size_t space = data.find(' ');
    if (space == std::string_view::npos || space == 0 || space > 20) return false;
    uint64_t length = 0;
    for (size_t i = 0; i < space; ++i) {
      if (data[i] < '0' || data[i] > '9') return false;
      length = length * 10 + static_cast<uint64_t>(data[i] - '0');
    }
    if (length <= space + 1 || length > data.size() || data[length - 1] != '\n') return false;
    std::string_view record = data.substr(space + 1, length - space - 2);
    size_t eq = record.find('=');
    if (eq == std::string_view::npos || eq == 0) return false;
    (*out)[std::string(record.substr(0, eq))] = std::string(record.substr(eq + 1));
    data.remove_prefix(length);
  }
  return true;
}

// The pax keys that may appear: those that only rename or resize the next
// entry, or carry metadata tar does not apply here.
bool AllowedPaxKey(const std::string& key) {
  static const std::set<std::string> kAllowed = {
      "path", "linkpath", "size",  "mtime",   "atime",   "ctime",      "uid",
      "gid",  "uname",    "gname", "comment", "charset", "hdrcharset",
  };
  return kAllowed.count(key) > 0;
}

std::optional<uint64_t> Decimal(const std::string& text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value;
}

}  // namespace

Result<TarSummary> CheckTarArchive(std::string_view archive, const TarLimits& limits) {
  std::string_view first_magic = archive.size() >= kBlock ? archive.substr(kMagic, 5) : "";
  if (first_magic != "ustar") {
    if (const char* compression = CompressionOf(archive)) {
      return Refuse(std::string("it is ") + compression +
                    "-compressed: only plain tar archives are unpacked");
    }
  }
  TarSummary summary;
  std::set<std::string> members;       // every entry's normalized path
  std::set<std::string> files;         // regular files (hard link targets)
  std::set<std::string> symlinks;      // symbolic links
  std::set<std::string> parents;       // proper prefixes of every entry
  std::optional<std::string> long_name, long_link;
  std::map<std::string, std::string> pax;
  bool pending_meta = false;  // a long name or pax header waits for its entry
  size_t pos = 0;
  while (true) {
    if (pos == archive.size()) {
      if (pending_meta) return Refuse("it ends after a long-name or pax header");
      break;  // no end-of-archive blocks: tar accepts that too
    }
    if (archive.size() - pos < kBlock) {
      return Refuse("it ends inside a header at byte " + std::to_string(pos));
    }
    std::string_view block = archive.substr(pos, kBlock);
    const std::string at = " (header at byte " + std::to_string(pos) + ")";
    if (AllZero(block)) {
      if (pending_meta) return Refuse("a long-name or pax header has no entry" + at);
      if (!AllZero(archive.substr(pos))) {
        return Refuse("it has data after its end-of-archive block" + at);
      }
      break;
    }
    std::string_view magic = block.substr(kMagic, 8);
    bool posix = magic == std::string_view("ustar\0" "00", 8);
    bool gnu = magic == std::string_view("ustar  \0", 8);
    if (!posix && !gnu) {
      return Refuse(pos == 0 ? "it is not a tar archive (no ustar header)"
                             : "a header is not a ustar header" + at);
    }
    if (!ValidChecksum(block)) return Refuse("a header's checksum is wrong" + at);
    auto size = Octal(block, kSize, kSizeLen);
    auto mode = Octal(block, kMode, 8);
    if (!size || !mode) return Refuse("a header's size or mode is not an octal number" + at);
    char type = block[kType];
    pos += kBlock;

    // Metadata for the next entry: its data is read here.
    if (type == 'L' || type == 'K' || type == 'x') {
      if (*size > kMaxMetaBytes) {
        return Refuse("a long-name or pax header of " + std::to_string(*size) + " bytes" + at);
      }
      uint64_t padded = (*size + kBlock - 1) / kBlock * kBlock;
      if (archive.size() - pos < padded) return Refuse("it is truncated" + at);
      std::string_view data = archive.substr(pos, static_cast<size_t>(*size));
      pos += static_cast<size_t>(padded);
      pending_meta = true;
      if (type == 'x') {
        if (!ParsePax(data, &pax)) return Refuse("a malformed pax header" + at);
        for (const auto& record : pax) {
          if (!AllowedPaxKey(record.first)) {
            return Refuse("pax key '" + Printable(record.first) +
                          "' (sparse files and other extensions are not unpacked)" + at);
          }
        }
      } else {
        size_t nul = data.find('\0');
        std::string name(nul == std::string_view::npos ? data : data.substr(0, nul));
        (type == 'L' ? long_name : long_link) = std::move(name);
      }
      continue;
    }

    // An entry: its name, link and size after the metadata before it.
    std::string name;
    if (pax.count("path")) {
      name = pax["path"];
    } else if (long_name) {
      name = *long_name;
    } else {
      name = std::string(Field(block, kName, kNameLen));
      std::string_view prefix = posix ? Field(block, kPrefix, kPrefixLen) : std::string_view();
      if (!prefix.empty()) name = std::string(prefix) + "/" + name;
    }
    std::string link = pax.count("linkpath") ? pax["linkpath"]
                       : long_link           ? *long_link
                                             : std::string(Field(block, kLink, kLinkLen));
    uint64_t data_size = *size;
    if (pax.count("size")) {
      auto parsed = Decimal(pax["size"]);
      if (!parsed) return Refuse("a pax size is not a number" + at);
      data_size = *parsed;
    }
    long_name.reset();
    long_link.reset();
    pax.clear();
    pending_meta = false;
    const std::string entry = "entry '" + Printable(name) + "'" + at;
    if (name.find('\0') != std::string::npos || link.find('\0') != std::string::npos) {
      return Refuse("a NUL byte in the name of " + entry);
    }
    if ((*mode & 06000) != 0) return Refuse("set-user-id or set-group-id bit on " + entry);
    if (++summary.entries > limits.max_entries) {
      return Refuse("it holds more than " + std::to_string(limits.max_entries) + " entries");
    }
    auto parts = Components(name);
    if (!parts) return Refuse("an absolute name or '..' in " + entry);
    std::string path = Join(*parts, parts->size());
    bool is_file = type == '0' || type == '\0';
    if (!is_file && type != '5' && type != '2' && type != '1') {
      const char* kind = type == '3'   ? "a character device"
                         : type == '4' ? "a block device"
                         : type == '6' ? "a FIFO"
                         : type == 'S' ? "a sparse file"
                         : type == 'g' ? "a global pax header"
                                       : nullptr;
      return Refuse(std::string(kind ? kind : "an entry of type '" + Printable(std::string(1, type)) +
                                                  "'") +
                    ": " + entry);
    }
    if (!is_file && data_size != 0) return Refuse("a link or directory with data: " + entry);
    if (path.empty()) {
      if (type != '5') return Refuse("an entry that names the target itself: " + entry);
      continue;  // "./": the target directory
    }
    if (!members.insert(path).second) return Refuse("a second entry of the same name: " + entry);
    for (size_t n = 1; n < parts->size(); ++n) {
      std::string parent = Join(*parts, n);
      if (symlinks.count(parent)) {
        return Refuse("an entry below the symbolic link '" + Printable(parent) + "': " + entry);
      }
      parents.insert(parent);
    }
    if (type == '2') {
      if (parents.count(path)) {
        return Refuse("a symbolic link over entries already below it: " + entry);
      }
      // Leading ".." only, and no higher than the link's directory.
      if (link.empty() || link[0] == '/') {
        return Refuse("a symbolic link to an absolute or empty target: " + entry);
      }
      size_t ups = 0;
      bool descended = false;
      size_t start = 0;
      while (start <= link.size()) {
        size_t slash = link.find('/', start);
        if (slash == std::string::npos) slash = link.size();
        std::string_view part = std::string_view(link).substr(start, slash - start);
        if (part == "..") {
          if (descended) return Refuse("a symbolic link with '..' inside its target: " + entry);
          ++ups;
        } else if (!part.empty() && part != ".") {
          descended = true;
        }
        start = slash + 1;
      }
      if (ups > parts->size() - 1) {
        return Refuse("a symbolic link that points outside the archive ('" + Printable(link) +
                      "'): " + entry);
      }
      symlinks.insert(path);
    } else if (type == '1') {
      auto target = Components(link);
      if (!target || !files.count(Join(*target, target->size()))) {
        return Refuse("a hard link to '" + Printable(link) +
                      "', which is no regular file before it in the archive: " + entry);
      }
    } else if (is_file) {
      files.insert(path);
      if (data_size > limits.max_unpacked_bytes - std::min(summary.unpacked_bytes,
                                                           limits.max_unpacked_bytes)) {
        return Refuse("it unpacks to more than " + std::to_string(limits.max_unpacked_bytes) +
                      " bytes (" + entry + " alone declares " + std::to_string(data_size) + ")");
      }
      summary.unpacked_bytes += data_size;
      uint64_t padded = (data_size + kBlock - 1) / kBlock * kBlock;
      if (archive.size() - pos < padded) return Refuse("it is truncated in " + entry);
      pos += static_cast<size_t>(padded);
    }
  }
  return summary;
}

}  // namespace rayx
