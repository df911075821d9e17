// Serving stored objects to other nodes.
#include "agent/object_server.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <boost/asio/post.hpp>

#include "common/logging.h"
#include "object_store/object_pull.h"
#include "protocol/kv_messages.h"
#include "protocol/process_messages.h"
#include "transport/message.h"

namespace rayx::worker {

namespace {

// `dir/name` for a plain file name of a regular file in `dir` (`rayx logs`).
Result<std::string> LogFilePath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return Status::NotFound("this node keeps no log directory");
  if (name.size() > 255 || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    return Status::InvalidArgument("'" + name.substr(0, 64) +
                                   "' is not a log file's name: give a name `rayx logs` lists, "
                                   "not a path");
  }
  std::string path = dir + "/" + name;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return Status::NotFound("no log file '" + name + "' (`rayx logs` lists them)");
  }
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("'" + name + "' is not a regular file");
  return path;
}

// Reads at most `max_bytes` of `path` from `offset`; `*size` is its size now
// (0 and nothing read when it cannot be opened).
void ReadLogChunk(const std::string& path, bool no_follow, uint64_t offset, uint64_t max_bytes,
                  uint64_t* size, std::string* chunk) {
  *size = 0;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (no_follow ? O_NOFOLLOW : 0));
  if (fd < 0) return;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    *size = static_cast<uint64_t>(st.st_size);
    if (offset < *size) {
      chunk->resize(std::min<uint64_t>(max_bytes, *size - offset));
      ssize_t n = ::pread(fd, chunk->data(), chunk->size(), static_cast<off_t>(offset));
      chunk->resize(n > 0 ? static_cast<size_t>(n) : 0);
    }
  }
  ::close(fd);
}

// The regular files of `dir`, newest first, at most kMaxLogFiles.
protocol::ListLogsReply ListLogFiles(const std::string& dir) {
  protocol::ListLogsReply out;
  out.directory = dir;
  if (dir.empty()) return out;
  constexpr size_t kMaxScanned = 100000;  // bounds one listing's work
  std::error_code ec;
  size_t scanned = 0;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (++scanned > kMaxScanned) {
      out.truncated = true;
      break;
    }
    struct stat st {};
    std::string name = it->path().filename().string();
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out.files.push_back({name, static_cast<uint64_t>(st.st_size),
                         static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 +
                             st.st_mtim.tv_nsec / 1000000});
  }
  std::sort(out.files.begin(), out.files.end(), [](const auto& a, const auto& b) {
    return a.modified_ms != b.modified_ms ? a.modified_ms > b.modified_ms : a.name < b.name;
  });
  if (out.files.size() > protocol::ListLogsReply::kMaxLogFiles) {
    out.files.resize(protocol::ListLogsReply::kMaxLogFiles);
    out.truncated = true;
  }
  return out;
}

