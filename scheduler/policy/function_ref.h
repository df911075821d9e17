// A non-owning reference to a callable, for predicates passed down a search.
#pragma once

#include <type_traits>
#include <utility>

namespace rayx::scheduler::policy {

template <typename Signature>
class FunctionRef;

// Like C++26 std::function_ref: refers to a callable without copying or
// allocating. REQUIRES: the callable outlives the FunctionRef (pass a lambda
// straight into the call that uses it).
template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef> &&
                                                    std::is_invocable_r_v<R, F&, Args...>>>
  FunctionRef(F&& f)  // NOLINT: implicit by design, like std::function_ref
      : object_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace rayx::scheduler::policy
