// Python values <-> msgpack for calls between Python and C++, with the same
// nesting bound on both sides.
#include "msgpack_values.h"

#include <msgpack.hpp>

#include <cstdint>
#include <string_view>
#include <vector>

#include "bindings.h"
#include "rayx/detail/bounded_unpack.h"

namespace rayx::python {
namespace py = pybind11;
using detail::kMaxValueDepth;

namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

// Walks a Python value depth first and packs it. Lists, tuples and dicts are
// read through the C API's own storage (PyList_GET_ITEM, PyDict_Next), so no
// Python code runs during the walk: a subclass's __len__ or __getitem__
// cannot change the value under it or make it endless. A container met again
// inside itself is refused (it would nest forever); the path to a bad part is
// only spelled out when there is an error.
class ValuePacker {
 public:
  ValuePacker(Packer& pk, const std::string& what) : pk_(pk), what_(what) {}

  void Pack(PyObject* o) {
    if (o == Py_None) {
      pk_.pack_nil();
    } else if (PyBool_Check(o)) {
      pk_.pack(o == Py_True);
    } else if (PyLong_Check(o)) {
      PackInt(o);
    } else if (PyFloat_Check(o)) {
      pk_.pack(PyFloat_AS_DOUBLE(o));
    } else if (PyUnicode_Check(o)) {
      Py_ssize_t n = 0;
      const char* s = PyUnicode_AsUTF8AndSize(o, &n);  // UnicodeEncodeError for lone surrogates
      if (s == nullptr) throw py::error_already_set();
      uint32_t size = Size(n, "a str");
      pk_.pack_str(size);
      pk_.pack_str_body(s, size);
    } else if (PyBytes_Check(o)) {
      PackBin(PyBytes_AS_STRING(o), PyBytes_GET_SIZE(o));
    } else if (PyByteArray_Check(o)) {
      PackBin(PyByteArray_AS_STRING(o), PyByteArray_GET_SIZE(o));
    } else if (PyList_Check(o) || PyTuple_Check(o)) {
      PackSequence(o);
    } else if (PyDict_Check(o)) {
      PackDict(o);
    } else {
      throw py::type_error("cannot pass a " + std::string(Py_TYPE(o)->tp_name) + " (at " +
                           Path() + ") between Python and C++: values that cross languages are "
                           "None, bool, int, float, str, bytes, list, tuple and dict");
    }
  }

 private:
  // An open list, tuple or dict and where the walk is inside it.
  struct Level {
    py::object container;  // held: the walk keeps borrowed items of it
    Py_ssize_t index = 0;  // sequences
    PyObject* key = nullptr;  // dicts: the entry's key
    bool at_key = false;      // dicts: packing the key itself
  };

  void PackInt(PyObject* o) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow == 0) {
      pk_.pack(static_cast<int64_t>(v));
      return;
    }
    unsigned long long u = PyLong_AsUnsignedLongLong(o);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      throw py::value_error("the int at " + Path() + " does not fit in 64 bits for C++");
    }
    pk_.pack(static_cast<uint64_t>(u));
  }

  void PackBin(const char* data, Py_ssize_t n) {
    uint32_t size = Size(n, "a bytes value");
    pk_.pack_bin(size);
    pk_.pack_bin_body(data, size);
  }

  void PackSequence(PyObject* o) {
    const bool list = PyList_Check(o);
    Py_ssize_t n = list ? PyList_GET_SIZE(o) : PyTuple_GET_SIZE(o);
    uint32_t size = Size(n, list ? "a list" : "a tuple");
    const size_t at = Enter(o);
    pk_.pack_array(size);
    for (Py_ssize_t i = 0; i < n; ++i) {
      // Only a finalizer run by the allocator could resize a list meanwhile.
      if (list && i >= PyList_GET_SIZE(o)) ChangedSize();
      levels_[at].index = i;
      Pack(list ? PyList_GET_ITEM(o, i) : PyTuple_GET_ITEM(o, i));
    }
    Leave();
  }

  void PackDict(PyObject* o) {
    Py_ssize_t n = PyDict_GET_SIZE(o);
    uint32_t size = Size(n, "a dict");
    const size_t at = Enter(o);
    pk_.pack_map(size);
    Py_ssize_t pos = 0, seen = 0;
    PyObject* key = nullptr;
    PyObject* value = nullptr;
    while (PyDict_Next(o, &pos, &key, &value)) {
      if (++seen > n) ChangedSize();
      levels_[at].key = key;
      levels_[at].at_key = true;
      Pack(key);
      levels_[at].at_key = false;
      Pack(value);
    }
    if (seen != n) ChangedSize();
    Leave();
  }

  // Opens `container`; returns its level's index.
  size_t Enter(PyObject* container) {
    if (levels_.size() >= kMaxValueDepth) {
      throw py::value_error("a value crossing to C++ nests deeper than " +
                            std::to_string(kMaxValueDepth) + " lists, tuples and dicts at " +
                            Path());
    }
    for (const Level& l : levels_) {
      if (l.container.ptr() == container) {
        throw py::value_error("the " + std::string(Py_TYPE(container)->tp_name) + " at " +
                              Path() + " contains itself: it cannot cross to C++");
      }
    }
    levels_.push_back(Level{py::reinterpret_borrow<py::object>(container)});
    return levels_.size() - 1;
  }
  void Leave() { levels_.pop_back(); }

  [[noreturn]] void ChangedSize() {
    throw py::value_error("the container at " + Path() + " changed size while it was packed");
  }

  // msgpack counts sizes in 32 bits.
  uint32_t Size(Py_ssize_t n, const char* what) {
    if (static_cast<uint64_t>(n) > UINT32_MAX) {
      throw py::value_error(std::string(what) + " of " + std::to_string(n) + " at " + Path() +
                            " is too large to cross to C++ (msgpack holds at most 2^32 - 1)");
    }
    return static_cast<uint32_t>(n);
  }

  // "argument 0 of f[2] key 'a'", "argument 0 of f[2]['a']".
  std::string Path() const {
    std::string out = what_;
    for (const Level& l : levels_) {
      if (!PyDict_Check(l.container.ptr())) {
        out += "[" + std::to_string(l.index) + "]";
        continue;
      }
      std::string key = "?";
      try {
        key = py::cast<std::string>(py::repr(l.key));
      } catch (const std::exception&) {
        PyErr_Clear();  // a key whose repr fails still gets its place named
      }
      out += l.at_key ? " key " + key : "[" + key + "]";
    }
    return out;
  }

  Packer& pk_;
  const std::string& what_;
  std::vector<Level> levels_;
};

