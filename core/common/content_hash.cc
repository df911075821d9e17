// BLAKE2b-256 content hashes.
#include "common/content_hash.h"

#include <sodium.h>

#include <cstdlib>
#include <fstream>
#include <vector>

namespace rayx {

static_assert(sizeof(crypto_generichash_state) <= 384, "state buffer too small");

ContentHasher::ContentHasher() {
  if (sodium_init() < 0) std::abort();  // no entropy source: nothing can work
  crypto_generichash_init(reinterpret_cast<crypto_generichash_state*>(state_), nullptr, 0, 32);
}

void ContentHasher::Update(std::string_view bytes) {
  crypto_generichash_update(reinterpret_cast<crypto_generichash_state*>(state_),
                            reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

std::string ContentHasher::HexDigest() {
  unsigned char out[32];
  crypto_generichash_final(reinterpret_cast<crypto_generichash_state*>(state_), out, sizeof out);
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : out) {
    hex += kHex[c >> 4];
    hex += kHex[c & 15];
  }
  return hex;
}

std::string ContentHashHex(std::string_view bytes) {
  ContentHasher h;
  h.Update(bytes);
  return h.HexDigest();
}

std::string Sha256Hex(std::string_view bytes) {
  if (sodium_init() < 0) std::abort();
  unsigned char out[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(out, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : out) {
    hex += kHex[c >> 4];
    hex += kHex[c & 15];
  }
  return hex;
}

Result<std::string> FileContentHashHex(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + path);
  ContentHasher h;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.Update(std::string_view(buf.data(), static_cast<size_t>(in.gcount())));
  }
  return h.HexDigest();
}

bool IsContentHash(std::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace rayx
