// Encoding and hostile-input-safe decoding of wire messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <msgpack.hpp>

#include "protocol/group_messages.h"
#include "protocol/job_messages.h"
#include "protocol/kv_messages.h"
#include "protocol/message_list.h"
#include "protocol/messages.h"
#include "protocol/placement_messages.h"
#include "protocol/process_messages.h"
#include "rayx/status.h"

namespace rayx::protocol {

// The largest control-plane frame a daemon accepts; bigger ones are dropped.
inline constexpr size_t kMaxControlFrameBytes = 16 << 20;

// Limits applied while parsing untrusted msgpack, so a few bytes claiming a huge
// array or a deeply nested value cannot make us allocate or recurse without
// bound. Besides these, the elements a value's headers declare add up to at
// most its size in bytes (rayx/detail/bounded_unpack.h), and ext values are
// refused.
struct DecodeLimits {
  size_t max_array = 1 << 17;
  size_t max_map = 1 << 17;
  size_t max_str = 1 << 20;
  size_t max_bin = kMaxControlFrameBytes;
  size_t max_depth = 16;
};

namespace detail {
// A msgpack stream that appends to a string (no intermediate buffer).
struct AppendWriter {
  std::string* out;
  void write(const char* data, size_t n) { out->append(data, n); }
};
// Parses exactly one msgpack value filling all of [data, data+size).
Status ParseOne(const char* data, size_t size, const DecodeLimits& limits,
                msgpack::object_handle* out);
}  // namespace detail

template <typename T>
std::string Encode(const T& value) {
  std::string out;
  detail::AppendWriter writer{&out};
  msgpack::pack(writer, value);
  return out;
}

// Decodes `bytes` into T. Returns InvalidArgument (never throws) when the bytes
// are not one well-formed msgpack value within the limits, or do not have T's
// shape; the message says which.
template <typename T>
Result<T> Decode(std::string_view bytes, const DecodeLimits& limits = {}) {
  msgpack::object_handle handle;
  RAYX_RETURN_IF_ERROR(detail::ParseOne(bytes.data(), bytes.size(), limits, &handle));
  try {
    T out{};
    handle.get().convert(out);
    return out;
  } catch (const std::exception& e) {
    std::string what = "message";
    if constexpr (requires { T::kType; }) what = MessageTypeName(static_cast<uint16_t>(T::kType));
    return Status::InvalidArgument(what + " does not have the expected fields: " + e.what());
  }
}

// Every message's first frame: a fast path for the usual encoding (a map of
// at most 15 entries with short keys and unsigned values), which reads the
// same fields as the generic decoder; anything else goes the generic way.
template <>
Result<Envelope> Decode<Envelope>(std::string_view bytes, const DecodeLimits& limits);

// The protocol's types are encoded and decoded by code compiled once, in
// codec_instances_*.cc (message_list.h): a file that sends a message does not
// compile msgpack's code for it again (that was most of the build's time).
// RAYX_CODEC_NO_EXTERN_TEMPLATES: every file instantiates what it uses (the
// fuzz build, where most targets use few types).
#ifndef RAYX_CODEC_NO_EXTERN_TEMPLATES
#define RAYX_CODEC_EXTERN(T)                               \
  extern template std::string Encode<T>(const T& value); \
  extern template Result<T> Decode<T>(std::string_view bytes, const DecodeLimits& limits);
RAYX_PROTOCOL_CORE_TYPES(RAYX_CODEC_EXTERN)
RAYX_PROTOCOL_MORE_TYPES(RAYX_CODEC_EXTERN)
#undef RAYX_CODEC_EXTERN
extern template std::string Encode<Envelope>(const Envelope& value);
#endif

// Checks the envelope's protocol version. Returns InvalidArgument naming both
// sides' versions, e.g. "peer speaks rayx protocol 2, this head speaks 1".
Status CheckProtocolVersion(const Envelope& env, std::string_view self);

}  // namespace rayx::protocol
