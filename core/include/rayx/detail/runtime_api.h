// The type-erased calls the templates of rayx.h make into the runtime.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rayx/placement_group.h"
#include "rayx/resources.h"

namespace rayx::detail {

struct ObjectCore;  // an owned object's entry; freed when the last handle goes
using ObjectHandle = std::shared_ptr<ObjectCore>;
struct ActorCore;
using ActorPtr = std::shared_ptr<ActorCore>;

// One argument of a call: a value (msgpack bytes) or an object reference that
// the runtime resolves before the call runs.
struct Arg {
  std::string bytes;
  ObjectHandle ref;
};

// The kinds of SchedulingStrategy (rayx/placement_group.h).
enum class StrategyKind : uint8_t { kDefault = 0, kSpread = 1, kNodeAffinity = 2 };

// Where a call's worker goes: a placement group's bundle, or a strategy.
struct Placement {
  std::string placement_group_id;
  int32_t bundle_index = -1;         // -1: any bundle of the group
  bool group_visible_devices = false;
  StrategyKind strategy = StrategyKind::kDefault;
  std::string affinity_node_id;      // for kNodeAffinity
  bool affinity_soft = false;
  LabelMap label_selector;
  // The worker's program, when not this process's own (a call into another
  // language): executable, its arguments and environment additions.
  std::string worker_executable;
  std::vector<std::string> worker_args;
  std::map<std::string, std::string> worker_env;
  bool empty() const {
    return placement_group_id.empty() && strategy == StrategyKind::kDefault &&
           label_selector.empty() &&
           worker_executable.empty();
  }
  // Distinguishes worker pools: calls with different placements never share.
  std::string Key() const;
};

// Ray's default: a task whose worker dies runs again up to 3 times.
inline constexpr int kDefaultMaxRetries = 3;

struct CallOptions {
  std::string name;          // for errors and logs; the function's name when empty
  // Runs of the task again when its worker or node dies while running it
  // (application exceptions are never retried). 0: fail at once.
  int max_retries = kDefaultMaxRetries;
  // Also retry (within max_retries) when the function throws (Ray's
  // retry_exceptions); only for functions that are safe to run twice.
  bool retry_exceptions = false;
  // A result that starts with these bytes is an exception the function's
  // language encoded as a value (Python's), retried like a thrown one.
  std::string retriable_value_prefix;
  ResourceMap resources;     // default {CPU: 1} for tasks, {} for actors
  bool resources_set = false;
  Placement placement;
};

struct ActorOptions {
  std::string name;          // named actors can be found with GetActor
  bool detached = false;     // outlives its job
  ResourceMap resources;
  Placement placement;
  // Times the actor is created again when its worker or node dies (-1: no
  // limit). 0: it dies with its worker.
  int max_restarts = 0;
  // Times a call in flight when the worker died is sent again to the
  // restarted actor (-1: no limit). 0: it fails with ActorDied.
  int max_task_retries = 0;
  // Opaque bytes kept with a named actor's name and given to GetActor callers
  // (the Python package keeps the class's name and method return counts).
  std::string metadata;
};

// A placement group as the head last reported it. `state`: PENDING, CREATED,
// INFEASIBLE or REMOVED (the names users see).
struct PlacementGroupStatus {
  std::string id;
  PlacementGroupState state = PlacementGroupState::PENDING;
  std::string reason;
};
// Shared by a PlacementGroup handle and the runtime: the creation's answer.
struct PlacementGroupCore;
using PlacementGroupPtr = std::shared_ptr<PlacementGroupCore>;
// Sends the creation without waiting for the head (the id is chosen here).
PlacementGroupPtr CreatePlacementGroup(const std::string& name,
                                       const std::vector<ResourceMap>& bundles,
                                       PlacementStrategy strategy, bool detached = false);
const std::string& PlacementGroupIdOf(const PlacementGroupPtr& group);
// Waits for the creation's answer, then (when pending) up to `timeout_ms` for
// the group to be placed.
PlacementGroupStatus WaitPlacementGroup(const PlacementGroupPtr& group, int64_t timeout_ms);
void RemovePlacementGroup(const std::string& id);
// An object that is `ready_value` once the group is placed (Ray's pg.ready()).
ObjectHandle PlacementGroupReady(const PlacementGroupPtr& group, std::string ready_value);

// Workers of this process's calls run `executable args...` with `env` added
// (a Python driver names its interpreter and "-m rayx._worker"), instead of
// this program itself. Applies to leases requested afterwards.
void SetWorkerCommand(const std::string& executable, std::vector<std::string> args,
                      std::map<std::string, std::string> env);
// The job this process's runtime belongs to (hex); needs a runtime.
const std::string& CurrentJobId();

ObjectHandle SubmitTask(const std::string& function, std::vector<Arg> args,
                        const CallOptions& options);
ActorPtr CreateActor(const std::string& factory, std::vector<Arg> args,
                     const ActorOptions& options);
ObjectHandle SubmitActorTask(const ActorPtr& actor, const std::string& method,
                             std::vector<Arg> args);
void KillActor(const ActorPtr& actor);
// The owner's last handle to `actor` went away: stops it once its calls have
// answered, unless it is named or detached (ActorSubmitter::Release). Python's
// handles call it; a no-op without a runtime.
void ReleaseActor(const ActorPtr& actor);
// Throws std::runtime_error naming the actor when there is none.
ActorPtr GetNamedActor(const std::string& name);
std::string SerializeActor(const ActorPtr& actor);
// False while the actor waits for a worker (its creation or restart waits for
// resources); true otherwise, a dead actor included.
bool ActorPlaced(const ActorPtr& actor);
// The actor's id (hex): the same for every handle of one actor.
const std::string& ActorIdOf(const ActorPtr& actor);
// The metadata its creator attached (ActorOptions::metadata), if named.
const std::string& ActorMetadataOf(const ActorPtr& actor);
ActorPtr DeserializeActor(const std::string& bytes);

// An object's bytes: in this process's memory, or mapped read-only from the
// node's shared-memory store (no copy). `keepalive` holds them.
struct ObjectBytes {
  std::string_view view;
  std::shared_ptr<const void> keepalive;
};

// Values at least this large go to the node's shared-memory object store
// (when the process has one) instead of travelling inline.
inline constexpr size_t kInlineObjectLimit = 100 * 1024;

ObjectHandle PutBytes(std::string bytes);
// A new object of `size` bytes written by `fill` (exactly `size` bytes, once):
// for a large one straight into the node's store, so the value is copied once.
ObjectHandle PutEncoded(size_t size, const std::function<void(char* out)>& fill);
// Waits for the object; timeout_ms < 0 waits forever. Throws TaskError when the
// call that makes it failed, GetTimeoutError on timeout.
ObjectBytes GetBytes(const ObjectHandle& object, int64_t timeout_ms);

// Lets a caller end blocking calls made on its thread early. While an
// InterruptScope lives, GetBytes and WaitPlacementGroup on this thread wait in
// slices of at most kInterruptSliceMs and run `check` between them: what it
// throws ends the wait and unwinds the call that made it, which cleans up as
// on any error (an actor group half made is killed). The Python bindings
// throw Interrupted from it on Ctrl-C, which is not a std::exception, so that
// no `catch (const std::exception&)` on the way mistakes it for a failure.
struct Interrupted {};
inline constexpr int64_t kInterruptSliceMs = 200;
class InterruptScope {
 public:
  explicit InterruptScope(std::function<void()> check);
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  std::function<void()> check_;
  const std::function<void()>* previous_;
};
// Runs this thread's innermost InterruptScope check, if any.
void CheckInterrupt();
bool HasInterruptCheck();
class BlockedCalls;  // runtime/blocked_calls.h
// This thread waits in a get or wait. In a worker whose wait has to block
// (what it waits for is not ready), the runtime counts the call as blocked
// from Blocking until the scope ends, and the head lets the lease's CPU serve
// other work meanwhile (Ray's rule; BlockedCalls). Scopes nest: one made
// while another lives on this thread counts through the outermost, so a wait
// cut into slices (Ctrl-C checks) or a list of gets is one blocked stretch,
// not one per slice or element. Cheap: no lock or allocation until a wait
// blocks; nothing at all in a driver. Not copyable; ends on the thread that
// made it.
//
// `counts` false: this thread's waits inside the scope are not a call's (a
// helper thread that waits on behalf of coroutines, which the event loop
// keeps running meanwhile): nothing is counted.
class BlockedScope {
 public:
  explicit BlockedScope(bool counts = true);
  ~BlockedScope();
  BlockedScope(const BlockedScope&) = delete;
  BlockedScope& operator=(const BlockedScope&) = delete;
  // The wait has to block: counted in `calls` (the runtime's; nullptr in a
  // driver) until the outermost scope ends. Idempotent.
  void Blocking(const std::shared_ptr<BlockedCalls>& calls);

