// The enums that travel in wire messages, their names, and their msgpack form.
#pragma once

#include <array>
#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>

#include <msgpack.hpp>

#include "rayx/status.h"

namespace rayx::protocol {

// Design: on the wire an enum is its unsigned number (frozen: values are never
// renumbered, new ones are appended). Users see and type the names; they are
// converted only at the edges (the C++ API, the Python binding, the CLI). A
// number out of range is refused while decoding, so a handler only ever sees
// a named value. The decoder also takes the names themselves, which head state
// files written before protocol 4 hold.

// Where a lease's worker goes outside a placement group.
enum class LeaseStrategy : uint8_t {
  kDefault = 0,       // the hybrid policy: pack, then spread
  kSpread = 1,        // the least loaded node, round robin among equals
  kNodeAffinity = 2,  // RequestLeaseRequest::affinity_node_id
};

// How a placement group's bundles are laid over nodes.
enum class PlacementStrategy : uint8_t {
  kPack = 0,
  kSpread = 1,
  kStrictPack = 2,
  kStrictSpread = 3,
};

// PENDING: waiting for resources. CREATED: every bundle reserved. INFEASIBLE:
// no set of alive nodes could ever hold it (re-examined when nodes join).
// REMOVED: gone.
enum class PlacementGroupState : uint8_t {
  kPending = 0,
  kCreated = 1,
  kInfeasible = 2,
  kRemoved = 3,
};

// Each wire enum's names, indexed by value, and what it is called in errors.
template <typename E>
struct EnumNames;

template <>
struct EnumNames<LeaseStrategy> {
  static constexpr std::string_view kWhat = "scheduling strategy";
  static constexpr std::array<std::string_view, 3> kNames = {"DEFAULT", "SPREAD", "NODE_AFFINITY"};
  static constexpr bool kEmptyIsFirst = true;  // "" names DEFAULT, as before protocol 4
};

template <>
struct EnumNames<PlacementStrategy> {
  static constexpr std::string_view kWhat = "placement strategy";
  static constexpr std::array<std::string_view, 4> kNames = {"PACK", "SPREAD", "STRICT_PACK",
                                                             "STRICT_SPREAD"};
};

template <>
struct EnumNames<PlacementGroupState> {
  static constexpr std::string_view kWhat = "placement group state";
  static constexpr std::array<std::string_view, 4> kNames = {"PENDING", "CREATED", "INFEASIBLE",
                                                             "REMOVED"};
};

template <typename E>
concept WireEnum = requires { EnumNames<E>::kNames; };

// True when `value` is one of E's named values.
template <WireEnum E>
constexpr bool IsKnown(E value) {
  return static_cast<size_t>(value) < EnumNames<E>::kNames.size();
}

// "SPREAD"; "?" for a value that IsKnown refuses.
template <WireEnum E>
std::string_view Name(E value) {
  return IsKnown(value) ? EnumNames<E>::kNames[static_cast<size_t>(value)] : "?";
}

// "PACK, SPREAD, STRICT_PACK or STRICT_SPREAD".
template <WireEnum E>
std::string NameList() {
  const auto& names = EnumNames<E>::kNames;
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
  }
  return out;
}

// The value named `name` (exactly as Name writes it). Returns InvalidArgument
// naming the valid names otherwise: "unknown placement strategy 'SCATTER':
// use PACK, SPREAD, STRICT_PACK or STRICT_SPREAD". For LeaseStrategy, ""
// also names DEFAULT.
template <WireEnum E>
Result<E> Parse(std::string_view name) {
  if constexpr (requires { EnumNames<E>::kEmptyIsFirst; }) {
    if (name.empty()) return static_cast<E>(0);
  }
  const auto& names = EnumNames<E>::kNames;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<E>(i);
  }
  return Status::InvalidArgument("unknown " + std::string(EnumNames<E>::kWhat) + " '" +
                                 std::string(name.substr(0, 64)) + "': use " + NameList<E>());
}

// For test failures and logs.
template <WireEnum E>
std::ostream& operator<<(std::ostream& os, E value) {
  if (IsKnown(value)) return os << Name(value);
  return os << EnumNames<E>::kWhat << " " << static_cast<unsigned>(value);
}

}  // namespace rayx::protocol

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
