// ZAP for one context, and the accept gate of its guarded server sockets.
#include "transport/zap_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>

#include <zmq.hpp>

#include "common/logging.h"
#include "transport/zmq_frame.h"

namespace rayx::transport {

namespace {

constexpr char kZapEndpoint[] = "inproc://zeromq.zap.01";

// "ADDRESS:PORT" of a socket's own or its peer's end, or "" when `fd` is no
// (longer a) connected IP socket.
std::string SocketAddress(int fd, bool peer, uint16_t* port = nullptr) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return "";
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&addr);
    if (!::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text)) return "";
    if (port) *port = ntohs(v4->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    if (!::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text)) return "";
    if (port) *port = ntohs(v6->sin6_port);
  } else {
    return "";
  }
  return text;
}

std::string ListenerName(int fd) {
  int listening = 0;
  socklen_t len = sizeof listening;
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) return "";
  uint16_t port = 0;
  std::string address = SocketAddress(fd, false, &port);
  return address.empty() ? "" : address + ":" + std::to_string(port);
}

int64_t Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::seconds>(d).count();
}

}  // namespace

ZapServer::ZapServer(zmq::context_t& context, std::shared_ptr<const Verifier> verifier,
                     std::string what, AcceptGateOptions gate)
    : context_(context), verifier_(std::move(verifier)), what_(std::move(what)), gate_(gate) {
  handler_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::rep);
  handler_->set(zmq::sockopt::linger, 0);
  handler_->bind(kZapEndpoint);
  std::string wake_endpoint = "inproc://rayx-zap-wake-" + ::rayx::detail::RandomHex(8);
  wake_receive_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::pair);
  wake_receive_->set(zmq::sockopt::linger, 0);
  wake_receive_->bind(wake_endpoint);
  wake_send_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::pair);
  wake_send_->set(zmq::sockopt::linger, 0);
  wake_send_->connect(wake_endpoint);
  thread_ = std::thread([this] { Serve(); });
}

ZapServer::~ZapServer() {
  try {
    wake_send_->send(zmq::str_buffer("stop"), zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
  }
  if (thread_.joinable()) thread_.join();
  for (auto& m : monitors_) m->close();
  for (auto& m : new_monitors_) m->close();
  handler_->close();
  wake_receive_->close();
  wake_send_->close();
}

void ZapServer::Guard(zmq::socket_t& server) {
  std::string endpoint = "inproc://rayx-zap-monitor-" + ::rayx::detail::RandomHex(8);
  if (zmq_socket_monitor(server.handle(), endpoint.c_str(),
                         ZMQ_EVENT_LISTENING | ZMQ_EVENT_ACCEPTED) != 0) {
    RAYX_LOG(Warning) << what_ << ": cannot watch its connections (" << zmq_strerror(zmq_errno())
                      << "): floods are refused one connection at a time";
    return;
  }
  auto monitor = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::pair);
  monitor->set(zmq::sockopt::linger, 0);
  monitor->connect(endpoint);
  {
    std::lock_guard<std::mutex> lock(mu_);
    new_monitors_.push_back(std::move(monitor));
  }
  wake_send_->send(zmq::str_buffer("guard"), zmq::send_flags::dontwait);
}

void ZapServer::Serve() {
  while (true) {
    std::vector<zmq::pollitem_t> items = {{handler_->handle(), 0, ZMQ_POLLIN, 0},
                                          {wake_receive_->handle(), 0, ZMQ_POLLIN, 0}};
    for (auto& m : monitors_) items.push_back({m->handle(), 0, ZMQ_POLLIN, 0});
    // Wake when the next ban ends, else only for work.
    auto timeout = std::chrono::milliseconds(-1);
    if (auto next = gate_.NextExpiry()) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - AcceptGate::Clock::now());
      timeout = std::max(left, std::chrono::milliseconds(0));
    }
    try {
      zmq::poll(items.data(), items.size(), timeout);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return;  // the context is ending
    }
    if (gate_.Expire(AcceptGate::Clock::now())) ApplyBans();
    if (items[1].revents & ZMQ_POLLIN) {
      zmq::message_t command;
      try {
        if (!wake_receive_->recv(command)) continue;
      } catch (const zmq::error_t&) {
        return;
      }
      if (command.to_string_view() == "stop") return;
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& m : new_monitors_) monitors_.push_back(std::move(m));
      new_monitors_.clear();
      continue;  // poll again, with the new monitors
    }
    // Every pending connection event first, even where poll saw none yet: a
    // connection's ACCEPTED event is queued before its ZAP request, and its
    // socket is closed once it is refused (its peer could not be read then).
    for (auto& m : monitors_) HandleEvent(*m);
    if (items[0].revents & ZMQ_POLLIN) HandleZap();
  }
}

