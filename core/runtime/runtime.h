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

#include "common/address.h"
#include "common/clock.h"
#include "object_store/object_server_directory.h"
#include "object_store/shared_memory_store.h"
#include "object_store/store_ledger.h"
#include "object_store/store_writer.h"
#include "protocol/codec.h"
#include "protocol/messages.h"
#include "rayx/detail/runtime_api.h"
#include "rayx/errors.h"
#include "runtime/object_table.h"
#include "runtime/output_printer.h"
#include "runtime/task.h"
#include "transport/security.h"

namespace rayx::detail {

// The parts the runtime owns, defined in their own headers: this one stays free
// of ZeroMQ (the sockets belong to HeadClient, ZmqWorkerConnector and
// runtime.cc) and of the submitters' internals.
class ActorSubmitter;
class ArgumentResolver;
class BlockedCalls;
class HeadClient;
class TaskSubmitter;
class WorkerConnector;
class WorkerSendQueue;

struct ActorCore {
  ActorId actor_id;
  std::string name;
  std::string metadata;  // ActorOptions::metadata of a named actor
  ~ActorCore() = default;
};

// The runtime of one driver or worker process: a facade over its parts.
//
// Design: user threads and one I/O thread. User threads create object entries
// (ObjectTable) and queue their calls (`submissions_`, under `mu_`): the first
// call of a burst posts one drain to the I/O thread, which takes the whole
// queue and hands each call to its submitter. The I/O thread owns every socket
// and the parts that use them: the HeadClient (calls to the head,
// heartbeats), the TaskSubmitter (pools of leased workers per resource shape),
// the ActorSubmitter (one ordered connection per actor), the WorkerSendQueue
// (one flush per burst) and the WorkerConnections; replies complete objects
// in the ObjectTable, which wakes Get. The ObjectTable and the submission
// queue are the only state both kinds of thread touch.
//
// Thread safety: the public methods may be called from any user thread (not
// from the I/O thread); Stop once.
class Runtime {
 public:
  struct Config {
    HostPort head;
    // What this process proves at every connection: the cluster's (a driver
    // holding the token) or its job's (a worker). REQUIRES: not empty.
    transport::Credential credential;
    // The head's and object servers' public CURVE key (the cluster's).
    std::string cluster_key;
    JobId job_id;  // empty: a new job (a driver); set: a worker of that job
    bool is_worker = false;
    LeaseId host_lease_id;  // in a worker: the lease it runs in
    std::string node_ip = "127.0.0.1";
    // In a worker: its own agent's object server, whose store its large Puts
    // go to (several agents may share node_ip). Empty: the first node at
    // node_ip that has a store.
    std::string object_address;
    // A driver: print the job's workers' output (Options::log_to_driver).
    bool log_to_driver = false;
    // How long calls to the head wait while it is down or restarting before
    // they fail (drivers). Default: 60 s; $RAYX_HEAD_TIMEOUT_MS sets it.
    int64_t head_timeout_ms = 60000;
    // Where this process's tasks are counted; nullptr: WorkCounters::Process().
    WorkCounters* counters = nullptr;
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
  void ReleaseActor(const ActorPtr& actor);
  ActorPtr GetNamedActor(const std::string& name);
  std::string SerializeActor(const ActorPtr& actor);
  // False while the actor waits for a worker (ActorSubmitter::WaitingForWorker:
  // its creation or restart waits for resources); true otherwise, dead included.
  bool ActorPlaced(const ActorPtr& actor);
  ActorPtr DeserializeActor(const std::string& bytes);

  // Placement groups (through the head).
  PlacementGroupPtr CreatePlacementGroup(const std::string& name,
                                         const std::vector<ResourceMap>& bundles,
                                         PlacementStrategy strategy, bool detached = false);
  PlacementGroupStatus WaitPlacementGroup(const PlacementGroupPtr& group, int64_t timeout_ms);
  // An object that becomes `ready_value` once the group is placed (an
  // Infeasible or PlacementGroupRemoved error if it never will be).
  ObjectHandle PlacementGroupReady(const PlacementGroupPtr& group, std::string ready_value);
  void RemovePlacementGroup(const std::string& id);

  ObjectHandle Put(std::string bytes);
  ObjectHandle PutEncoded(size_t size, const std::function<void(char*)>& fill);
  // In a worker, a Get or Wait that has to block counts its call as blocked
  // (BlockedScope, BlockedCalls): the head lends the lease's CPU meanwhile.
  ObjectBytes Get(const ObjectHandle& object, int64_t timeout_ms);
  std::vector<bool> Wait(const std::vector<ObjectHandle>& objects, size_t num_returns,
                         int64_t timeout_ms);
  // The calls of this worker's lease that wait (nullptr in a driver, which
  // holds no lease).
  const std::shared_ptr<BlockedCalls>& blocked_calls() const { return blocked_calls_; }
  void Release(const ObjectId& object_id);

