// Content hashes (BLAKE2b-256, from libsodium) for caching uploads by content.
#pragma once

#include <string>
#include <string_view>

#include "rayx/status.h"

namespace rayx {

// Incremental: Update any number of times, then HexDigest once.
class ContentHasher {
 public:
  ContentHasher();
  void Update(std::string_view bytes);
  // 64 lowercase hex digits.
  std::string HexDigest();

 private:
  alignas(64) unsigned char state_[384];
};

std::string ContentHashHex(std::string_view bytes);
// SHA-256 of `bytes` as 64 lowercase hex digits: the hash Python's hashlib
// gives, which the Python package names exported code by.
std::string Sha256Hex(std::string_view bytes);
// The hash of a file's bytes; NotFound when it cannot be read.
Result<std::string> FileContentHashHex(const std::string& path);
// True for 64 lowercase hex digits (a hash that is safe to use as a file name).
bool IsContentHash(std::string_view text);

}  // namespace rayx
