// Errors that reach the user from remote code.
#pragma once

#include <stdexcept>
#include <string>

namespace rayx {

// Thrown by Get() when the task or actor call that makes the object failed:
// its code threw, its worker died, or it could not be scheduled.
class TaskError : public std::runtime_error {
 public:
  TaskError(std::string type, std::string message, std::string function, std::string node)
      : std::runtime_error(Describe(type, message, function, node)),
        type_(std::move(type)),
        message_(std::move(message)),
        function_(std::move(function)),
        node_(std::move(node)) {}

  // The remote exception's type (e.g. "std::invalid_argument"), or a rayx kind:
  // "WorkerCrashed", "ActorDied", "Infeasible", "FunctionNotFound",
  // "ArgumentTypeError", "WorkerStartFailed", "WorkerUnreachable", "ObjectLost",
  // "ProtocolError", "RuntimeStopped".
  const std::string& type() const { return type_; }
  const std::string& remote_message() const { return message_; }
  const std::string& function() const { return function_; }
  const std::string& node() const { return node_; }

 private:
  static std::string Describe(const std::string& type, const std::string& message,
                              const std::string& function, const std::string& node) {
    return function + " failed" + (node.empty() ? "" : " on node " + node) + ": " + type + ": " +
           message;
  }
  std::string type_, message_, function_, node_;
};

// Thrown by Put (and a ref exported into a value) when the node's object
// store is full and its spill disk too: what() gives the figures (what the
// store holds, by job; what is spilled, and the limit reached) and what to
// do. Nothing stored before is lost.
class ObjectStoreFullError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown by Get(ref, timeout) when the object is not ready in time.
class GetTimeoutError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace rayx
