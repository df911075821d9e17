// Errors that reach the user from remote code.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace rayx {

// Why a call failed: kException when its own code threw, else what rayx says
// (numbered and named as the wire's TaskErrorKind; TaskError::type() is the
// name: "WorkerCrashed", ...).
enum class TaskErrorKind : uint8_t {
  kException = 0,
  kWorkerCrashed = 1,      // its worker died while running it
  kWorkerUnreachable = 2,  // its worker's connection was lost
  kWorkerStartFailed = 3,  // no worker could be started for it
  kActorDied = 4,          // its actor died (and will not restart for it)
  kInfeasible = 5,         // no node could ever hold its resources
  kPlacementGroupRemoved = 6,
  kObjectLost = 7,         // an argument or its result is gone
  kOutOfMemory = 8,        // the node's memory monitor stopped its worker
  kObjectStoreFull = 9,    // its result found the store and the spill disk full
  kRuntimeStopped = 10,    // rayx::Shutdown() came first
  kFunctionNotFound = 11,  // its worker does not have the function
  kArgumentTypeError = 12, // its arguments do not decode as the function's
  kInvalidArgument = 13,   // the request itself was refused as malformed
  kWrongJob = 14,          // sent to a worker of another job
  kGeneratorTooLong = 15,
  kGeneratorEnded = 16,
  kProtocolError = 17,     // the worker refused the call
  kRequeued = 18,          // (internal: handed back unrun)
  kInternal = 19,
  kPlacementGroupUnavailable = 20,  // the head did not answer for the group
};

// Thrown by Get() when the task or actor call that makes the object failed:
// its code threw, its worker died, or it could not be scheduled.
class TaskError : public std::runtime_error {
 public:
  TaskError(TaskErrorKind kind, std::string type, std::string message, std::string function,
            std::string node)
      : std::runtime_error(Describe(type, message, function, node)),
        kind_(kind),
        type_(std::move(type)),
        message_(std::move(message)),
        function_(std::move(function)),
        node_(std::move(node)) {}

  // kException when the remote code threw; otherwise rayx's reason.
  TaskErrorKind kind() const { return kind_; }
  // The remote exception's type (e.g. "std::invalid_argument"), or the kind's
  // name ("WorkerCrashed", "ActorDied", ...).
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
  TaskErrorKind kind_;
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
