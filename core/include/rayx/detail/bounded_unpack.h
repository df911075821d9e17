// Reading one msgpack value from bytes rayx did not write itself, with bounds on
// its nesting and on what its headers may declare, so that a few bytes cannot
// make a process allocate or recurse without limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <msgpack.hpp>

namespace rayx::detail {

// The most arrays and maps a value may nest inside each other. One bound for C++
// arguments and results and for values crossing between Python and C++, so
// that whatever one side may write the other can read.
inline constexpr size_t kMaxValueDepth = 128;

// Limits on one value. Whatever they are, the arrays and maps of a value may
// declare at most as many elements, all together, as it has bytes (each
// element takes at least one): memory spent on a value stays proportional to
// its size, however its headers lie.
struct UnpackLimits {
  size_t max_array = UINT32_MAX;  // elements of one array
  size_t max_map = UINT32_MAX;    // entries of one map
  size_t max_str = UINT32_MAX;    // bytes of one str
  size_t max_bin = UINT32_MAX;    // bytes of one bin
  size_t max_ext = UINT32_MAX;    // bytes of one ext; 0 refuses ext values
  size_t max_depth = kMaxValueDepth;
};

// The bytes are not one msgpack value within the limits; what() says which
// limit, or where the bytes broke off. A msgpack::unpack_error, like the
// errors of msgpack::unpack.
class UnpackError : public msgpack::unpack_error {
 public:
  using msgpack::unpack_error::unpack_error;
};

// Parses exactly one msgpack value that fills all of `bytes`. Strings and bins
// are copied into the handle's zone (it does not point into `bytes`). Throws
// UnpackError when `bytes` are empty, truncated, malformed, over a limit, or
// followed by more bytes.
msgpack::object_handle UnpackBounded(std::string_view bytes, const UnpackLimits& limits = {});

}  // namespace rayx::detail
