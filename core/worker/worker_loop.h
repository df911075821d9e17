// The worker process's task loop: runs the calls pushed to it and batches their
// results.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/asio/thread_pool.hpp>

#include "object_store/object_pull.h"
#include "object_store/object_server_directory.h"
#include "object_store/shared_memory_store.h"
#include "object_store/store_ledger.h"
#include "protocol/push_tasks.h"
#include "transport/frame.h"
#include "transport/security.h"
#include "transport/zmq_fwd.h"
#include "worker/deferred_calls.h"
#include "worker/worker_env.h"

namespace rayx::detail {

struct RemoteFunction;

// Runs the calls of each PushTasksRequest in order and sends their results back
// in batches through `send`.
//
// Design: the calls of a message run one at a time in order, and messages in
// arrival order (so an actor's calls from one caller run in submission order).
// A result is sent at once unless the next call of the batch is known to be
// quick; exceptions become error data. The loop does not own the connection:
// RunWorker feeds it from a ROUTER socket, tests from a fake.
//
// Deferred calls: a function with invoke_deferrable may take its call over
// (CallControl::Defer), e.g. a Python actor that runs calls concurrently on
// threads or an event loop. The loop then remembers where the result goes
// (caller, call id, return id) and moves on; the answer, given on any thread,
// waits in DeferredCalls until the loop's thread calls CompleteDeferred, which
// sends it like any other result (so results may leave out of order). RunWorker
// polls completion_fd() beside its socket while deferred_count() > 0. A call
// that throws after deferring answers with its error at once (a later answer
// is dropped); a deferred call is only lost with its process, which callers
// notice as a lost connection. The loop defers calls itself for a C++ actor
// whose factory allows more than one call at once (RAYX_ACTOR_CONCURRENCY):
// their arguments are copied (stored ones stay mapped) and the calls run on a
// pool of that many threads.
//
// Generators: a call may yield values before its result (CallControl::Yield
// on the loop's thread, DeferredCall::Item from a deferred call's): each goes
// to the caller at once as the call's next item (PushTasksReply kItem, a
// large one stored under protocol::GeneratorItemId), in order and ahead of
// the call's result, which ends the call. Nothing bounds how far a generator
// runs ahead of its consumer (Ray's default too).
//
// Containment: a worker serves its own job (env.job_id). A task or an actor's
// creation sent under another job id is refused with an error result naming
// both ids; a call to this worker's actor from another job (a named actor is
// shared) runs, but its results travel inline, so a file is only ever written
// into the store under this worker's own job id, and goes when that job ends.
// A stored argument is mapped only when it is an object of this node's store
// (SharedMemoryStore::Open) of the size the call declares; any other is pulled
// from a known object server, within the pull's bounds (PullObject).
//
// Not thread-safe: Handle, CompleteDeferred and `send` run on the caller's one
// thread (a DeferredCall answers from any thread). `context`
// (used to pull arguments stored on other nodes) must outlive the loop.
class WorkerLoop {
 public:
  // Sends one reply: [routing][envelope][body][result frames...].
  using SendFn = std::function<void(transport::Frames& frames)>;

  // `servers`: where stored arguments may be pulled from; nullptr: the
  // cluster's object servers, asked of the head at env.head_address.
  WorkerLoop(zmq::context_t& context, const WorkerEnv& env, SendFn send,
             std::shared_ptr<ObjectServerDirectory> servers = nullptr,
             PullOptions pull_options = {});

