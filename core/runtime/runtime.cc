// The client runtime: objects, leases, direct task calls.
#include "runtime/runtime.h"

#include <unistd.h>

#include <boost/asio/post.hpp>
#include <chrono>
#include <cstring>
#include <future>

#include "common/logging.h"
#include "rayx/ids.h"
#include "rayx/version.h"
#include "object_store/object_pull.h"
#include "object_store/shared_memory_store.h"
#include "protocol/placement_messages.h"
#include "transport/message.h"

namespace rayx::detail {

using protocol::MessageType;
using transport::FrameView;
using transport::Frames;

namespace {
constexpr size_t kMaxInFlight = 256;      // calls pipelined to one worker (task or actor)
// One message to a worker carries at most this many calls (a batch of many
// small calls), and stops growing past this many body bytes.
constexpr uint32_t kMaxCallsPerMessage = 64;
constexpr size_t kMaxMessageBodyBytes = 256 * 1024;
constexpr int64_t kIdleLeaseMs = 1000;    // an idle task worker is given back after this
constexpr int64_t kTickMs = 100;
constexpr int64_t kSaturatedAfterMs = 50;
// Values of any size travel in frames; this bounds one frame on worker links.
constexpr int64_t kMaxDataFrameBytes = int64_t{1} << 31;

// Workers run this very program, started in this process's directory.
void SetWorkerProgram(protocol::RequestLeaseRequest* req) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  req->executable = n > 0 ? std::string(exe, static_cast<size_t>(n)) : "";
  // Rebuilt while running: the program at that path is the one to start.
  const std::string deleted = " (deleted)";
  if (req->executable.size() > deleted.size() &&
      req->executable.compare(req->executable.size() - deleted.size(), deleted.size(),
                              deleted) == 0) {
    req->executable.resize(req->executable.size() - deleted.size());
  }
  char cwd[4096];
  req->working_dir = getcwd(cwd, sizeof cwd) ? cwd : "";
  // A submitted job's program lives in its working directory package, which
  // each node fetches for itself (rayx job submit --working-dir).
  const char* hash = std::getenv("RAYX_PACKAGE_HASH");
  const char* dir = std::getenv("RAYX_PACKAGE_DIR");
  if (hash && dir && *hash && *dir) {
    req->package_hash = hash;
    req->package_dir = dir;
  }
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void ApplyPlacement(const Placement& p, protocol::RequestLeaseRequest* req) {
  req->placement_group_id = p.placement_group_id;
  req->bundle_index = p.bundle_index;
  req->group_visible_devices = p.group_visible_devices;
  req->strategy = p.strategy;
  req->affinity_node_id = p.affinity_node_id;
  req->affinity_soft = p.affinity_soft;
  req->label_selector = p.label_selector;
}

std::string ShapeKey(const ResourceMap& resources) {
  std::string key;
  for (const auto& [name, amount] : resources) key += name + "=" + FormatAmount(amount) + ";";
  return key;
}
}  // namespace

// One leased worker (or an actor's worker) and the calls in flight to it.
struct Runtime::WorkerConn : std::enable_shared_from_this<WorkerConn> {
  std::string lease_id;
  std::string address;
  std::string node;
  int32_t pid = 0;
  zmq::socket_t socket;
  zmq::socket_t monitor;
  std::unique_ptr<transport::ZmqSocketLoop> loop;
  std::unique_ptr<transport::ZmqSocketLoop> monitor_loop;
  std::unordered_map<uint64_t, Task> in_flight;  // sent or queued to send
  std::vector<uint64_t> unsent;                  // ids in in_flight not sent yet, in order
  bool flush_queued = false;                     // in flush_queue_
  uint64_t next_id = 1;
  int64_t idle_since = 0;
  bool lost = false;
  Shape* shape = nullptr;        // task workers
  ActorState* actor = nullptr;   // actor workers

  // libzmq 4.3 sends monitor events with a blocking send from its I/O thread:
  // closing the reader while the socket can still emit (its disconnect) would
  // stall that thread, and with it every socket of the context. So the
  // monitor is stopped first, then the socket closes, then the reader.
  ~WorkerConn() {
    monitor_loop.reset();
    loop.reset();
    if (socket.handle() != nullptr) {
      zmq_socket_monitor(socket.handle(), nullptr, 0);
      socket.close();
    }
    monitor.close();
  }
};

struct Runtime::Shape {
  ResourceMap resources;
  Placement placement;
  std::deque<Task> queue;
  std::vector<std::shared_ptr<WorkerConn>> workers;
  int lease_requests = 0;
  int64_t lease_requested_at = 0;
  // True once a lease request has waited kSaturatedAfterMs at the head: the
  // cluster has no free slot for this shape, so queue deeper on the workers
  // we have. Until then each worker gets one task at a time and waiting work
  // asks for more workers (spreading slow tasks over the cluster).
  bool Saturated(int64_t now) const {
    return lease_requests > 0 && now - lease_requested_at > kSaturatedAfterMs;
  }
};

struct Runtime::ActorState {
  std::string actor_id;
  std::string name;
  std::string class_name;
  std::string lease_id;
  bool owner = false;
  bool detached = false;
  std::deque<Task> queue;        // calls not yet sent, in order
  bool resolving = false;        // the front call waits for its arguments
  bool pumping = false;          // PumpActor is running
  std::shared_ptr<WorkerConn> conn;
  std::string dead_reason;       // set once the actor is gone
};

ObjectCore::~ObjectCore() {
  if (Runtime* runtime = CurrentRuntime()) runtime->Release(id);
}

Runtime::Runtime(Config config)
    : config_(std::move(config)),
      id_prefix_(rayx::detail::RandomHex(8)),
      work_(boost::asio::make_work_guard(io_)),
      head_(context_, zmq::socket_type::dealer),
      tick_timer_(io_),
      heartbeat_timer_(io_) {}

Result<std::unique_ptr<Runtime>> Runtime::Start(const Config& config) {
  std::unique_ptr<Runtime> runtime(new Runtime(config));
  RAYX_RETURN_IF_ERROR(runtime->Connect());
  return runtime;
}

Status Runtime::Connect() {
  head_.set(zmq::sockopt::linger, 0);
  head_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(protocol::kMaxControlFrameBytes));
  head_.connect(config_.head.ZmqEndpoint());
  head_loop_ = std::make_unique<transport::ZmqSocketLoop>(
      io_, head_, [this](Frames& frames) { OnHeadMessage(frames); });
  head_loop_->Start();
  thread_ = std::thread([this] { io_.run(); });

