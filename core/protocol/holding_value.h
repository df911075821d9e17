// A call's result that holds ObjectRefs: the value, and the stored objects
// those refs point at.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace rayx::protocol {

// A function's result may start with this envelope (Python writes it when an
// ObjectRef went inside the value):
//   "RXH1", u32 count, count x (u32 length, that many bytes of a store path),
//   then the value itself
// (little-endian). The worker stores such a result whatever its size and
// tells its node's agent that the stored object holds those paths (the holds
// the function's process took for them), so they go when the result does.
inline constexpr std::string_view kHoldingMagic = "RXH1";
// The most paths one result may hold.
inline constexpr uint32_t kMaxHeldPaths = 1u << 16;

// Splits `value` when it has the envelope: `*paths` and `*inner` (a view into
// `value`) are set and true is returned. False, leaving both alone, when it
// has none or it is malformed (then the value travels as it is).
inline bool ParseHoldingValue(std::string_view value, std::vector<std::string>* paths,
                              std::string_view* inner) {
  if (value.substr(0, kHoldingMagic.size()) != kHoldingMagic) return false;
  size_t pos = kHoldingMagic.size();
  auto u32 = [&](uint32_t* out) {
    if (value.size() - pos < 4) return false;
    std::memcpy(out, value.data() + pos, 4);  // little-endian hosts only (as push_tasks)
    pos += 4;
    return true;
  };
  uint32_t count = 0;
  if (!u32(&count) || count > kMaxHeldPaths) return false;
  std::vector<std::string> out;
  out.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t n = 0;
    if (!u32(&n) || value.size() - pos < n) return false;
    out.emplace_back(value.substr(pos, n));
    pos += n;
  }
  *paths = std::move(out);
  *inner = value.substr(pos);
  return true;
}

}  // namespace rayx::protocol