  // Handles one received message [routing][envelope][body][payload...]:
  // a PushTasksRequest runs; one that cannot be parsed (or has another protocol
  // version) is answered with an ErrorReply; anything else is ignored.
  void Handle(transport::Frames& frames);
  // Sends the answers of deferred calls given so far (batched per caller). A
  // call answered with error type kWorkerExitAnswer (message: the exit status)
  // ends the process once the answers before it are sent: an actor that runs
  // calls on other threads exits from here, after its earlier calls' results
  // left, never from the thread that asked.
  void CompleteDeferred();
  static constexpr const char* kWorkerExitAnswer = "rayx.worker.exit";
  // How the process ends for kWorkerExitAnswer (tests replace it). Default:
  // ExitWorker.
  void SetExit(std::function<void(int status)> exit) { exit_ = std::move(exit); }
  // On the loop's thread, while a task of a batch runs and has to block in a
  // get or wait (SetCallBlockingHook): the tasks queued behind it (the rest
  // of its batch, and every message `drain` still finds on the socket) are
  // answered "Requeued", so their callers run them elsewhere instead of
  // waiting behind a call that may wait for them. Nothing is handed back by
  // an actor's worker (its calls keep their order) or outside a task's run.
  void ReleaseQueued();
  // Hands ReleaseQueued the messages waiting on the socket: calls `take` with
  // each, without blocking. Set by RunWorker.
  using DrainFn = std::function<void(const std::function<void(transport::Frames&)>& take)>;
  void SetDrain(DrainFn drain) { drain_ = std::move(drain); }
  // Calls deferred and not answered yet.
  size_t deferred_count() const { return pending_.size(); }
  // Readable when CompleteDeferred has answers to send.
  int completion_fd() const { return deferred_.fd(); }
  // Constructs this worker's actor from the protocol::ActorInit in file
  // `path` (which is removed): a detached actor the head restarts. An error
  // names the factory or the constructor's exception.
  Status ConstructFromFile(const std::string& path);
  // Hears when an actor-creation call (its owner's constructor call) begins
  // (`began` true) and how it ended (`began` false, `error` empty when the
  // actor was made). Only the first creation call this worker runs is told.
  using ConstructionObserver = std::function<void(bool began, const std::string& error)>;
  void SetConstructionObserver(ConstructionObserver observer) {
    construction_observer_ = std::move(observer);
  }
  // Hears which actor this worker hosts, once its constructor ran: callers
  // holding that actor's key (another job's members) may reach it from then
  // on (worker_main tells its JobVerifier).
  using HostObserver = std::function<void(const ActorId& actor)>;
  void SetHostObserver(HostObserver observer) { host_observer_ = std::move(observer); }
  // Tells this node's agent that the stored result at `container` holds
  // `contents` (a result holding ObjectRefs; protocol/holding_value.h). A
  // result whose contents cannot be stored here (no store, another job's
  // call) travels without: its holds stay until the job ends.
  using HoldContentsFn =
      std::function<void(const std::string& container, std::vector<std::string> contents)>;
  void SetHoldContents(HoldContentsFn fn) { hold_contents_ = std::move(fn); }

 private:
  // What one call produced: a value (msgpack bytes, or raw for rayx::Bytes) or
  // an error.
  struct CallOutcome {
    bool ok = true;
    std::string value;
    // kException: error_type names the exception; else rayx's reason.
    protocol::TaskErrorKind error_kind = protocol::TaskErrorKind::kException;
    std::string error_type, error_message;
    std::string error_node;  // where it failed (empty: this node); see Run's ObjectLost
    bool deferred = false;   // answered later (CompleteDeferred); nothing else is set
  };
  // Where a deferred call's result goes.
  struct PendingCall {
    transport::Frame routing;
    uint64_t call_id = 0;
    std::string return_id;
    std::string job;  // the job the call came from
    uint32_t items = 0;  // items a generator call yielded so far
  };
  class Control;
  // A registered function as this worker knows it, with how long its calls
  // take.
  struct KnownFunction {
    const RemoteFunction* fn = nullptr;
    double average_us = -1;  // < 0: never ran here
    // The name its calls' output goes under: the function, or an actor's
    // class; empty for Python's calls (the Python worker names its own).
    std::string output_name;
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };

