// TcpProxy: poll(2) over the listening socket and each forwarded pair.
#include "util/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rayx::testing {

Result<std::unique_ptr<TcpProxy>> TcpProxy::Start(const std::string& target_host,
                                                  uint16_t target_port) {
  std::unique_ptr<TcpProxy> proxy(new TcpProxy(target_host, target_port));
  RAYX_RETURN_IF_ERROR(proxy->Listen());
  proxy->thread_ = std::thread([p = proxy.get()] { p->Loop(); });
  return proxy;
}

TcpProxy::~TcpProxy() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  CloseAll();
}

Status TcpProxy::Listen() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Internal(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port_);  // 0 the first time: any free port
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 16) != 0) {
    int err = errno;
    ::close(fd);
    return Status::Internal(std::string("proxy cannot listen: ") + std::strerror(err));
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  std::lock_guard<std::mutex> lock(mu_);
  listen_fd_ = fd;
  return Status::OK();
}

void TcpProxy::CloseAll() {
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  for (auto [a, b] : pairs_) {
    ::close(a);
    ::close(b);
  }
  pairs_.clear();
}

void TcpProxy::Cut() {
  std::lock_guard<std::mutex> lock(mu_);
  CloseAll();
}

Status TcpProxy::Resume() { return Listen(); }

void TcpProxy::Loop() {
  char buffer[64 * 1024];
  while (!stop_) {
    std::vector<pollfd> fds;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (listen_fd_ >= 0) fds.push_back({listen_fd_, POLLIN, 0});
      for (auto [a, b] : pairs_) {
        fds.push_back({a, POLLIN, 0});
        fds.push_back({b, POLLIN, 0});
      }
    }
    // A bounded wait, so that Cut and the destructor are seen without a
    // wake-up channel.
    if (::poll(fds.data(), fds.size(), 10) <= 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    for (const pollfd& p : fds) {
      if (p.revents == 0) continue;
      if (p.fd == listen_fd_) {
        int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (client < 0) continue;
        int target = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(target_port_);
        ::inet_pton(AF_INET, target_host_.c_str(), &addr.sin_addr);
        if (target < 0 || ::connect(target, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
          ::close(client);
          if (target >= 0) ::close(target);
          continue;
        }
        pairs_.emplace_back(client, target);
        ++accepted_;
        continue;
      }
      // A forwarded side: copy what it has to its partner, or end the pair.
      for (size_t i = 0; i < pairs_.size(); ++i) {
        auto [a, b] = pairs_[i];
        if (p.fd != a && p.fd != b) continue;
        int to = p.fd == a ? b : a;
        ssize_t n = ::read(p.fd, buffer, sizeof buffer);
        bool ok = n > 0;
        for (ssize_t sent = 0; ok && sent < n;) {
          ssize_t w = ::send(to, buffer + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
          if (w <= 0)
            ok = false;
          else
            sent += w;
        }
        if (!ok) {
          ::close(a);
          ::close(b);
          pairs_.erase(pairs_.begin() + static_cast<std::ptrdiff_t>(i));
        }
        break;
      }
    }
  }
}

}  // namespace rayx::testing