  const JobId& job_id() const { return config_.job_id; }
  const Config& config() const { return config_; }
  // How this process connects to the head, and to object servers (their
  // mechanism is the cluster's, learned at registration).
  transport::ClientSecurity HeadSecurity() const {
    return transport::ClientSecurity::Head(config_.credential, config_.cluster_key);
  }
  const transport::ClientSecurity& ObjectServerSecurity() const { return data_security_; }
  // How this process connects to a worker of `job`: Unauthenticated when this
  // process may not (a job's workers reach only their own job's).
  // How to reach a worker of `job`: with the credential of that job this
  // process derives, or, for another job's actor, with the actor's key.
  Result<transport::ClientSecurity> WorkerSecurity(
      const JobId& job, const std::optional<transport::ActorKey>& actor_key = std::nullopt) const;
  // Calls the head and waits up to `timeout_ms` for its answer.
  // REQUIRES: a user thread (not the I/O thread).
  template <typename Reply, typename Request>
  Result<Reply> CallHead(const Request& request, int64_t timeout_ms) {
    Result<std::string> body =
        CallHeadEncoded(static_cast<uint16_t>(Request::kType), protocol::Encode(request),
                        static_cast<uint16_t>(Reply::kType), timeout_ms);
    if (!body.ok()) return body.status();
    return protocol::Decode<Reply>(*body);
  }
  // ObjectRefs inside values (Python's pickling of an ObjectRef). A ref
  // travels as its object's id and the location of a copy in this node's
  // store that its agent holds for the ref (ObjectPins).
  struct ExportedRef {
    std::string id;  // the object's (its origin's, for a borrowed one)
    protocol::ObjectLocation location;
  };
  // Puts a ref to `object` inside a value: waits until it is ready (a failed
  // one throws its TaskError: the caller sends the error instead), makes
  // sure a copy is in this node's store (this process's own file, or a copy
  // of a value in memory or on another node) and takes one hold on it at
  // this node's agent, which the receiver of the value owns from then on
  // (a container's, or one never let go: see HoldContents). Throws
  // std::runtime_error when this machine has no store or the agent refuses.
  ExportedRef ExportRef(const ObjectHandle& object);
  // The ref inside a value that arrived: one handle per object in this
  // process (a ref that came before and is still held is returned again).
  // A new one takes its own hold at the location's agent and lets go of it
  // when released; one whose object is gone gets an ObjectLost error (get
  // raises it). Throws std::invalid_argument for a location no object server
  // of the cluster serves.
  ObjectHandle ImportRef(const std::string& id, const protocol::ObjectLocation& location);
  // A Put of a value that holds `contents` (paths ExportRef held): stored
  // whatever its size, and the agent told that it holds them (they go with it).
  ObjectHandle PutContainer(size_t size, const std::function<void(char*)>& fill,
                            std::vector<std::string> contents);
  // The stored object at `container` (this node's, just written: a worker's
  // result) holds `contents`. Never blocks.
  void HoldContents(const std::string& container, std::vector<std::string> contents);
  // Lets go of holds ExportRef took (a value that failed to serialize).
  void ReleaseHolds(const std::vector<std::string>& paths);
  // Objects currently held (for tests of reference counting).
  size_t ObjectCount();
  // See detail::GeneratorItem (runtime_api.h).
  ObjectHandle GeneratorItem(const ObjectHandle& generator, uint32_t index);

 private:
  // Work a user thread hands to the I/O thread; run in submission order.
  struct Submission {
    enum class Kind : uint8_t { kTask, kActorCall, kClosure };
    Kind kind = Kind::kTask;
    Task task;
    std::optional<ResourceMap> resources;  // kTask; none: the default {CPU: 1}
    Placement placement;                   // kTask
    std::function<void()> closure;         // kClosure
  };

  // The sockets this runtime owns besides the head's and the workers' (runtime.cc).
  struct Sockets;

