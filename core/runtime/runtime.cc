// The client runtime: objects, leases, direct task calls.
#include "runtime/runtime.h"

#include <unistd.h>

#include <boost/asio/post.hpp>
#include <chrono>
#include <future>

#include "common/logging.h"
#include "rayx/ids.h"
#include "rayx/version.h"
#include "object_store/object_pull.h"
#include "object_store/shared_memory_store.h"
#include "transport/message.h"

namespace rayx::detail {

using protocol::MessageType;
using transport::FrameView;
using transport::Frames;

namespace {
constexpr size_t kMaxInFlight = 256;      // tasks pipelined to one task worker
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

std::string ShapeKey(const ResourceMap& resources) {
  std::string key;
  for (const auto& [name, amount] : resources) key += name + "=" + FormatAmount(amount) + ";";
  return key;
}
}  // namespace

// One leased worker (or an actor's worker) and the calls in flight to it.
struct Runtime::WorkerConn {
  std::string lease_id;
  std::string address;
  std::string node;
  int32_t pid = 0;
  zmq::socket_t socket;
  zmq::socket_t monitor;
  std::unique_ptr<transport::ZmqSocketLoop> loop;
  std::unique_ptr<transport::ZmqSocketLoop> monitor_loop;
  std::unordered_map<uint64_t, Task> in_flight;
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
    delete_sockets_.clear();
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
  std::lock_guard<std::mutex> lock(mu_);
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(++next_object_));
  return id_prefix_ + buf;
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

ObjectHandle Runtime::Put(std::string bytes) {
  std::string id = NewObjectId();
  std::shared_ptr<const protocol::ObjectLocation> location;
  if (bytes.size() >= kInlineObjectLimit && !local_store_dir_.empty()) {
    auto path = SharedMemoryStore(local_store_dir_).Write(config_.job_id + "-" + id, bytes);
    if (path.ok()) {
      auto loc = std::make_shared<protocol::ObjectLocation>();
      loc->node_address = config_.node_ip;
      loc->path = *path;
      loc->size = bytes.size();
      location = loc;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& entry = objects_[id];
    entry.state = Entry::State::kReady;
    if (location) {
      entry.location = location;
    } else {
      entry.value = std::make_shared<const std::string>(std::move(bytes));
    }
  }
  return NewEntry(id);
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
    objects_.erase(it);
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
  std::vector<std::function<void()>> waiters;
  bool released = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.find(id);
    if (it == objects_.end()) return;
    Entry& entry = it->second;
    entry.state = error ? Entry::State::kFailed : Entry::State::kReady;
    entry.value = std::move(value);
    entry.error = std::move(error);
    entry.location = location;
    waiters.swap(entry.waiters);
    for (auto& w : waiters) released = released || !w;
    if (released) objects_.erase(it);
    cv_.notify_all();
  }
  if (released && location) DeleteStored(*location);  // nobody wants it any more
  for (auto& w : waiters) {
    if (w) w();
  }
}

ObjectBytes Runtime::Get(const ObjectHandle& object, int64_t timeout_ms) {
  if (!object) throw std::invalid_argument("Get on an empty ObjectRef");
  std::unique_lock<std::mutex> lock(mu_);
  auto done = [&] {
    auto it = objects_.find(object->id);
    return it == objects_.end() || it->second.state != Entry::State::kPending;
  };
  if (timeout_ms < 0) {
    cv_.wait(lock, done);
  } else if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), done)) {
    throw GetTimeoutError("object " + object->id + " was not ready within " +
                          std::to_string(timeout_ms) + " ms");
  }
  auto it = objects_.find(object->id);
  if (it == objects_.end()) throw std::runtime_error("object " + object->id + " was freed");
  Entry& entry = it->second;
  if (entry.state == Entry::State::kFailed) {
    const ErrorInfo& e = *entry.error;
    throw TaskError(e.type, e.message, e.function, e.node);
  }
  if (entry.value) return {*entry.value, entry.value};
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
  if (timeout_ms < 0) {
    cv_.wait(lock, count);
  } else {
    cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), count);
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
  ObjectHandle handle = NewPendingObject();
  const std::string& id = handle->id;
  ResourceMap resources = options.resources_set ? options.resources : ResourceMap{{kCpu, 1}};
  Task task;
  task.function = function;
  task.display = options.name.empty() ? function : options.name;
  task.args = std::move(args);
  task.object_id = id;
  boost::asio::post(io_, [this, resources, task = std::move(task)]() mutable {
    std::string key = ShapeKey(resources);
    ResolveThen(task, [this, key, resources](Task ready) {
      Enqueue(key, resources, std::move(ready));
    });
  });
  return handle;
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