  protocol::RegisterDriverRequest req;
  req.token = config_.token;
  req.rayx_version = kRayxVersion;
  req.job_id = config_.job_id;
  req.node_ip = config_.node_ip;
  req.pid = getpid();
  auto reply = CallHeadSync<protocol::RegisterDriverReply>(req, 15000);
  if (!reply.ok()) return reply.status();
  config_.job_id = reply->job_id;
  heartbeat_period_ms_ = reply->heartbeat_period_ms;
  // A node of the cluster on this machine lends its object store to large Puts.
  auto status = QueryClusterStatus(config_.head.ToString(), config_.token, 5000);
  if (status.ok()) {
    for (const auto& node : status->nodes) {
      if (node.alive && node.address == config_.node_ip && !node.store_dir.empty()) {
        local_store_dir_ = node.store_dir;
        local_object_address_ = node.object_address;
        store_writer_ = std::make_unique<StoreWriter>(local_store_dir_, StoreWriter::Options{});
        break;
      }
    }
  }
  boost::asio::post(io_, [this] {
    Heartbeat();
    Tick();
  });
  return Status::OK();
}

Runtime::~Runtime() { Stop(); }

void Runtime::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (!config_.is_worker && !config_.job_id.empty()) {  // empty: never registered
    protocol::FinishJobRequest req;
    req.job_id = config_.job_id;
    auto reply = CallHeadSync<protocol::FinishJobReply>(req, 5000);
    if (!reply.ok()) RAYX_LOG(Warning) << "could not end job " << config_.job_id << ": " << reply.status();
  }
  boost::asio::post(io_, [this] {
    tick_timer_.cancel();
    heartbeat_timer_.cancel();
    for (auto& [key, shape] : shapes_) shape->workers.clear();
    for (auto& [id, actor] : actors_) actor->conn.reset();
    flush_queue_.clear();
    delete_sockets_.clear();
    if (store_writer_) store_writer_->Clear();
    head_loop_.reset();
    work_.reset();
    io_.stop();
  });
  if (thread_.joinable()) thread_.join();
  // Wake anyone still waiting.
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, entry] : objects_) {
    if (entry.state == Entry::State::kPending) {
      entry.state = Entry::State::kFailed;
      entry.error = std::make_shared<ErrorInfo>(
          ErrorInfo{"RuntimeStopped", "rayx::Shutdown() was called before this result arrived",
                    "", ""});
    }
  }
  cv_.notify_all();
}

// ---- Objects -------------------------------------------------------------------

std::string Runtime::NewObjectId() {
  static constexpr char kHex[] = "0123456789abcdef";
  uint64_t n = next_object_.fetch_add(1, std::memory_order_relaxed) + 1;
  std::string id = id_prefix_;
  id.resize(id_prefix_.size() + 16);
  for (int i = 15; i >= 0; --i, n >>= 4) id[id_prefix_.size() + static_cast<size_t>(i)] = kHex[n & 15];
  return id;
}

ObjectHandle Runtime::NewEntry(std::string id) {
  auto core = std::make_shared<ObjectCore>();
  core->id = std::move(id);
  return core;
}

ObjectHandle Runtime::NewPendingObject() {
  std::string id = NewObjectId();
  {
    std::lock_guard<std::mutex> lock(mu_);
    objects_[id];
  }
  return NewEntry(std::move(id));
}

ObjectHandle Runtime::Submit(Submission submission) {
  ObjectHandle handle = NewEntry(NewObjectId());
  submission.task.object_id = handle->id;
  bool post = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    objects_.try_emplace(handle->id);
    submissions_.push_back(std::move(submission));
    post = !drain_posted_;
    drain_posted_ = true;
  }
  if (post) boost::asio::post(io_, [this] { DrainSubmissions(); });
  return handle;
}

void Runtime::PostOrdered(std::function<void()> fn) {
  Submission submission;
  submission.kind = Submission::Kind::kClosure;
  submission.closure = std::move(fn);
  bool post = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    submissions_.push_back(std::move(submission));
    post = !drain_posted_;
    drain_posted_ = true;
  }
  if (post) boost::asio::post(io_, [this] { DrainSubmissions(); });
}

void Runtime::DrainSubmissions() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_.swap(submissions_);
    drain_posted_ = false;
  }
  for (Submission& s : draining_) {
    switch (s.kind) {
      case Submission::Kind::kTask: {
        Shape* shape = ShapeFor(s.resources, s.placement);
        ResolveThen(s.task, [this, shape](Task ready) {
          shape->queue.push_back(std::move(ready));
          Pump(*shape);
        });
        break;
      }
      case Submission::Kind::kActorCall:
        SubmitToActor(std::move(s.task));
        break;
      case Submission::Kind::kClosure:
        s.closure();
        break;
    }
  }
  draining_.clear();
  // The burst is complete: send it now rather than after other queued handlers.
  if (flush_posted_) FlushSends();
}

ObjectHandle Runtime::Put(std::string bytes) {
  if (bytes.size() >= kInlineObjectLimit && store_writer_) {
    std::string id = NewObjectId();
    auto buffer = store_writer_->Create(config_.job_id + "-" + id, bytes.size());
    if (buffer.ok()) {
      std::memcpy((*buffer)->data(), bytes.data(), bytes.size());
      return PutStored(std::move(id), std::move(*buffer));
    }
  }
  return PutInMemory(std::move(bytes));
}

ObjectHandle Runtime::PutEncoded(size_t size, const std::function<void(char*)>& fill) {
  if (size >= kInlineObjectLimit && store_writer_) {
    std::string id = NewObjectId();
    auto buffer = store_writer_->Create(config_.job_id + "-" + id, size);
    if (buffer.ok()) {
      try {
        fill((*buffer)->data());
      } catch (...) {
        store_writer_->Free(std::move(*buffer), /*reusable=*/false, NowMs());
        throw;
      }
      return PutStored(std::move(id), std::move(*buffer));
    }
  }
  // No store here, or it is full: the value stays in memory.
  std::string bytes(size, '\0');
  fill(bytes.data());
  return PutInMemory(std::move(bytes));
}

