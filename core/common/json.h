// JSON text from msgpack values: the head's web API and `--format json` in the
// CLI show the same wire structs the CLI reads, field for field.
#pragma once

#include <string>
#include <string_view>

#include <msgpack.hpp>

namespace rayx {

// Appends `text` as a JSON string literal (quotes, escapes; bytes that are not
// UTF-8 pass through, as the wire carries them).
void AppendJsonString(std::string* out, std::string_view text);

// `value` as JSON: maps with non-string keys get their keys as text, bin as
// lowercase hex, ext as null, NaN and infinities as null.
std::string MsgpackToJson(const msgpack::object& value);

namespace detail {
// True on this thread while ToJson packs a value: the wire enums
// (protocol/enums.h) pack as their names then, text for people, and as their
// numbers everywhere else (the wire).
inline bool& PackingForJson() {
  thread_local bool packing = false;
  return packing;
}
}  // namespace detail

// Any msgpack-packable value (a wire struct) as JSON; wire enums as their names.
template <typename T>
std::string ToJson(const T& value) {
  msgpack::sbuffer buffer;
  struct Scope {
    bool before = detail::PackingForJson();
    Scope() { detail::PackingForJson() = true; }
    ~Scope() { detail::PackingForJson() = before; }
  };
  {
    Scope names;
    msgpack::pack(buffer, value);
  }
  msgpack::object_handle handle = msgpack::unpack(buffer.data(), buffer.size());
  return MsgpackToJson(handle.get());
}

}  // namespace rayx
