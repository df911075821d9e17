// Chunked, pipelined object transfer between nodes.
#include "object_store/object_pull.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <zmq.hpp>

#include "transport/message.h"
#include "transport/zmq_frame.h"

namespace rayx {

namespace {
// A TCP connect to "tcp://IP:PORT" (at most `timeout_ms`): a refused one means
// no server listens there any more (its node agent died), which ZeroMQ would
// only show as silence. Anything else (accepted, no answer, not an IPv4
// endpoint) is OK: the pull itself decides.
Status ProbeServer(const std::string& endpoint, int timeout_ms) {
  const std::string prefix = "tcp://";
  size_t colon = endpoint.rfind(':');
  if (endpoint.rfind(prefix, 0) != 0 || colon == std::string::npos) return Status::OK();
  std::string ip = endpoint.substr(prefix.size(), colon - prefix.size());
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::atoi(endpoint.c_str() + colon + 1)));
  if (inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1) return Status::OK();
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::OK();
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  int error = rc == 0 ? 0 : errno;
  if (error == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    error = 0;
    if (::poll(&p, 1, timeout_ms) == 1) {
      socklen_t len = sizeof error;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
    }
  }
  ::close(fd);
  if (error == ECONNREFUSED) {
    return Status::Unavailable("the object server at " + endpoint +
                               " refused the connection: its node agent is gone");
  }
  return Status::OK();
}
}  // namespace

Result<std::string> PullObject(zmq::context_t& context, const transport::ClientSecurity& security,
                               const protocol::ObjectLocation& location, int64_t timeout_ms,
                               uint64_t chunk, int window) {
  RAYX_RETURN_IF_ERROR(ProbeServer(location.object_address, 1000));
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  transport::MakeClient(socket, security);
  transport::HandshakeWatch handshakes(context, socket);
  socket.connect(location.object_address);
  std::string out(location.size, '\0');
  uint64_t next_offset = 0;
  uint64_t received = 0;
  uint64_t next_id = 1;
  int in_flight = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  try {
    while (received < location.size) {
      while (in_flight < window && next_offset < location.size) {
        protocol::PullObjectRequest req;
        req.path = location.path;
        req.offset = next_offset;
        req.length = std::min<uint64_t>(chunk, location.size - next_offset);
        // The request id is the offset's chunk number + 1: replies place themselves.
        transport::Frames frames = transport::MakeMessage(req, next_offset / chunk + 1);
        transport::SendFrames(socket, frames);
        next_offset += req.length;
        ++in_flight;
        ++next_id;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return Status::Unavailable("pulling " + location.path + " from " +
                                   location.object_address + ": no answer for " +
                                   std::to_string(timeout_ms / 1000) +
                                   " s (is its node alive?)");
      }
      zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::min(left, std::chrono::milliseconds(100)));
      if (!(item.revents & ZMQ_POLLIN)) {
        if (std::string why = handshakes.Failure(); !why.empty()) {
          return Status::Unauthenticated("pulling " + location.path + ": the object server at " +
                                         location.object_address + " did not let this process in: " +
                                         why);
        }
        continue;
      }
      transport::Frames reply = transport::ReceiveFrames(socket);
      if (reply.size() < 2) continue;
      auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(reply[0]));
      if (!env.ok()) return env.status();
      if (env->t == static_cast<uint16_t>(protocol::MessageType::kErrorReply)) {
        auto error = protocol::Decode<protocol::ErrorReply>(transport::FrameView(reply[1]));
        return error.ok() ? error->ToStatus() : error.status();
      }
      if (reply.size() < 3 || env->id == 0) return Status::Internal("malformed pull reply");
      uint64_t offset = (env->id - 1) * chunk;
      std::string_view data = reply[2].View();
      if (offset + data.size() > out.size()) return Status::Internal("pull reply out of range");
      std::memcpy(out.data() + offset, data.data(), data.size());
      received += data.size();
      // An idle timeout: a large transfer takes as long as it needs while chunks come.
      deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
      --in_flight;
      if (data.size() == 0) return Status::Internal("empty chunk while pulling " + location.path);
    }
  } catch (const zmq::error_t& e) {
    return Status::Unavailable(std::string("pulling an object failed: ") + e.what());
  }
  return out;
}

ObjectDeleter::ObjectDeleter(zmq::context_t& context) : context_(context) {}
ObjectDeleter::~ObjectDeleter() = default;

void ObjectDeleter::Delete(const std::string& object_address, const std::string& path) {
  auto& socket = sockets_[object_address];
  if (!socket) {
    socket = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
    socket->set(zmq::sockopt::linger, 1000);
    transport::MakeClient(*socket, security_);
    socket->connect(object_address);
  }
  protocol::DeleteObjectsRequest req;
  req.paths = {path};
  transport::Frames frames = transport::MakeMessage(req, 0);
  try {
    (void)transport::SendFrames(*socket, frames, zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
    // Best effort: the job's end removes whatever is left.
  }
}

void ObjectDeleter::Clear() { sockets_.clear(); }

}  // namespace rayx
