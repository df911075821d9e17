// The thread that decides who may connect to one ZeroMQ context's servers
// (ZAP), and that shuts out addresses flooding them (AcceptGate).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "transport/accept_gate.h"
#include "transport/security.h"
#include "transport/zmq_fwd.h"

namespace rayx::transport {

// Serves ZeroMQ's authentication protocol (ZAP) for one context, on a thread
// of its own: every PLAIN or CURVE server socket of the context asks it about
// each new connection, and a refused connection is closed before any message
// of it is delivered. Refusals are logged, at most a few lines per 10 s,
// naming the peer's address.
//
// A server socket handed to Guard is also watched for new connections (a
// ZeroMQ monitor): an address that keeps connecting without proving a
// credential is shut out in the kernel for a while (AcceptGate), with one log
// line naming it.
class ZapServer {
 public:
  // Binds ZAP's endpoint in `context` and starts serving. REQUIRES: no other
  // ZapServer in `context`, and this one made before the context's server
  // sockets accept connections. `what` names the server in log lines.
  ZapServer(zmq::context_t& context, std::shared_ptr<const Verifier> verifier, std::string what,
            AcceptGateOptions gate = {});
  // REQUIRES: every guarded socket is closed (ZeroMQ's monitor events are
  // sent blocking: they need this reader while their socket lives).
  ~ZapServer();
  ZapServer(const ZapServer&) = delete;
  ZapServer& operator=(const ZapServer&) = delete;

  // Watches `server` (a socket of this context, made a server by MakeServer,
  // not yet bound; called on the thread that uses it) and bans flooding
  // addresses from the ports it binds.
  void Guard(zmq::socket_t& server);

  uint64_t accepted_count() const { return accepted_.load(); }
  uint64_t refused_count() const { return refused_.load(); }
  // Addresses banned so far (AcceptGate), and those banned now.
  uint64_t bans_total() const { return bans_total_.load(); }
  uint64_t banned_now() const { return banned_now_.load(); }

 private:
  struct Listener {
    int fd = -1;
    std::string name;  // its local address, checked before each use of fd
  };

  void Serve();
  void HandleZap();
  void HandleEvent(zmq::socket_t& monitor);
  void ApplyBans();

  zmq::context_t& context_;
  std::shared_ptr<const Verifier> verifier_;
  std::string what_;
  std::unique_ptr<zmq::socket_t> handler_;
  std::unique_ptr<zmq::socket_t> wake_send_;
  std::unique_ptr<zmq::socket_t> wake_receive_;
  std::mutex mu_;
  std::vector<std::unique_ptr<zmq::socket_t>> new_monitors_;  // guarded by mu_
  // Only the serving thread's, from here on.
  std::vector<std::unique_ptr<zmq::socket_t>> monitors_;
  std::vector<Listener> listeners_;
  AcceptGate gate_;
  detail::LogRateLimiter refusals_log_{5, std::chrono::seconds(10)};
  detail::LogRateLimiter bans_log_{5, std::chrono::seconds(10)};
  bool apply_failed_ = false;
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> bans_total_{0};
  std::atomic<uint64_t> banned_now_{0};
  std::thread thread_;
};

}  // namespace rayx::transport
