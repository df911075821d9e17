// rayx's C++ API: tasks, actors and objects on a cluster. Mirrors Ray's C++ API.
//
//   int Plus(int a, int b) { return a + b; }
//   RAYX_REMOTE(Plus);
//   int main(int argc, char** argv) {
//     rayx::Init(argc, argv);           // first thing in main: workers start here too
//     auto ref = rayx::Task(Plus).Remote(1, 2);
//     int three = *ref.Get();
//     rayx::Shutdown();
//   }
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "rayx/detail/registry.h"
#include "rayx/detail/runtime_api.h"
#include "rayx/errors.h"
#include "rayx/placement_group.h"
#include "rayx/resources.h"

namespace rayx {

struct Options {
  // "host:port" of a running cluster's head. Default: $RAYX_ADDRESS, else the
  // cluster started on this machine by `rayx start`, else a private one-machine
  // cluster started now and stopped by Shutdown().
  std::string address;
  // The cluster token. Default: $RAYX_TOKEN, else this machine's session.
  std::string token;
  // Where `rayx start` keeps sessions. Default: $RAYX_TEMP_DIR, else /tmp/rayx.
  std::string temp_dir;
  // CPUs of the private cluster (when one is started). Default: all.
  double num_cpus = 0;
  // GPUs of the private cluster (< 0: detected), and its custom resources.
  double num_gpus = -1;
  ResourceMap resources;
  // More `rayx start` flags for the private cluster, e.g.
  // {"--memory-usage-threshold", "0.8"}. Ignored when joining a cluster.
  std::vector<std::string> private_cluster_flags;
  // Print what this job's workers write to stdout and stderr here, line by
  // line, as "(name pid=N, ip=A) line" (Ray's log_to_driver). Default: on,
  // unless $RAYX_LOG_TO_DRIVER is 0.
  bool log_to_driver = true;
};

// Connects this program to a cluster. In a worker process (started by a node
// agent), it serves tasks instead and never returns: call it first in main().
void Init();
void Init(const Options& options);
void Init(int argc, char** argv);
// Ends the job: its workers and non-detached actors stop, its objects are freed.
void Shutdown();
bool IsInitialized();

// Inside a task or actor: the node's GPU devices it holds (also what
// CUDA_VISIBLE_DEVICES lists, so CUDA numbers them 0..n-1). Empty elsewhere.
std::vector<int> GetGpuIds();

// ---- Objects -----------------------------------------------------------------

template <typename T>
class ObjectRef {
 public:
  ObjectRef() = default;
  explicit ObjectRef(detail::ObjectHandle handle) : handle_(std::move(handle)) {}

  // Waits for the value. Throws TaskError when the call that makes it failed.
  auto Get() const { return GetWithTimeout(-1); }
  // Throws GetTimeoutError after `timeout_ms`.
  auto Get(int64_t timeout_ms) const { return GetWithTimeout(timeout_ms); }
  const std::string& ID() const { return detail::ObjectIdOf(handle_); }
  const detail::ObjectHandle& handle() const { return handle_; }