  KnownFunction& Lookup(std::string_view name);
  // Why `call` (of the batch in batch_, sent by `peer`) is not run here; ""
  // when it is.
  std::string Refusal(const protocol::TaskCallView& call, const transport::Principal& peer) const;
  // This worker now hosts `actor` (hex).
  void Hosting(std::string_view actor);
  // The actor was made by `factory`: a pool runs its calls when it allows
  // several at once.
  void StartActorPool(const RemoteFunction& factory);
  // Runs a method call of the actor on actor_pool_ (deferred through
  // `control`); `mappings` and `pulled` hold its stored arguments.
  void RunOnPool(const protocol::TaskCallView& call, const RemoteFunction* fn, const ArgViews& args,
                 std::vector<std::shared_ptr<const void>> mappings,
                 std::vector<std::string> pulled, CallControl& control);
  CallOutcome Run(const protocol::TaskCallView& call, const RemoteFunction* fn);
  // Writes the result of call `call_id` (of job `call_job`) into the reply;
  // with `item`, the generator call's item *item instead (not an error).
  void AddResult(uint64_t call_id, std::string_view return_id, std::string_view call_job,
                 CallOutcome outcome, const uint32_t* item = nullptr);
  // Sends the results written so far as one reply.
  void Flush();
  // Answers every call of the request `frames` "Requeued" (ReleaseQueued).
  void RequeueMessage(transport::Frames& frames);
  void WriteRequeued(uint64_t call_id);

  zmq::context_t& context_;
  SendFn send_;
  ConstructionObserver construction_observer_;
  HostObserver host_observer_;
  HoldContentsFn hold_contents_;
  std::string hosted_actor_;  // hex; empty until an actor was constructed here
  std::string node_ip_;
  std::string job_;  // this worker's job id (hex)
  // The name its output goes under (protocol::kOutputNameMarker), last told.
  std::string announced_;
  // Tells the node's agent, before a call of a C++ function or actor other
  // than the last, whose output follows (`known.output_name`).
  void AnnounceName(const KnownFunction& known);
  SharedMemoryStore store_{""};
  // The store's capacity (null: an older agent's store, unbounded): a large
  // result reserves its bytes there first (ReserveResult).
  std::shared_ptr<StoreLedger> ledger_;
  // Reserves `size` bytes for a result, asking the agent to make room when
  // they do not fit (ResourceExhausted: the store and its spill disk are full).
  Status ReserveResult(size_t size);
  std::shared_ptr<ObjectServerDirectory> servers_;
  PullOptions pull_options_;
  std::string object_address_;
  transport::ClientSecurity object_security_;  // pulls of arguments from other nodes
  std::shared_ptr<void> actor_;
  std::string actor_error_;  // why the actor could not be created
  DeferredCalls deferred_;
  std::function<void(int)> exit_;
  DrainFn drain_;
  // The batch's call running now (Handle), and the first one handed back
  // (ReleaseQueued); npos: none.
  size_t running_ = std::string::npos;
  size_t released_from_ = std::string::npos;
  std::unordered_map<uint64_t, PendingCall> pending_;  // by token
  uint64_t next_token_ = 1;
  // Runs the actor's method calls when its factory allows several at once.
  // Declared last: destroyed (joined) first, while what its calls use lives.
  std::unique_ptr<boost::asio::thread_pool> actor_pool_;

  // Registered functions by name (the registry does not change after start-up).
  std::unordered_map<std::string, KnownFunction, StringHash, std::equal_to<>> functions_;
  KnownFunction unknown_;
  // Reused from message to message.
  std::vector<std::string_view> payload_;
  protocol::PushTasksView batch_;
  transport::Frame routing_;
  protocol::PushTasksWriter writer_;
  std::string body_;
  transport::Frames result_frames_;
};

// Serves tasks in a worker process described by `env` (worker_main.cc, the
// loop's ZeroMQ edge): removes the
// worker-only variables from the environment, listens on env.node_ip, reports
// READY on env.ready_fd and runs a WorkerLoop on one ROUTER socket (and its
// completion_fd while calls are deferred). Never
// returns; a crash ends the process, which callers notice as a lost connection.
[[noreturn]] void RunWorker(const WorkerEnv& env);

// Ends this worker process with `status` once the replies it sent have left
// (an exit straight after a send could drop them from ZeroMQ's queue, and the
// caller of a call that succeeded would see it die with the process). Only
// RunWorker's thread can close its socket: called elsewhere (or outside a
// worker), it flushes stdio and exits at once.
[[noreturn]] void ExitWorker(int status);

}  // namespace rayx::detail
