// Text helpers for messages built from what users and peers send.
#pragma once

#include <string>
#include <string_view>

namespace rayx {

// The longest prefix of `text` of at most `max_bytes` bytes that does not end
// inside a UTF-8 character, so a truncated reason or value still prints and
// encodes cleanly. (Invalid UTF-8 is cut at `max_bytes` minus at most 3.)
inline std::string Utf8Prefix(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t end = max_bytes;
  // Back off over continuation bytes (10xxxxxx) to the start of the
  // character that crosses the limit; a character has at most 3 of them.
  for (int i = 0; i < 3 && end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80; ++i) {
    --end;
  }
  return std::string(text.substr(0, end));
}

}  // namespace rayx