void Runtime::Enqueue(const std::string& shape_key, const ResourceMap& resources, Task task) {
  auto& shape = shapes_[shape_key];
  if (!shape) {
    shape = std::make_unique<Shape>();
    shape->resources = resources;
  }
  shape->queue.push_back(std::move(task));
  Pump(*shape);
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
    Send(*best, task);
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

bool Runtime::Send(WorkerConn& conn, Task& task) {
  protocol::PushTaskRequest req;
  req.function = task.function;
  req.actor_id = task.actor_id;
  req.actor_creation = task.actor_creation;
  req.num_args = static_cast<uint32_t>(task.resolved.size());
  req.return_id = task.object_id;
  req.job_id = config_.job_id;
  req.stored_args = task.stored;
  uint64_t id = conn.next_id++;
  Frames frames = transport::MakeMessage(req, id);
  for (auto& bytes : task.resolved) frames.push_back(transport::MakeFrame(bytes));
  if (!conn.loop->Send(frames)) {
    // The worker is gone (its socket has no peer left).
    if (conn.actor) {
      FailTask(task, "ActorDied",
               "the actor's worker at " + conn.address + " is unreachable: it died", conn.node);
    } else if (conn.shape) {
      conn.shape->queue.push_front(std::move(task));  // another worker will run it
    } else {
      FailTask(task, "WorkerUnreachable", "could not send the call to " + conn.address,
               conn.node);
    }
    OnWorkerLost(conn);
    return false;
  }
  task.resolved.clear();  // sent: the copies in the frames are gone with them
  task.stored.clear();
  conn.in_flight.emplace(id, std::move(task));
  return true;
}

void Runtime::OnWorkerMessage(WorkerConn& conn, Frames& frames) {
  if (frames.size() < 2) return;
  auto env = protocol::Decode<protocol::Envelope>(FrameView(frames[0]));
  if (!env.ok()) return;
  auto it = conn.in_flight.find(env->id);
  if (it == conn.in_flight.end()) return;
  Task task = std::move(it->second);
  conn.in_flight.erase(it);
  if (conn.in_flight.empty()) conn.idle_since = NowMs();
  auto reply = protocol::Decode<protocol::PushTaskReply>(FrameView(frames[1]));
  if (!reply.ok()) {
    FailTask(task, "ProtocolError", reply.status().message(), conn.node);
  } else if (!reply->ok) {
    FailTask(task, reply->error_type, reply->error_message, reply->node_address);
    if (task.actor_creation && conn.actor) {
      // Calls already sent fail on the worker with this reason too; the lease goes back.
      conn.actor->dead_reason = "the actor's constructor failed: " + reply->error_message;
      protocol::ReturnLeaseRequest ret;
      ret.lease_id = conn.lease_id;
      CallHead<protocol::ReturnLeaseReply>(ret, [](Result<protocol::ReturnLeaseReply>) {});
    }
  } else if (!reply->stored.path.empty()) {
    Complete(task.object_id, nullptr, nullptr,
             std::make_shared<const protocol::ObjectLocation>(reply->stored));
  } else {
    std::string value = frames.size() > 2 ? std::string(FrameView(frames[2])) : std::string();
    Complete(task.object_id, std::make_shared<const std::string>(std::move(value)), nullptr);
  }
  if (conn.shape) Pump(*conn.shape);
}

void Runtime::OnWorkerLost(WorkerConn& conn) {
  if (conn.lost) return;
  conn.lost = true;
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
           std::make_shared<ErrorInfo>(ErrorInfo{type, message, task.display, node}));
}

void Runtime::Tick() {
  int64_t now = NowMs();
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
  boost::asio::post(io_, [this, core, options, creation, task = std::move(task)]() mutable {
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
  ObjectHandle handle = NewPendingObject();
  const std::string& id = handle->id;
  Task task;
  task.function = method;
  task.display = method;
  task.args = std::move(args);
  task.object_id = id;
  task.actor_id = actor->actor_id;
  boost::asio::post(io_, [this, actor_id = actor->actor_id, task = std::move(task)]() mutable {
    auto it = actors_.find(actor_id);
    if (it == actors_.end()) {
      FailTask(task, "ActorDied", "unknown actor " + actor_id, "");
      return;
    }
    ActorState& state = *it->second;
    if (!state.dead_reason.empty()) {
      FailTask(task, "ActorDied", state.dead_reason, "");
      return;
    }
    state.queue.push_back(std::move(task));
    PumpActor(state);
  });
  return handle;
}

void Runtime::PumpActor(ActorState& actor) {
  // Strictly in order: the front call goes once its arguments are resolved.
  while (actor.conn && !actor.resolving && !actor.queue.empty()) {
    Task& front = actor.queue.front();
    bool has_refs = false;
    for (auto& a : front.args) has_refs = has_refs || a.ref;
    if (has_refs || front.resolved.size() != front.args.size()) {
      actor.resolving = true;
      Task task = std::move(front);
      actor.queue.pop_front();
      ActorState* a = &actor;
      ResolveThen(task, [this, a](Task ready) {
        a->resolving = false;
        if (a->conn) {
          Send(*a->conn, ready);
        } else {
          FailTask(ready, "ActorDied", a->dead_reason, "");
        }
        PumpActor(*a);
      });
      continue;
    }
    Task task = std::move(front);
    actor.queue.pop_front();
    Send(*actor.conn, task);
  }
}

void Runtime::KillActor(const ActorPtr& actor) {
  if (!actor) return;
  std::string actor_id = actor->actor_id;
  boost::asio::post(io_, [this, actor_id] {
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
  boost::asio::post(io_, [this, actor, reply] {
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
  boost::asio::post(io_, [this, info = *info, promise] {
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

}  // namespace rayx::detail