 private:
  BlockedScope* outer_;                  // the thread's enclosing scope, or nullptr
  bool counts_;
  std::shared_ptr<BlockedCalls> calls_;  // set once counted
};
// In a worker: runs `hook` on the thread whose call starts to block in a
// get or wait (the first time per blocked stretch, before it sleeps). The
// worker loop uses it to hand back the calls queued behind the blocked one
// (WorkerLoop::ReleaseQueued). Set once, before calls run.
void SetCallBlockingHook(std::function<void()> hook);
// A worker's stored result at `container` holds `contents` (holds this
// process's runtime took for ObjectRefs inside it): tells this node's agent.
// Does nothing without a runtime.
void HoldResultContents(const std::string& container, std::vector<std::string> contents);
// Marks ready objects; returns once `num_returns` are ready or the timeout passes.
std::vector<bool> WaitObjects(const std::vector<ObjectHandle>& objects, size_t num_returns,
                              int64_t timeout_ms);
const std::string& ObjectIdOf(const ObjectHandle& object);
// Item `index` of the generator call whose result is `generator` (made by
// this process): an object that is ready once the item arrived, or that
// fails when the call ended without yielding it (or `generator` was
// released first). Claim each index once (a second claim of an item is a
// second owner of its entry). Throws std::out_of_range past the item limit.
ObjectHandle GeneratorItem(const ObjectHandle& generator, uint32_t index);
// Objects this process holds (owned, and generator items not yet claimed):
// for tests of reference counting.
size_t ObjectCount();

}  // namespace rayx::detail