// The file name of a store path (what follows the last '/').
std::string_view BaseName(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

ObjectServer::ObjectServer(boost::asio::io_context& io, SharedMemoryStore store)
    : io_(io),
      store_(std::move(store)),
      pins_(ObjectPins::Ops{
          [this](const std::string& path) { return store_.Exists(path); },
          [this](const std::string& path) { store_.Remove(path); }}),
      router_(context_, zmq::socket_type::router) {}

void ObjectServer::Delete(const std::string& path) {
  if (!pins_.Release(path)) store_.Remove(path);
  held_objects_->store(pins_.size());
}

size_t ObjectServer::RemoveJob(const std::string& job_hex) {
  pins_.ForgetPrefix(store_.dir() + "/" + job_hex + "-");
  held_objects_->store(pins_.size());
  return store_.RemovePrefix(job_hex + "-");
}

ObjectServer::~ObjectServer() {
  *alive_ = false;
  spill_thread_.reset();
  transfer_thread_.reset();
  loop_.reset();
  router_.close();
  zap_.reset();
}

void ObjectServer::EnableSpilling(std::shared_ptr<StoreLedger> ledger,
                                  StoreSpiller::Options options) {
  options.held_objects = [held = held_objects_] { return held->load(); };
  spiller_ = std::make_unique<StoreSpiller>(store_, std::move(ledger), std::move(options));
  usage_ = spiller_->Count();
  spill_thread_ = std::make_unique<WorkThread>(kMaxSpillJobs);
}

StoreSpiller::Usage ObjectServer::StoreUsage() {
  if (!spiller_) {
    StoreSpiller::Usage now;
    now.stored_bytes = store_.UsageBytes();
    return now;
  }
  std::lock_guard<std::mutex> lock(usage_mu_);
  if (!count_queued_) {
    count_queued_ = spill_thread_->Post([this] {
      StoreSpiller::Usage counted = spiller_->Count();
      counted.by_job.clear();
      std::lock_guard<std::mutex> counted_lock(usage_mu_);
      usage_ = std::move(counted);
      count_queued_ = false;
    });
  }
  return usage_;
}

void ObjectServer::EnableCheckpoints(CheckpointFiles files,
                                     transport::ClientSecurity pull_security,
                                     std::shared_ptr<ObjectServerDirectory> servers,
                                     JobLive live) {
  checkpoints_ = std::move(files);
  pull_security_ = std::move(pull_security);
  servers_ = std::move(servers);
  job_live_ = std::move(live);
  transfer_thread_ = std::make_unique<WorkThread>(kMaxTransfers);
}

void ObjectServer::AnswerFromThread(WorkThread& thread, transport::Frames& reply, uint64_t id,
                                    std::function<transport::Frames()> job,
                                    const std::string& busy) {
  auto routing = std::make_shared<transport::Frame>(std::move(reply[0]));
  if (thread.Post([this, routing, job = std::move(job)] { AnswerLater(routing, job()); })) return;
  transport::Frames out;
  out.push_back(std::move(*routing));
  for (auto& f : transport::MakeErrorMessage(Status::Unavailable(busy), "object server", id)) {
    out.push_back(std::move(f));
  }
  (void)loop_->Send(out);
}

transport::Frames ObjectServer::ErrorFromNode(const Status& status, uint64_t id) const {
  return transport::MakeErrorMessage(
      Status(status.code(), status.message() + " (node " + ip_ + ")"), "object server", id);
}

void ObjectServer::AnswerLater(std::shared_ptr<transport::Frame> routing,
                               transport::Frames message) {
  auto shared = std::make_shared<transport::Frames>(std::move(message));
  boost::asio::post(io_, [this, routing, shared, alive = alive_] {
    if (!*alive) return;
    transport::Frames out;
    out.push_back(std::move(*routing));
    for (auto& f : *shared) out.push_back(std::move(f));
    (void)loop_->Send(out);
  });
}

Status ObjectServer::Replicate(const protocol::ReplicateShardRequest& req, uint64_t* bytes) {
  *bytes = 0;
  uint64_t size = 0;
  for (const ShardFile& file : req.files) size += file.size;
  RAYX_RETURN_IF_ERROR(checkpoints_->CheckRoom(size));
  RAYX_RETURN_IF_ERROR(PullShard(pull_context_, pull_security_, *servers_, req.source,
                                 req.source_dir, req.shard_dir, req.files, req.hash,
                                 *checkpoints_));
  for (const ShardFile& file : req.files) *bytes += file.size;
  return Status::OK();
}

bool ObjectServer::MayTouchCheckpoint(const transport::Principal& who,
                                      const std::string& relative) const {
  if (who.is_cluster()) return true;
  if (!who.is_job()) return false;
  const std::string writer = relative.substr(0, relative.find('/'));
  if (writer == who.job.Hex()) return true;
  auto job = JobId::FromHex(writer);
  return job.ok() && job_live_ && !job_live_(*job);
}

transport::Frames ObjectServer::ServeCheckpointFile(const transport::Principal& who,
                                                    const std::string& relative,
                                                    uint64_t offset, uint64_t length,
                                                    uint64_t id) {
  if (!MayTouchCheckpoint(who, relative)) {
    return transport::MakeErrorMessage(
        Status::Unauthenticated("checkpoint file " + relative.substr(0, 200) +
                                " belongs to another job that is still running"),
        "object server", id);
  }
  auto fd = checkpoints_->OpenFile(relative);
  if (!fd.ok()) return transport::MakeErrorMessage(fd.status(), "object server", id);
  struct stat st {};
  ::fstat(*fd, &st);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const uint64_t from = std::min<uint64_t>(offset, size);
  std::string chunk(std::min<uint64_t>({length, kMaxChunk, size - from}), '\0');
  ssize_t n = chunk.empty() ? 0 : ::pread(*fd, chunk.data(), chunk.size(), static_cast<off_t>(from));
  ::close(*fd);
  if (n < 0 || static_cast<size_t>(n) != chunk.size()) {
    return transport::MakeErrorMessage(
        Status::Internal("reading checkpoint file " + relative + " failed"), "object server", id);
  }
  protocol::PullObjectReply out;
  out.size = size;
  transport::Frames message = transport::MakeMessage(out, id);
  message.push_back(transport::Frame::Adopt(std::move(chunk)));
  return message;
}

Result<std::string> ObjectServer::Start(const std::string& ip, transport::WireSecurity mode,
                                        const transport::Credential& server,
                                        std::shared_ptr<const transport::Verifier> verifier) {
  ip_ = ip;
  credential_ = server;
  zap_ = std::make_unique<transport::ZapServer>(context_, std::move(verifier),
                                                "object server " + ip);
  transport::MakeServer(router_, mode, server);
  zap_->Guard(router_);
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
      if (checkpoints_ && req->path.size() > checkpoints_->dir().size() + 1 &&
          req->path.compare(0, checkpoints_->dir().size() + 1, checkpoints_->dir() + "/") == 0) {
        return answer(ServeCheckpointFile(who, req->path.substr(checkpoints_->dir().size() + 1),
                                          req->offset, req->length, env->id));
      }
      if (!store_.Contains(req->path)) {
        return answer(transport::MakeErrorMessage(
            Status::InvalidArgument("not an object of this node's store: " + req->path),
            "object server", env->id));
      }
      // A job reads its own job's objects, and another job's only with the
      // grant that job sent with a call's argument (a detached actor's).
      if (who.is_job()) {
        std::string_view name = BaseName(req->path);
        auto owner = transport::Credential::JobOfObject(name);
        if ((!owner || *owner != who.job) && !credential_.IsReadGrant(name, req->grant)) {
          return answer(transport::MakeErrorMessage(
              Status::Unauthenticated("object " + req->path.substr(0, 200) +
                                      " belongs to another job, and this request carries no "
                                      "grant of that job to read it"),
              "object server", env->id));
        }
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
    case protocol::MessageType::kMakeRoomRequest: {
      auto req = protocol::Decode<protocol::MakeRoomRequest>(body);
      if (!req.ok()) return answer(transport::MakeErrorMessage(req.status(), "object server", env->id));
      if (!spiller_) return answer(transport::MakeMessage(protocol::MakeRoomReply{}, env->id));
      // Answered from the spill thread, through the loop.
      const uint64_t id = env->id;
      const uint64_t bytes = req->bytes;
      return AnswerFromThread(
          *spill_thread_, reply, id,
          [this, id, bytes] {
            Status made = spiller_->MakeRoom(bytes);
            protocol::MakeRoomReply out;
            out.stored_bytes = spiller_->last().stored_bytes + bytes;
            out.spilled_bytes = spiller_->last().spilled_bytes;
            return made.ok() ? transport::MakeMessage(out, id) : ErrorFromNode(made, id);
          },
          "the object store on " + ip_ + " has " + std::to_string(kMaxSpillJobs) +
              " requests for room waiting: try again");
    }
    case protocol::MessageType::kReplicateShardRequest: {
      auto req = protocol::Decode<protocol::ReplicateShardRequest>(body);
      if (!req.ok()) return answer(transport::MakeErrorMessage(req.status(), "object server", env->id));
      auto refuse = [&](Status why) {
        return answer(transport::MakeErrorMessage(why, "object server", env->id));
      };
      if (!checkpoints_) return refuse(Status::Unavailable("this node keeps no checkpoints"));
      if (!CheckpointFiles::IsSafeRelative(req->shard_dir) ||
          req->files.size() > CheckpointFiles::kMaxFiles) {
        return refuse(Status::InvalidArgument("bad shard " + req->shard_dir.substr(0, 200)));
      }
      for (const ShardFile& f : req->files) {
        if (!CheckpointFiles::IsSafeRelative(f.path)) {
          return refuse(Status::InvalidArgument("bad file " + f.path.substr(0, 200) + " in shard " +
                                                req->shard_dir.substr(0, 200)));
        }
      }
      if (who.is_job() && req->shard_dir.rfind(who.job.Hex() + "/", 0) != 0) {
        return refuse(Status::Unauthenticated("shard " + req->shard_dir.substr(0, 200) +
                                              " belongs to another job"));
      }
      const uint64_t id = env->id;
      auto shared = std::make_shared<protocol::ReplicateShardRequest>(std::move(*req));
      return AnswerFromThread(
          *transfer_thread_, reply, id,
          [this, id, shared] {
            uint64_t bytes = 0;
            Status copied = Replicate(*shared, &bytes);
            protocol::ReplicateShardReply out;
            out.dir = checkpoints_->dir();
            out.bytes = bytes;
            return copied.ok() ? transport::MakeMessage(out, id) : ErrorFromNode(copied, id);
          },
          "node " + ip_ + " has " + std::to_string(kMaxTransfers) +
              " shard copies waiting: try again");
    }
    case protocol::MessageType::kDeleteShardsRequest: {
      auto req = protocol::Decode<protocol::DeleteShardsRequest>(body);
      if (!req.ok() || !checkpoints_) return;
      for (const auto& path : req->paths) {
        if (MayTouchCheckpoint(who, path)) (void)checkpoints_->Remove(path);
      }
      return;
    }
    case protocol::MessageType::kKeepCheckpointRecordRequest: {
      protocol::DecodeLimits limits;  // a record is one string of up to 8 MiB
      limits.max_str = protocol::KeepCheckpointRecordRequest::kMaxRecordBytes;
      auto req = protocol::Decode<protocol::KeepCheckpointRecordRequest>(body, limits);
      if (!req.ok() || !checkpoints_) return;
      // The record of this directory's checkpoint only: its key names the
      // directory's job and checkpoint id (<job>/<run key>/<id>).
      const std::string& dir = req->checkpoint_dir;
      if (!MayTouchCheckpoint(who, dir)) return;  // another running job's checkpoint
      const size_t job_end = dir.find('/');
      const size_t id_start = dir.rfind('/');
      if (job_end == std::string::npos || id_start == job_end ||
          req->key.rfind(protocol::kCheckpointRecordPrefix + dir.substr(0, job_end) + "/" +
                             dir.substr(id_start + 1) + "/",
                         0) != 0) {
        RAYX_LOG(Warning) << "refused a checkpoint record " << req->key.substr(0, 200)
                          << " for directory " << dir.substr(0, 200);
        return;
      }
      Status kept = checkpoints_->KeepRecord(dir, protocol::Encode(*req));
      if (!kept.ok() && kept.code() != StatusCode::kNotFound) {
        RAYX_LOG(Warning) << "cannot keep the record of checkpoint " << dir << ": " << kept;
      }
      return;
    }
    case protocol::MessageType::kDeleteObjectsRequest: {
      auto req = protocol::Decode<protocol::DeleteObjectsRequest>(body);
      if (!req.ok()) return;
      for (const auto& path : req->paths) {
        // A job frees its own job's objects only (they are named <job>-<id>).
        if (who.is_job() && BaseName(path).rfind(who.job.Hex() + "-", 0) != 0) continue;
        if (store_.Contains(path)) Delete(path);
      }
      return;
    }
    case protocol::MessageType::kHoldObjectsRequest: {
      auto req = protocol::Decode<protocol::HoldObjectsRequest>(body);
      if (!req.ok()) return answer(transport::MakeErrorMessage(req.status(), "object server", env->id));
      // As deletes: only objects of this store, and a job's own ones.
      auto refused = [&](const std::string& path) -> std::string {
        if (!store_.Contains(path)) return "not an object of this node's store: " + path.substr(0, 200);
        if (who.is_job() && BaseName(path).rfind(who.job.Hex() + "-", 0) != 0) {
          return "object " + path.substr(0, 200) + " belongs to another job (ObjectRefs inside "
                 "values stay within their job)";
        }
        return "";
      };
      if (!req->container.empty()) {  // a container's contents: no reply
        if (!refused(req->container).empty()) return;
        std::vector<std::string> contents;
        for (auto& path : req->paths) {
          if (refused(path).empty()) contents.push_back(std::move(path));
        }
        pins_.Contain(req->container, contents);
        held_objects_->store(pins_.size());
        return;
      }
      protocol::HoldObjectsReply out;
      for (const auto& path : req->paths) {
        Status held = Status::OK();
        if (std::string why = refused(path); !why.empty()) held = Status::InvalidArgument(why);
        if (held.ok()) held = pins_.Hold(path, req->fresh);
        if (!held.ok()) {
          // All or none: the holds this request took are let go again, and
          // the sender, told of the error, holds none.
          for (uint32_t i = 0; i < out.held; ++i) Delete(req->paths[i]);
          return answer(transport::MakeErrorMessage(held, "object server", env->id));
        }
        ++out.held;
      }
      held_objects_->store(pins_.size());
      return answer(transport::MakeMessage(out, env->id));
    }
    case protocol::MessageType::kReadLogRequest: {
      if (!who.is_cluster()) {
        return answer(transport::MakeErrorMessage(
            Status::Unauthenticated("only holders of the cluster token read process output"),
            "object server", env->id));
      }
      auto req = protocol::Decode<protocol::ReadLogRequest>(body);
      if (!req.ok()) return answer(transport::MakeErrorMessage(req.status(), "object server", env->id));
      std::optional<ProcessRunner::LogInfo> log;
      if (!req->file.empty()) {
        auto path = LogFilePath(log_dir_, req->file);
        if (!path.ok()) {
          return answer(transport::MakeErrorMessage(
              Status(path.status().code(), path.status().message() + " on " + ip_),
              "object server", env->id));
        }
        log = ProcessRunner::LogInfo{*path, false};
      } else {
        log = log_lookup_ ? log_lookup_(req->lease_id, req->index) : std::nullopt;
      }
      if (!log) {
        return answer(transport::MakeErrorMessage(
            Status::NotFound("no output of process " + std::to_string(req->index) + " of lease " +
                             req->lease_id.Hex() + " on this node (never ran here, or forgotten)"),
            "object server", env->id));
      }
      protocol::ReadLogReply out;
      out.exited = log->exited;  // read before the size: no output is missed
      out.path = log->path;
      std::string chunk;
      // A file named by the client is never reached through a link.
      ReadLogChunk(log->path, /*no_follow=*/!req->file.empty(), req->offset,
                   std::min<uint64_t>(req->max_bytes, kMaxChunk), &out.size, &chunk);
      transport::Frames message = transport::MakeMessage(out, env->id);
      message.push_back(transport::Frame::Adopt(std::move(chunk)));
      return answer(std::move(message));
    }
    case protocol::MessageType::kListLogsRequest: {
      if (!who.is_cluster()) {
        return answer(transport::MakeErrorMessage(
            Status::Unauthenticated("only holders of the cluster token list a node's logs"),
            "object server", env->id));
      }
      auto req = protocol::Decode<protocol::ListLogsRequest>(body);
      if (!req.ok()) return answer(transport::MakeErrorMessage(req.status(), "object server", env->id));
      return answer(transport::MakeMessage(ListLogFiles(log_dir_), env->id));
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
