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
#include <vector>
#include <zmq.hpp>

#include "object_store/checkpoint_files.h"
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

uint64_t DefaultMaxPullBytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long page = ::sysconf(_SC_PAGESIZE);
  uint64_t half = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2 : 0;
  return std::max<uint64_t>(half, uint64_t{1} << 30);
}

Status PullInto(zmq::context_t& context, const transport::ClientSecurity& security,
                const protocol::ObjectLocation& location, ObjectServerDirectory& servers,
                const PullOptions& options, const PullSink& sink) {
  const std::string& path = location.path;
  const uint64_t size = location.size;
  RAYX_RETURN_IF_ERROR(servers.Check(location.object_address));
  const int64_t connect_ms = std::max<int64_t>(1, std::min(options.connect_timeout_ms,
                                                            options.idle_timeout_ms));
  RAYX_RETURN_IF_ERROR(
      ProbeServer(location.object_address, static_cast<int>(std::min<int64_t>(connect_ms, 1000))));
  const uint64_t chunk = std::max<uint64_t>(options.chunk, 1);
  const uint64_t chunks = size == 0 ? 0 : (size - 1) / chunk + 1;
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  // A reply is one chunk and its header: nothing larger is taken in.
  socket.set(zmq::sockopt::maxmsgsize,
             static_cast<int64_t>(std::min<uint64_t>(chunk, uint64_t{1} << 31) + 65536));
  transport::MakeClient(socket, security);
  transport::HandshakeWatch handshakes(context, socket);
  // The sink is told the size once the server confirmed it: a declared size
  // alone sizes nothing.
  bool confirmed = false;
  std::vector<bool> have(chunks, false);
  uint64_t next_chunk = 0;
  uint64_t received = 0;
  int in_flight = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(connect_ms);
  auto where = [&] { return "pulling " + path.substr(0, 200) + " from " + location.object_address; };
  try {
    socket.connect(location.object_address);
    while (received < chunks) {
      while (in_flight < std::max(options.window, 1) && next_chunk < chunks) {
        protocol::PullObjectRequest req;
        req.path = path;
        req.grant = location.grant;
        req.offset = next_chunk * chunk;
        req.length = std::min<uint64_t>(chunk, size - req.offset);
        // The request id is the chunk's number + 1: replies place themselves.
        transport::Frames frames = transport::MakeMessage(req, next_chunk + 1);
        transport::SendFrames(socket, frames);
        ++next_chunk;
        ++in_flight;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return Status::Unavailable(
            where() + ": " +
            (confirmed ? "no answer for " + std::to_string(options.idle_timeout_ms / 1000) + " s"
                       : "no answer within " + std::to_string(connect_ms) + " ms") +
            " (is its node alive?)");
      }
      zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::min(left, std::chrono::milliseconds(100)));
      if (!(item.revents & ZMQ_POLLIN)) {
        if (std::string why = handshakes.Failure(); !why.empty()) {
          return Status::Unauthenticated(where() + ": the object server did not let this "
                                         "process in: " + why);
        }
        continue;
      }
      transport::Frames reply = transport::ReceiveFrames(socket);
      if (reply.size() < 2) continue;
      auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(reply[0]));
      if (!env.ok()) return Status::Internal(where() + ": " + env.status().message());
      if (env->t == static_cast<uint16_t>(protocol::MessageType::kErrorReply)) {
        auto error = protocol::Decode<protocol::ErrorReply>(transport::FrameView(reply[1]));
        return error.ok() ? error->ToStatus() : error.status();
      }
      auto header = protocol::Decode<protocol::PullObjectReply>(transport::FrameView(reply[1]));
      if (env->t != static_cast<uint16_t>(protocol::MessageType::kPullObjectReply) ||
          !header.ok() || reply.size() != 3 || env->id == 0 || env->id > chunks) {
        return Status::Internal(where() + ": a malformed reply");
      }
      if (header->size != size) {
        return Status::InvalidArgument("object " + path.substr(0, 200) + " is " +
                                       std::to_string(header->size) + " bytes at " +
                                       location.object_address + ", but its location declares " +
                                       std::to_string(size));
      }
      const uint64_t index = env->id - 1;
      const uint64_t offset = index * chunk;
      std::string_view data = reply[2].View();
      if (have[index] || data.size() != std::min<uint64_t>(chunk, size - offset)) {
        return Status::Internal(where() + ": chunk " + std::to_string(index) + " came twice or " +
                                "with " + std::to_string(data.size()) + " bytes");
      }
      if (!confirmed) {
        RAYX_RETURN_IF_ERROR(sink.confirmed());
        confirmed = true;
      }
      RAYX_RETURN_IF_ERROR(sink.chunk(offset, data));
      have[index] = true;
      ++received;
      // From the first answer on, an idle timeout: a large transfer takes as
      // long as it needs while chunks come.
      deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.idle_timeout_ms);
      --in_flight;
    }
  } catch (const zmq::error_t& e) {
    return Status::Unavailable(where() + " failed: " + e.what());
  }
  if (!confirmed) RAYX_RETURN_IF_ERROR(sink.confirmed());  // an empty object
  return Status::OK();
}

