// The client runtime every driver and worker embeds: it owns this process's
// objects, leases workers from the head and sends them tasks directly.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <zmq.hpp>

#include "common/address.h"
#include "object_store/store_writer.h"
#include "protocol/messages.h"
#include "protocol/push_tasks.h"
#include "rayx/detail/runtime_api.h"
#include "rayx/errors.h"
#include "transport/zmq_socket_loop.h"

namespace rayx::detail {

struct ErrorInfo {
  std::string type, message, function, node;
};

// An object this process owns. The value lives in this process's memory (the
// owner); it is freed when the last ObjectRef to it is gone.
struct ObjectCore {
  std::string id;
  ~ObjectCore();
};

struct ActorCore {
  std::string actor_id;
  std::string name;
  ~ActorCore() = default;
};

// Design: user threads and one I/O thread. User threads create object entries
// and queue their calls (`submissions_`, under `mu_`): the first call of a
// burst posts one drain to the I/O thread, which takes the whole queue. The
// I/O thread owns every socket (the head, one DEALER per leased worker) and
// completes objects, waking Get() through a condition variable that is
// notified only while someone waits. The object table and the submission
// queue are the only state both touch, under `mu_`. Tasks of one resource
// shape share a pool of leased workers, each with up to kMaxInFlight tasks
// pipelined; a worker idle for kIdleLeaseMs is given back. Calls to one worker
// are batched: queued on its connection and sent, many per message, once the
// I/O thread's current work is done. An actor is one leased worker; its calls
// go over one socket, so they run in submission order.
class Runtime {
 public:
  struct Config {
    HostPort head;
    std::string token;
    std::string job_id;   // empty: a new job (a driver); set: a worker of that job
    bool is_worker = false;
    std::string node_ip = "127.0.0.1";
  };

  // Connects, registers the job and starts the I/O thread.
  static Result<std::unique_ptr<Runtime>> Start(const Config& config);
  ~Runtime();

  // Ends the job (drivers) and stops the I/O thread.
  void Stop();

  ObjectHandle SubmitTask(const std::string& function, std::vector<Arg> args,
                          const CallOptions& options);
  ActorPtr CreateActor(const std::string& factory, std::vector<Arg> args,
                       const ActorOptions& options);
  ObjectHandle SubmitActorTask(const ActorPtr& actor, const std::string& method,
                               std::vector<Arg> args);
  void KillActor(const ActorPtr& actor);
  ActorPtr GetNamedActor(const std::string& name);
  std::string SerializeActor(const ActorPtr& actor);
  ActorPtr DeserializeActor(const std::string& bytes);

  // Placement groups (through the head).
  PlacementGroupPtr CreatePlacementGroup(const std::string& name,
                                         const std::vector<ResourceMap>& bundles,
                                         const std::string& strategy);
  PlacementGroupState WaitPlacementGroup(const PlacementGroupPtr& group, int64_t timeout_ms);
  void RemovePlacementGroup(const std::string& id);

  ObjectHandle Put(std::string bytes);
  ObjectHandle PutEncoded(size_t size, const std::function<void(char*)>& fill);
  ObjectBytes Get(const ObjectHandle& object, int64_t timeout_ms);
  std::vector<bool> Wait(const std::vector<ObjectHandle>& objects, size_t num_returns,
                         int64_t timeout_ms);
  void Release(const std::string& object_id);

  const std::string& job_id() const { return config_.job_id; }
  // Objects currently held (for tests of reference counting).
  size_t ObjectCount();

 private:
  struct Entry {
    enum class State { kPending, kReady, kFailed } state = State::kPending;
    std::shared_ptr<const std::string> value;            // inline, or pulled here
    std::shared_ptr<const protocol::ObjectLocation> location;  // in a node's store
    std::shared_ptr<const void> mapped;                  // the store file, mapped
    std::shared_ptr<StoreWriter::Buffer> written;        // this process's Put, in the store
    bool shared_out = false;  // `location` was handed to another process (a task argument)
    std::shared_ptr<ErrorInfo> error;
    std::vector<std::function<void()>> waiters;  // run on the I/O thread when done
  };
  struct Task {
    std::string function;
    std::string display;  // the name in errors; empty: `function`
    std::vector<Arg> args;
    std::vector<std::string> resolved;  // args' bytes, once resolved
    std::map<uint32_t, protocol::ObjectLocation> stored;  // args left in a store
    std::string object_id;
    bool actor_creation = false;
    std::string actor_id;
  };
  // Work a user thread hands to the I/O thread; run in submission order.
  struct Submission {
    enum class Kind : uint8_t { kTask, kActorCall, kClosure };
    Kind kind = Kind::kTask;
    Task task;
    std::optional<ResourceMap> resources;  // kTask; none: the default {CPU: 1}
    Placement placement;                   // kTask
    std::function<void()> closure;         // kClosure
  };
  // A result to record in the object table.
  struct Completion {
    std::string id;
    std::shared_ptr<const std::string> value;
    std::shared_ptr<ErrorInfo> error;
    std::shared_ptr<const protocol::ObjectLocation> location;
  };
  struct WorkerConn;
  struct Shape;
  struct ActorState;

