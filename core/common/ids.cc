// Random id generation.
#include "rayx/ids.h"

#include <random>

namespace rayx::detail {

std::string RandomHex(size_t bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::random_device rd;  // /dev/urandom on Linux
  std::string out;
  out.reserve(bytes * 2);
  for (size_t i = 0; i < bytes; ++i) {
    unsigned v = rd() & 0xff;
    out += kDigits[v >> 4];
    out += kDigits[v & 0xf];
  }
  return out;
}

bool IsLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace rayx::detail
