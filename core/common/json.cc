// JSON text from msgpack values.
#include "common/json.h"

#include <charconv>
#include <cmath>

namespace rayx {

namespace {

constexpr char kHex[] = "0123456789abcdef";

void AppendNumber(std::string* out, double value) {
  if (!std::isfinite(value)) {
    *out += "null";
    return;
  }
  // The shortest text that reads back as `value`.
  char text[32];
  auto [end, ec] = std::to_chars(text, text + sizeof(text), value);
  out->append(text, end);
}

void Append(std::string* out, const msgpack::object& o, int depth) {
  // The wire structs nest a few levels; anything deeper is not ours.
  if (depth > 64) {
    *out += "null";
    return;
  }
  switch (o.type) {
    case msgpack::type::NIL:
      *out += "null";
      return;
    case msgpack::type::BOOLEAN:
      *out += o.via.boolean ? "true" : "false";
      return;
    case msgpack::type::POSITIVE_INTEGER:
      *out += std::to_string(o.via.u64);
      return;
    case msgpack::type::NEGATIVE_INTEGER:
      *out += std::to_string(o.via.i64);
      return;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      AppendNumber(out, o.via.f64);
      return;
    case msgpack::type::STR:
      AppendJsonString(out, std::string_view(o.via.str.ptr, o.via.str.size));
      return;
    case msgpack::type::BIN: {
      out->push_back('"');
      for (uint32_t i = 0; i < o.via.bin.size; ++i) {
        auto byte = static_cast<unsigned char>(o.via.bin.ptr[i]);
        out->push_back(kHex[byte >> 4]);
        out->push_back(kHex[byte & 15]);
      }
      out->push_back('"');
      return;
    }
    case msgpack::type::ARRAY:
      out->push_back('[');
      for (uint32_t i = 0; i < o.via.array.size; ++i) {
        if (i) out->push_back(',');
        Append(out, o.via.array.ptr[i], depth + 1);
      }
      out->push_back(']');
      return;
    case msgpack::type::MAP:
      out->push_back('{');
      for (uint32_t i = 0; i < o.via.map.size; ++i) {
        if (i) out->push_back(',');
        const msgpack::object& key = o.via.map.ptr[i].key;
        if (key.type == msgpack::type::STR) {
          Append(out, key, depth + 1);
        } else {
          std::string text;
          Append(&text, key, depth + 1);
          AppendJsonString(out, text);
        }
        out->push_back(':');
        Append(out, o.via.map.ptr[i].val, depth + 1);
      }
      out->push_back('}');
      return;
    default:
      *out += "null";
      return;
  }
}

}  // namespace

void AppendJsonString(std::string* out, std::string_view text) {
  out->push_back('"');
  for (char c : text) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          *out += "\\u00";
          out->push_back(kHex[(static_cast<unsigned char>(c) >> 4) & 15]);
          out->push_back(kHex[static_cast<unsigned char>(c) & 15]);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

std::string MsgpackToJson(const msgpack::object& value) {
  std::string out;
  Append(&out, value, 0);
  return out;
}

}  // namespace rayx
