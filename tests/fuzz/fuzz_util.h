// Helpers shared by the libFuzzer targets: splitting the fuzzer's bytes into
// the parts a decoder takes, and failing loudly when an invariant breaks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace rayx::fuzz {

// Aborts (a crash libFuzzer records, with the input) when `ok` is false.
inline void Check(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::abort();
}

// Reads the fuzzer's bytes front to back. Reads past the end give zeros and
// empty strings, so every input means something.
class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size)
      : bytes_(reinterpret_cast<const char*>(data), size) {}

  uint8_t Byte() {
    if (pos_ >= bytes_.size()) return 0;
    return static_cast<uint8_t>(bytes_[pos_++]);
  }
  // A little-endian u16.
  uint16_t U16() {
    uint16_t lo = Byte();
    return static_cast<uint16_t>(lo | (Byte() << 8));
  }
  // The next `n` bytes, or fewer at the end.
  std::string_view Take(size_t n) {
    n = std::min(n, bytes_.size() - pos_);
    std::string_view out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  // A part prefixed by its u16 length.
  std::string_view Part() { return Take(U16()); }
  // Everything not read yet.
  std::string_view Rest() { return Take(bytes_.size() - pos_); }
  bool empty() const { return pos_ >= bytes_.size(); }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

// Writes what FuzzInput reads, for the seed generator.
class FuzzInputWriter {
 public:
  FuzzInputWriter& Byte(uint8_t b) {
    out_.push_back(static_cast<char>(b));
    return *this;
  }
  FuzzInputWriter& Part(std::string_view part) {
    uint16_t n = static_cast<uint16_t>(std::min<size_t>(part.size(), 0xffff));
    Byte(static_cast<uint8_t>(n & 0xff));
    Byte(static_cast<uint8_t>(n >> 8));
    out_.append(part.substr(0, n));
    return *this;
  }
  FuzzInputWriter& Rest(std::string_view rest) {
    out_.append(rest);
    return *this;
  }
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

// Reads every byte of `s`, so a view that points outside its buffer is
// caught by AddressSanitizer here rather than never.
inline void Touch(std::string_view s) {
  volatile unsigned sum = 0;
  for (char c : s) sum = sum + static_cast<unsigned char>(c);
  (void)sum;
}

}  // namespace rayx::fuzz