ObjectHandle Runtime::PutInMemory(std::string bytes) {
  std::string id = NewObjectId();
  auto value = std::make_shared<const std::string>(std::move(bytes));
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& entry = objects_[id];
    entry.state = Entry::State::kReady;
    entry.value = std::move(value);
  }
  return NewEntry(std::move(id));
}

ObjectHandle Runtime::PutStored(std::string id, std::shared_ptr<StoreWriter::Buffer> buffer) {
  auto location = std::make_shared<protocol::ObjectLocation>();
  location->node_address = config_.node_ip;
  location->path = buffer->path();
  location->size = buffer->size();
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& entry = objects_[id];
    entry.state = Entry::State::kReady;
    entry.location = std::move(location);
    entry.written = std::move(buffer);
  }
  return NewEntry(std::move(id));
}

void Runtime::DeleteStored(const protocol::ObjectLocation& location) {
  // This process wrote it (a Put): remove it directly.
  if (location.object_address.empty()) {
    ::unlink(location.path.c_str());
    return;
  }
  auto& socket = delete_sockets_[location.object_address];
  if (!socket) {
    socket = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
    socket->set(zmq::sockopt::linger, 1000);
    socket->connect(location.object_address);
  }
  protocol::DeleteObjectsRequest req;
  req.paths = {location.path};
  Frames frames = transport::MakeMessage(req, 0);
  try {
    for (size_t i = 0; i < frames.size(); ++i) {
      (void)socket->send(frames[i], (i + 1 < frames.size() ? zmq::send_flags::sndmore
                                                           : zmq::send_flags::none) |
                                        zmq::send_flags::dontwait);
    }
  } catch (const zmq::error_t&) {
    // Best effort: the job's end removes whatever is left.
  }
}

void Runtime::Release(const std::string& object_id) {
  std::shared_ptr<const protocol::ObjectLocation> location;
  std::shared_ptr<StoreWriter::Buffer> written;
  bool shared_out = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.find(object_id);
    if (it == objects_.end()) return;
    if (it->second.state == Entry::State::kPending) {
      // Dropped when its result arrives.
      it->second.waiters.push_back(nullptr);  // marks "released"
      return;
    }
    location = it->second.location;
    written = std::move(it->second.written);
    shared_out = it->second.shared_out;
    objects_.erase(it);
  }
  if (written) {
    // This process's Put: its file may serve the next Put unless another
    // process may still read it (then it goes, like any other).
    if (!stopped_ && !shared_out) {
      store_writer_->Free(std::move(written), /*reusable=*/true, NowMs());
      return;
    }
    if (stopped_) return;  // the job's end removes it
    boost::asio::post(io_, [this, written = std::move(written)]() mutable {
      store_writer_->Free(std::move(written), /*reusable=*/false, NowMs());
    });
    return;
  }
  if (location && !stopped_) {
    boost::asio::post(io_, [this, location] { DeleteStored(*location); });
  }
}

size_t Runtime::ObjectCount() {
  std::lock_guard<std::mutex> lock(mu_);
  return objects_.size();
}

void Runtime::Complete(const std::string& id, std::shared_ptr<const std::string> value,
                       std::shared_ptr<ErrorInfo> error,
                       std::shared_ptr<const protocol::ObjectLocation> location) {
  std::vector<Completion> one(1);
  one[0] = Completion{id, std::move(value), std::move(error), std::move(location)};
  CompleteAll(one);
}

void Runtime::CompleteAll(std::vector<Completion>& batch) {
  std::vector<std::function<void()>> continuations;
  std::vector<std::shared_ptr<const protocol::ObjectLocation>> unwanted;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Completion& c : batch) {
      auto it = objects_.find(c.id);
      if (it == objects_.end()) continue;
      Entry& entry = it->second;
      entry.state = c.error ? Entry::State::kFailed : Entry::State::kReady;
      entry.value = std::move(c.value);
      entry.error = std::move(c.error);
      entry.location = c.location;
      if (entry.waiters.empty()) continue;
      bool released = false;
      for (auto& w : entry.waiters) {
        if (w) {
          continuations.push_back(std::move(w));
        } else {
          released = true;
        }
      }
      entry.waiters.clear();
      if (released) {
        objects_.erase(it);
        if (c.location) unwanted.push_back(c.location);
      }
    }
    wake = waiting_ > 0;
  }
  batch.clear();
  if (wake) cv_.notify_all();
  for (auto& location : unwanted) DeleteStored(*location);  // nobody wants it any more
  for (auto& w : continuations) w();
}

ObjectBytes Runtime::Get(const ObjectHandle& object, int64_t timeout_ms) {
  if (!object) throw std::invalid_argument("Get on an empty ObjectRef");
  std::unique_lock<std::mutex> lock(mu_);
  auto it = objects_.find(object->id);
  if (it != objects_.end() && it->second.state == Entry::State::kPending) {
    auto done = [&] {
      it = objects_.find(object->id);
      return it == objects_.end() || it->second.state != Entry::State::kPending;
    };
    ++waiting_;
    bool ready = true;
    if (timeout_ms < 0) {
      cv_.wait(lock, done);
    } else {
      ready = cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), done);
    }
    --waiting_;
    if (!ready) {
      throw GetTimeoutError("object " + object->id + " was not ready within " +
                            std::to_string(timeout_ms) + " ms");
    }
  }
  if (it == objects_.end()) throw std::runtime_error("object " + object->id + " was freed");
  Entry& entry = it->second;
  if (entry.state == Entry::State::kFailed) {
    const ErrorInfo& e = *entry.error;
    throw TaskError(e.type, e.message, e.function, e.node);
  }
  if (entry.value) return {*entry.value, entry.value};
  if (entry.written) return {entry.written->view(), entry.written};
  if (entry.mapped) {
    auto mapped = std::static_pointer_cast<const MappedObject>(entry.mapped);
    return {mapped->view(), mapped};
  }
  auto location = entry.location;
  lock.unlock();
  // In a store: mapped in place when it is on this machine, else pulled once.
  if (location->node_address == config_.node_ip) {
    auto mapped = MappedObject::Open(location->path);
    if (mapped.ok()) {
      std::lock_guard<std::mutex> relock(mu_);
      auto again = objects_.find(object->id);
      if (again != objects_.end()) again->second.mapped = *mapped;
      return {(*mapped)->view(), *mapped};
    }
  }
  auto pulled = PullObject(context_, *location);
  if (!pulled.ok()) {
    throw TaskError("ObjectLost", pulled.status().message(), "Get", location->node_address);
  }
  auto value = std::make_shared<const std::string>(std::move(*pulled));
  std::lock_guard<std::mutex> relock(mu_);
  auto again = objects_.find(object->id);
  if (again != objects_.end()) again->second.value = value;
  return {*value, value};
}

