// rayx._core: the Python face of librayx's runtime (a thin layer; the Python
// package in python_bindings/rayx/ builds Ray's API on it).
//
// Every call that can block (connecting, getting, waiting, creating placement
// groups, head calls) releases the GIL. Long waits are cut into slices so that
// Ctrl-C (a pending signal) interrupts them with KeyboardInterrupt.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "common/address.h"
#include "common/directory_archive.h"
#include "common/session_dir.h"
#include "msgpack_values.h"
#include "protocol/messages.h"
#include "protocol/placement_messages.h"
#include "rayx/cluster_status.h"
#include "rayx/detail/registry.h"
#include "worker/worker_loop.h"
#include "rayx/detail/runtime_api.h"
#include "rayx/errors.h"
#include "rayx/rayx.h"
#include "runtime/kv_client.h"
#include "runtime/runtime.h"
#include "transport/sync_client.h"

namespace py = pybind11;
using namespace rayx::detail;  // NOLINT: this file is the binding of that namespace
using rayx::ResourceMap;
using rayx::python::ContiguousBytes;
using rayx::python::ExceptionType;
using rayx::python::ObjectBuffer;
using rayx::python::ActorClaim;
using rayx::python::PyActor;
using rayx::python::PyObjectRef;
using rayx::python::PyPlacementGroup;
using rayx::python::ToPlacementStrategy;
using rayx::python::ToStrategyKind;
using rayx::PlacementStrategy;

