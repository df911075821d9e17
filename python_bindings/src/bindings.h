// The parts of rayx._core defined outside core_module.cc.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <string_view>

#include "rayx/detail/runtime_api.h"
#include "runtime/api_enums.h"

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


// A read-only view of a bytes-like object's memory as one run of bytes.
// Construct and destroy it with the GIL held; the view may be read without.
// Throws error_already_set (BufferError) for an object whose memory is not
// contiguous, such as a strided memoryview (memoryview(b)[::2]): its length
// counts items that are not one after another.
class ContiguousBytes {
 public:
  explicit ContiguousBytes(pybind11::handle o) {
    if (PyObject_GetBuffer(o.ptr(), &buffer_, PyBUF_SIMPLE) != 0) {
      throw pybind11::error_already_set();
    }
  }
  ~ContiguousBytes() { PyBuffer_Release(&buffer_); }
  ContiguousBytes(const ContiguousBytes&) = delete;
  ContiguousBytes& operator=(const ContiguousBytes&) = delete;

  std::string_view view() const {
    return {static_cast<const char*>(buffer_.buf), static_cast<size_t>(buffer_.len)};
  }

 private:
  Py_buffer buffer_{};
};

// The user's names of strategies, converted at this edge through the wire's
// one table of names. Each throws ValueError naming the valid names for any
// other.
template <typename Wire>
Wire ParseName(const std::string& s) {
  auto parsed = protocol::Parse<Wire>(s);
  if (!parsed.ok()) throw pybind11::value_error(parsed.status().message());
  return *parsed;
}
inline PlacementStrategy ToPlacementStrategy(const std::string& s) {
  return detail::FromWire(ParseName<protocol::PlacementStrategy>(s));
}
// "" and "DEFAULT" name the default (hybrid) strategy.
inline detail::StrategyKind ToStrategyKind(const std::string& s) {
  return detail::FromWire(ParseName<protocol::LeaseStrategy>(s));
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