std::vector<bool> Runtime::Wait(const std::vector<ObjectHandle>& objects, size_t num_returns,
                                int64_t timeout_ms) {
  std::vector<bool> ready(objects.size(), false);
  std::unique_lock<std::mutex> lock(mu_);
  auto count = [&] {
    size_t n = 0;
    for (size_t i = 0; i < objects.size(); ++i) {
      auto it = objects_.find(objects[i]->id);
      ready[i] = it == objects_.end() || it->second.state != Entry::State::kPending;
      n += ready[i] ? 1 : 0;
    }
    return n >= num_returns;
  };
  if (!count()) {
    ++waiting_;
    if (timeout_ms < 0) {
      cv_.wait(lock, count);
    } else {
      cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), count);
    }
    --waiting_;
  }
  count();
  return ready;
}

// ---- Head calls ------------------------------------------------------------------

template <typename Reply, typename Request>
void Runtime::CallHead(const Request& request, std::function<void(Result<Reply>)> done) {
  uint64_t id = next_request_++;
  head_calls_[id] = [done = std::move(done)](Result<std::pair<uint16_t, std::string>> raw) {
    if (!raw.ok()) return done(raw.status());
    if (raw->first != static_cast<uint16_t>(Reply::kType)) {
      return done(Status::Internal("unexpected reply " + protocol::MessageTypeName(raw->first)));
    }
    done(protocol::Decode<Reply>(raw->second));
  };
  Frames frames = transport::MakeMessage(request, id);
  if (!head_loop_->Send(frames)) {
    auto cb = std::move(head_calls_[id]);
    head_calls_.erase(id);
    cb(Status::Unavailable("cannot send to the head at " + config_.head.ToString()));
  }
}

template <typename Reply, typename Request>
Result<Reply> Runtime::CallHeadSync(const Request& request, int64_t timeout_ms) {
  auto promise = std::make_shared<std::promise<Result<Reply>>>();
  auto future = promise->get_future();
  boost::asio::post(io_, [this, request, promise] {
    CallHead<Reply>(request, [promise](Result<Reply> r) { promise->set_value(std::move(r)); });
  });
  if (future.wait_for(std::chrono::milliseconds(timeout_ms)) != std::future_status::ready) {
    return Status::Unavailable("the head at " + config_.head.ToString() + " did not answer within " +
                               std::to_string(timeout_ms / 1000) +
                               " s: is the cluster running (rayx status)?");
  }
  return future.get();
}

void Runtime::OnHeadMessage(Frames& frames) {
  if (frames.size() < 2) return;
  auto env = protocol::Decode<protocol::Envelope>(FrameView(frames[0]));
  if (!env.ok()) return;
  auto it = head_calls_.find(env->id);
  if (it == head_calls_.end()) return;
  auto cb = std::move(it->second);
  head_calls_.erase(it);
  if (env->t == static_cast<uint16_t>(MessageType::kErrorReply)) {
    auto error = protocol::Decode<protocol::ErrorReply>(FrameView(frames[1]));
    cb(error.ok() ? error->ToStatus() : error.status());
    return;
  }
  cb(std::make_pair(env->t, std::string(FrameView(frames[1]))));
}

void Runtime::Heartbeat() {
  // Only a driver keeps its job alive; a worker's runtime must not.
  if (stopped_ || config_.is_worker) return;
  protocol::DriverHeartbeatRequest req;
  req.job_id = config_.job_id;
  CallHead<protocol::DriverHeartbeatReply>(req, [](Result<protocol::DriverHeartbeatReply>) {});
  heartbeat_timer_.expires_after(std::chrono::milliseconds(heartbeat_period_ms_));
  heartbeat_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) Heartbeat();
  });
}

// ---- Tasks ---------------------------------------------------------------------

ObjectHandle Runtime::SubmitTask(const std::string& function, std::vector<Arg> args,
                                 const CallOptions& options) {
  Submission submission;
  submission.kind = Submission::Kind::kTask;
  submission.task.function = function;
  submission.task.display = options.name;
  submission.task.args = std::move(args);
  if (options.resources_set) submission.resources = options.resources;
  submission.placement = options.placement;
  return Submit(std::move(submission));
}

Runtime::Shape* Runtime::ShapeFor(const std::optional<ResourceMap>& resources,
                                  const Placement& placement) {
  bool plain = placement.empty();
  if (!resources && plain && default_shape_) return default_shape_;
  ResourceMap wanted = resources ? *resources : ResourceMap{{kCpu, 1}};
  auto& shape = shapes_[ShapeKey(wanted) + (plain ? "" : placement.Key())];
  if (!shape) {
    shape = std::make_unique<Shape>();
    shape->resources = std::move(wanted);
    shape->placement = placement;
  }
  if (!resources && plain) default_shape_ = shape.get();
  return shape.get();
}

void Runtime::ResolveThen(Task& task, std::function<void(Task)> ready) {
  // Collects the argument bytes; waits on the first unresolved reference and
  // tries again once it completes.
  task.resolved.resize(task.args.size());
  for (size_t i = 0; i < task.args.size(); ++i) {
    Arg& arg = task.args[i];
    if (!arg.ref) {
      task.resolved[i] = std::move(arg.bytes);
      arg.bytes.clear();
      arg.ref = nullptr;
      continue;
    }
    std::unique_lock<std::mutex> lock(mu_);
    auto it = objects_.find(arg.ref->id);
    if (it == objects_.end()) {
      lock.unlock();
      FailTask(task, "ObjectLost", "argument " + std::to_string(i) + " (object " + arg.ref->id +
                                       ") is not known to this process",
               "");
      return;
    }
    if (it->second.state == Entry::State::kFailed) {
      ErrorInfo e = *it->second.error;
      lock.unlock();
      FailTask(task, e.type, "argument " + std::to_string(i) + " failed: " + e.message, e.node);
      return;
    }
    if (it->second.state == Entry::State::kReady && !it->second.value && it->second.location) {
      // Left in its store: the worker maps or pulls it.
      it->second.shared_out = true;
      protocol::ObjectLocation location = *it->second.location;
      if (location.object_address.empty()) {
        // Put by this process into the local store: served by the local agent.
        location.object_address = local_object_address_;
      }
      task.stored[static_cast<uint32_t>(i)] = location;
      task.resolved[i].clear();
      arg.ref = nullptr;
      continue;
    }
    if (it->second.state == Entry::State::kPending) {
      auto shared = std::make_shared<Task>(std::move(task));
      it->second.waiters.push_back([this, shared, ready] {
        boost::asio::post(io_, [this, shared, ready] { ResolveThen(*shared, ready); });
      });
      return;
    }
    task.resolved[i] = *it->second.value;
    arg.ref = nullptr;
  }
  ready(std::move(task));
}

