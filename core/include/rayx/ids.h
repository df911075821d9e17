// Typed identifiers: a NodeId is never confused with a LeaseId or any other string.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

#include <msgpack.hpp>

#include "rayx/status.h"

namespace rayx {

namespace detail {
// `bytes` random bytes as lowercase hex, from a per-thread generator seeded by the OS.
std::string RandomHex(size_t bytes);
// Like RandomHex, every byte from the operating system's entropy source
// (getrandom): for secrets (cluster tokens) and ids that act as credentials
// (lease and job ids). Slower; other ids use RandomHex.
std::string SecureRandomHex(size_t bytes);
bool IsLowerHex(std::string_view s);
}  // namespace detail

// A unique id made of `Bytes` random bytes, kept as lowercase hex. Tag makes
// each id kind a distinct type: a LeaseId is not a JobId, nor a std::string.
//
// On the wire (msgpack) an id is a plain str, the same bytes a std::string
// field of its hex would be; the nil id is "". Reading one accepts any str the
// peer sent, unchecked: an id a peer made up names nothing in any table
// (lookups answer NotFound), it is not malformed input. Only FromHex checks
// the form, for ids a user typed (command-line arguments).
//
// A Tag may declare `static constexpr bool kReadsLegacyArray = true;` to also
// read the one-element array ([hex]) an older rayx wrote (NodeId in head state
// files).
template <typename Tag, size_t Bytes>
class UniqueId {
 public:
  static constexpr size_t kBytes = Bytes;
  static constexpr size_t kHexDigits = 2 * Bytes;

  UniqueId() = default;
  // From a fast per-thread generator: for ids that are not credentials.
  static UniqueId FromRandom() { return UniqueId(detail::RandomHex(kBytes)); }
  // From the operating system's entropy source: for ids that act as
  // credentials (whoever knows a lease id may use or return the lease).
  static UniqueId FromSecureRandom() { return UniqueId(detail::SecureRandomHex(kBytes)); }
  // Returns InvalidArgument unless `hex` is kHexDigits lowercase hex digits.
  static Result<UniqueId> FromHex(std::string_view hex) {
    if (hex.size() != kHexDigits || !detail::IsLowerHex(hex)) {
      return Status::InvalidArgument("malformed id '" + std::string(hex.substr(0, 64)) +
                                     "': expected " + std::to_string(kHexDigits) +
                                     " lowercase hex digits");
    }
    return UniqueId(std::string(hex));
  }
  // The id exactly as a peer, a stored row or the Python API named it, or as
  // its maker built it (object ids), unchecked ("" is the nil id). Such an id
  // may name nothing.
  static UniqueId FromWire(std::string text) { return UniqueId(std::move(text)); }

  bool IsNil() const { return hex_.empty(); }
  const std::string& Hex() const { return hex_; }
  // The first 8 hex digits, for logs and tables.
  std::string Short() const { return hex_.substr(0, 8); }

  auto operator<=>(const UniqueId&) const = default;

 private:
  explicit UniqueId(std::string hex) : hex_(std::move(hex)) {}
  std::string hex_;
};

template <typename Tag, size_t Bytes>
std::ostream& operator<<(std::ostream& os, const UniqueId<Tag, Bytes>& id) {
  return os << id.Hex();
}

struct NodeIdTag {
  static constexpr bool kReadsLegacyArray = true;  // head state files before ids were str
};
using NodeId = UniqueId<NodeIdTag, 16>;
// A worker or process lease the head granted. Minted with FromSecureRandom.
struct LeaseIdTag {};
using LeaseId = UniqueId<LeaseIdTag, 16>;
// A job: a driver's, or a submitted one's. Minted by the head with FromSecureRandom.
struct JobIdTag {};
using JobId = UniqueId<JobIdTag, 8>;
// A placement group. Minted with FromSecureRandom (by its creator, or the head
// when the creator names none).
struct PlacementGroupIdTag {};
using PlacementGroupId = UniqueId<PlacementGroupIdTag, 12>;
// An actor. Minted by its creator with FromSecureRandom: whoever knows it may
// call or kill the actor.
struct ActorIdTag {};
using ActorId = UniqueId<ActorIdTag, 16>;
// An object its owner (a process's runtime) made: the runtime's 8 random bytes
// from the fast generator, then a counter (Runtime::NewObjectId). Not a
// credential; made per task, so minting one must be cheap.
struct ObjectIdTag {};
using ObjectId = UniqueId<ObjectIdTag, 16>;

}  // namespace rayx

template <typename Tag, size_t Bytes>
struct std::hash<rayx::UniqueId<Tag, Bytes>> {
  size_t operator()(const rayx::UniqueId<Tag, Bytes>& id) const {
    return std::hash<std::string>()(id.Hex());
  }
};

// msgpack: an id is its hex as a str (see UniqueId).
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
namespace adaptor {

template <typename Tag, size_t Bytes>
struct convert<rayx::UniqueId<Tag, Bytes>> {
  const msgpack::object& operator()(const msgpack::object& o,
                                    rayx::UniqueId<Tag, Bytes>& id) const {
    const msgpack::object* text = &o;
    if constexpr (requires { Tag::kReadsLegacyArray; }) {
      if (o.type == msgpack::type::ARRAY && o.via.array.size == 1) text = &o.via.array.ptr[0];
    }
    // As std::string reads: a str, or a bin.
    if (text->type == msgpack::type::STR) {
      id = rayx::UniqueId<Tag, Bytes>::FromWire(
          std::string(text->via.str.ptr, text->via.str.size));
    } else if (text->type == msgpack::type::BIN) {
      id = rayx::UniqueId<Tag, Bytes>::FromWire(
          std::string(text->via.bin.ptr, text->via.bin.size));
    } else {
      throw msgpack::type_error();
    }
    return o;
  }
};

template <typename Tag, size_t Bytes>
struct pack<rayx::UniqueId<Tag, Bytes>> {
  template <typename Stream>
  msgpack::packer<Stream>& operator()(msgpack::packer<Stream>& o,
                                      const rayx::UniqueId<Tag, Bytes>& id) const {
    return o.pack(id.Hex());
  }
};

template <typename Tag, size_t Bytes>
struct object_with_zone<rayx::UniqueId<Tag, Bytes>> {
  void operator()(msgpack::object::with_zone& o, const rayx::UniqueId<Tag, Bytes>& id) const {
    msgpack::adaptor::object_with_zone<std::string>()(o, id.Hex());
  }
};

}  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
}  // namespace msgpack
