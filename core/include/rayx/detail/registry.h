// The table of remote functions, filled by RAYX_REMOTE at static
// initialization, so the same executable can run them as a worker.
#pragma once

#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <typeinfo>
#include <type_traits>
#include <utility>
#include <vector>

#include <msgpack.hpp>

#include "rayx/detail/bounded_unpack.h"

namespace rayx {

// Raw bytes. As an argument, a result or a Put value, its content is the whole
// frame on the wire, never passed through msgpack; nested inside another value
// it is a msgpack bin.
struct Bytes {
  std::string data;

  template <typename Packer>
  void msgpack_pack(Packer& pk) const {
    pk.pack_bin(static_cast<uint32_t>(data.size()));
    pk.pack_bin_body(data.data(), static_cast<uint32_t>(data.size()));
  }
  void msgpack_unpack(const msgpack::object& o) {
    if (o.type != msgpack::type::BIN) throw msgpack::type_error();
    data.assign(o.via.bin.ptr, o.via.bin.size);
  }
  bool operator==(const Bytes&) const = default;
};

}  // namespace rayx

namespace rayx::detail {

using ArgViews = std::vector<std::string_view>;

// A worker's call that answers after its function returned (see
// RemoteFunction::invoke_deferrable). Copies name the same call. The first
// Succeed or Fail, from any thread, is its answer; later ones are ignored.
// When the last copy goes unanswered, the call fails (type "CallDropped"), so
// its caller always hears. An empty DeferredCall answers nothing.
class DeferredCall {
 public:
  // Where the answer goes (the worker loop's queue). Thread-safe.
  class Sink {
   public:
    virtual ~Sink() = default;
    // `ok`: `value` is the result (bytes as invoke returns them); otherwise
    // the call failed with {error_type, value (the message)}.
    virtual void Answer(bool ok, std::string value, std::string error_type) = 0;
    // One value a generator call yielded, before its answer; ignored once
    // the call was answered.
    virtual void Item(std::string value) = 0;
  };

  DeferredCall() = default;
  explicit DeferredCall(std::shared_ptr<Sink> sink) : sink_(std::move(sink)) {}

  void Succeed(std::string value) const {
    if (sink_) sink_->Answer(true, std::move(value), "");
  }
  void Fail(std::string type, std::string message) const {
    if (sink_) sink_->Answer(false, std::move(message), std::move(type));
  }
  // A generator call's next item (in order; before Succeed or Fail).
  void Item(std::string value) const {
    if (sink_) sink_->Item(std::move(value));
  }
  bool valid() const { return sink_ != nullptr; }

 private:
  std::shared_ptr<Sink> sink_;
};

// What a deferrable function is given beside its arguments. Valid during the
// call only; not thread-safe (the worker loop's thread).
class CallControl {
 public:
  virtual ~CallControl() = default;
  // Takes the call over: its result is what the returned DeferredCall is
  // answered with, later, and the function's return value is ignored. The
  // arguments' views are valid until the function returns only: copy what
  // is needed later.
  virtual DeferredCall Defer() = 0;
  // A generator call yields `value`: it goes to the caller now, as the
  // call's next item, ahead of its result (a deferred call yields through
  // DeferredCall::Item instead). Throws std::length_error past
  // protocol::kMaxGeneratorItems items.
  virtual void Yield(std::string value) = 0;
};

struct RemoteFunction {
  std::string name;
  // Free functions and methods: decode args, call, encode the result.
  std::function<std::string(void* self, const ArgViews& args)> invoke;
  // Instead of invoke when set: a function that may answer later
  // (call.Defer()), e.g. a Python actor that runs its calls concurrently.
  std::function<std::string(void* self, const ArgViews& args, CallControl& call)>
      invoke_deferrable;
  // Functions returning T* can also create actors: the instance, owned.
  std::function<std::shared_ptr<void>(const ArgViews& args)> create;
  size_t arity = 0;
  // An actor factory's: how many method calls of its actor may run at once
  // (RAYX_ACTOR_CONCURRENCY). 1: one at a time, in order.
  int max_concurrency = 1;
};

class FunctionRegistry {
 public:
  static FunctionRegistry& Instance();
  void Add(const std::string& key, RemoteFunction fn);
  // The factory registered under `key` (now or later) lets `n` calls of its
  // actors run at once.
  void SetMaxConcurrency(const std::string& key, int n);
  // nullptr when absent.
  const RemoteFunction* FindByName(const std::string& name) const;
  const RemoteFunction* FindByKey(const std::string& key) const;