void Runtime::Pump(Shape& shape) {
  // Least-loaded worker first, until every worker is full.
  size_t depth = shape.Saturated(NowMs()) ? kMaxInFlight : 1;
  while (!shape.queue.empty()) {
    WorkerConn* best = nullptr;
    for (auto& w : shape.workers) {
      if (w->lost || w->in_flight.size() >= depth) continue;
      if (!best || w->in_flight.size() < best->in_flight.size()) best = w.get();
    }
    if (!best) break;
    Task task = std::move(shape.queue.front());
    shape.queue.pop_front();
    Send(*best, std::move(task));
  }
  // More workers while work waits; one lease request at a time per shape keeps
  // the head's load per burst small.
  if (!shape.queue.empty() && shape.lease_requests == 0) RequestLease(shape);
}

void Runtime::RequestLease(Shape& shape) {
  ++shape.lease_requests;
  shape.lease_requested_at = NowMs();
  protocol::RequestLeaseRequest req;
  req.job_id = config_.job_id;
  req.resources = shape.resources;
  ApplyPlacement(shape.placement, &req);
  SetWorkerProgram(&req);
  Shape* s = &shape;
  CallHead<protocol::RequestLeaseReply>(req, [this, s](Result<protocol::RequestLeaseReply> r) {
    --s->lease_requests;
    if (!r.ok()) {
      // Infeasible, or the worker could not start: every queued task fails.
      bool infeasible = r.status().message().rfind("infeasible", 0) == 0;
      while (!s->queue.empty()) {
        FailTask(s->queue.front(), infeasible ? "Infeasible" : "WorkerStartFailed",
                 r.status().message(), "");
        s->queue.pop_front();
      }
      return;
    }
    auto conn = Connect(r->worker_address, r->node_address, r->worker_pid, r->lease_id);
    conn->shape = s;
    s->workers.push_back(conn);
    Pump(*s);
  });
}

std::shared_ptr<Runtime::WorkerConn> Runtime::Connect(const std::string& address,
                                                      const std::string& node, int32_t pid,
                                                      const std::string& lease_id) {
  auto conn = std::make_shared<WorkerConn>();
  conn->lease_id = lease_id;
  conn->address = address;
  conn->node = node;
  conn->pid = pid;
  conn->idle_since = NowMs();
  conn->socket = zmq::socket_t(context_, zmq::socket_type::dealer);
  conn->socket.set(zmq::sockopt::linger, 0);
  conn->socket.set(zmq::sockopt::maxmsgsize, kMaxDataFrameBytes);
  conn->socket.set(zmq::sockopt::sndhwm, 0);
  conn->socket.set(zmq::sockopt::rcvhwm, 0);
  // A dead worker must not be dialled again and again.
  conn->socket.set(zmq::sockopt::reconnect_ivl, -1);
  // Disconnects (the worker died) come through a monitor socket.
  std::string monitor = "inproc://rayx-monitor-" + std::to_string(++next_monitor_);
  zmq_socket_monitor(conn->socket.handle(), monitor.c_str(), ZMQ_EVENT_DISCONNECTED);
  conn->monitor = zmq::socket_t(context_, zmq::socket_type::pair);
  conn->monitor.connect(monitor);
  conn->socket.connect(address);
  WorkerConn* raw = conn.get();
  conn->loop = std::make_unique<transport::ZmqSocketLoop>(
      io_, conn->socket, [this, raw](Frames& frames) { OnWorkerMessage(*raw, frames); });
  conn->monitor_loop = std::make_unique<transport::ZmqSocketLoop>(
      io_, conn->monitor, [this, raw](Frames&) { OnWorkerLost(*raw); });
  conn->loop->Start();
  conn->monitor_loop->Start();
  return conn;
}

void Runtime::Send(WorkerConn& conn, Task task) {
  uint64_t id = conn.next_id++;
  conn.in_flight.emplace(id, std::move(task));
  conn.unsent.push_back(id);
  if (!conn.flush_queued) {
    conn.flush_queued = true;
    flush_queue_.push_back(conn.shared_from_this());
  }
  // Sent once the I/O thread's current work is done, with whatever else
  // it queues meanwhile.
  if (!flush_posted_) {
    flush_posted_ = true;
    boost::asio::post(io_, [this] { FlushSends(); });
  }
}

void Runtime::FlushSends() {
  flush_posted_ = false;  // a posted flush that finds nothing queued is a no-op
  flushing_.swap(flush_queue_);
  for (auto& conn : flushing_) {
    conn->flush_queued = false;
    if (!conn->lost) SendQueued(*conn);
  }
  flushing_.clear();
}

