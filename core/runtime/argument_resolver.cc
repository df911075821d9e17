// Resolving a call's arguments, waiting on pending ones.
#include "runtime/argument_resolver.h"

#include <memory>

#include <boost/asio/post.hpp>

namespace rayx::detail {

ArgumentResolver::ArgumentResolver(ObjectTable& objects, boost::asio::io_context& io,
                                   std::string local_object_address)
    : objects_(objects), io_(io), local_object_address_(std::move(local_object_address)) {}

void ArgumentResolver::ResolveThen(Task& task, Ready ready) {
  // Collects the argument bytes; waits on the first unresolved reference and
  // goes on from it once it completes (the arguments before it are done).
  task.resolved.resize(task.args.size());
  for (size_t i = task.args_resolved; i < task.args.size(); task.args_resolved = ++i) {
    Arg& arg = task.args[i];
    if (!arg.ref) {
      // A value; empty once moved to `resolved` (resolving again after a lost
      // argument keeps it there).
      if (!arg.bytes.empty()) task.resolved[i] = std::move(arg.bytes);
      arg.bytes.clear();
      continue;
    }
    protocol::ObjectLocation location;
    ErrorInfo error;
    switch (objects_.ResolveArg(arg.ref->id, &task.resolved[i], &location, &error)) {
      case ObjectTable::ArgState::kUnknown:
        FailTask(objects_, task, protocol::TaskErrorKind::kObjectLost,
                 "argument " + std::to_string(i) + " (object " + arg.ref->id.Hex() +
                     ") is not known to this process",
                 "");
        return;
      case ObjectTable::ArgState::kFailed:
        // The argument's own error (an exception keeps its type).
        error.message = "argument " + std::to_string(i) + " failed: " + error.message;
        error.function = task.DisplayName();
        FailTask(objects_, task, std::move(error));
        return;
      case ObjectTable::ArgState::kStored:
        if (location.object_address.empty()) {
          // Put by this process into the local store: served by the local agent.
          location.object_address = local_object_address_;
        }
        task.stored[static_cast<uint32_t>(i)] = std::move(location);
        task.resolved[i].clear();
        // The reference stays: should the worker fail to read that copy, the
        // owner brings it back by its id (TaskSubmitter::RecoverArguments).
        continue;
      case ObjectTable::ArgState::kPending: {
        ObjectId id = arg.ref->id;
        auto shared = std::make_shared<Task>(std::move(task));
        auto retry = [this, shared, ready] {
          boost::asio::post(io_, [this, shared, ready] { ResolveThen(*shared, ready); });
        };
        // Completed meanwhile: try again, as the waiter would have.
        if (!objects_.AddWaiter(id, retry)) retry();
        return;
      }
      case ObjectTable::ArgState::kValue:
        break;
    }
    arg.ref = nullptr;
  }
  ready(std::move(task));
}

}  // namespace rayx::detail