Result<std::string> PullObject(zmq::context_t& context, const transport::ClientSecurity& security,
                               const protocol::ObjectLocation& location,
                               ObjectServerDirectory& servers, const PullOptions& options) {
  const uint64_t limit =
      options.max_object_bytes > 0 ? options.max_object_bytes : DefaultMaxPullBytes();
  if (location.size > limit) {
    return Status::InvalidArgument("object " + location.path.substr(0, 200) + " declares " +
                                   std::to_string(location.size) + " bytes, over the limit of " +
                                   std::to_string(limit) + " bytes a pull takes into memory");
  }
  std::string out;
  PullSink sink{[&] {
                  out.resize(location.size);
                  return Status::OK();
                },
                [&](uint64_t offset, std::string_view data) {
                  std::memcpy(out.data() + offset, data.data(), data.size());
                  return Status::OK();
                }};
  RAYX_RETURN_IF_ERROR(PullInto(context, security, location, servers, options, sink));
  return out;
}

Status PullToFile(zmq::context_t& context, const transport::ClientSecurity& security,
                  const protocol::ObjectLocation& location, ObjectServerDirectory& servers,
                  const std::string& file, const PullOptions& options, std::string* hash) {
  const std::string partial = file + ".partial";
  int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::Unavailable("cannot create " + partial + ": " + std::strerror(errno));
  // Chunks come in order over one connection (one server loop answers them
  // in turn): hashed as they come; out of order, the caller reads the file.
  FileHasher hasher;
  uint64_t hashed = 0;
  bool in_order = true;
  PullSink sink{[&] {
                  return ::ftruncate(fd, static_cast<off_t>(location.size)) == 0
                             ? Status::OK()
                             : Status::Unavailable("cannot size " + partial + ": " +
                                                   std::strerror(errno));
                },
                [&](uint64_t offset, std::string_view data) {
                  if (hash != nullptr && in_order) {
                    if (offset == hashed) {
                      hasher.Update(data.data(), data.size());
                      hashed += data.size();
                    } else {
                      in_order = false;
                    }
                  }
                  size_t done = 0;
                  while (done < data.size()) {
                    ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done,
                                         static_cast<off_t>(offset + done));
                    if (n < 0 && errno == EINTR) continue;
                    if (n <= 0) {
                      return Status::Unavailable("writing " + partial + " failed: " +
                                                 std::strerror(n < 0 ? errno : EIO));
                    }
                    done += static_cast<size_t>(n);
                  }
                  return Status::OK();
                }};
  Status pulled = PullInto(context, security, location, servers, options, sink);
  if (::close(fd) != 0 && pulled.ok()) {
    pulled = Status::Unavailable("writing " + partial + " failed: " + std::strerror(errno));
  }
  if (pulled.ok() && ::rename(partial.c_str(), file.c_str()) != 0) {
    pulled = Status::Unavailable("cannot publish " + file + ": " + std::strerror(errno));
  }
  if (!pulled.ok()) ::unlink(partial.c_str());
  if (hash != nullptr) *hash = pulled.ok() && in_order && hashed == location.size ? hasher.Hex() : "";
  return pulled;
}