  explicit Runtime(Config config);
  Status Connect();
  std::string NewObjectId();
  ObjectHandle NewEntry(std::string id);
  ObjectHandle PutInMemory(std::string bytes);
  ObjectHandle PutStored(std::string id, std::shared_ptr<StoreWriter::Buffer> buffer);
  // A handle to a new entry awaiting its result.
  ObjectHandle NewPendingObject();
  // Creates the result's pending entry, queues `submission` for the I/O
  // thread and returns the result's handle.
  ObjectHandle Submit(Submission submission);
  // Runs `fn` on the I/O thread, ordered with the calls submitted before it.
  void PostOrdered(std::function<void()> fn);
  void Complete(const std::string& id, std::shared_ptr<const std::string> value,
                std::shared_ptr<ErrorInfo> error,
                std::shared_ptr<const protocol::ObjectLocation> location = nullptr);
  // Records every completion of `batch` under one lock, wakes waiting Gets
  // once, then runs the entries' continuations. Clears `batch`.
  void CompleteAll(std::vector<Completion>& batch);
  void DeleteStored(const protocol::ObjectLocation& location);

  // I/O thread.
  template <typename Reply, typename Request>
  void CallHead(const Request& request, std::function<void(Result<Reply>)> done);
  template <typename Reply, typename Request>
  Result<Reply> CallHeadSync(const Request& request, int64_t timeout_ms);
  void OnHeadMessage(transport::Frames& frames);
  void DrainSubmissions();
  Shape* ShapeFor(const std::optional<ResourceMap>& resources, const Placement& placement);
  void SubmitToActor(Task task);
  void ResolveThen(Task& task, std::function<void(Task)> ready);
  void Pump(Shape& shape);
  void RequestLease(Shape& shape);
  std::shared_ptr<WorkerConn> Connect(const std::string& address, const std::string& node,
                                      int32_t pid, const std::string& lease_id);
  // Queues `task` on `conn`; it is sent with the connection's next batch.
  void Send(WorkerConn& conn, Task task);
  void FlushSends();
  void SendQueued(WorkerConn& conn);
  void OnWorkerMessage(WorkerConn& conn, transport::Frames& frames);
  void OnWorkerRefused(WorkerConn& conn, const std::string& why);
  void OnWorkerLost(WorkerConn& conn);
  void FailTask(const Task& task, const std::string& type, const std::string& message,
                const std::string& node);
  void PumpActor(ActorState& actor);
  void Tick();
  void Heartbeat();

  Config config_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, Entry> objects_;         // under mu_
  size_t waiting_ = 0;                  // threads in Get/Wait, under mu_
  std::vector<Submission> submissions_;  // under mu_
  bool drain_posted_ = false;           // under mu_
  std::string id_prefix_;
  std::atomic<uint64_t> next_object_{0};

  // Declared first, destroyed last: every socket, including those held by
  // handlers still queued in io_ (destroyed with io_), must close before the
  // context does, or closing the context blocks forever.
  zmq::context_t context_{1};
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
  zmq::socket_t head_;
  std::unique_ptr<transport::ZmqSocketLoop> head_loop_;
  std::unordered_map<uint64_t, std::function<void(Result<std::pair<uint16_t, std::string>>)>>
      head_calls_;
  uint64_t next_request_ = 1;
  boost::asio::steady_timer tick_timer_;
  boost::asio::steady_timer heartbeat_timer_;
  int64_t heartbeat_period_ms_ = 1000;
  uint64_t next_monitor_ = 0;

  std::unordered_map<std::string, std::unique_ptr<Shape>> shapes_;
  Shape* default_shape_ = nullptr;  // {CPU: 1}, the shape of tasks without resources
  // Batching, reused from burst to burst (I/O thread).
  std::vector<Submission> draining_;
  std::vector<std::shared_ptr<WorkerConn>> flush_queue_, flushing_;
  bool flush_posted_ = false;
  protocol::PushTasksWriter writer_;
  std::string body_;
  std::vector<std::string_view> payload_views_;
  std::vector<protocol::TaskResultView> results_;
  std::vector<Completion> completions_;
  std::unordered_map<std::string, std::unique_ptr<ActorState>> actors_;
  std::atomic<bool> stopped_{false};
  // This node's object store (from the head's node table), for large Puts.
  std::string local_store_dir_;
  std::string local_object_address_;
  std::unique_ptr<StoreWriter> store_writer_;  // set when there is a local store
  // One socket per object server, for deletes (no replies).
  std::unordered_map<std::string, std::unique_ptr<zmq::socket_t>> delete_sockets_;
};

// The process's runtime, or nullptr before Init / after Shutdown.
Runtime* CurrentRuntime();
// The runtime, starting it in a worker process on first use. Throws
// std::runtime_error with advice when rayx::Init was not called.
Runtime& RequireRuntime();

// The answer to a placement group's creation, filled in by the I/O thread.
struct PlacementGroupCore {
  std::string id;
  std::mutex mu;
  std::condition_variable cv;
  bool answered = false;
  Status error;
  PlacementGroupState state;
};

}  // namespace rayx::detail
