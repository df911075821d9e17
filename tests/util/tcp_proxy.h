// A TCP forwarder for tests: a client connects to the proxy's port and its
// bytes go to the target and back. Cut() drops every forwarded connection and
// refuses new ones until Resume(): a network blip between one client and a
// daemon, with both processes still running.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rayx/status.h"

namespace rayx::testing {

class TcpProxy {
 public:
  // Listens on 127.0.0.1 (a free port) and forwards to target_host:target_port.
  static Result<std::unique_ptr<TcpProxy>> Start(const std::string& target_host,
                                                 uint16_t target_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  uint16_t port() const { return port_; }
  // Closes every forwarded connection and the listening socket (connecting is
  // refused) until Resume. Returns once that is done.
  void Cut();
  // Listens on the same port again.
  Status Resume();
  // Connections accepted so far.
  int accepted() const { return accepted_.load(); }

 private:
  TcpProxy(std::string target_host, uint16_t target_port)
      : target_host_(std::move(target_host)), target_port_(target_port) {}
  Status Listen();
  void Loop();
  void CloseAll();

  std::string target_host_;
  uint16_t target_port_;
  uint16_t port_ = 0;
  std::mutex mu_;  // guards listen_fd_ and pairs_ against Cut from the test's thread
  int listen_fd_ = -1;
  std::vector<std::pair<int, int>> pairs_;  // (client side, target side)
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

}  // namespace rayx::testing