  explicit Runtime(Config config);
  // CallHead's body: `body` is an encoded request of type `type`; the answer is
  // the body of a reply of type `reply_type`.
  Result<std::string> CallHeadEncoded(uint16_t type, std::string body, uint16_t reply_type,
                                      int64_t timeout_ms);
  Status Connect();
  ObjectId NewObjectId();
  ObjectHandle NewEntry(ObjectId id);
  ObjectHandle PutInMemory(std::string bytes);
  ObjectHandle PutStored(ObjectId id, std::shared_ptr<StoreWriter::Buffer> buffer);
  // A new object of `size` (> 0) bytes written by `fill` into this node's
  // store; Unavailable when there is none or it cannot hold it (`fill`'s
  // exception propagates, and the file goes).
  Result<ObjectHandle> PutIntoStore(size_t size, const std::function<void(char*)>& fill);
  // Reserves `size` bytes in the local store (StoreLedger), asking its agent
  // to make room when they do not fit. ResourceExhausted (the store and its
  // spill disk are full, with the agent's figures), or Unavailable.
  // How long a Put waits for its agent to spill what makes room for it.
  static constexpr int64_t kMakeRoomTimeoutMs = 120000;
  Status ReserveStore(size_t size);
  // A handle to a new entry awaiting its result.
  ObjectHandle NewPendingObject();
  // Takes `options.name` for the new actor `core` at the head (user thread);
  // throws std::invalid_argument when another actor holds it.
  void ReserveActorName(const ActorCore& core, const std::string& factory,
                        const ActorOptions& options);
  // Completes `object_id` with `value` once group `group_id` is placed (I/O thread).
  void AwaitPlaced(const ObjectId& object_id, const PlacementGroupId& group_id,
                   std::shared_ptr<const std::string> value);
  // Creates the result's pending entry, queues `submission` for the I/O
  // thread and returns the result's handle.
  ObjectHandle Submit(Submission submission);
  // Runs `fn` on the I/O thread, ordered with the calls submitted before it.
  void PostOrdered(std::function<void()> fn);
  // Deletes a stored object's file (I/O thread): directly when this process
  // wrote it, else through its node's object server.
  void DeleteStored(const protocol::ObjectLocation& location);

  // I/O thread.
  void DrainSubmissions();
  void Tick();

  Config config_;
  ObjectTable objects_;
  std::mutex mu_;                        // guards the submission queue
  std::vector<Submission> submissions_;  // under mu_
  bool drain_posted_ = false;           // under mu_
  std::string id_prefix_;
  std::atomic<uint64_t> next_object_{0};

  // The ZeroMQ context (and the delete sockets). Declared first, destroyed
  // last: every socket, including those held by handlers still queued in io_
  // (destroyed with io_), must close before the context does, or closing the
  // context blocks forever.
  std::unique_ptr<Sockets> sockets_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
  std::unique_ptr<HeadClient> head_;
  // A driver with log_to_driver: prints its job's workers' output.
  std::unique_ptr<OutputPrinter> printer_;
  std::atomic<bool> submitted_any_{false};  // a task, actor or call was submitted
  boost::asio::steady_timer tick_timer_;
  // A worker's: its blocked calls and the delay before the head hears of them.
  std::shared_ptr<BlockedCalls> blocked_calls_;
  boost::asio::steady_timer blocked_timer_;

  std::unique_ptr<WorkerConnector> connector_;  // a ZmqWorkerConnector
  SystemClock clock_;
  // Made once the job is registered; used on the I/O thread only.
  std::unique_ptr<WorkerSendQueue> send_queue_;
  std::unique_ptr<ArgumentResolver> resolver_;
  std::unique_ptr<TaskSubmitter> tasks_;
  std::unique_ptr<ActorSubmitter> actors_;
  std::vector<Submission> draining_;  // reused from burst to burst (I/O thread)
  std::atomic<bool> stopped_{false};
  // This node's object store (from the head's node table, with the spill
  // directory its ledger names), for large Puts; its dir() is empty when this
  // machine has none.
  SharedMemoryStore local_store_{""};
  std::string local_object_address_;
  // Object servers: the cluster's mechanism (set at registration) with this
  // process's credential. Read by pulls on user threads after Connect.
  transport::ClientSecurity data_security_;
  std::unique_ptr<StoreWriter> store_writer_;  // set when there is a local store
  // The local store's capacity and usage (null: none, or an older agent's
  // store without one), and the spill epoch last seen (Tick drops mappings of
  // spilled objects when it moves).
  std::shared_ptr<StoreLedger> ledger_;
  uint64_t seen_spill_epoch_ = 0;
  // The object servers pulls may connect to (the cluster's, from the head).
  std::unique_ptr<ObjectServerDirectory> object_servers_;
  // Borrowed objects' handles by object id (ImportRef), so one object has
  // one handle here; expired ones are swept as the map grows.
  std::mutex borrowed_mu_;
  std::unordered_map<std::string, std::weak_ptr<ObjectCore>> borrowed_;
  size_t borrowed_sweep_at_ = 64;
};

// The process's runtime, or nullptr before Init / after Shutdown.
Runtime* CurrentRuntime();
// The runtime, starting it in a worker process on first use. Throws
// std::runtime_error with advice when rayx::Init was not called.
Runtime& RequireRuntime();

// The answer to a placement group's creation, filled in by the I/O thread.
struct PlacementGroupCore {
  PlacementGroupId id;
  std::mutex mu;
  std::condition_variable cv;
  bool answered = false;
  Status error;
  PlacementGroupStatus state;
};

}  // namespace rayx::detail