ObjectDeleter::ObjectDeleter(zmq::context_t& context) : context_(context) {}
ObjectDeleter::~ObjectDeleter() = default;

zmq::socket_t& ObjectDeleter::Socket(const std::string& object_address) {
  auto& socket = sockets_[object_address];
  if (!socket) {
    socket = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
    socket->set(zmq::sockopt::linger, 1000);
    transport::MakeClient(*socket, security_);
    socket->connect(object_address);
  }
  return *socket;
}

void ObjectDeleter::Delete(const std::string& object_address, const std::string& path) {
  protocol::DeleteObjectsRequest req;
  req.paths = {path};
  transport::Frames frames = transport::MakeMessage(req, 0);
  try {
    (void)transport::SendFrames(Socket(object_address), frames, zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
    // Best effort: the job's end removes whatever is left.
  }
}

void ObjectDeleter::Contain(const std::string& object_address, const std::string& container,
                            std::vector<std::string> contents) {
  protocol::HoldObjectsRequest req;
  req.container = container;
  req.paths = std::move(contents);
  transport::Frames frames = transport::MakeMessage(req, 0);
  try {
    (void)transport::SendFrames(Socket(object_address), frames, zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
    // Best effort, as deletes: the holds stay until the job ends.
  }
}

namespace {

// One request to the object server at `object_address` and its reply, on a
// socket of its own, within `timeout_ms`. `where` names the request in errors.
template <typename Reply, typename Request>
Result<Reply> CallObjectServer(zmq::context_t& context, const transport::ClientSecurity& security,
                               ObjectServerDirectory& servers, const std::string& object_address,
                               const Request& req, const std::string& where, int64_t timeout_ms) {
  RAYX_RETURN_IF_ERROR(servers.Check(object_address));
  RAYX_RETURN_IF_ERROR(ProbeServer(object_address, 1000));
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::maxmsgsize, int64_t{1} << 20);
  transport::MakeClient(socket, security);
  transport::HandshakeWatch handshakes(context, socket);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  try {
    socket.connect(object_address);
    transport::Frames frames = transport::MakeMessage(req, 1);
    transport::SendFrames(socket, frames);
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return Status::Unavailable(where + ": no answer within " + std::to_string(timeout_ms) +
                                   " ms (is its node alive?)");
      }
      zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::min(left, std::chrono::milliseconds(100)));
      if (!(item.revents & ZMQ_POLLIN)) {
        if (std::string why = handshakes.Failure(); !why.empty()) {
          return Status::Unauthenticated(where + ": the object server did not let this process "
                                         "in: " + why);
        }
        continue;
      }
      transport::Frames reply = transport::ReceiveFrames(socket);
      if (reply.size() < 2) continue;
      auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(reply[0]));
      if (!env.ok()) return Status::Internal(where + ": " + env.status().message());
      if (env->t == static_cast<uint16_t>(protocol::MessageType::kErrorReply)) {
        auto error = protocol::Decode<protocol::ErrorReply>(transport::FrameView(reply[1]));
        return error.ok() ? error->ToStatus() : error.status();
      }
      auto out = protocol::Decode<Reply>(transport::FrameView(reply[1]));
      if (env->t != static_cast<uint16_t>(Reply::kType) || !out.ok()) {
        return Status::Internal(where + ": a malformed reply");
      }
      return *out;
    }
  } catch (const zmq::error_t& e) {
    return Status::Unavailable(where + " failed: " + e.what());
  }
}

}  // namespace

Status HoldObjects(zmq::context_t& context, const transport::ClientSecurity& security,
                   ObjectServerDirectory& servers, const std::string& object_address,
                   const std::vector<std::string>& paths, bool fresh, int64_t timeout_ms) {
  protocol::HoldObjectsRequest req;
  req.paths = paths;
  req.fresh = fresh;
  const std::string where = "holding " + std::to_string(paths.size()) + " object(s) at " +
                            object_address + " (" + (paths.empty() ? "" : paths[0].substr(0, 200)) +
                            ")";
  auto out = CallObjectServer<protocol::HoldObjectsReply>(context, security, servers,
                                                          object_address, req, where, timeout_ms);
  if (!out.ok()) return out.status();
  if (out->held != paths.size()) return Status::Internal(where + ": a malformed reply");
  return Status::OK();
}