void Runtime::SendQueued(WorkerConn& conn) {
  size_t next = 0;
  while (next < conn.unsent.size()) {
    size_t first = next;
    writer_.BeginRequest(&body_, config_.job_id);
    Frames frames(2);
    for (; next < conn.unsent.size() && writer_.count() < kMaxCallsPerMessage &&
           body_.size() < kMaxMessageBodyBytes;
         ++next) {
      const Task& task = conn.in_flight.at(conn.unsent[next]);
      writer_.Call(conn.unsent[next], task.actor_creation, task.function, task.actor_id,
                   task.object_id, static_cast<uint32_t>(task.resolved.size()));
      for (uint32_t i = 0; i < task.resolved.size(); ++i) {
        auto stored = task.stored.find(i);
        if (stored != task.stored.end()) {
          writer_.StoredArg(stored->second);
        } else if (task.resolved[i].size() >= protocol::kMaxInlineWireValue) {
          writer_.FrameArg(static_cast<uint32_t>(frames.size() - 2));
          frames.push_back(transport::MakeFrame(task.resolved[i]));
        } else {
          writer_.InlineArg(task.resolved[i]);
        }
      }
    }
    writer_.Finish();
    protocol::Envelope env;
    env.t = static_cast<uint16_t>(MessageType::kPushTasksRequest);
    env.id = conn.unsent[first];
    frames[0] = transport::MakeFrame(protocol::Encode(env));
    frames[1] = zmq::message_t(body_.data(), body_.size());
    if (!conn.loop->Send(frames)) {
      // The worker is gone (its socket has no peer left): OnWorkerLost gives
      // the unsent tasks to other workers and fails the actor's calls.
      conn.unsent.erase(conn.unsent.begin(), conn.unsent.begin() + static_cast<ptrdiff_t>(first));
      OnWorkerLost(conn);
      return;
    }
    for (size_t i = first; i < next; ++i) {
      Task& task = conn.in_flight.at(conn.unsent[i]);
      // Sent: the copies in the frames went with them.
      task.args.clear();
      task.resolved.clear();
      task.stored.clear();
    }
  }
  conn.unsent.clear();
}

void Runtime::OnWorkerMessage(WorkerConn& conn, Frames& frames) {
  if (frames.size() < 2) return;
  auto env = protocol::Decode<protocol::Envelope>(FrameView(frames[0]));
  if (!env.ok()) return;
  if (env->t == static_cast<uint16_t>(MessageType::kErrorReply)) {
    auto error = protocol::Decode<protocol::ErrorReply>(FrameView(frames[1]));
    OnWorkerRefused(conn, error.ok() ? error->ToStatus().message() : error.status().message());
    return;
  }
  if (env->t != static_cast<uint16_t>(MessageType::kPushTasksReply)) return;
  payload_views_.clear();
  for (size_t i = 2; i < frames.size(); ++i) payload_views_.push_back(FrameView(frames[i]));
  Status parsed = protocol::ParsePushTasksReply(FrameView(frames[1]), payload_views_, &results_);
  if (!parsed.ok()) {
    OnWorkerRefused(conn, parsed.message());
    return;
  }
  for (const protocol::TaskResultView& result : results_) {
    auto it = conn.in_flight.find(result.call_id);
    if (it == conn.in_flight.end()) continue;
    Task task = std::move(it->second);
    conn.in_flight.erase(it);
    Completion done;
    done.id = std::move(task.object_id);
    switch (result.value.kind) {
      case protocol::WireValue::kError:
        done.error = std::make_shared<ErrorInfo>(
            ErrorInfo{std::string(result.error_type), std::string(result.error_message),
                      task.display.empty() ? task.function : task.display,
                      std::string(result.error_node)});
        if (task.actor_creation && conn.actor) {
          // Calls already sent fail on the worker with this reason too; the lease goes back.
          conn.actor->dead_reason =
              "the actor's constructor failed: " + std::string(result.error_message);
          protocol::ReturnLeaseRequest ret;
          ret.lease_id = conn.lease_id;
          CallHead<protocol::ReturnLeaseReply>(ret, [](Result<protocol::ReturnLeaseReply>) {});
        }
        break;
      case protocol::WireValue::kStored:
        done.location = std::make_shared<const protocol::ObjectLocation>(result.value.stored);
        break;
      default:
        done.value = std::make_shared<const std::string>(result.value.bytes);
        break;
    }
    completions_.push_back(std::move(done));
  }
  if (conn.in_flight.empty()) conn.idle_since = NowMs();
  CompleteAll(completions_);
  if (conn.shape) {
    Pump(*conn.shape);
  } else if (conn.actor && conn.actor->conn.get() == &conn) {
    PumpActor(*conn.actor);
  }
}

void Runtime::OnWorkerRefused(WorkerConn& conn, const std::string& why) {
  // Nothing more will work on this connection (e.g. the worker runs another
  // rayx version): its calls fail with the reason, and it is dropped.
  std::string message = "the worker at " + conn.address + " refused the call: " + why;
  for (auto& [id, task] : conn.in_flight) FailTask(task, "ProtocolError", message, conn.node);
  conn.in_flight.clear();
  conn.unsent.clear();
  OnWorkerLost(conn);
}

void Runtime::OnWorkerLost(WorkerConn& conn) {
  if (conn.lost) return;
  conn.lost = true;
  if (conn.shape) {
    // Never sent: another worker runs them, in their order.
    for (auto it = conn.unsent.rbegin(); it != conn.unsent.rend(); ++it) {
      auto task = conn.in_flight.find(*it);
      if (task == conn.in_flight.end()) continue;
      conn.shape->queue.push_front(std::move(task->second));
      conn.in_flight.erase(task);
    }
  }
  conn.unsent.clear();
  std::string who = "the worker process (pid " + std::to_string(conn.pid) + ") on node " +
                    conn.node;
  for (auto& [id, task] : conn.in_flight) {
    FailTask(task, conn.actor ? "ActorDied" : "WorkerCrashed",
             who + " died while running this call (it crashed or was killed; its log is in "
                   "that node's session logs)",
             conn.node);
  }
  conn.in_flight.clear();
  // Give the lease back so its resources are freed: only its holder may (a
  // caller with a passed or looked-up actor handle does not own the actor).
  if (!conn.actor || conn.actor->owner) {
    protocol::ReturnLeaseRequest req;
    req.lease_id = conn.lease_id;
    CallHead<protocol::ReturnLeaseReply>(req, [](Result<protocol::ReturnLeaseReply>) {});
  }
  if (conn.actor) {
    ActorState* actor = conn.actor;
    if (actor->dead_reason.empty()) actor->dead_reason = who + " died";
    while (!actor->queue.empty()) {
      FailTask(actor->queue.front(), "ActorDied", actor->dead_reason, conn.node);
      actor->queue.pop_front();
    }
    // Close the socket later: we are inside its monitor's handler.
    auto keep = actor->conn;
    boost::asio::post(io_, [keep] {});
    actor->conn.reset();
    return;
  }
  if (Shape* shape = conn.shape) {
    boost::asio::post(io_, [this, shape, raw = &conn] {
      std::erase_if(shape->workers, [raw](const auto& w) { return w.get() == raw; });
      Pump(*shape);
    });
  }
}

