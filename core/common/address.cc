// Address parsing and local interface queries.
#include "common/address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>

#include "common/text.h"

namespace rayx {

Result<HostPort> ParseHostPort(std::string_view text, uint16_t default_port) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("invalid address '" + Utf8Prefix(text, 200) +
                                   (text.size() > 200 ? "...'" : "'") + ": " + why +
                                   " (expected HOST:PORT, e.g. 10.0.0.1:6380)");
  };
  if (text.empty()) return bad("empty");
  HostPort out;
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    if (default_port == 0) return bad("missing ':PORT'");
    out.host = std::string(text);
    out.port = default_port;
    return out;
  }
  out.host = std::string(text.substr(0, colon));
  std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port == 0 ||
      port > 65535) {
    return bad("port must be a number from 1 to 65535");
  }
  if (out.host.empty()) return bad("empty host");
  out.port = static_cast<uint16_t>(port);
  return out;
}

Result<std::string> ResolveIpv4(const std::string& host) {
  in_addr addr{};
  if (inet_pton(AF_INET, host.c_str(), &addr) == 1) return host;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return Status::InvalidArgument("cannot resolve host '" + host + "': " + gai_strerror(rc));
  }
  char buf[INET_ADDRSTRLEN];
  auto* sin = reinterpret_cast<sockaddr_in*>(res->ai_addr);
  inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf);
  freeaddrinfo(res);
  return std::string(buf);
}

Result<std::string> LocalAddressToward(const std::string& remote_ip) {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return Status::Internal("socket() failed");
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(9);
  if (inet_pton(AF_INET, remote_ip.c_str(), &remote.sin_addr) != 1) {
    ::close(fd);
    return Status::InvalidArgument("not an IPv4 address: " + remote_ip);
  }
  if (::connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof remote) != 0) {
    ::close(fd);
    return Status::Unavailable("no route to " + remote_ip);
  }
  sockaddr_in local{};
  socklen_t len = sizeof local;
  getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
  ::close(fd);
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &local.sin_addr, buf, sizeof buf);
  return std::string(buf);
}

namespace {
// Calls fn(ip, loopback, interface name) for each IPv4 address of an
// interface that is up, until it returns true.
template <typename Fn>
void ForEachIpv4(Fn fn) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    if (!(it->ifa_flags & IFF_UP)) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr, buf, sizeof buf);
    if (fn(std::string(buf), (it->ifa_flags & IFF_LOOPBACK) != 0,
           std::string(it->ifa_name ? it->ifa_name : ""))) {
      break;
    }
  }
  freeifaddrs(list);
}
}  // namespace

std::string DefaultNodeIp() {
  std::string found = "127.0.0.1";
  ForEachIpv4([&](const std::string& ip, bool loopback, const std::string&) {
    if (loopback) return false;
    found = ip;
    return true;
  });
  return found;
}

bool IsLocalAddress(const std::string& ip) {
  if (ip.rfind("127.", 0) == 0 || ip == "localhost" || ip == "0.0.0.0") return true;
  bool local = false;
  ForEachIpv4([&](const std::string& candidate, bool, const std::string&) {
    local = candidate == ip;
    return local;
  });
  return local;
}

std::string InterfaceWithAddress(const std::string& ip) {
  std::string found, loopback_name;
  ForEachIpv4([&](const std::string& candidate, bool loopback, const std::string& name) {
    if (loopback && loopback_name.empty()) loopback_name = name;
    if (candidate != ip) return false;
    found = name;
    return true;
  });
  // 127.0.0.2 and the like are on the loopback interface without being listed.
  if (found.empty() && ip.rfind("127.", 0) == 0) found = loopback_name;
  return found;
}

}  // namespace rayx