void ZapServer::HandleZap() {
  Frames request;
  try {
    request = ReceiveFrames(*handler_);
  } catch (const zmq::error_t&) {
    return;
  }
  // RFC 27: version, request id, domain, address, identity, mechanism, then
  // the mechanism's credentials.
  auto part = [&](size_t i) {
    return i < request.size() ? std::string(request[i].View()) : std::string();
  };
  ZapRequest zap;
  zap.domain = part(2);
  zap.address = part(3);
  zap.mechanism = part(5);
  if (zap.mechanism == "PLAIN") {
    zap.username = part(6);
    zap.password = part(7);
  } else if (zap.mechanism == "CURVE" && request.size() > 6 && request[6].size() == 32) {
    char key[41];
    zmq_z85_encode(key, reinterpret_cast<const uint8_t*>(request[6].View().data()), 32);
    zap.client_key.assign(key, 40);
  }
  std::optional<Principal> who;
  if (part(0) == "1.0") who = verifier_->Verify(zap);
  if (who) {
    ++accepted_;
    if (gate_.Proved(zap.address, AcceptGate::Clock::now())) ApplyBans();
  } else {
    ++refused_;
    uint64_t suppressed = 0;
    if (refusals_log_.Allow(std::chrono::steady_clock::now(), &suppressed)) {
      RAYX_LOG(Warning) << what_ << ": refused a " << (zap.mechanism.empty() ? "NULL" : zap.mechanism)
                        << " connection from " << zap.address
                        << ": it did not prove the cluster's or a live job's credential"
                        << (suppressed ? " (" + std::to_string(suppressed) +
                                             " more refusals were not logged)"
                                       : std::string());
    }
  }
  Frames reply;
  reply.push_back(MakeFrame("1.0"));
  reply.push_back(MakeFrame(part(1)));
  reply.push_back(MakeFrame(who ? "200" : "400"));
  reply.push_back(MakeFrame(who ? "OK" : "no valid rayx credential"));
  reply.push_back(MakeFrame(who ? who->UserId() : std::string()));
  reply.push_back(MakeFrame(""));
  try {
    SendFrames(*handler_, reply);
  } catch (const zmq::error_t&) {
  }
}

void ZapServer::HandleEvent(zmq::socket_t& monitor) {
  // Read every pending event: libzmq's IO thread blocks on a full monitor.
  while (auto event = ReceiveMonitorEvent(monitor)) {
    const uint16_t id = event->id;
    const int fd = static_cast<int>(event->value);
    if (id == ZMQ_EVENT_LISTENING) {
      std::string name = ListenerName(fd);
      if (name.empty()) continue;
      listeners_.push_back({fd, std::move(name)});
      if (gate_.banned() > 0) ApplyBans();
    } else if (id == ZMQ_EVENT_ACCEPTED) {
      // The connection may be gone already (its fd closed): then it is not
      // counted.
      std::string peer = SocketAddress(fd, true);
      std::string local = SocketAddress(fd, false);
      if (peer.empty() || !gate_.Connected(peer, local, AcceptGate::Clock::now())) continue;
      uint64_t suppressed = 0;
      if (bans_log_.Allow(std::chrono::steady_clock::now(), &suppressed)) {
        const AcceptGateOptions& o = gate_.options();
        RAYX_LOG(Warning) << what_ << ": shut out " << AcceptGate::Canonical(peer) << " for "
                          << Seconds(o.ban) << " s: it opened " << o.max_unproved
                          << " connections within " << Seconds(o.window)
                          << " s without proving the cluster's or a live job's credential "
                             "(its open connections are kept)"
                          << (suppressed ? " (" + std::to_string(suppressed) +
                                               " more addresses were shut out, not logged)"
                                         : std::string());
      }
      ApplyBans();
      ++bans_total_;  // after the ban is in force: a reader of the count sees it applied
    }
  }
}

void ZapServer::ApplyBans() {
  banned_now_ = gate_.banned();
  const std::vector<uint32_t> banned = gate_.BannedIpv4();
  for (auto it = listeners_.begin(); it != listeners_.end();) {
    // The fd is libzmq's: use it only while it is still the same listener
    // (a closed one's number may belong to another socket by now).
    if (ListenerName(it->fd) != it->name) {
      it = listeners_.erase(it);
      continue;
    }
    Status s = AcceptGate::Apply(it->fd, banned);
    if (!s.ok() && !apply_failed_) {
      apply_failed_ = true;
      RAYX_LOG(Warning) << what_ << ": " << s.message()
                        << ": floods are refused one connection at a time";
    }
    ++it;
  }
}

}  // namespace rayx::transport