void Runtime::FailTask(const Task& task, const std::string& type, const std::string& message,
                       const std::string& node) {
  Complete(task.object_id, nullptr,
           std::make_shared<ErrorInfo>(ErrorInfo{
               type, message, task.display.empty() ? task.function : task.display, node}));
}

void Runtime::Tick() {
  int64_t now = NowMs();
  if (store_writer_) store_writer_->Trim(now);
  for (auto& [key, shape] : shapes_) {
    std::vector<std::shared_ptr<WorkerConn>> keep;
    for (auto& w : shape->workers) {
      if (!w->lost && w->in_flight.empty() && shape->queue.empty() &&
          now - w->idle_since > kIdleLeaseMs) {
        protocol::ReturnLeaseRequest req;
        req.lease_id = w->lease_id;
        CallHead<protocol::ReturnLeaseReply>(req, [](Result<protocol::ReturnLeaseReply>) {});
        continue;
      }
      keep.push_back(w);
    }
    shape->workers.swap(keep);
    if (!shape->queue.empty()) Pump(*shape);  // saturation may allow deeper queues now
  }
  tick_timer_.expires_after(std::chrono::milliseconds(kTickMs));
  tick_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) Tick();
  });
}

// ---- Actors --------------------------------------------------------------------

ActorPtr Runtime::CreateActor(const std::string& factory, std::vector<Arg> args,
                              const ActorOptions& options) {
  if (!options.name.empty()) {
    protocol::GetActorRequest lookup;
    lookup.name = options.name;
    if (CallHeadSync<protocol::GetActorReply>(lookup, 10000).ok()) {
      throw std::invalid_argument("an actor named '" + options.name +
                                  "' already exists: choose another name, or GetActor it");
    }
  }
  auto core = std::make_shared<ActorCore>();
  core->actor_id = RandomHex(16);
  core->name = options.name;
  ObjectHandle creation = NewPendingObject();
  const std::string& creation_id = creation->id;
  Task task;
  task.function = factory;
  task.display = factory;
  task.args = std::move(args);
  task.object_id = creation_id;
  task.actor_creation = true;
  task.actor_id = core->actor_id;
  PostOrdered([this, core, options, creation, task = std::move(task)]() mutable {
    auto state = std::make_unique<ActorState>();
    state->actor_id = core->actor_id;
    state->name = options.name;
    state->class_name = task.function;
    state->owner = true;
    state->detached = options.detached;
    state->queue.push_back(std::move(task));
    ActorState* actor = state.get();
    actors_[core->actor_id] = std::move(state);
    protocol::RequestLeaseRequest req;
    req.job_id = config_.job_id;
    req.resources = options.resources;
    ApplyPlacement(options.placement, &req);
    req.for_actor = true;
    req.detached = options.detached;
    SetWorkerProgram(&req);
    CallHead<protocol::RequestLeaseReply>(req, [this, actor, creation](
                                                   Result<protocol::RequestLeaseReply> r) {
      if (!r.ok()) {
        actor->dead_reason = "the actor could not be placed: " + r.status().message();
        while (!actor->queue.empty()) {
          FailTask(actor->queue.front(), "ActorDied", actor->dead_reason, "");
          actor->queue.pop_front();
        }
        return;
      }
      actor->lease_id = r->lease_id;
      actor->conn = Connect(r->worker_address, r->node_address, r->worker_pid, r->lease_id);
      actor->conn->actor = actor;
      PumpActor(*actor);
      if (!actor->name.empty()) {
        // Registered once the constructor has run, so a name always means a live actor.
        std::lock_guard<std::mutex> lock(mu_);
        objects_[creation->id].waiters.push_back([this, actor, creation] {
          boost::asio::post(io_, [this, actor, creation] {
            if (!actor->dead_reason.empty()) return;
            protocol::RegisterActorRequest reg;
            reg.actor.actor_id = actor->actor_id;
            reg.actor.name = actor->name;
            reg.actor.job_id = config_.job_id;
            reg.actor.class_name = actor->class_name;
            reg.actor.worker_address = actor->conn ? actor->conn->address : "";
            reg.actor.lease_id = actor->lease_id;
            reg.actor.detached = actor->detached;
            CallHead<protocol::RegisterActorReply>(reg, [actor](Result<protocol::RegisterActorReply> rr) {
              if (!rr.ok()) RAYX_LOG(Warning) << "actor '" << actor->name << "': " << rr.status();
            });
          });
        });
      }
    });
  });
  return core;
}

ObjectHandle Runtime::SubmitActorTask(const ActorPtr& actor, const std::string& method,
                                      std::vector<Arg> args) {
  if (!actor) throw std::invalid_argument("call on an empty ActorHandle");
  Submission submission;
  submission.kind = Submission::Kind::kActorCall;
  submission.task.function = method;
  submission.task.args = std::move(args);
  submission.task.actor_id = actor->actor_id;
  return Submit(std::move(submission));
}

void Runtime::SubmitToActor(Task task) {
  auto it = actors_.find(task.actor_id);
  if (it == actors_.end()) {
    FailTask(task, "ActorDied", "unknown actor " + task.actor_id, "");
    return;
  }
  ActorState& state = *it->second;
  if (!state.dead_reason.empty()) {
    FailTask(task, "ActorDied", state.dead_reason, "");
    return;
  }
  state.queue.push_back(std::move(task));
  PumpActor(state);
}

void Runtime::PumpActor(ActorState& actor) {
  // Re-entered from a continuation that ran inside the loop below: that loop goes on.
  if (actor.pumping) return;
  actor.pumping = true;
  // Strictly in order: the front call goes once its arguments are resolved. At
  // most kMaxInFlight calls are on their way; replies let more go.
  while (actor.conn && !actor.resolving && !actor.queue.empty() &&
         actor.conn->in_flight.size() < kMaxInFlight) {
    Task task = std::move(actor.queue.front());
    actor.queue.pop_front();
    bool has_refs = false;
    for (auto& a : task.args) has_refs = has_refs || a.ref;
    if (!has_refs) {
      task.resolved.resize(task.args.size());
      for (size_t i = 0; i < task.args.size(); ++i) task.resolved[i] = std::move(task.args[i].bytes);
      task.args.clear();
      Send(*actor.conn, std::move(task));
      continue;
    }
    actor.resolving = true;
    ActorState* a = &actor;
    ResolveThen(task, [this, a](Task ready) {
      a->resolving = false;
      if (a->conn) {
        Send(*a->conn, std::move(ready));
      } else {
        FailTask(ready, "ActorDied", a->dead_reason, "");
      }
      PumpActor(*a);
    });
  }
  actor.pumping = false;
}

