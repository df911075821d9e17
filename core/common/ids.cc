// Random id generation.
#include "rayx/ids.h"

#include <sys/random.h>

#include <cerrno>
#include <random>

namespace rayx::detail {

namespace {
const char* kDigits = "0123456789abcdef";
}  // namespace

std::string RandomHex(size_t bytes) {
  // Ids are made often (one per placement group, actor, node): a per-thread
  // generator seeded once from the OS, not a device read per byte.
  thread_local std::mt19937_64 gen = [] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    return std::mt19937_64(seq);
  }();
  std::string out;
  out.reserve(bytes * 2);
  uint64_t word = 0;
  for (size_t i = 0; i < bytes; ++i) {
    if (i % 8 == 0) word = gen();
    unsigned v = static_cast<unsigned>(word & 0xff);
    word >>= 8;
    out += kDigits[v >> 4];
    out += kDigits[v & 0xf];
  }
  return out;
}

std::string SecureRandomHex(size_t bytes) {
  // getrandom(2), the kernel's CSPRNG: std::random_device's default source on
  // x86 is the CPU's RDSEED/RDRAND instruction, not the operating system.
  std::string raw(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = getrandom(raw.data() + got, bytes - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      // No getrandom (a kernel before 3.17): the same pool through the device.
      std::random_device rd("/dev/urandom");
      for (; got < bytes; ++got) raw[got] = static_cast<char>(rd() & 0xff);
    }
  }
  std::string out;
  out.reserve(bytes * 2);
  for (char c : raw) {
    unsigned v = static_cast<unsigned char>(c);
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
