// Host:port addresses and the local network facts rayx needs about them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rayx/status.h"

namespace rayx {

struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string ToString() const { return host + ":" + std::to_string(port); }
  // "tcp://host:port" for ZeroMQ.
  std::string ZmqEndpoint() const { return "tcp://" + ToString(); }
};

// Parses "host:port" (port 1-65535) or "host" with `default_port` when nonzero.
// Returns InvalidArgument with an example of the expected form otherwise.
Result<HostPort> ParseHostPort(std::string_view text, uint16_t default_port = 0);

// Resolves `host` to a dotted IPv4 address. Returns InvalidArgument when it
// cannot be resolved.
Result<std::string> ResolveIpv4(const std::string& host);

// The local address the kernel would use to reach `remote_ip`: the IP of the
// interface facing the head on multi-NIC machines. Sends no packet (a UDP
// connect only picks a route). Returns Unavailable when there is no route.
Result<std::string> LocalAddressToward(const std::string& remote_ip);

// The IPv4 address of the first non-loopback interface that is up, else
// "127.0.0.1".
std::string DefaultNodeIp();

// True when `ip` belongs to this machine (loopback or an interface address).
bool IsLocalAddress(const std::string& ip);

// The name of the interface that holds `ip` ("eth0"; the loopback interface
// for any 127.x address), or empty when none does.
std::string InterfaceWithAddress(const std::string& ip);

}  // namespace rayx
