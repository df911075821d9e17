// Serving stored objects to other nodes.
#include "agent/object_server.h"

#include <unistd.h>

#include <fstream>

#include "common/logging.h"
#include "protocol/process_messages.h"
#include "transport/message.h"

namespace rayx::worker {

ObjectServer::ObjectServer(boost::asio::io_context& io, SharedMemoryStore store)
    : io_(io), store_(std::move(store)), router_(context_, zmq::socket_type::router) {}

ObjectServer::~ObjectServer() {
  loop_.reset();
  router_.close();
  zap_.reset();
}

Result<std::string> ObjectServer::Start(const std::string& ip, transport::WireSecurity mode,
                                        const transport::Credential& server,
                                        std::shared_ptr<const transport::Verifier> verifier) {
  ip_ = ip;
  zap_ = std::make_unique<transport::ZapServer>(context_, std::move(verifier),
                                                "object server " + ip);
  transport::MakeServer(router_, mode, server);
  ports_ = std::make_unique<PortReserver>(PortReserver::FromKernel(), clock_,
                                          PortReserver::BindProbe(ip),
                                          static_cast<uint32_t>(::getpid()) * 2654435761u);
  router_.set(zmq::sockopt::linger, 0);
  router_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(protocol::kMaxControlFrameBytes));
  router_.set(zmq::sockopt::sndhwm, 1000);
  try {
    router_.bind("tcp://" + ip + ":*");
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("the object server cannot listen on " + ip + ": " + e.what());
  }
  loop_ = std::make_unique<transport::ZmqSocketLoop>(
      io_, router_, [this](transport::Frames& frames) { OnMessage(frames); });
  loop_->Start();
  return router_.get(zmq::sockopt::last_endpoint);
}

void ObjectServer::OnMessage(transport::Frames& frames) {
  if (frames.size() < 3) return;  // [routing][envelope][body]
  auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(frames[1]));
  if (!env.ok()) return;
  // Who the connection proved to be (ZAP): nobody else gets here.
  const transport::Principal who = transport::PeerPrincipal(frames[1]);
  if (!who.valid()) return;
  std::string_view body = transport::FrameView(frames[2]);
  transport::Frames reply;
  reply.push_back(std::move(frames[0]));
  auto answer = [&](transport::Frames message) {
    for (auto& f : message) reply.push_back(std::move(f));
    (void)loop_->Send(reply);
  };
  switch (static_cast<protocol::MessageType>(env->t)) {
    case protocol::MessageType::kPullObjectRequest: {
      auto req = protocol::Decode<protocol::PullObjectRequest>(body);
      if (!req.ok()) return answer(transport::MakeErrorMessage(req.status(), "object server", env->id));
      if (!store_.Contains(req->path)) {
        return answer(transport::MakeErrorMessage(
            Status::InvalidArgument("not an object of this node's store: " + req->path),
            "object server", env->id));
      }
      auto mapped = store_.Open(req->path);  // O_NOFOLLOW, regular files only
      if (!mapped.ok()) {
        return answer(transport::MakeErrorMessage(
            Status::NotFound("object " + req->path + " is gone (freed, or its job ended)"),
            "object server", env->id));
      }
      std::string_view all = (*mapped)->view();
      uint64_t offset = std::min<uint64_t>(req->offset, all.size());
      uint64_t length = std::min<uint64_t>({req->length, kMaxChunk, all.size() - offset});
      protocol::PullObjectReply out;
      out.size = all.size();
      transport::Frames message = transport::MakeMessage(out, env->id);
      message.push_back(transport::MakeFrame(all.substr(offset, length)));
      return answer(std::move(message));
    }
    case protocol::MessageType::kDeleteObjectsRequest: {
      auto req = protocol::Decode<protocol::DeleteObjectsRequest>(body);
      if (!req.ok()) return;
      for (const auto& path : req->paths) {
        // A job frees its own job's objects only (they are named <job>-<id>).
        if (who.is_job()) {
          std::string_view name = path;
          name = name.substr(name.rfind('/') == std::string_view::npos ? 0 : name.rfind('/') + 1);
          if (name.rfind(who.job.Hex() + "-", 0) != 0) continue;
        }
        store_.Remove(path);
      }
      return;
    }
    case protocol::MessageType::kReadLogRequest: {
      if (!who.is_cluster()) {
        return answer(transport::MakeErrorMessage(
            Status::Unauthenticated("only holders of the cluster token read process output"),
            "object server", env->id));
      }
      auto req = protocol::Decode<protocol::ReadLogRequest>(body);
      if (!req.ok()) return answer(transport::MakeErrorMessage(req.status(), "object server", env->id));
      auto log = log_lookup_ ? log_lookup_(req->lease_id, req->index) : std::nullopt;
      if (!log) {
        return answer(transport::MakeErrorMessage(
            Status::NotFound("no output of process " + std::to_string(req->index) + " of lease " +
                             req->lease_id.Hex() + " on this node (never ran here, or forgotten)"),
            "object server", env->id));
      }
      protocol::ReadLogReply out;
      out.exited = log->exited;  // read before the size: no output is missed
      out.path = log->path;
      std::ifstream in(log->path, std::ios::binary);
      std::string chunk;
      if (in) {
        in.seekg(0, std::ios::end);
        out.size = static_cast<uint64_t>(in.tellg());
        if (req->offset < out.size) {
          uint64_t length = std::min<uint64_t>({req->max_bytes, kMaxChunk, out.size - req->offset});
          chunk.resize(length);
          in.seekg(static_cast<std::streamoff>(req->offset));
          in.read(chunk.data(), static_cast<std::streamsize>(length));
          chunk.resize(static_cast<size_t>(in.gcount()));
        }
      }
      transport::Frames message = transport::MakeMessage(out, env->id);
      message.push_back(transport::Frame::Adopt(std::move(chunk)));
      return answer(std::move(message));
    }
    case protocol::MessageType::kReservePortRequest: {
      auto port = ports_->Reserve();
      if (!port.ok()) {
        return answer(transport::MakeErrorMessage(
            Status::Unavailable(port.status().message() + " on " + ip_), "object server", env->id));
      }
      protocol::ReservePortReply out;
      out.port = *port;
      return answer(transport::MakeMessage(out, env->id));
    }
    default:
      return;
  }
}

}  // namespace rayx::worker