namespace {

// How long one slice of a blocking wait lasts before pending signals are checked.
constexpr int64_t kSliceMs = 100;

// Raised with args (type, message, function, node) when the call that makes an
// object failed in rayx itself or its worker.
py::object& TaskErrorType() {
  static py::object* type = nullptr;
  return ExceptionType(type, "rayx._core.TaskError", PyExc_RuntimeError);
}
py::object& TimeoutType() {
  static py::object* type = nullptr;
  return ExceptionType(type, "rayx._core.GetTimeout", PyExc_TimeoutError);
}
// Raised when the node's object store and its spill disk are full (rayx._api
// raises exceptions.ObjectStoreFullError for it).
py::object& StoreFullType() {
  static py::object* type = nullptr;
  return ExceptionType(type, "rayx._core.ObjectStoreFull", PyExc_MemoryError);
}

[[noreturn]] void RaiseTaskError(const rayx::TaskError& e) {
  py::tuple args = py::make_tuple(e.type(), e.remote_message(), e.function(), e.node());
  PyErr_SetObject(TaskErrorType().ptr(), args.ptr());
  throw py::error_already_set();
}

// Raises KeyboardInterrupt (or what a signal handler raised) when a signal is
// pending. Needs the GIL.
void CheckSignals() {
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

// The deadline of a blocking call, cut into slices of at most kSliceMs.
// A negative timeout waits forever, and so does one past kForeverS (or NaN):
// steady_clock counts nanoseconds in an int64, so a deadline ~9.2e9 s away
// would wrap into the past and time out at once.
class Deadline {
 public:
  static constexpr double kForeverS = 100.0 * 365 * 24 * 3600;

  explicit Deadline(double timeout_s)
      : forever_(!(timeout_s >= 0 && timeout_s <= kForeverS)),
        at_(std::chrono::steady_clock::now() +
            std::chrono::milliseconds(static_cast<int64_t>(forever_ ? 0 : timeout_s * 1000))) {}

  bool Passed() const { return !forever_ && std::chrono::steady_clock::now() >= at_; }
  // How long the next slice lasts, in ms (at most `max_ms`): 0 once the
  // deadline has passed.
  int64_t Slice(int64_t max_ms = kSliceMs) const {
    if (forever_) return max_ms;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    at_ - std::chrono::steady_clock::now())
                    .count();
    return std::max<int64_t>(0, std::min<int64_t>(left, max_ms));
  }

 private:
  bool forever_;
  std::chrono::steady_clock::time_point at_;
};

ResourceMap ToResources(const py::dict& d) {
  ResourceMap out;
  for (auto item : d) out[py::cast<std::string>(item.first)] = py::cast<double>(item.second);
  return out;
}

// Call options as the Python layer passes them: a dict of plain values.
Placement ToPlacement(const py::dict& o) {
  Placement p;
  if (o.contains("placement_group_id")) p.placement_group_id = py::cast<std::string>(o["placement_group_id"]);
  if (o.contains("bundle_index")) p.bundle_index = py::cast<int32_t>(o["bundle_index"]);
  if (o.contains("strategy")) p.strategy = ToStrategyKind(py::cast<std::string>(o["strategy"]));
  if (o.contains("node_id")) p.affinity_node_id = py::cast<std::string>(o["node_id"]);
  if (o.contains("soft")) p.affinity_soft = py::cast<bool>(o["soft"]);
  if (o.contains("group_devices")) p.group_visible_devices = py::cast<bool>(o["group_devices"]);
  if (o.contains("worker_executable")) {
    p.worker_executable = py::cast<std::string>(o["worker_executable"]);
  }
  // A Python call with its own runtime_env: its workers' arguments (which also
  // keep their pool apart, Placement::Key) and environment additions.
  if (o.contains("worker_args")) {
    p.worker_args = py::cast<std::vector<std::string>>(o["worker_args"]);
  }
  if (o.contains("worker_env")) {
    p.worker_env = py::cast<std::map<std::string, std::string>>(o["worker_env"]);
  }
  if (o.contains("label_selector")) {
    for (auto item : py::cast<py::dict>(o["label_selector"])) {
      p.label_selector[py::cast<std::string>(item.first)] = py::cast<std::string>(item.second);
    }
  }
  return p;
}

// Arguments: bytes-like values, or PyObjectRef (resolved before the call).
std::vector<Arg> ToArgs(const py::list& args) {
  std::vector<Arg> out;
  out.reserve(args.size());
  for (const auto& a : args) {
    Arg arg;
    if (PyBytes_Check(a.ptr())) {  // the common case (rayx._serialization's blobs): no buffer_info
      arg.bytes.assign(PyBytes_AS_STRING(a.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(a.ptr())));
    } else if (py::isinstance<PyObjectRef>(a)) {
      arg.ref = py::cast<PyObjectRef&>(a).handle;
    } else {
      arg.bytes = ContiguousBytes(a).view();
    }
    out.push_back(std::move(arg));
  }
  return out;
}

ObjectBuffer Get(const PyObjectRef& ref, double timeout_s) {
  const Deadline deadline(timeout_s);
  // The slices are one wait: a worker's call that blocks is counted once, not
  // once per slice (the head hears of it once).
  BlockedScope blocked;
  while (true) {
    int64_t slice = deadline.Slice();
    try {
      py::gil_scoped_release release;
      return ObjectBuffer{GetBytes(ref.handle, slice)};
    } catch (const rayx::GetTimeoutError&) {
      if (deadline.Passed()) {
        PyErr_SetString(TimeoutType().ptr(),
                        ("rayx.get: object " + ObjectIdOf(ref.handle) + " was not ready within " +
                         std::to_string(timeout_s) + " s")
                            .c_str());
        throw py::error_already_set();
      }
    } catch (const rayx::TaskError& e) {
      RaiseTaskError(e);
    }
    CheckSignals();
  }
}

// `counts_as_blocked` false: the waiting thread runs no call (the futures
// thread of `await ref`): a worker's lease does not lend its CPU for it.
std::vector<bool> Wait(const std::vector<PyObjectRef*>& refs, size_t num_returns,
                       double timeout_s, bool counts_as_blocked) {
  std::vector<ObjectHandle> handles;
  handles.reserve(refs.size());
  for (auto* r : refs) handles.push_back(r->handle);
  const Deadline deadline(timeout_s);
  BlockedScope blocked(counts_as_blocked);  // as in Get
  while (true) {
    int64_t slice = deadline.Slice();
    std::vector<bool> ready;
    {
      py::gil_scoped_release release;
      ready = WaitObjects(handles, num_returns, slice);
    }
    size_t n = static_cast<size_t>(std::count(ready.begin(), ready.end(), true));
    if (n >= num_returns || deadline.Passed()) return ready;
    CheckSignals();
  }
}

// Writes `parts` (offset, buffer) into a new object of `size` bytes: for a large
// one straight into the node's store. The GIL is released while copying. A
// value holding ObjectRefs passes `contents`, the holds taken for them
// (Runtime::PutContainer: stored whatever its size); on an error they are let go.
PyObjectRef PutParts(size_t size, const std::vector<std::pair<size_t, py::buffer>>& parts,
                     std::vector<std::string> contents) {
  // Released with the GIL held: declared before the release below.
  std::vector<std::pair<size_t, std::unique_ptr<ContiguousBytes>>> views;
  views.reserve(parts.size());
  for (const auto& [offset, buffer] : parts) {
    auto view = std::make_unique<ContiguousBytes>(buffer);
    if (offset > size || view->view().size() > size - offset) {
      if (!contents.empty()) RequireRuntime().ReleaseHolds(contents);
      throw std::invalid_argument("put: a part ends past the object's size");
    }
    views.emplace_back(offset, std::move(view));
  }
  auto fill = [&](char* out) {
    std::memset(out, 0, size);
    for (const auto& [offset, view] : views) {
      std::memcpy(out + offset, view->view().data(), view->view().size());
    }
  };
  py::gil_scoped_release release;
  if (contents.empty()) return PyObjectRef{PutEncoded(size, fill)};
  return PyObjectRef{RequireRuntime().PutContainer(size, fill, std::move(contents))};
}

// ObjectRefs inside values (rayx._api: ObjectRef.__reduce__ and
// _import_ref; see Runtime::ExportRef and ImportRef).
py::tuple ExportRef(const PyObjectRef& ref) {
  Runtime::ExportedRef out;
  try {
    py::gil_scoped_release release;
    out = RequireRuntime().ExportRef(ref.handle);
  } catch (const rayx::TaskError& e) {
    RaiseTaskError(e);
  }
  return py::make_tuple(out.id, out.location.node_address, out.location.object_address,
                        out.location.path, out.location.size);
}

PyObjectRef ImportRef(const std::string& id, const std::string& node_address,
                      const std::string& object_address, const std::string& path, uint64_t size) {
  rayx::protocol::ObjectLocation location;
  location.node_address = node_address;
  location.object_address = object_address;
  location.path = path;
  location.size = size;
  py::gil_scoped_release release;
  return PyObjectRef{RequireRuntime().ImportRef(id, location)};
}

// How long one slice of a placement group wait lasts: each slice is a call
// the head holds, so longer than kSliceMs (Ctrl-C still acts within 0.5 s).
constexpr int64_t kPlacementSliceMs = 500;

// (state, reason) of `pg` once it is placed, or found infeasible or removed,
// or when `timeout_s` has passed (< 0: no limit), waiting in slices so that
// Ctrl-C interrupts it. The head answers a decided group at once and holds a
// wait to the end of its slice otherwise; that includes an infeasible group
// while the nodes of a restarted head rejoin (it may fit then), so an
// INFEASIBLE answer that took the whole slice is asked again.
py::tuple WaitPlacementGroupSliced(const PyPlacementGroup& pg, double timeout_s) {
  const Deadline deadline(timeout_s);
  while (true) {
    const int64_t slice = deadline.Slice(kPlacementSliceMs);
    const auto asked = std::chrono::steady_clock::now();
    PlacementGroupStatus state;
    {
      py::gil_scoped_release release;
      state = WaitPlacementGroup(pg.group, slice);
    }
    const bool held = slice > 0 && std::chrono::steady_clock::now() - asked >=
                                       std::chrono::milliseconds(slice);
    const bool undecided = state.state == rayx::PlacementGroupState::PENDING ||
                           (state.state == rayx::PlacementGroupState::INFEASIBLE && held);
    if (!undecided || deadline.Passed()) {
      return py::make_tuple(rayx::PlacementGroupStateName(state.state), state.reason);
    }
    CheckSignals();
  }
}

py::dict NodeToDict(const rayx::NodeInfo& n) {
  py::dict d;
  d["NodeID"] = n.node_id.Hex();
  d["Alive"] = n.alive;
  d["NodeManagerAddress"] = n.address;
  d["NodeManagerHostname"] = n.hostname;
  d["Resources"] = n.total;
  d["Available"] = n.available;
  d["Labels"] = n.labels;
  d["IsHeadNode"] = n.is_head_node;
  d["DeathReason"] = n.death_reason;
  return d;
}

py::list Nodes() {
  rayx::Result<rayx::ClusterStatus> status = rayx::Status::Unavailable("");
  {
    py::gil_scoped_release release;
    status = rayx::detail::CurrentClusterStatus(5000);
  }
  if (!status.ok()) throw std::runtime_error("cannot reach the head: " + status.status().message());
  py::list out;
  for (const auto& n : status->nodes) out.append(NodeToDict(n));
  return out;
}

// --- The head's package store and state, for rayx's Ray-compatible layer -------

// A connection to this runtime's head, for the calls that have no runtime
// method (packages, the state listing).
std::unique_ptr<rayx::transport::SyncClient> ConnectHead() {
  auto where = rayx::ParseHostPort(CurrentHeadAddress());
  if (!where.ok()) throw std::runtime_error("bad head address: " + where.status().message());
  auto client = rayx::transport::SyncClient::Connect(*where, rayx::detail::CurrentHeadSecurity());
  if (!client.ok()) throw std::runtime_error("cannot reach the head: " + client.status().message());
  return std::move(*client);
}

constexpr int64_t kPackageTimeoutMs = 60000;

// Packs `dir` (leaving out the tar patterns `excludes`) and uploads it to the
// head's package store unless it is there; returns its content hash.
// ValueError when it is over `limit` bytes or the head's own limit.
std::string UploadPackageOf(const std::string& dir, const std::vector<std::string>& excludes,
                            uint64_t limit) {
  py::gil_scoped_release release;
  auto archive = rayx::PackDirectory(dir, excludes, limit);
  if (!archive.ok()) {
    if (archive.status().code() == rayx::StatusCode::kInvalidArgument) {
      throw std::invalid_argument(archive.status().message());
    }
    throw std::runtime_error(archive.status().message());
  }
  auto head = ConnectHead();
  // The connection proves this process's credential: no token in the body.
  auto hash = rayx::UploadPackage(*head, "", *archive, kPackageTimeoutMs);
  if (!hash.ok()) {
    if (hash.status().code() == rayx::StatusCode::kInvalidArgument) {
      throw std::invalid_argument(dir + ": " + hash.status().message());
    }
    throw std::runtime_error("uploading " + dir + ": " + hash.status().message());
  }
  return *hash;
}

// Package `hash` unpacked at `dest` (done once: a non-empty `dest` is kept).
std::string FetchPackageTo(const std::string& hash, const std::string& dest) {
  py::gil_scoped_release release;
  std::error_code ec;
  if (std::filesystem::is_directory(dest, ec) && !std::filesystem::is_empty(dest, ec)) return dest;
  auto head = ConnectHead();
  auto archive = rayx::DownloadPackage(*head, "", hash, kPackageTimeoutMs);
  if (!archive.ok()) {
    throw std::runtime_error("cannot fetch package " + hash.substr(0, 12) + ": " +
                             archive.status().message());
  }
  rayx::Status unpacked = rayx::UnpackArchive(*archive, dest);
  if (!unpacked.ok()) throw std::runtime_error(unpacked.message());
  return dest;
}

// The head's leases and placement groups (what `rayx list` shows), as dicts.
py::dict ListState() {
  rayx::Result<rayx::protocol::ListStateReply> reply = rayx::Status::Unavailable("");
  {
    py::gil_scoped_release release;
    auto head = ConnectHead();
    rayx::protocol::ListStateRequest req;
    reply = head->Call<rayx::protocol::ListStateReply>(req, 5000);
  }
  if (!reply.ok()) throw std::runtime_error("the head did not list its state: " +
                                            reply.status().message());
  py::list leases;
  for (const auto& l : reply->leases) {
    py::dict d;
    d["lease_id"] = l.lease_id.Hex();
    d["job_id"] = l.job_id.Hex();
    d["kind"] = std::string(rayx::protocol::Name(l.kind));
    d["state"] = std::string(rayx::protocol::Name(l.state));
    d["node_id"] = l.node_id;
    d["node_address"] = l.node_address;
    d["pid"] = l.pid;
    d["resources"] = l.resources;
    d["gpu_ids"] = l.gpu_ids;
    d["placement_group_id"] = l.placement_group_id.Hex();
    d["bundle_index"] = l.bundle_index;
    d["actor_name"] = l.actor_name;
    d["class_name"] = l.class_name;
    d["detached"] = l.detached;
    leases.append(d);
  }
  py::list groups;
  for (const auto& g : reply->placement_groups) {
    py::dict d;
    d["placement_group_id"] = g.placement_group_id.Hex();
    d["name"] = g.name;
    d["job_id"] = g.job_id.Hex();
    d["strategy"] = std::string(rayx::protocol::Name(g.strategy));
    d["bundles"] = g.bundles;
    d["state"] = std::string(rayx::protocol::Name(g.state));
    d["reason"] = g.reason;
    py::list nodes;
    for (const auto& where : g.locations) nodes.append(where.node_id);
    d["bundle_nodes"] = nodes;
    d["detached"] = g.detached;
    groups.append(d);
  }
  py::dict out;
  out["leases"] = leases;
  out["placement_groups"] = groups;
  return out;
}

// A handle to the existing placement group `id` (made by another process):
// waits and ready() ask the head about it.
PyPlacementGroup PlacementGroupFromId(const std::string& id) {
  auto core = std::make_shared<PlacementGroupCore>();
  core->id = rayx::PlacementGroupId::FromWire(id);
  core->answered = true;
  core->state.id = id;
  core->state.state = rayx::PlacementGroupState::PENDING;
  return PyPlacementGroup{std::move(core)};
}

// --- Python workers ---------------------------------------------------------

// The Python function that runs calls in a worker: dispatch(kind, instance,
// args) with kind "task", "create" or "method" and args a list of read-only
// memoryviews valid during the call only. It returns the result's bytes
// ("create": the instance). Once the actor runs its calls concurrently
// (defer_method_calls), methods are dispatch("method", instance, args, done):
// it returns nothing and answers later through `done` (a DeferredCallHandle).
py::object* g_dispatch = nullptr;
// Set once, by the Python actor's creation, on the loop's thread.
bool g_defer_methods = false;

// The call running on this thread, not deferred (set during its dispatch on
// the worker loop's thread): where a generator's items go (yield_item).
thread_local CallControl* tl_control = nullptr;

// A deferred call as Python sees it: succeed(bytes) or fail(type, message),
// once, from any thread; item(bytes) before that for a generator's items.
struct DeferredCallHandle {
  DeferredCall call;
};

py::list ArgViewsToList(const ArgViews& args) {
  py::list views;
  for (std::string_view a : args) {
    views.append(py::reinterpret_steal<py::object>(
        PyMemoryView_FromMemory(const_cast<char*>(a.data()), static_cast<Py_ssize_t>(a.size()), PyBUF_READ)));
  }
  return views;
}

std::string Describe(py::error_already_set& e) {
  std::string text = e.what();
  try {
    py::object format = py::module_::import("traceback").attr("format_exception");
    py::list lines = format(e.type(), e.value(), e.trace());
    text.clear();
    for (const auto& l : lines) text += py::cast<std::string>(l);
  } catch (...) {
  }
  return text;
}

// `instance`: the actor (nullptr for a task). `control`: the call's, for a
// generator's items (nullptr: the call cannot yield any).
std::string Dispatch(const char* kind, const py::object* instance, const ArgViews& args,
                     CallControl* control = nullptr) {
  struct Current {
    CallControl* outer = tl_control;
    explicit Current(CallControl* c) { tl_control = c; }
    ~Current() { tl_control = outer; }
  } current(control);
  py::gil_scoped_acquire gil;
  try {
    py::object result = (*g_dispatch)(kind, instance ? *instance : py::none(), ArgViewsToList(args));
    return std::string(ContiguousBytes(result).view());
  } catch (py::error_already_set& e) {
    throw std::runtime_error(Describe(e));
  }
}

void RegisterPythonFunctions() {
  auto& registry = FunctionRegistry::Instance();
  RemoteFunction task;
  task.name = "rayx.py.task";
  task.invoke_deferrable = [](void*, const ArgViews& args, CallControl& control) {
    return Dispatch("task", nullptr, args, &control);
  };
  registry.Add(task.name, task);

  // A call from C++ (rayx::PyFunction): module, function and msgpack arguments.
  RemoteFunction xlang;
  xlang.name = "rayx.py.xlang";
  xlang.invoke = [](void*, const ArgViews& args) { return Dispatch("xlang", nullptr, args); };
  registry.Add(xlang.name, xlang);

  RemoteFunction actor;
  actor.name = "rayx.py.actor";
  actor.create = [](const ArgViews& args) -> std::shared_ptr<void> {
    py::gil_scoped_acquire gil;
    try {
      py::object instance = (*g_dispatch)("create", py::none(), ArgViewsToList(args));
      // Dropped with the GIL held: Python objects die under the GIL.
      return std::shared_ptr<void>(new py::object(std::move(instance)), [](void* p) {
        py::gil_scoped_acquire again;
        delete static_cast<py::object*>(p);
      });
    } catch (py::error_already_set& e) {
      throw std::runtime_error(Describe(e));
    }
  };
  registry.Add(actor.name, actor);

  RemoteFunction method;
  method.name = "rayx.py.method";
  method.invoke_deferrable = [](void* self, const ArgViews& args, CallControl& control) {
    const auto* instance = static_cast<const py::object*>(self);
    if (!g_defer_methods) return Dispatch("method", instance, args, &control);
    py::gil_scoped_acquire gil;
    try {
      DeferredCallHandle done{control.Defer()};
      (*g_dispatch)("method", instance ? *instance : py::none(), ArgViewsToList(args),
                    std::move(done));
    } catch (py::error_already_set& e) {
      throw std::runtime_error(Describe(e));
    }
    return std::string();
  };
  registry.Add(method.name, method);
}

[[noreturn]] void ServeWorker(py::object dispatch) {
  if (!std::getenv("RAYX_WORKER_MODE")) {
    throw std::runtime_error("rayx._worker is started by a node agent, not by hand");
  }
  g_dispatch = new py::object(std::move(dispatch));  // lives as long as the process
  RegisterPythonFunctions();
  py::gil_scoped_release release;
  rayx::Init();  // serves tasks; never returns in a worker
  std::_Exit(1);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "rayx's runtime, as the rayx package uses it";
  m.attr("TaskError") = TaskErrorType();
  m.attr("GetTimeout") = TimeoutType();
  m.attr("ObjectStoreFull") = StoreFullType();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const rayx::ObjectStoreFullError& e) {
      PyErr_SetString(StoreFullType().ptr(), e.what());
    }
  });
  m.attr("INLINE_OBJECT_LIMIT") = kInlineObjectLimit;
  // "PACK, SPREAD, STRICT_PACK or STRICT_SPREAD": the wire's one table.
  m.attr("PLACEMENT_STRATEGY_NAMES") = rayx::protocol::NameList<rayx::protocol::PlacementStrategy>();
  // A worker writes it, then a name, before output of another call (rayx._worker._announce).
  m.attr("OUTPUT_NAME_MARKER") = std::string(rayx::protocol::kOutputNameMarker);
  // A deferred call failed with this type (message: the exit status) ends the
  // worker after the answers before it are sent (WorkerLoop::CompleteDeferred).
  m.attr("WORKER_EXIT_ANSWER") = std::string(rayx::detail::WorkerLoop::kWorkerExitAnswer);
  // The names of rayx's task error kinds (TaskError's first field for them),
  // from the one table C++ uses: rayx.exceptions maps them to Ray's classes.
  {
    py::list kinds;
    for (std::string_view name : rayx::protocol::EnumNames<rayx::protocol::TaskErrorKind>::kNames) {
      kinds.append(std::string(name));
    }
    m.attr("TASK_ERROR_KINDS") = py::tuple(kinds);
  }

  py::class_<ObjectBuffer>(m, "ObjectBuffer", py::buffer_protocol())
      .def_buffer([](ObjectBuffer& b) {
        return py::buffer_info(const_cast<char*>(b.bytes.view.data()), 1,
                               py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.bytes.view.size())}, {1}, true);
      })
      .def("__len__", [](const ObjectBuffer& b) { return b.bytes.view.size(); })
      .def_property_readonly("address", [](const ObjectBuffer& b) {
        return reinterpret_cast<uintptr_t>(b.bytes.view.data());
      });

  py::class_<PyObjectRef>(m, "ObjectRefCore")
      .def_property_readonly("id", [](const PyObjectRef& r) { return ObjectIdOf(r.handle); });
  py::class_<PyActor>(m, "ActorCore")
      .def_property_readonly("id", [](const PyActor& a) { return ActorIdOf(a.actor); })
      .def_property_readonly("metadata", [](const PyActor& a) {
        return py::bytes(ActorMetadataOf(a.actor));
      });
  py::class_<PyPlacementGroup>(m, "PlacementGroupCore")
      .def_property_readonly("id", [](const PyPlacementGroup& p) { return PlacementGroupIdOf(p.group); });

  m.def("init", [](const std::string& address, const std::string& token, double num_cpus,
                   double num_gpus, const py::dict& resources, const std::string& temp_dir,
                   const std::vector<std::string>& private_cluster_flags, bool log_to_driver) {
    rayx::Options options;
    options.log_to_driver = log_to_driver;
    options.address = address;
    options.token = token;
    options.temp_dir = temp_dir;
    options.num_cpus = num_cpus;
    options.num_gpus = num_gpus;
    options.resources = ToResources(resources);
    options.private_cluster_flags = private_cluster_flags;
    py::gil_scoped_release release;
    rayx::Init(options);
  }, py::arg("address"), py::arg("token"), py::arg("num_cpus"), py::arg("num_gpus"),
        py::arg("resources"), py::arg("temp_dir") = "",
        py::arg("private_cluster_flags") = std::vector<std::string>{},
        py::arg("log_to_driver") = true);
  m.def("shutdown", []() {
    py::gil_scoped_release release;
    rayx::Shutdown();
  });
  m.def("is_initialized", &rayx::IsInitialized);
  m.def("set_worker_command", &SetWorkerCommand);
  m.def("serve_worker", &ServeWorker);
  // Ends the worker once the results it sent have left (rayx::detail::ExitWorker).
  m.def("exit_worker", [](int status) { rayx::detail::ExitWorker(status); });
  // The actor this worker hosts runs its calls concurrently: from now on each
  // method call is handed to dispatch with a DeferredCallHandle.
  m.def("defer_method_calls", []() { g_defer_methods = true; });
  py::class_<DeferredCallHandle>(m, "DeferredCallHandle")
      .def("succeed", [](const DeferredCallHandle& h, const py::buffer& value) {
        std::string bytes(ContiguousBytes(value).view());
        h.call.Succeed(std::move(bytes));
      })
      .def("fail", [](const DeferredCallHandle& h, const std::string& type,
                      const std::string& message) { h.call.Fail(type, message); })
      .def("item", [](const DeferredCallHandle& h, const py::buffer& value) {
        std::string bytes(ContiguousBytes(value).view());
        h.call.Item(std::move(bytes));
      });
  // A generator call running on this thread yields `value` (its bytes): sent
  // to the caller now (a deferred call yields through its handle's item()).
  m.def("yield_item", [](const py::buffer& value) {
    if (tl_control == nullptr) {
      throw std::runtime_error("yield_item: no generator call runs on this thread");
    }
    std::string bytes(ContiguousBytes(value).view());
    CallControl* control = tl_control;
    py::gil_scoped_release release;
    control->Yield(std::move(bytes));
  });
  // Item `index` of the generator call whose result is `ref` (see
  // rayx::detail::GeneratorItem): claim each index once.
  m.def("generator_item", [](const PyObjectRef& ref, uint32_t index) {
    return PyObjectRef{GeneratorItem(ref.handle, index)};
  });
  m.def("object_count", []() { return rayx::detail::ObjectCount(); });
  m.def("job_id", []() { return CurrentJobId(); });
  m.def("node_ip", []() { return CurrentNodeIp(); });
  m.def("head_address", []() { return CurrentHeadAddress(); });
  m.def("gpu_ids", &rayx::GetGpuIds);

  m.def("submit_task", [](const std::string& function, const py::list& args, const std::string& name,
                          const py::dict& resources, bool resources_set, const py::dict& placement,
                          int max_retries, bool retry_exceptions) {
    CallOptions options;
    options.name = name;
    options.max_retries = max_retries;
    options.retry_exceptions = retry_exceptions;
    // rayx._worker marks an exception that the task's retry_exceptions covers so.
    if (retry_exceptions) options.retriable_value_prefix = std::string("RXP1\x03", 5);
    options.resources = ToResources(resources);
    options.resources_set = resources_set;
    options.placement = ToPlacement(placement);
    std::vector<Arg> a = ToArgs(args);
    py::gil_scoped_release release;
    return PyObjectRef{SubmitTask(function, std::move(a), options)};
  });
  m.def("create_actor", [](const py::list& args, const std::string& name, bool detached,
                           const py::dict& resources, const py::dict& placement, int max_restarts,
                           int max_task_retries, const py::bytes& metadata) {
    ActorOptions options;
    options.name = name;
    options.metadata = metadata;
    options.detached = detached;
    options.max_restarts = max_restarts;
    options.max_task_retries = max_task_retries;
    options.resources = ToResources(resources);
    options.placement = ToPlacement(placement);
    std::vector<Arg> a = ToArgs(args);
    ActorPtr actor;
    {
      py::gil_scoped_release release;
      actor = CreateActor("rayx.py.actor", std::move(a), options);
    }
    // Ray's lifetime: an unnamed, non-detached actor goes with its handle.
    std::shared_ptr<ActorClaim> claim;
    if (name.empty() && !detached) claim = std::make_shared<ActorClaim>(actor);
    return PyActor{actor, std::move(claim)};
  });
  m.def("submit_actor_task", [](const PyActor& actor, const py::list& args) {
    std::vector<Arg> a = ToArgs(args);
    py::gil_scoped_release release;
    return PyObjectRef{SubmitActorTask(actor.actor, "rayx.py.method", std::move(a))};
  });
  m.def("kill_actor", [](const PyActor& actor) {
    py::gil_scoped_release release;
    KillActor(actor.actor);
  });
  m.def("get_named_actor", [](const std::string& name) {
    py::gil_scoped_release release;
    return PyActor{GetNamedActor(name)};
  });
  m.def("serialize_actor", [](const PyActor& a) {
    // Another process may hold it now: the creator no longer releases it.
    if (a.claim) a.claim->escaped = true;
    return py::bytes(SerializeActor(a.actor));
  });
  m.def("deserialize_actor", [](const std::string& bytes) {
    py::gil_scoped_release release;
    return PyActor{DeserializeActor(bytes)};
  });

  m.def("msgpack_dumps", &rayx::python::MsgpackDumps, py::arg("value"), py::arg("what") = "value");
  m.def("msgpack_loads", &rayx::python::MsgpackLoads, py::arg("data"));
  m.def("put_parts", &PutParts, py::arg("size"), py::arg("parts"),
        py::arg("contents") = std::vector<std::string>{});
  m.def("export_ref", &ExportRef);
  m.def("import_ref", &ImportRef);
  m.def("release_holds", [](const std::vector<std::string>& paths) {
    if (Runtime* runtime = CurrentRuntime()) runtime->ReleaseHolds(paths);
  });
  m.def("get", &Get, py::arg("ref"), py::arg("timeout_s"));
  m.def("wait", &Wait, py::arg("refs"), py::arg("num_returns"), py::arg("timeout_s"),
        py::arg("counts_as_blocked") = true);

  m.def("kv_put", [](const std::string& ns, const std::string& key, const py::bytes& value,
                     bool overwrite, bool job_scoped) {
    std::string v = value;
    py::gil_scoped_release release;
    return KvPut(ns, key, v, overwrite, job_scoped);
  });
  m.def("kv_get", [](const std::string& ns, const std::string& key) -> py::object {
    std::optional<std::string> v;
    {
      py::gil_scoped_release release;
      v = KvGet(ns, key);
    }
    if (!v) return py::none();
    return py::bytes(*v);
  });

  m.def("nodes", &Nodes);
  m.def("upload_package", &UploadPackageOf, py::arg("dir"), py::arg("excludes"), py::arg("limit"));
  m.def("fetch_package", &FetchPackageTo, py::arg("hash"), py::arg("dest"));
  m.def("list_state", &ListState);
  m.def("placement_group_from_id", &PlacementGroupFromId);
  // The head address of the cluster `rayx start` runs on this machine ("" when none).
  m.def("local_cluster_address", [](const std::string& temp_dir) {
    auto local = FindLocalCluster(temp_dir.empty() ? DefaultTempDir() : temp_dir);
    return local.ok() ? local->address : std::string();
  });

  m.def("create_placement_group", [](const std::string& name, const std::vector<py::dict>& bundles,
                                     const std::string& strategy, bool detached) {
    std::vector<ResourceMap> b;
    for (const auto& d : bundles) b.push_back(ToResources(d));
    PlacementStrategy s = ToPlacementStrategy(strategy);
    py::gil_scoped_release release;
    return PyPlacementGroup{CreatePlacementGroup(name, b, s, detached)};
  });
  m.def("wait_placement_group", &WaitPlacementGroupSliced);
  m.def("placement_group_ready", [](const PyPlacementGroup& pg, const py::bytes& value) {
    std::string v = value;
    py::gil_scoped_release release;
    return PyObjectRef{PlacementGroupReady(pg.group, std::move(v))};
  });
  m.def("remove_placement_group", [](const std::string& id) {
    py::gil_scoped_release release;
    RemovePlacementGroup(id);
  });

  rayx::python::BindCollective(m);
  rayx::python::BindTrain(m);
}