// `o` as Python: arrays are lists, or tuples where they are (inside) a map key,
// which must be hashable.
py::object ToPython(const msgpack::object& o, size_t depth, bool in_key) {
  switch (o.type) {
    case msgpack::type::NIL: return py::none();
    case msgpack::type::BOOLEAN: return py::bool_(o.via.boolean);
    case msgpack::type::POSITIVE_INTEGER: return py::int_(o.via.u64);
    case msgpack::type::NEGATIVE_INTEGER: return py::int_(o.via.i64);
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return py::float_(o.via.f64);
    case msgpack::type::STR: return py::str(o.via.str.ptr, o.via.str.size);
    case msgpack::type::BIN: return py::bytes(o.via.bin.ptr, o.via.bin.size);
    default: break;
  }
  if (o.type != msgpack::type::ARRAY && o.type != msgpack::type::MAP) {
    throw py::type_error("a C++ value of msgpack type " + std::to_string(static_cast<int>(o.type)) +
                         " has no Python equivalent");
  }
  // UnpackBounded already keeps values this shallow; the check keeps this
  // recursion bounded whatever object it is given.
  if (depth >= kMaxValueDepth) {
    throw py::value_error("a C++ value nests deeper than " + std::to_string(kMaxValueDepth) +
                          " arrays and maps");
  }
  if (o.type == msgpack::type::ARRAY) {
    const uint32_t n = o.via.array.size;
    if (in_key) {
      py::tuple out(n);
      for (uint32_t i = 0; i < n; ++i) {
        PyTuple_SET_ITEM(out.ptr(), i, ToPython(o.via.array.ptr[i], depth + 1, true).release().ptr());
      }
      return out;
    }
    py::list out(n);
    for (uint32_t i = 0; i < n; ++i) {
      PyList_SET_ITEM(out.ptr(), i, ToPython(o.via.array.ptr[i], depth + 1, false).release().ptr());
    }
    return out;
  }
  if (in_key) {
    throw py::type_error("a C++ map used as a map key has no hashable Python equivalent");
  }
  py::dict out;
  for (uint32_t i = 0; i < o.via.map.size; ++i) {
    py::object key = ToPython(o.via.map.ptr[i].key, depth + 1, true);
    py::object value = ToPython(o.via.map.ptr[i].val, depth + 1, false);
    if (PyDict_SetItem(out.ptr(), key.ptr(), value.ptr()) != 0) throw py::error_already_set();
  }
  return out;
}

}  // namespace

py::bytes MsgpackDumps(py::handle value, const std::string& what) {
  msgpack::sbuffer buffer;
  Packer pk(buffer);
  ValuePacker(pk, what).Pack(value.ptr());
  return py::bytes(buffer.data(), buffer.size());
}

py::object MsgpackLoads(py::handle data) {
  ContiguousBytes bytes(data);
  msgpack::object_handle handle;
  try {
    handle = detail::UnpackBounded(bytes.view());
  } catch (const detail::UnpackError& e) {
    throw py::value_error(std::string("not a msgpack value rayx accepts: ") + e.what());
  }
  return ToPython(handle.get(), 0, false);
}

}  // namespace rayx::python