void Runtime::KillActor(const ActorPtr& actor) {
  if (!actor) return;
  std::string actor_id = actor->actor_id;
  PostOrdered([this, actor_id] {
    auto it = actors_.find(actor_id);
    if (it == actors_.end()) return;
    ActorState& state = *it->second;
    state.dead_reason = "the actor was killed (ActorHandle::Kill)";
    protocol::ReturnLeaseRequest req;
    req.lease_id = state.lease_id;
    CallHead<protocol::ReturnLeaseReply>(req, [](Result<protocol::ReturnLeaseReply>) {});
  });
}

ActorPtr Runtime::GetNamedActor(const std::string& name) {
  protocol::GetActorRequest req;
  req.name = name;
  auto reply = CallHeadSync<protocol::GetActorReply>(req, 10000);
  if (!reply.ok()) throw std::runtime_error(reply.status().message());
  return DeserializeActor(protocol::Encode(reply->actor));
}

std::string Runtime::SerializeActor(const ActorPtr& actor) {
  auto reply = std::make_shared<std::promise<protocol::ActorInfo>>();
  auto future = reply->get_future();
  PostOrdered([this, actor, reply] {
    protocol::ActorInfo info;
    info.actor_id = actor->actor_id;
    auto it = actors_.find(actor->actor_id);
    if (it != actors_.end()) {
      info.name = it->second->name;
      info.class_name = it->second->class_name;
      info.lease_id = it->second->lease_id;
      info.worker_address = it->second->conn ? it->second->conn->address : "";
    }
    reply->set_value(info);
  });
  protocol::ActorInfo info = future.get();
  if (info.worker_address.empty()) {
    throw std::runtime_error("the actor is not running yet or has died; wait for a call to "
                             "return before passing its handle");
  }
  return protocol::Encode(info);
}

ActorPtr Runtime::DeserializeActor(const std::string& bytes) {
  auto info = protocol::Decode<protocol::ActorInfo>(bytes);
  if (!info.ok()) throw std::runtime_error("malformed actor handle: " + info.status().message());
  auto core = std::make_shared<ActorCore>();
  core->actor_id = info->actor_id;
  core->name = info->name;
  auto promise = std::make_shared<std::promise<void>>();
  auto done = promise->get_future();
  PostOrdered([this, info = *info, promise] {
    if (!actors_.count(info.actor_id)) {
      auto state = std::make_unique<ActorState>();
      state->actor_id = info.actor_id;
      state->name = info.name;
      state->class_name = info.class_name;
      state->lease_id = info.lease_id;
      state->conn = Connect(info.worker_address, "", 0, info.lease_id);
      state->conn->actor = state.get();
      actors_[info.actor_id] = std::move(state);
    }
    promise->set_value();
  });
  done.wait();
  return core;
}

// ---- Placement groups ------------------------------------------------------------

namespace {
PlacementGroupState StateOf(const protocol::PlacementGroupInfo& info) {
  return PlacementGroupState{info.placement_group_id, info.state, info.reason};
}
}  // namespace

PlacementGroupPtr Runtime::CreatePlacementGroup(const std::string& name,
                                                const std::vector<ResourceMap>& bundles,
                                                const std::string& strategy) {
  auto core = std::make_shared<PlacementGroupCore>();
  core->id = RandomHex(12);
  protocol::CreatePlacementGroupRequest req;
  req.job_id = config_.job_id;
  req.name = name;
  req.strategy = strategy;
  req.bundles = bundles;
  req.placement_group_id = core->id;
  PostOrdered([this, req = std::move(req), core] {
    CallHead<protocol::CreatePlacementGroupReply>(
        req, [core](Result<protocol::CreatePlacementGroupReply> r) {
          std::lock_guard<std::mutex> lock(core->mu);
          core->answered = true;
          if (r.ok()) {
            core->state = StateOf(r->group);
          } else {
            core->error = r.status();
          }
          core->cv.notify_all();
        });
  });
  return core;
}

PlacementGroupState Runtime::WaitPlacementGroup(const PlacementGroupPtr& group,
                                                int64_t timeout_ms) {
  PlacementGroupState created;
  {
    std::unique_lock<std::mutex> lock(group->mu);
    if (!group->cv.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0) + 10000),
                            [&] { return group->answered; })) {
      throw std::runtime_error("PlacementGroup::Wait: the head did not answer the creation");
    }
    if (!group->error.ok()) {
      if (group->error.code() == StatusCode::kInvalidArgument) {
        throw std::invalid_argument("CreatePlacementGroup: " + group->error.message());
      }
      throw std::runtime_error("CreatePlacementGroup: " + group->error.message());
    }
    created = group->state;
  }
  if (created.state != "PENDING") return created;
  protocol::WaitPlacementGroupRequest req;
  req.placement_group_id = group->id;
  req.timeout_ms = std::max<int64_t>(timeout_ms, 0);
  // The head answers by the deadline (its tick); the slack covers the trip.
  auto reply = CallHeadSync<protocol::WaitPlacementGroupReply>(req, req.timeout_ms + 10000);
  if (!reply.ok()) {
    if (reply.status().code() == StatusCode::kNotFound) {
      return PlacementGroupState{group->id, "REMOVED", reply.status().message()};
    }
    throw std::runtime_error("PlacementGroup::Wait: " + reply.status().message());
  }
  return StateOf(reply->group);
}

void Runtime::RemovePlacementGroup(const std::string& id) {
  protocol::RemovePlacementGroupRequest req;
  req.placement_group_id = id;
  // Ordered with earlier calls on the I/O thread; the reply is not awaited.
  PostOrdered([this, req] {
    CallHead<protocol::RemovePlacementGroupReply>(
        req, [id = req.placement_group_id](Result<protocol::RemovePlacementGroupReply> r) {
          if (!r.ok()) RAYX_LOG(Warning) << "removing placement group " << id << ": " << r.status();
        });
  });
}

}  // namespace rayx::detail
