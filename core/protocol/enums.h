// The wire enums' msgpack form: each travels as its unsigned number (see
// enum_names.h for the enums and their names), and packs as its name only for
// JSON text (rayx::ToJson).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <msgpack.hpp>

#include "common/json.h"
#include "protocol/enum_names.h"

namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
namespace adaptor {

template <rayx::protocol::WireEnum E>
struct convert<E> {
  const msgpack::object& operator()(const msgpack::object& o, E& v) const {
    using Names = rayx::protocol::EnumNames<E>;
    if (o.type == msgpack::type::POSITIVE_INTEGER) {
      if (o.via.u64 >= Names::kNames.size()) {
        throw std::invalid_argument(std::string(Names::kWhat) + " " + std::to_string(o.via.u64) +
                                    " is not one of 0.." +
                                    std::to_string(Names::kNames.size() - 1));
      }
      v = static_cast<E>(o.via.u64);
      return o;
    }
    if (o.type == msgpack::type::STR) {
      auto parsed = rayx::protocol::Parse<E>(std::string_view(o.via.str.ptr, o.via.str.size));
      if (!parsed.ok()) throw std::invalid_argument(parsed.status().message());
      v = *parsed;
      return o;
    }
    throw std::invalid_argument(std::string(Names::kWhat) + " is not a number from 0 to " +
                                std::to_string(Names::kNames.size() - 1));
  }
};

template <rayx::protocol::WireEnum E>
struct pack<E> {
  template <typename Stream>
  msgpack::packer<Stream>& operator()(msgpack::packer<Stream>& p, E v) const {
    if (rayx::detail::PackingForJson()) {  // text for people (rayx::ToJson)
      std::string_view name = rayx::protocol::Name(v);
      p.pack_str(static_cast<uint32_t>(name.size()));
      p.pack_str_body(name.data(), static_cast<uint32_t>(name.size()));
      return p;
    }
    p.pack_uint8(static_cast<uint8_t>(v));
    return p;
  }
};

template <rayx::protocol::WireEnum E>
struct object<E> {
  void operator()(msgpack::object& o, E v) const {
    o.type = msgpack::type::POSITIVE_INTEGER;
    o.via.u64 = static_cast<uint8_t>(v);
  }
};

template <rayx::protocol::WireEnum E>
struct object_with_zone<E> {
  void operator()(msgpack::object::with_zone& o, E v) const {
    o.type = msgpack::type::POSITIVE_INTEGER;
    o.via.u64 = static_cast<uint8_t>(v);
  }
};

}  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
}  // namespace msgpack
