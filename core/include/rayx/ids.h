// Typed identifiers: a NodeId is never confused with any other string.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <msgpack.hpp>

#include "rayx/status.h"

namespace rayx {

namespace detail {
// `bytes` random bytes as lowercase hex, from a per-thread generator seeded by the OS.
std::string RandomHex(size_t bytes);
// Like RandomHex, every byte from the operating system's entropy source: for
// secrets (cluster tokens) and ids that act as credentials (lease ids).
// Slower; other ids use RandomHex.
std::string SecureRandomHex(size_t bytes);
bool IsLowerHex(std::string_view s);
}  // namespace detail

// A unique id made of random bytes, kept as lowercase hex. Tag makes each id
// kind a distinct type.
template <typename Tag>
class UniqueId {
 public:
  static constexpr size_t kBytes = 16;

  UniqueId() = default;
  static UniqueId FromRandom() { return UniqueId(detail::RandomHex(kBytes)); }
  // From the operating system's entropy source: for ids that act as
  // credentials (whoever knows a lease id may use or return the lease).
  static UniqueId FromSecureRandom() { return UniqueId(detail::SecureRandomHex(kBytes)); }
  // Returns InvalidArgument unless `hex` is 32 lowercase hex digits.
  static Result<UniqueId> FromHex(std::string_view hex) {
    if (hex.size() != 2 * kBytes || !detail::IsLowerHex(hex)) {
      return Status::InvalidArgument("malformed id '" + std::string(hex.substr(0, 64)) +
                                     "': expected 32 lowercase hex digits");
    }
    return UniqueId(std::string(hex));
  }

  bool IsNil() const { return hex_.empty(); }
  const std::string& Hex() const { return hex_; }
  // The first 8 hex digits, for logs and tables.
  std::string Short() const { return hex_.substr(0, 8); }

  auto operator<=>(const UniqueId&) const = default;

  MSGPACK_DEFINE(hex_)

 private:
  explicit UniqueId(std::string hex) : hex_(std::move(hex)) {}
  std::string hex_;
};

struct NodeIdTag {};
using NodeId = UniqueId<NodeIdTag>;
// A worker or process lease the head granted. Minted with FromSecureRandom.
struct LeaseIdTag {};
using LeaseId = UniqueId<LeaseIdTag>;

}  // namespace rayx

template <typename Tag>
struct std::hash<rayx::UniqueId<Tag>> {
  size_t operator()(const rayx::UniqueId<Tag>& id) const {
    return std::hash<std::string>()(id.Hex());
  }
};
