// Keeps connection floods off a server's CPU: an address that keeps opening
// connections without proving a credential is shut out in the kernel, before
// its next TCP handshake completes.
//
// Design: refusing a stranger costs a server its share of the handshake (for
// CURVE, several Curve25519 operations before ZAP can say no), and a stranger
// can open connections far faster than they are refused. The AcceptGate counts
// each address's new connections (ZeroMQ's ACCEPTED events) and forgets the
// count when the address proves a credential (ZAP); an address that opened
// `max_unproved` connections within `window` and has not proved one within
// `trusted_for` is banned for `ban`. Bans are a classic BPF program attached to
// the listening socket (SO_ATTACH_FILTER): the kernel drops the banned
// addresses' SYNs, so a banned peer costs no process anything. Connections that
// are already open are left alone, and an address that proved a credential
// recently is never banned, nor is the server's own machine (so a user
// mistyping a token on a cluster node cannot shut that node out). Bounded: `max_tracked` counted addresses,
// `max_trusted` remembered ones, `max_banned` bans (IPv4 only: an IPv6 peer is
// counted but never filtered).
//
// The policy (Connected/Proved/Expire) is plain code on a caller's clock; the
// ZapServer drives it on its thread and applies the program (Apply).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rayx/status.h"

namespace rayx::transport {

struct AcceptGateOptions {
  int max_unproved = 20;
  std::chrono::steady_clock::duration window = std::chrono::seconds(10);
  std::chrono::steady_clock::duration ban = std::chrono::seconds(60);
  std::chrono::steady_clock::duration trusted_for = std::chrono::hours(1);
  size_t max_tracked = 4096;
  size_t max_trusted = 8192;
  size_t max_banned = 200;  // a classic BPF jump reaches 255 instructions
};

class AcceptGate {
 public:
  using Clock = std::chrono::steady_clock;

  explicit AcceptGate(AcceptGateOptions options = {});

  // A connection from `address` to `local` (IP addresses as text) was
  // accepted. True when this banned the address (the caller applies
  // BannedIpv4() then). The machine itself (`address` is `local`, 127.0.0.1 or
  // ::1) is never counted: its strangers are refused one connection at a time.
  bool Connected(std::string_view address, std::string_view local, Clock::time_point now);
  // A connection from `address` proved a credential: it is trusted from now
  // on. True when this lifted a ban on it.
  bool Proved(std::string_view address, Clock::time_point now);
  // Ends the bans whose time is up. True when any ended.
  bool Expire(Clock::time_point now);
  // When the next ban ends, if any is in force.
  std::optional<Clock::time_point> NextExpiry() const;

  bool IsBanned(std::string_view address) const;
  size_t banned() const { return bans_.size(); }
  uint64_t bans_total() const { return bans_total_; }
  // The banned IPv4 addresses, in network byte order.
  std::vector<uint32_t> BannedIpv4() const;
  const AcceptGateOptions& options() const { return options_; }

  // Makes the kernel drop packets from `banned` (network byte order) bound
  // for `listen_fd` (a listening TCP socket), replacing any earlier program;
  // an empty list removes it. At most 200 addresses.
  static Status Apply(int listen_fd, const std::vector<uint32_t>& banned);

  // `address` as text in the form ZAP reports it (IPv4-mapped IPv6 addresses
  // become IPv4), or "" when it is no IP address.
  static std::string Canonical(std::string_view address);

 private:
  struct Count {
    Clock::time_point since;
    int connections = 0;
  };
  struct Ban {
    std::string address;
    uint32_t ipv4 = 0;  // network byte order
    Clock::time_point until;
  };

  bool Trusted(const std::string& address, Clock::time_point now) const;

  AcceptGateOptions options_;
  std::unordered_map<std::string, Count> counts_;
  std::unordered_map<std::string, Clock::time_point> trusted_;  // last proof
  std::vector<Ban> bans_;
  uint64_t bans_total_ = 0;
};

}  // namespace rayx::transport
