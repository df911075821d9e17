// Fuzzes the C++ side of values crossing from C++ to Python
// (python_bindings/src/msgpack_values.h) in an embedded interpreter: any bytes
// must give a Python value or a clean ValueError, TypeError or BufferError;
// what loads must dump again, to a fixed point.
//
// The other Python value format, rayx._serialization's pickled blobs, is not
// fuzzed: unpickling runs code by design, so those blobs may only come from
// authenticated members of the same job (the sockets' business), never from
// anyone else.
#include <pybind11/embed.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fuzz_util.h"
#include "msgpack_values.h"

namespace py = pybind11;

namespace {

// A clean refusal: a Python exception of the documented kinds, or pybind11's
// C++ spelling of one.
bool Expected(py::error_already_set& e) {
  return e.matches(PyExc_ValueError) || e.matches(PyExc_TypeError) ||
         e.matches(PyExc_BufferError);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Python's own allocator would hide its blocks from AddressSanitizer.
  setenv("PYTHONMALLOC", "malloc", 1);
  // For the life of the process, never finalized; held by a static so that
  // LeakSanitizer sees it reachable.
  static py::scoped_interpreter* interpreter = new py::scoped_interpreter();
  (void)interpreter;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using rayx::fuzz::Check;
  using rayx::python::MsgpackDumps;
  using rayx::python::MsgpackLoads;
  py::object value;
  try {
    value = MsgpackLoads(py::memoryview::from_memory(data, static_cast<py::ssize_t>(size)));
  } catch (py::error_already_set& e) {
    Check(Expected(e), std::string("an unexpected Python exception: ") + e.what());
    return 0;
  } catch (const py::value_error&) {
    return 0;
  } catch (const py::type_error&) {
    return 0;
  }
  try {
    py::bytes once = MsgpackDumps(value, "a fuzzed value");
    py::bytes twice = MsgpackDumps(MsgpackLoads(once), "a fuzzed value");
    Check(once.equal(twice), "dumping what msgpack_loads made is not a fixed point");
  } catch (py::error_already_set& e) {
    Check(false, std::string("a loaded value does not dump and load again: ") + e.what());
  } catch (const std::exception& e) {
    Check(false, std::string("a loaded value does not dump and load again: ") + e.what());
  }
  return 0;
}