 private:
  struct Impl;
  FunctionRegistry();
  std::unique_ptr<Impl> impl_;
};

// A function or member pointer's type and bytes: the registry key. The type
// matters: a virtual method's pointer holds only its vtable slot, which methods
// of other classes share.
template <typename F>
std::string PointerKey(F f) {
  std::string key(typeid(F).name());
  key.push_back('\0');
  size_t offset = key.size();
  key.resize(offset + sizeof(F));
  std::memcpy(key.data() + offset, &f, sizeof(F));
  return key;
}

// A readable name for an unregistered function pointer (from the symbol table).
std::string DescribePointer(const void* address);

// msgpack writers: one that only counts, one that fills a presized string,
// one that fills memory of a counted size.
struct CountingWriter {
  size_t size = 0;
  void write(const char*, size_t n) { size += n; }
};
struct StringWriter {
  std::string* out;
  void write(const char* data, size_t n) { out->append(data, n); }
};
struct MemoryWriter {
  char* at;
  char* end;
  void write(const char* data, size_t n) {
    if (n > static_cast<size_t>(end - at)) throw std::logic_error("msgpack wrote more than it counted");
    std::memcpy(at, data, n);
    at += n;
  }
};

// The size of Pack(value).
template <typename T>
size_t PackedSize(const T& value) {
  if constexpr (std::is_same_v<T, Bytes>) {
    return value.data.size();
  } else {
    CountingWriter counter;
    msgpack::pack(counter, value);
    return counter.size;
  }
}

// Writes Pack(value) into `out`, which holds exactly `size` = PackedSize(value) bytes.
template <typename T>
void PackInto(const T& value, char* out, size_t size) {
  if constexpr (std::is_same_v<T, Bytes>) {
    std::memcpy(out, value.data.data(), size);
  } else {
    MemoryWriter writer{out, out + size};
    msgpack::pack(writer, value);
    if (writer.at != writer.end) throw std::logic_error("msgpack wrote less than it counted");
  }
}

// Pack(value) for a value whose PackedSize is known.
template <typename T>
std::string PackSized(const T& value, size_t size) {
  if constexpr (std::is_same_v<T, Bytes>) {
    return value.data;  // the frame is the content
  } else {
    // Filled in place, so a large value is copied once (a growing buffer
    // would copy it again and again).
    std::string out;
    out.reserve(size);
    StringWriter writer{&out};
    msgpack::pack(writer, value);
    return out;
  }
}

template <typename T>
std::string Pack(const T& value) {
  if constexpr (std::is_same_v<T, Bytes>) {
    return value.data;  // the frame is the content
  } else {
    return PackSized(value, PackedSize(value));
  }
}

// The value Pack wrote. Throws UnpackError when `bytes` are not one msgpack
// value within UnpackLimits{} (nesting at most kMaxValueDepth), and
// msgpack::type_error when the value is not a T.
template <typename T>
T Unpack(std::string_view bytes) {
  if constexpr (std::is_same_v<T, Bytes>) {
    return Bytes{std::string(bytes)};
  } else {
    msgpack::object_handle handle = UnpackBounded(bytes);
    return handle.get().as<T>();
  }
}

// A readable C++ type name ("std::string", "std::vector<int, ...>").
std::string TypeName(const std::type_info& type);

// A call's argument that does not convert to its parameter's type. A
// msgpack::type_error, like msgpack's own mismatches, whose message names the
// function, the argument and the type.
class ArgumentTypeError : public msgpack::type_error {
 public:
  explicit ArgumentTypeError(std::string what) : what_(std::move(what)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

// Argument `index` of `function`. Throws std::invalid_argument when its bytes
// are not one msgpack value within the limits (too deep, truncated, ...) and
// ArgumentTypeError when the value is not a T; both name the function and
// the argument.
template <typename T>
T UnpackArg(std::string_view bytes, size_t index, const std::string& function) {
  if constexpr (std::is_same_v<T, Bytes>) {
    return Bytes{std::string(bytes)};
  } else {
    msgpack::object_handle handle;
    try {
      handle = UnpackBounded(bytes);
    } catch (const UnpackError& e) {
      throw std::invalid_argument("argument " + std::to_string(index) + " of " + function +
                                  " is not a msgpack value rayx accepts: " + e.what());
    }
    try {
      return handle.get().as<T>();
    } catch (const msgpack::type_error&) {
      throw ArgumentTypeError("argument " + std::to_string(index) + " of " + function +
                              " does not convert to " + TypeName(typeid(T)));
    }
  }
}

template <typename Tuple, size_t... I>
Tuple UnpackArgs(const ArgViews& args, const std::string& function, std::index_sequence<I...>) {
  return Tuple(UnpackArg<std::tuple_element_t<I, Tuple>>(args[I], I, function)...);
}

template <typename R, typename Call>
std::string CallAndPack(Call&& call) {
  if constexpr (std::is_void_v<R>) {
    call();
    return Pack(msgpack::type::nil_t());
  } else {
    return Pack(call());
  }
}

inline void CheckArity(const ArgViews& args, size_t want, const std::string& name) {
  if (args.size() != want) {
    throw std::invalid_argument(name + " takes " + std::to_string(want) + " arguments, got " +
                                std::to_string(args.size()));
  }
}

template <typename R, typename... Args>
RemoteFunction MakeRemote(const std::string& name, R (*fn)(Args...)) {
  using Tuple = std::tuple<std::decay_t<Args>...>;
  RemoteFunction out;
  out.name = name;
  out.arity = sizeof...(Args);
  if constexpr (std::is_pointer_v<R>) {
    // A factory: only called to create an actor, which the worker then owns.
    using Class = std::remove_pointer_t<R>;
    out.create = [fn, name](const ArgViews& args) {
      CheckArity(args, sizeof...(Args), name);
      Tuple tuple = UnpackArgs<Tuple>(args, name, std::index_sequence_for<Args...>());
      Class* instance = std::apply(fn, std::move(tuple));
      return std::shared_ptr<void>(instance, [](void* p) { delete static_cast<Class*>(p); });
    };
  } else {
    out.invoke = [fn, name](void*, const ArgViews& args) {
      CheckArity(args, sizeof...(Args), name);
      Tuple tuple = UnpackArgs<Tuple>(args, name, std::index_sequence_for<Args...>());
      return CallAndPack<R>([&] { return std::apply(fn, std::move(tuple)); });
    };
  }
  return out;
}

// Methods, const or not: `Object` is C or const C.
template <typename R, typename Object, typename Method, typename... Args>
RemoteFunction MakeMethodImpl(const std::string& name, Method fn) {
  using Tuple = std::tuple<std::decay_t<Args>...>;
  RemoteFunction out;
  out.name = name;
  out.arity = sizeof...(Args);
  out.invoke = [fn, name](void* self, const ArgViews& args) {
    CheckArity(args, sizeof...(Args), name);
    Tuple tuple = UnpackArgs<Tuple>(args, name, std::index_sequence_for<Args...>());
    Object* object = static_cast<Object*>(self);
    return CallAndPack<R>([&] {
      return std::apply([&](auto&&... a) { return (object->*fn)(std::forward<decltype(a)>(a)...); },
                        std::move(tuple));
    });
  };
  return out;
}

template <typename R, typename C, typename... Args>
RemoteFunction MakeMethod(const std::string& name, R (C::*fn)(Args...)) {
  return MakeMethodImpl<R, C, decltype(fn), Args...>(name, fn);
}

template <typename R, typename C, typename... Args>
RemoteFunction MakeMethod(const std::string& name, R (C::*fn)(Args...) const) {
  return MakeMethodImpl<R, const C, decltype(fn), Args...>(name, fn);
}

// "a, &B::c ,D::e" -> {"a", "B::c", "D::e"}
std::vector<std::string> SplitNames(const char* names);

template <typename F>
void RegisterOne(const std::string& name, F f) {
  if constexpr (std::is_member_function_pointer_v<F>) {
    FunctionRegistry::Instance().Add(PointerKey(f), MakeMethod(name, f));
  } else {
    FunctionRegistry::Instance().Add(PointerKey(f), MakeRemote(name, f));
  }
}

template <typename... Fs>
bool RegisterRemote(const char* names, Fs... fs) {
  std::vector<std::string> split = SplitNames(names);
  size_t i = 0;
  (RegisterOne(split.at(i++), fs), ...);
  return true;
}

template <typename F>
bool RegisterActorConcurrency(const char* name, F factory, int n) {
  if (n < 1) {
    throw std::invalid_argument(std::string("RAYX_ACTOR_CONCURRENCY(") + name + ", " +
                                std::to_string(n) + "): the count must be at least 1");
  }
  FunctionRegistry::Instance().SetMaxConcurrency(PointerKey(factory), n);
  return true;
}

}  // namespace rayx::detail

#define RAYX_REMOTE_CONCAT_INNER(a, b) a##b
#define RAYX_REMOTE_CONCAT(a, b) RAYX_REMOTE_CONCAT_INNER(a, b)

// Registers functions, actor factories (static functions returning T*) and
// actor methods so workers can run them:
//   RAYX_REMOTE(Plus, Counter::Create, &Counter::Add);
#define RAYX_REMOTE(...)                                                             \
  [[maybe_unused]] static const bool RAYX_REMOTE_CONCAT(rayx_remote_, __LINE__) = \
      ::rayx::detail::RegisterRemote(#__VA_ARGS__, __VA_ARGS__)

// Lets up to `n` method calls of each actor that `factory` (registered with
// RAYX_REMOTE) makes run at once, on a pool of `n` threads in the actor's
// worker, like Ray's max_concurrency: the methods must be thread-safe, and
// calls may finish out of order. Without it an actor runs its calls one at a
// time, in order, on the worker's thread.
//   RAYX_ACTOR_CONCURRENCY(Counter::Create, 4);
#define RAYX_ACTOR_CONCURRENCY(factory, n)                                                 \
  [[maybe_unused]] static const bool RAYX_REMOTE_CONCAT(rayx_actor_concurrency_, __LINE__) = \
      ::rayx::detail::RegisterActorConcurrency(#factory, factory, n)