 private:
  auto GetWithTimeout(int64_t timeout_ms) const {
    auto bytes = detail::GetBytes(handle_, timeout_ms);
    if constexpr (std::is_void_v<T>) {
      return;
    } else {
      return std::make_shared<T>(detail::Unpack<T>(bytes.view));
    }
  }
  detail::ObjectHandle handle_;
};

// Stores `value` (msgpack-encoded; a rayx::Bytes as is) as a new object. A
// large value is encoded straight into the node's shared-memory store; a
// rayx::Bytes passed as an rvalue is moved in, not copied, when it is small.
template <typename T>
ObjectRef<std::decay_t<T>> Put(T&& value) {
  using D = std::decay_t<T>;
  if constexpr (std::is_same_v<D, Bytes> && !std::is_lvalue_reference_v<T>) {
    return ObjectRef<D>(detail::PutBytes(std::move(value.data)));
  } else {
    size_t size = detail::PackedSize(value);
    if (size < detail::kInlineObjectLimit) {
      return ObjectRef<D>(detail::PutBytes(detail::PackSized(value, size)));
    }
    return ObjectRef<D>(detail::PutEncoded(
        size, [&value, size](char* out) { detail::PackInto(value, out, size); }));
  }
}

template <typename T>
auto Get(const ObjectRef<T>& ref) {
  return ref.Get();
}
template <typename T>
auto Get(const ObjectRef<T>& ref, int64_t timeout_ms) {
  return ref.Get(timeout_ms);
}
template <typename T>
std::vector<std::shared_ptr<T>> Get(const std::vector<ObjectRef<T>>& refs) {
  std::vector<std::shared_ptr<T>> out;
  out.reserve(refs.size());
  detail::BlockedScope blocked;  // one blocked stretch for the whole list
  for (const auto& ref : refs) out.push_back(ref.Get());
  return out;
}

template <typename T>
struct WaitResult {
  std::vector<ObjectRef<T>> ready;
  std::vector<ObjectRef<T>> unready;
};

// Returns when `num_returns` of `refs` are ready (or failed) or after
// `timeout_ms` (< 0: no limit), splitting them in submission order.
template <typename T>
WaitResult<T> Wait(const std::vector<ObjectRef<T>>& refs, size_t num_returns,
                   int64_t timeout_ms) {
  if (num_returns > refs.size()) {
    throw std::invalid_argument("Wait: num_returns (" + std::to_string(num_returns) +
                                ") exceeds the number of refs (" + std::to_string(refs.size()) +
                                ")");
  }
  std::vector<detail::ObjectHandle> handles;
  for (const auto& r : refs) handles.push_back(r.handle());
  std::vector<bool> ready = detail::WaitObjects(handles, num_returns, timeout_ms);
  WaitResult<T> out;
  for (size_t i = 0; i < refs.size(); ++i) {
    (ready[i] && out.ready.size() < num_returns ? out.ready : out.unready).push_back(refs[i]);
  }
  return out;
}

namespace detail {

template <typename T>
struct IsObjectRef : std::false_type {};
template <typename T>
struct IsObjectRef<ObjectRef<T>> : std::true_type {};

template <typename A>
Arg MakeArg(A&& value) {
  using D = std::decay_t<A>;
  if constexpr (IsObjectRef<D>::value) {
    return Arg{std::string(), value.handle()};
  } else {
    return Arg{Pack(value), nullptr};
  }
}

template <typename... A>
std::vector<Arg> MakeArgs(A&&... values) {
  std::vector<Arg> args;
  args.reserve(sizeof...(A));
  (args.push_back(MakeArg(std::forward<A>(values))), ...);
  return args;
}

template <typename F>
const RemoteFunction& Lookup(F f) {
  const RemoteFunction* fn = FunctionRegistry::Instance().FindByKey(PointerKey(f));
  if (fn == nullptr) {
    const void* address = nullptr;
    if constexpr (!std::is_member_function_pointer_v<F>) {
      address = reinterpret_cast<const void*>(f);
    }
    throw std::invalid_argument("function " + DescribePointer(address) +
                                " is not registered: add it to RAYX_REMOTE(...)");
  }
  return *fn;
}

template <typename F>
struct FunctionTraits;
template <typename R, typename... A>
struct FunctionTraits<R (*)(A...)> {
  using Return = R;
  static constexpr size_t kArity = sizeof...(A);
};
template <typename R, typename C, typename... A>
struct FunctionTraits<R (C::*)(A...)> {
  using Return = R;
  using Class = C;
  static constexpr size_t kArity = sizeof...(A);
};
template <typename R, typename C, typename... A>
struct FunctionTraits<R (C::*)(A...) const> {
  using Return = R;
  using Class = C;
  static constexpr size_t kArity = sizeof...(A);
};

}  // namespace detail

namespace detail {
inline void ApplyStrategy(const SchedulingStrategy& strategy, Placement* placement) {
  placement->strategy = StrategyKind::kDefault;
  placement->affinity_node_id.clear();
  placement->affinity_soft = false;
  if (std::holds_alternative<SpreadSchedulingStrategy>(strategy)) {
    placement->strategy = StrategyKind::kSpread;
  }
  if (const auto* a = std::get_if<NodeAffinitySchedulingStrategy>(&strategy)) {
    placement->strategy = StrategyKind::kNodeAffinity;
    placement->affinity_node_id = a->node_id;
    placement->affinity_soft = a->soft;
  }
}
}  // namespace detail

// ---- Tasks -------------------------------------------------------------------

template <typename F>
class TaskCaller {
 public:
  using Return = typename detail::FunctionTraits<F>::Return;
  explicit TaskCaller(F f) : fn_(&detail::Lookup(f)) {}

