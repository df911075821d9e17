// msgpack-c's object builder with the checks its unpack_limit lacks.
#include "rayx/detail/bounded_unpack.h"

#include <memory>
#include <string>

namespace rayx::detail {
namespace {

// "1 byte", "2 bytes".
std::string Count(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// The builder msgpack::unpack itself uses, wrapped: msgpack-c checks its
// limits per container, but allocates a container's elements as soon as its
// header declares them, so nested headers that each claim a large count cost
// memory the input never paid for. Here every declared element is charged to
// a budget of one per input byte, and each refusal says what was over which
// limit. msgpack-c's parser calls the visitor's members by name (a template,
// not virtual calls), so hiding the base's members is enough; this follows
// the v2 visitor interface of msgpack-c 4.x.
class BoundedObjectBuilder : public msgpack::v2::detail::create_object_visitor {
  using Base = msgpack::v2::detail::create_object_visitor;

 public:
  BoundedObjectBuilder(const UnpackLimits& limits, size_t size)
      : Base(nullptr, nullptr,
             msgpack::unpack_limit(limits.max_array, limits.max_map, limits.max_str,
                                   limits.max_bin, limits.max_ext, limits.max_depth)),
        limits_(limits),
        size_(size),
        budget_(size) {}

  bool start_array(uint32_t n) {
    Enter("an array", n, "element", "elements", limits_.max_array, n);
    return Base::start_array(n);
  }
  bool end_array() {
    --depth_;
    return Base::end_array();
  }
  bool start_map(uint32_t n) {
    Enter("a map", n, "entry", "entries", limits_.max_map, 2 * static_cast<uint64_t>(n));
    return Base::start_map(n);
  }
  bool end_map() {
    --depth_;
    return Base::end_map();
  }
  bool visit_str(const char* v, uint32_t size) {
    CheckBytes("a str", size, limits_.max_str);
    return Base::visit_str(v, size);
  }
  bool visit_bin(const char* v, uint32_t size) {
    CheckBytes("a bin", size, limits_.max_bin);
    return Base::visit_bin(v, size);
  }
  bool visit_ext(const char* v, uint32_t size) {
    if (limits_.max_ext == 0) throw UnpackError("msgpack ext values are not accepted here");
    CheckBytes("an ext value", size, limits_.max_ext);
    return Base::visit_ext(v, size);
  }
  void parse_error(size_t /*parsed_offset*/, size_t error_offset) {
    throw UnpackError("malformed msgpack at byte " + std::to_string(error_offset) + " of " +
                      std::to_string(size_));
  }
  void insufficient_bytes(size_t /*parsed_offset*/, size_t /*error_offset*/) {
    throw UnpackError("truncated msgpack value: its " + Count(size_, "byte", "bytes") +
                      " end inside it");
  }

 private:
  // Opens a container of `n` (its header's count) that holds `elements` values.
  void Enter(const char* what, uint32_t n, const char* one, const char* many, size_t limit,
             uint64_t elements) {
    if (depth_ >= limits_.max_depth) {
      throw UnpackError("msgpack value nested deeper than " + std::to_string(limits_.max_depth) +
                        " arrays and maps");
    }
    if (n > limit) {
      throw UnpackError(std::string(what) + " of " + Count(n, one, many) + " is over the limit of " +
                        std::to_string(limit));
    }
    if (elements > budget_) {
      throw UnpackError(std::string(what) + " of " + Count(n, one, many) + " in a msgpack value of " +
                        Count(size_, "byte", "bytes") + ": more than its bytes can hold");
    }
    budget_ -= elements;
    ++depth_;
  }
  void CheckBytes(const char* what, uint32_t size, size_t limit) {
    if (size > limit) {
      throw UnpackError(std::string(what) + " of " + Count(size, "byte", "bytes") +
                        " is over the limit of " + std::to_string(limit));
    }
  }

  const UnpackLimits limits_;
  const size_t size_;
  uint64_t budget_;   // elements the rest of the input can still hold
  size_t depth_ = 0;  // arrays and maps open
};

}  // namespace

msgpack::object_handle UnpackBounded(std::string_view bytes, const UnpackLimits& limits) {
  if (bytes.empty()) throw UnpackError("empty input where a msgpack value was expected");
  auto zone = std::make_unique<msgpack::zone>();
  BoundedObjectBuilder builder(limits, bytes.size());
  builder.set_zone(*zone);
  builder.set_referenced(false);
  size_t offset = 0;
  // Errors throw from the builder's callbacks; what returns is success, with
  // or without bytes after the value.
  msgpack::parse_return ret =
      msgpack::v2::detail::parse_imp(bytes.data(), bytes.size(), offset, builder);
  if (ret == msgpack::PARSE_EXTRA_BYTES) {
    throw UnpackError(Count(bytes.size() - offset, "unexpected byte", "unexpected bytes") +
                      " after the msgpack value");
  }
  if (ret != msgpack::PARSE_SUCCESS) {
    throw UnpackError("undecodable msgpack (parser result " + std::to_string(ret) + ")");
  }
  return msgpack::object_handle(builder.data(), std::move(zone));
}

}  // namespace rayx::detail
