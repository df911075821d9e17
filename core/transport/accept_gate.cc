#include "transport/accept_gate.h"

#include <arpa/inet.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rayx::transport {

AcceptGate::AcceptGate(AcceptGateOptions options) : options_(options) {
  options_.max_banned = std::min<size_t>(options_.max_banned, 200);
}

std::string AcceptGate::Canonical(std::string_view address) {
  std::string text(address);
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  char out[INET6_ADDRSTRLEN] = {};
  in_addr v4{};
  if (::inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    return ::inet_ntop(AF_INET, &v4, out, sizeof out) ? std::string(out) : std::string();
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, text.c_str(), &v6) != 1) return "";
  if (IN6_IS_ADDR_V4MAPPED(&v6)) {
    std::memcpy(&v4, v6.s6_addr + 12, 4);
    return ::inet_ntop(AF_INET, &v4, out, sizeof out) ? std::string(out) : std::string();
  }
  return ::inet_ntop(AF_INET6, &v6, out, sizeof out) ? std::string(out) : std::string();
}

bool AcceptGate::Trusted(const std::string& address, Clock::time_point now) const {
  auto it = trusted_.find(address);
  return it != trusted_.end() && now - it->second < options_.trusted_for;
}

bool AcceptGate::IsBanned(std::string_view address) const {
  std::string a = Canonical(address);
  return std::any_of(bans_.begin(), bans_.end(), [&](const Ban& b) { return b.address == a; });
}

bool AcceptGate::Connected(std::string_view address, std::string_view local, Clock::time_point now) {
  std::string a = Canonical(address);
  if (a.empty() || a == "127.0.0.1" || a == "::1" || a == Canonical(local)) return false;
  if (Trusted(a, now) || IsBanned(a)) return false;
  auto it = counts_.find(a);
  if (it == counts_.end()) {
    if (counts_.size() >= options_.max_tracked) {
      for (auto c = counts_.begin(); c != counts_.end();) {
        c = now - c->second.since >= options_.window ? counts_.erase(c) : std::next(c);
      }
      if (counts_.size() >= options_.max_tracked) return false;  // counted no further
    }
    it = counts_.emplace(a, Count{now, 0}).first;
  }
  Count& count = it->second;
  if (now - count.since >= options_.window) count = Count{now, 0};
  if (++count.connections < options_.max_unproved) return false;
  counts_.erase(it);
  in_addr v4{};
  if (::inet_pton(AF_INET, a.c_str(), &v4) != 1) return false;  // IPv6: not filtered
  if (bans_.size() >= options_.max_banned) {
    // Full: the ban that would end first makes room.
    bans_.erase(std::min_element(bans_.begin(), bans_.end(),
                                 [](const Ban& x, const Ban& y) { return x.until < y.until; }));
  }
  bans_.push_back({a, v4.s_addr, now + options_.ban});
  ++bans_total_;
  return true;
}

bool AcceptGate::Proved(std::string_view address, Clock::time_point now) {
  std::string a = Canonical(address);
  if (a.empty()) return false;
  counts_.erase(a);
  if (trusted_.size() >= options_.max_trusted && !trusted_.count(a)) {
    // Full: the address that proved least recently is forgotten.
    trusted_.erase(std::min_element(trusted_.begin(), trusted_.end(), [](const auto& x, const auto& y) {
      return x.second < y.second;
    }));
  }
  trusted_[a] = now;
  // A connection accepted before its address was banned proved itself: the
  // ban was a mistake (one address shared by a stranger and a member).
  size_t before = bans_.size();
  bans_.erase(std::remove_if(bans_.begin(), bans_.end(), [&](const Ban& b) { return b.address == a; }),
              bans_.end());
  return bans_.size() != before;
}

bool AcceptGate::Expire(Clock::time_point now) {
  size_t before = bans_.size();
  bans_.erase(std::remove_if(bans_.begin(), bans_.end(), [&](const Ban& b) { return b.until <= now; }),
              bans_.end());
  return bans_.size() != before;
}

std::optional<AcceptGate::Clock::time_point> AcceptGate::NextExpiry() const {
  if (bans_.empty()) return std::nullopt;
  return std::min_element(bans_.begin(), bans_.end(),
                          [](const Ban& x, const Ban& y) { return x.until < y.until; })
      ->until;
}

std::vector<uint32_t> AcceptGate::BannedIpv4() const {
  std::vector<uint32_t> out;
  out.reserve(bans_.size());
  for (const Ban& b : bans_) out.push_back(b.ipv4);
  return out;
}

Status AcceptGate::Apply(int listen_fd, const std::vector<uint32_t>& banned) {
  if (banned.empty()) {
    int unused = 0;  // the kernel wants an int-sized value it ignores
    if (::setsockopt(listen_fd, SOL_SOCKET, SO_DETACH_FILTER, &unused, sizeof unused) != 0 &&
        errno != ENOENT) {
      return Status::Internal(std::string("cannot remove the connection filter: ") + std::strerror(errno));
    }
    return Status::OK();
  }
  if (banned.size() > 200) return Status::InvalidArgument("at most 200 addresses can be banned");
  // For a TCP socket the packet starts at the TCP header; SKF_NET_OFF reaches
  // the IP header. IPv4 (version 4 in the first nibble): compare the source
  // address with each banned one; anything else passes.
  const auto n = static_cast<uint8_t>(banned.size());
  std::vector<sock_filter> program = {
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, static_cast<uint32_t>(SKF_NET_OFF)),
      BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xf0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x40, 0, static_cast<uint8_t>(n + 1)),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, static_cast<uint32_t>(SKF_NET_OFF + 12)),
  };
  for (size_t i = 0; i < banned.size(); ++i) {
    // BPF loads words in network order as host values: compare with ntohl.
    program.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ntohl(banned[i]),
                               static_cast<uint8_t>(n - i), 0));
  }
  program.push_back(BPF_STMT(BPF_RET | BPF_K, 0xffffffffu));  // pass
  program.push_back(BPF_STMT(BPF_RET | BPF_K, 0));            // drop
  sock_fprog fprog{static_cast<unsigned short>(program.size()), program.data()};
  if (::setsockopt(listen_fd, SOL_SOCKET, SO_ATTACH_FILTER, &fprog, sizeof fprog) != 0) {
    return Status::Internal(std::string("cannot attach the connection filter: ") + std::strerror(errno));
  }
  return Status::OK();
}

}  // namespace rayx::transport