  // e.g. {{"CPU", 1}, {"GPU", 1}, {"tpu", 2}}. Default: {CPU: 1}.
  TaskCaller& SetResources(ResourceMap resources) {
    options_.resources = std::move(resources);
    options_.resources_set = true;
    return *this;
  }
  TaskCaller& SetName(std::string name) {
    options_.name = std::move(name);
    return *this;
  }
  // Runs in bundle `bundle_index` of the group (-1: any of its bundles).
  TaskCaller& SetPlacementGroup(const PlacementGroup& group, int bundle_index = -1) {
    options_.placement.placement_group_id = group.GetID();
    options_.placement.bundle_index = bundle_index;
    return *this;
  }
  TaskCaller& SetSchedulingStrategy(const SchedulingStrategy& strategy) {
    detail::ApplyStrategy(strategy, &options_.placement);
    return *this;
  }
  // Runs the task again, up to `n` times, when its worker or node dies while
  // running it (default 3, as Ray; 0: fail at once). Exceptions the function
  // throws are retried only with SetRetryExceptions(true).
  TaskCaller& SetMaxRetries(int n) {
    if (n < 0) throw std::invalid_argument("SetMaxRetries: " + std::to_string(n) + " is < 0");
    options_.max_retries = n;
    return *this;
  }
  // Exceptions the function throws are retried too, within SetMaxRetries (Ray's
  // retry_exceptions); the last one reaches Get. Only for functions that are
  // safe to run twice.
  TaskCaller& SetRetryExceptions(bool retry) {
    options_.retry_exceptions = retry;
    return *this;
  }
  // Only on nodes whose labels equal these, e.g. {{"accelerator", "H100"}}.
  TaskCaller& SetLabelSelector(LabelMap selector) {
    options_.placement.label_selector = std::move(selector);
    return *this;
  }

  template <typename... A>
  ObjectRef<Return> Remote(A&&... args) {
    static_assert(sizeof...(A) == detail::FunctionTraits<F>::kArity,
                  "Remote() needs exactly the function's arguments");
    return ObjectRef<Return>(
        detail::SubmitTask(fn_->name, detail::MakeArgs(std::forward<A>(args)...), options_));
  }

 private:
  const detail::RemoteFunction* fn_;
  detail::CallOptions options_;
};

template <typename F>
TaskCaller<F> Task(F f) {
  return TaskCaller<F>(f);
}

// ---- Calls into Python ---------------------------------------------------------

namespace detail {
// The Python workers' program: $RAYX_PYTHON (else python3 on PATH) running
// rayx._worker, with this process's PYTHONPATH. Throws when no interpreter is found.
Placement PythonWorkerPlacement();
}  // namespace detail

// A Python function `module.function` run as a task by a Python worker, e.g.
//   int doubled = rayx::PyFunction<int>("mymodule", "double_it").Remote(21).Get();
// Arguments and the result cross as msgpack (nil, bool, integers, floats,
// strings, binary, arrays, maps): R must be a type msgpack reads that as. The
// module must be importable by the worker (installed, or on PYTHONPATH, or in
// the job's working directory). A Python exception fails Get() with its type
// and traceback.
template <typename R>
class PyFunction {
 public:
  PyFunction(std::string module, std::string function)
      : module_(std::move(module)), function_(std::move(function)) {
    options_.name = module_ + "." + function_;
  }
  PyFunction& SetResources(ResourceMap resources) {
    options_.resources = std::move(resources);
    options_.resources_set = true;
    return *this;
  }
  template <typename... A>
  ObjectRef<R> Remote(A&&... args) {
    options_.placement = detail::PythonWorkerPlacement();
    return ObjectRef<R>(detail::SubmitTask(
        "rayx.py.xlang", detail::MakeArgs(module_, function_, std::forward<A>(args)...), options_));
  }

 private:
  std::string module_, function_;
  detail::CallOptions options_;
};

// ---- Actors ------------------------------------------------------------------

enum class ActorLifetime { kNonDetached, kDetached };
inline constexpr ActorLifetime Detached = ActorLifetime::kDetached;
inline constexpr ActorLifetime NonDetached = ActorLifetime::kNonDetached;

template <typename C>
class ActorHandle;

template <typename C, typename M>
class ActorTaskCaller {
 public:
  using Return = typename detail::FunctionTraits<M>::Return;
  ActorTaskCaller(detail::ActorPtr actor, M method)
      : actor_(std::move(actor)), fn_(&detail::Lookup(method)) {}

  template <typename... A>
  ObjectRef<Return> Remote(A&&... args) {
    static_assert(sizeof...(A) == detail::FunctionTraits<M>::kArity,
                  "Remote() needs exactly the method's arguments");
    return ObjectRef<Return>(
        detail::SubmitActorTask(actor_, fn_->name, detail::MakeArgs(std::forward<A>(args)...)));
  }

 private:
  detail::ActorPtr actor_;
  const detail::RemoteFunction* fn_;
};

// A reference to a remote actor. Copyable, and can be passed to tasks and
// other actors as an argument. Calls from one caller run in submission order.
template <typename C>
class ActorHandle {
 public:
  ActorHandle() = default;
  explicit ActorHandle(detail::ActorPtr actor) : actor_(std::move(actor)) {}

