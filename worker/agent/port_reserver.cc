// Ports for rendezvous handed out from below the ephemeral range.
#include "agent/port_reserver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace rayx::worker {

PortReserver::PortReserver(Options options, const Clock& clock, Probe probe, uint32_t start)
    : options_(options),
      clock_(clock),
      probe_(std::move(probe)),
      cursor_(static_cast<uint16_t>(
          options.first + start % (static_cast<uint32_t>(options.last) - options.first + 1))) {}

Result<uint16_t> PortReserver::Reserve() {
  const int64_t now = clock_.NowMs();
  const uint32_t span = static_cast<uint32_t>(options_.last) - options_.first + 1;
  for (uint32_t tried = 0; tried < span; ++tried) {
    uint16_t port = cursor_;
    cursor_ = port == options_.last ? options_.first : static_cast<uint16_t>(port + 1);
    auto held = held_until_.find(port);
    if (held != held_until_.end()) {
      if (held->second > now) continue;
      held_until_.erase(held);
    }
    if (!probe_(port)) continue;
    held_until_[port] = now + options_.hold_ms;
    return port;
  }
  return Status::Unavailable("no free port in " + std::to_string(options_.first) + "-" +
                             std::to_string(options_.last) +
                             ": every port is in use or was handed out in the last " +
                             std::to_string(options_.hold_ms / 1000) + " s");
}

PortReserver::Options PortReserver::FromKernel() {
  Options options;
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (in >> low >> high && low > 0) {
    int last = low - 1;
    if (last > 65535) last = 65535;
    if (last - options.first + 1 >= 256) options.last = static_cast<uint16_t>(last);
  }
  return options;
}

PortReserver::Probe PortReserver::BindProbe(std::string ip) {
  return [ip = std::move(ip)](uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    ::inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
    bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return ok;
  };
}

}  // namespace rayx::worker
