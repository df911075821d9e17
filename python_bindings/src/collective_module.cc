// rayx._core.collective: the collective groups of core/collective for Python
// (rayx.util.collective builds Ray's API on it).
//
// A tensor arrives either as an object with the buffer protocol (numpy arrays,
// torch CPU tensors through .numpy()) or, for GPU memory, as a tuple
// ("cuda", data_ptr, count, dtype name, stream). Buffers must be C-contiguous,
// of int32, int64, float32 or float64, and writable where the operation writes.
// Every operation releases the GIL while it runs; its deadline and error
// messages are core/collective's (a CollectiveError names the group, the
// operation and the failed rank), raised here as rayx._core.collective.Error
// with args (message, failed_rank).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "collective/collective_driver.h"
#include "collective/group_registry.h"
#include "rayx/collective.h"

namespace py = pybind11;

namespace rayx::python {
namespace {

using collective::Backend;
using collective::CollectiveError;
using collective::DataType;
using collective::ReduceOp;

py::object& ErrorType() {
  static py::object* type = nullptr;
  return ExceptionType(type, "rayx._core.collective.Error", PyExc_RuntimeError);
}

[[noreturn]] void Raise(const CollectiveError& e) {
  py::tuple args = py::make_tuple(std::string(e.what()), e.failed_rank());
  PyErr_SetObject(ErrorType().ptr(), args.ptr());
  throw py::error_already_set();
}

// Runs `op` without the GIL, turning CollectiveError into the Python error.
template <typename F>
void Run(F&& op) {
  try {
    py::gil_scoped_release release;
    op();
  } catch (const CollectiveError& e) {
    Raise(e);
  }
}

// A tensor's memory as the collective API takes it. Holds the buffer view (and
// so the memory) for as long as it lives.
struct Tensor {
  void* data = nullptr;
  size_t count = 0;
  DataType type = DataType::kFloat;
  void* stream = nullptr;  // CUDA tensors: the stream to run on
  bool device = false;
  std::optional<py::buffer_info> view;
  size_t bytes() const { return count * collective::DataTypeSize(type); }
};

DataType TypeFromName(const std::string& name, const std::string& what) {
  if (name == "int32") return DataType::kInt32;
  if (name == "int64") return DataType::kInt64;
  if (name == "float32") return DataType::kFloat;
  if (name == "float64") return DataType::kDouble;
  if (name == "float16") return DataType::kHalf;
  if (name == "bfloat16") return DataType::kBFloat16;
  throw py::type_error(what + ": element type " + name +
                       " is not supported: use int32, int64, float32 or float64 (float16 and "
                       "bfloat16 on NCCL groups)");
}

// The buffer's element type from its struct format and item size.
DataType TypeFromFormat(const py::buffer_info& info, const std::string& what) {
  std::string f = info.format;
  if (!f.empty() && (f[0] == '<' || f[0] == '=' || f[0] == '@')) f = f.substr(1);
  if (f.size() == 1) {
    char c = f[0];
    if (c == 'f' && info.itemsize == 4) return DataType::kFloat;
    if (c == 'd' && info.itemsize == 8) return DataType::kDouble;
    if ((c == 'i' || c == 'l' || c == 'q') && info.itemsize == 4) return DataType::kInt32;
    if ((c == 'i' || c == 'l' || c == 'q') && info.itemsize == 8) return DataType::kInt64;
  }
  throw py::type_error(what + ": element type '" + info.format + "' (" +
                       std::to_string(info.itemsize) +
                       " bytes) is not supported: use int32, int64, float32 or float64 "
                       "(e.g. array.astype(numpy.float32))");
}

bool IsCContiguous(const py::buffer_info& info) {
  py::ssize_t expected = info.itemsize;
  for (py::ssize_t d = info.ndim; d-- > 0;) {
    if (info.shape[static_cast<size_t>(d)] > 1 && info.strides[static_cast<size_t>(d)] != expected) {
      return false;
    }
    expected *= info.shape[static_cast<size_t>(d)];
  }
  return true;
}

Tensor ToTensor(const py::object& obj, bool writable, const std::string& what) {
  Tensor t;
  if (py::isinstance<py::tuple>(obj)) {
    auto tup = py::cast<py::tuple>(obj);
    if (tup.size() != 5 || py::cast<std::string>(tup[0]) != "cuda") {
      throw py::type_error(what + ": a device tensor is passed as (\"cuda\", data_ptr, count, "
                           "dtype, stream)");
    }
    t.device = true;
    t.data = reinterpret_cast<void*>(py::cast<uintptr_t>(tup[1]));
    t.count = py::cast<size_t>(tup[2]);
    t.type = TypeFromName(py::cast<std::string>(tup[3]), what);
    t.stream = reinterpret_cast<void*>(py::cast<uintptr_t>(tup[4]));
    return t;
  }
  if (!PyObject_CheckBuffer(obj.ptr())) {
    throw py::type_error(what + ": expected a numpy array or a torch tensor, got " +
                         py::cast<std::string>(py::str(py::type::of(obj).attr("__name__"))));
  }
  py::buffer_info info = py::cast<py::buffer>(obj).request(false);
  if (!IsCContiguous(info)) {
    throw py::value_error(what + ": the array is not C-contiguous (a slice or a transpose): "
                          "pass numpy.ascontiguousarray(a) (torch: t.contiguous()) and copy the "
                          "result back");
  }
  if (writable && info.readonly) {
    throw py::value_error(what + ": the array is read-only (e.g. a value from rayx.get) but this "
                          "operation writes into it: pass a writable copy (a.copy())");
  }
  t.type = TypeFromFormat(info, what);
  t.count = static_cast<size_t>(info.size);
  t.data = info.ptr;
  t.view = std::move(info);
  return t;
}

// Every tensor of one operation is on the same side of the bus, of one type.
void CheckSame(const Tensor& a, const Tensor& b, const std::string& what) {
  if (a.device != b.device) throw py::value_error(what + ": mixes GPU and host tensors");
  if (a.type != b.type) {
    throw py::type_error(what + ": tensors of different element types (" +
                         collective::DataTypeName(a.type) + " and " +
                         collective::DataTypeName(b.type) + ")");
  }
}

std::vector<Tensor> ToTensors(const py::list& list, bool writable, const std::string& what) {
  std::vector<Tensor> out;
  for (const auto& item : list) out.push_back(ToTensor(py::reinterpret_borrow<py::object>(item), writable, what));
  return out;
}

// World-size-long lists: every element of `list` has `count` elements.
void CheckList(const std::vector<Tensor>& list, const Tensor& one, const std::string& group,
               const std::string& what) {
  const int world = collective::GetWorldSize(group);
  if (static_cast<int>(list.size()) != world) {
    throw py::value_error(what + ": the list has " + std::to_string(list.size()) +
                          " tensors but group '" + group + "' has " + std::to_string(world) +
                          " ranks: pass one per rank");
  }
  for (const auto& t : list) {
    CheckSame(t, one, what);
    if (t.count != one.count) {
      throw py::value_error(what + ": every tensor of the list must have " +
                            std::to_string(one.count) + " elements, like the tensor; one has " +
                            std::to_string(t.count));
    }
    if (t.device) throw py::value_error(what + ": lists of GPU tensors are not supported yet");
  }
}

int WorldSize(const std::string& group) {
  try {
    return collective::GetWorldSize(group);
  } catch (const CollectiveError& e) {
    Raise(e);
  }
}

}  // namespace

void BindCollective(py::module_& m) {
  py::module_ sub = m.def_submodule("collective", "collective groups over actors");
  sub.attr("Error") = ErrorType();
  sub.attr("HAVE_NCCL") =
#ifdef RAYX_HAVE_NCCL
      true;
#else
      false;
#endif

  sub.def("init_group", [](int world_size, int rank, const std::string& backend,
                           const std::string& name, int64_t timeout_ms) {
    collective::GroupOptions o;
    o.name = name;
    o.backend = backend == "nccl" ? Backend::kNccl : Backend::kGloo;
    o.timeout_ms = timeout_ms;
    Run([&] { collective::InitCollectiveGroup(world_size, rank, o); });
  });
  sub.def("create_group_over_actors", [](const std::vector<PyActor*>& actors,
                                         const std::string& backend, const std::string& name,
                                         int64_t timeout_ms) {
    std::vector<detail::ActorPtr> ptrs;
    for (auto* a : actors) ptrs.push_back(a->actor);
    collective::GroupOptions o;
    o.name = name;
    o.backend = backend == "nccl" ? Backend::kNccl : Backend::kGloo;
    o.timeout_ms = timeout_ms;
    try {
      RunInterruptibly([&] { collective::detail::CreateGroupOverActors(ptrs, o, false); });
    } catch (const CollectiveError& e) {
      Raise(e);
    }
  });
  sub.def("destroy_group", [](const std::string& name) {
    Run([&] { collective::DestroyCollectiveGroup(name); });
  });
  sub.def("is_initialized", [](const std::string& name) {
    return collective::IsGroupInitialized(name);
  });
  sub.def("rank", [](const std::string& name) {
    int r = 0;
    Run([&] { r = collective::GetRank(name); });
    return r;
  });
  sub.def("world_size", [](const std::string& name) { return WorldSize(name); });
  // "gloo" or "nccl": the backend of group `name` here (which memory it takes).
  sub.def("backend", [](const std::string& name) {
    std::string backend;
    Run([&] {
      backend = collective::BackendName(collective::detail::FindGroup(name)->spec().options.backend);
    });
    return backend;
  });

  sub.def("allreduce", [](const py::object& tensor, int op, const std::string& group) {
    Tensor t = ToTensor(tensor, true, "allreduce");
    Run([&] { collective::AllReduce(t.data, t.count, t.type, static_cast<ReduceOp>(op), group, t.stream); });
  });
  sub.def("allgather", [](const py::list& outputs, const py::object& tensor, const std::string& group) {
    const std::string what = "allgather";
    Tensor in = ToTensor(tensor, false, what);
    std::vector<Tensor> outs = ToTensors(outputs, true, what);
    CheckList(outs, in, group, what);
    if (in.device) throw py::value_error("allgather: GPU tensors are not supported yet: use a host copy");
    std::vector<char> gathered(in.bytes() * outs.size());
    Run([&] {
      collective::AllGather(in.data, gathered.data(), in.count, in.type, group);
      for (size_t i = 0; i < outs.size(); ++i) {
        std::memcpy(outs[i].data, gathered.data() + i * in.bytes(), in.bytes());
      }
    });
  });
  sub.def("reducescatter", [](const py::object& tensor, const py::list& inputs, int op,
                              const std::string& group) {
    const std::string what = "reducescatter";
    Tensor out = ToTensor(tensor, true, what);
    std::vector<Tensor> ins = ToTensors(inputs, false, what);
    CheckList(ins, out, group, what);
    if (out.device) throw py::value_error("reducescatter: GPU tensors are not supported yet: use a host copy");
    std::vector<char> joined(out.bytes() * ins.size());
    for (size_t i = 0; i < ins.size(); ++i) {
      std::memcpy(joined.data() + i * out.bytes(), ins[i].data, out.bytes());
    }
    Run([&] {
      collective::ReduceScatter(joined.data(), out.data, out.count, out.type,
                                static_cast<ReduceOp>(op), group);
    });
  });
  sub.def("broadcast", [](const py::object& tensor, int root, const std::string& group) {
    Tensor t = ToTensor(tensor, true, "broadcast");
    Run([&] { collective::Broadcast(t.data, t.count, t.type, root, group, t.stream); });
  });
  sub.def("reduce", [](const py::object& tensor, int root, int op, const std::string& group) {
    Tensor t = ToTensor(tensor, true, "reduce");
    Run([&] {
      collective::Reduce(t.data, t.count, t.type, static_cast<ReduceOp>(op), root, group, t.stream);
    });
  });
  sub.def("send", [](const py::object& tensor, int dst, const std::string& group) {
    Tensor t = ToTensor(tensor, false, "send");
    Run([&] { collective::Send(t.data, t.count, t.type, dst, group, t.stream); });
  });
  sub.def("recv", [](const py::object& tensor, int src, const std::string& group) {
    Tensor t = ToTensor(tensor, true, "recv");
    Run([&] { collective::Recv(t.data, t.count, t.type, src, group, t.stream); });
  });
  sub.def("barrier", [](const std::string& group) { Run([&] { collective::Barrier(group); }); });
}

}  // namespace rayx::python