  template <typename M>
  ActorTaskCaller<C, M> Task(M method) const {
    static_assert(std::is_same_v<typename detail::FunctionTraits<M>::Class, C>,
                  "the method belongs to another class");
    return ActorTaskCaller<C, M>(actor_, method);
  }
  // Stops the actor's process; pending and later calls fail.
  void Kill() const { detail::KillActor(actor_); }
  const detail::ActorPtr& ptr() const { return actor_; }

  // Passing a handle as an argument sends its address.
  template <typename Packer>
  void msgpack_pack(Packer& pk) const {
    pk.pack(detail::SerializeActor(actor_));
  }
  void msgpack_unpack(const msgpack::object& o) {
    actor_ = detail::DeserializeActor(o.as<std::string>());
  }

 private:
  detail::ActorPtr actor_;
};

template <typename F>
class ActorCreator {
 public:
  using Class = std::remove_pointer_t<typename detail::FunctionTraits<F>::Return>;
  static_assert(std::is_pointer_v<typename detail::FunctionTraits<F>::Return>,
                "an actor factory returns a pointer to a new instance");
  explicit ActorCreator(F f) : fn_(&detail::Lookup(f)) {}

  ActorCreator& SetName(std::string name) {
    options_.name = std::move(name);
    return *this;
  }
  ActorCreator& SetLifetime(ActorLifetime lifetime) {
    options_.detached = lifetime == ActorLifetime::kDetached;
    return *this;
  }
  ActorCreator& SetResources(ResourceMap resources) {
    options_.resources = std::move(resources);
    return *this;
  }
  // Runs in bundle `bundle_index` of the group (-1: any of its bundles).
  // With `see_group_devices`, the actor sees every GPU the group holds on its
  // node (CUDA_VISIBLE_DEVICES) and RAYX_LOCAL_RANK names its own, so CUDA
  // peer-to-peer and NVLink work between the group's actors.
  ActorCreator& SetPlacementGroup(const PlacementGroup& group, int bundle_index = -1,
                                  bool see_group_devices = false) {
    options_.placement.placement_group_id = group.GetID();
    options_.placement.bundle_index = bundle_index;
    options_.placement.group_visible_devices = see_group_devices;
    return *this;
  }
  ActorCreator& SetSchedulingStrategy(const SchedulingStrategy& strategy) {
    detail::ApplyStrategy(strategy, &options_.placement);
    return *this;
  }
  ActorCreator& SetLabelSelector(LabelMap selector) {
    options_.placement.label_selector = std::move(selector);
    return *this;
  }
  // When the actor's worker or node dies, the actor is created again (its
  // constructor runs again, with the same arguments) on a node that fits, up
  // to `n` times (-1: always; default 0: the actor dies with its worker).
  // Calls made after a restart reach the new instance. Kill ends it for good.
  ActorCreator& SetMaxRestarts(int n) {
    if (n < -1) throw std::invalid_argument("SetMaxRestarts: " + std::to_string(n) + " is < -1");
    options_.max_restarts = n;
    return *this;
  }
  // A call in flight when the actor's worker died is sent again to the
  // restarted actor, up to `n` times (-1: always; default 0: it fails with
  // ActorDied). Only for calls that are safe to run twice.
  ActorCreator& SetMaxTaskRetries(int n) {
    if (n < -1) {
      throw std::invalid_argument("SetMaxTaskRetries: " + std::to_string(n) + " is < -1");
    }
    options_.max_task_retries = n;
    return *this;
  }

  template <typename... A>
  ActorHandle<Class> Remote(A&&... args) {
    static_assert(sizeof...(A) == detail::FunctionTraits<F>::kArity,
                  "Remote() needs exactly the factory's arguments");
    if (options_.detached && options_.name.empty()) {
      throw std::invalid_argument("a detached actor needs a name (SetName): it is found by name "
                                  "after its job ends");
    }
    return ActorHandle<Class>(
        detail::CreateActor(fn_->name, detail::MakeArgs(std::forward<A>(args)...), options_));
  }

 private:
  const detail::RemoteFunction* fn_;
  detail::ActorOptions options_;
};

template <typename F>
ActorCreator<F> Actor(F factory) {
  return ActorCreator<F>(factory);
}

// The named actor, from any driver of the cluster (a detached one also from
// later jobs). Throws std::runtime_error when there is none.
template <typename C>
ActorHandle<C> GetActor(const std::string& name) {
  return ActorHandle<C>(detail::GetNamedActor(name));
}

}  // namespace rayx
