// Ports for rendezvous (MASTER_PORT) handed out by a node's agent.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>

#include "common/clock.h"
#include "rayx/status.h"

namespace rayx::worker {

// Design: a port handed out for a rendezvous is bound by the user's process a
// moment later (torch's TCPStore, Gloo). Binding port 0 and closing it, as
// torchrun does, leaves a window in which the kernel may give the same port to
// anyone's bind(0) or outgoing connection. Ports here come from a range below
// the kernel's ephemeral range (ip_local_port_range), which the kernel never
// picks by itself, and a port handed out is held back for `hold_ms` so two
// reservations never get the same port while the first may still be binding.
// A port some other program already listens on is skipped (the probe).
// Owned by the agent's event loop; not thread-safe.
class PortReserver {
 public:
  struct Options {
    // The range to hand out, inclusive. Default: 29500 (torch's MASTER_PORT
    // default) up to the port below the ephemeral range.
    uint16_t first = 29500;
    uint16_t last = 32767;
    // How long a handed-out port is not handed out again. Default: 10 minutes.
    int64_t hold_ms = 10 * 60 * 1000;
  };
  // Returns true when `port` can be bound on the node's address now.
  using Probe = std::function<bool(uint16_t port)>;

  // Hands out ports from `start` (taken modulo the range) on: agents of one
  // machine start at different places so they rarely race for one port.
  PortReserver(Options options, const Clock& clock, Probe probe, uint32_t start = 0);

  // A port of the range that is free and not held. Unavailable, naming the
  // range, when every port is held or in use.
  Result<uint16_t> Reserve();

  // The range below the kernel's ephemeral ports, read from
  // /proc/sys/net/ipv4/ip_local_port_range; the defaults when unreadable or
  // when fewer than 256 ports would be left.
  static Options FromKernel();

  // A probe that binds `ip`:port (SO_REUSEADDR) and closes it.
  static Probe BindProbe(std::string ip);

 private:
  Options options_;
  const Clock& clock_;
  Probe probe_;
  uint16_t cursor_;
  std::unordered_map<uint16_t, int64_t> held_until_;
};

}  // namespace rayx::worker