Result<protocol::MakeRoomReply> MakeRoom(zmq::context_t& context,
                                         const transport::ClientSecurity& security,
                                         ObjectServerDirectory& servers,
                                         const std::string& object_address, uint64_t bytes,
                                         int64_t timeout_ms) {
  protocol::MakeRoomRequest req;
  req.bytes = bytes;
  return CallObjectServer<protocol::MakeRoomReply>(
      context, security, servers, object_address, req,
      "making room for " + std::to_string(bytes) + " bytes in the object store at " +
          object_address,
      timeout_ms);
}

Status PullShard(zmq::context_t& context, const transport::ClientSecurity& security,
                 ObjectServerDirectory& servers, const std::string& source,
                 const std::string& source_dir, const std::string& shard_dir,
                 const std::vector<ShardFile>& files, const std::string& hash,
                 const CheckpointFiles& into) {
  const std::string where = "copying checkpoint shard " + shard_dir + " from " + source;
  std::vector<std::string> hashes;
  for (const ShardFile& file : files) {
    const std::string relative = shard_dir + "/" + file.path;
    auto target = into.PrepareFile(relative);
    if (!target.ok()) return target.status();
    protocol::ObjectLocation from;
    from.object_address = source;
    from.path = source_dir + "/" + relative;
    from.size = file.size;
    std::string file_hash;
    Status pulled =
        PullToFile(context, security, from, servers, *target, kShardPullOptions, &file_hash);
    if (!pulled.ok()) {
      (void)into.Remove(shard_dir);
      return Status(pulled.code(), where + ": " + pulled.message());
    }
    hashes.push_back(std::move(file_hash));
  }
  // Hashed as it came; read again only when chunks came out of order.
  Result<ShardManifest> copy = ShardManifest{};
  if (std::find(hashes.begin(), hashes.end(), "") == hashes.end()) {
    CheckpointFiles::Combine(files, hashes, &*copy);
  } else {
    copy = into.Read(shard_dir);
  }
  if (!copy.ok() || copy->hash != hash) {
    (void)into.Remove(shard_dir);
    return Status::Internal(where + ": the copy's hash differs from the shard's (" +
                            (copy.ok() ? copy->hash.substr(0, 16) : copy.status().message()) +
                            " vs " + hash.substr(0, 16) + ")");
  }
  return Status::OK();
}

Result<protocol::ReplicateShardReply> ReplicateShard(zmq::context_t& context,
                                                     const transport::ClientSecurity& security,
                                                     ObjectServerDirectory& servers,
                                                     const std::string& object_address,
                                                     const protocol::ReplicateShardRequest& req,
                                                     int64_t timeout_ms) {
  return CallObjectServer<protocol::ReplicateShardReply>(
      context, security, servers, object_address, req,
      "copying checkpoint shard " + req.shard_dir.substr(0, 200) + " to " + object_address,
      timeout_ms);
}

void ObjectDeleter::DeleteShards(const std::string& object_address,
                                 std::vector<std::string> paths) {
  protocol::DeleteShardsRequest req;
  req.paths = std::move(paths);
  transport::Frames frames = transport::MakeMessage(req, 0);
  try {
    (void)transport::SendFrames(Socket(object_address), frames, zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
    // Best effort: the node's agent removes its checkpoints when it stops.
  }
}

void ObjectDeleter::KeepCheckpointRecord(const std::string& object_address,
                                         const protocol::KeepCheckpointRecordRequest& req) {
  transport::Frames frames = transport::MakeMessage(req, 0);
  try {
    (void)transport::SendFrames(Socket(object_address), frames, zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
    // Best effort: the other nodes holding a shard keep the record too.
  }
}

void ObjectDeleter::Clear() { sockets_.clear(); }

}  // namespace rayx
