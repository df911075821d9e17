// One call on its way from this process to a worker: a task or an actor call.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "protocol/messages.h"
#include "rayx/detail/runtime_api.h"

namespace rayx::detail {

class ObjectTable;

// A call and its arguments, from submission until its result arrives. Plain
// data, moved between the submitters' queues and a WorkerConnection.
struct Task {
  std::string function;
  std::string display;  // the name in errors; empty: `function`
  std::vector<Arg> args;
  std::vector<std::string> resolved;                    // args' bytes, once resolved
  size_t args_resolved = 0;  // args [0, args_resolved) are in `resolved` already
  std::map<uint32_t, protocol::ObjectLocation> stored;  // args left in a store
  ObjectId object_id;                                   // the result's
  bool actor_creation = false;
  ActorId actor_id;
  // How many more times the call runs again when its worker (or node) dies
  // under it: a task's max_retries, an actor call's max_task_retries.
  int32_t retries_left = 0;
  int32_t retries_done = 0;
  // Its arguments were dropped once sent (it cannot be sent again).
  bool args_dropped = false;
  // Times its stored arguments were lost and resolved again (not a retry:
  // the call never ran). Bounded by TaskSubmitter::kMaxArgumentRecoveries.
  int32_t argument_recoveries = 0;
  // Tasks: an exception (an error result, or a value that starts with
  // `retriable_value_prefix`) also uses a retry.
  bool retry_exceptions = false;
  std::string retriable_value_prefix;

  const std::string& DisplayName() const { return display.empty() ? function : display; }
};

// Completes `task`'s result as failed: rayx's `kind`, with `message` and the
// node it happened on.
void FailTask(ObjectTable& objects, const Task& task, protocol::TaskErrorKind kind,
              const std::string& message, const std::string& node);
// Completes `task`'s result as failed with `error` as it is.
void FailTask(ObjectTable& objects, const Task& task, ErrorInfo error);

}  // namespace rayx::detail
