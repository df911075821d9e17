// The parts of rayx._core defined outside core_module.cc.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "rayx/detail/runtime_api.h"

namespace rayx::python {

// What rayx._core's Python objects hold.
// An object's bytes, read-only, kept alive (mapped from the store or in memory)
// for as long as this object or a memoryview of it lives.
struct ObjectBuffer {
  detail::ObjectBytes bytes;
};

struct PyObjectRef {
  detail::ObjectHandle handle;
};

// The creator's claim on an unnamed, non-detached actor it made: when the last
// Python object holding it goes (the handle and the methods cached on it), the
// actor is released (stopped once its calls have answered), unless the handle
// was pickled meanwhile, for another process may call it then. Held by the
// ActorCore objects of that handle, so a call made through a method of a
// temporary handle is submitted before the release.
struct ActorClaim {
  detail::ActorPtr actor;
  bool escaped = false;  // set with the GIL held (serialize_actor)
  explicit ActorClaim(detail::ActorPtr a) : actor(std::move(a)) {}
  ~ActorClaim() {
    if (!escaped) detail::ReleaseActor(actor);  // non-blocking
  }
  ActorClaim(const ActorClaim&) = delete;
  ActorClaim& operator=(const ActorClaim&) = delete;
};

struct PyActor {
  detail::ActorPtr actor;
  std::shared_ptr<ActorClaim> claim;  // the creator's own handle only
};

struct PyPlacementGroup {
  detail::PlacementGroupPtr group;
};


// The user's names of strategies, converted at this edge. Each throws
// ValueError naming the valid names for any other.
inline PlacementStrategy ToPlacementStrategy(const std::string& s) {
  if (s == "PACK") return PlacementStrategy::PACK;
  if (s == "SPREAD") return PlacementStrategy::SPREAD;
  if (s == "STRICT_PACK") return PlacementStrategy::STRICT_PACK;
  if (s == "STRICT_SPREAD") return PlacementStrategy::STRICT_SPREAD;
  throw pybind11::value_error("placement strategy " + s +
                              ": use PACK, SPREAD, STRICT_PACK or STRICT_SPREAD");
}
// "" and "DEFAULT" name the default (hybrid) strategy.
inline detail::StrategyKind ToStrategyKind(const std::string& s) {
  if (s.empty() || s == "DEFAULT") return detail::StrategyKind::kDefault;
  if (s == "SPREAD") return detail::StrategyKind::kSpread;
  if (s == "NODE_AFFINITY") return detail::StrategyKind::kNodeAffinity;
  throw pybind11::value_error("scheduling strategy " + s +
                              ": use DEFAULT, SPREAD or NODE_AFFINITY");
}

// A new exception class `qualified_name` deriving from `base`, made once and
// kept for the life of the process (never freed: it outlives the module).
inline pybind11::object& ExceptionType(pybind11::object*& slot, const char* qualified_name,
                                       PyObject* base) {
  if (slot == nullptr) {
    slot = new pybind11::object(pybind11::reinterpret_steal<pybind11::object>(
        PyErr_NewException(qualified_name, base, nullptr)));
  }
  return *slot;
}

// An InterruptScope whose check raises Ctrl-C's KeyboardInterrupt out of a
// long librayx call made without the GIL (group creation): the call unwinds,
// cleaning up what it made, and Interrupted reaches InterruptedToPython.
class CtrlCInterrupts {
 public:
  CtrlCInterrupts()
      : scope_([] {
          pybind11::gil_scoped_acquire gil;
          // The KeyboardInterrupt stays set until InterruptedToPython raises it.
          if (PyErr_CheckSignals() != 0) throw detail::Interrupted{};
        }) {}

 private:
  detail::InterruptScope scope_;
};

// Runs `fn` without the GIL; Ctrl-C ends its waits (CtrlCInterrupts).
template <typename F>
auto RunInterruptibly(F&& fn) -> decltype(fn()) {
  CtrlCInterrupts interrupts;
  try {
    pybind11::gil_scoped_release release;
    return fn();
  } catch (const detail::Interrupted&) {
    throw pybind11::error_already_set();  // the KeyboardInterrupt, with the GIL held again
  }
}

// rayx._core.collective: collective groups (Gloo on CPU, NCCL on GPU) for
// rayx.util.collective and rayx.train.
void BindCollective(pybind11::module_& m);

// rayx._core.train: actor groups of Python actors and checkpoints for
// rayx.train (train_module.cc).
void BindTrain(pybind11::module_& m);

}  // namespace rayx::python
