// Turning a call's arguments into bytes or store locations before it is sent.
#pragma once

#include <functional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "runtime/object_table.h"
#include "runtime/task.h"

namespace rayx::detail {

// Resolves a call's ObjectRef arguments from the ObjectTable: a value is
// copied in, a stored object is passed by location (the worker maps or pulls
// it), a failed or unknown one fails the call, a pending one is waited for.
// A stored argument keeps its reference in the call, so that a copy a worker
// could not read can be brought back by its id and the call resolved again.
//
// Thread safety: the I/O thread only. `objects` and `io` outlive it.
class ArgumentResolver {
 public:
  using Ready = std::function<void(Task)>;
  // `local_object_address`: the local agent's object server, which serves
  // this process's Puts into the local store to other processes.
  ArgumentResolver(ObjectTable& objects, boost::asio::io_context& io,
                   std::string local_object_address);

  // Calls `ready` with `task` once every argument is resolved: at once when
  // none waits, else from a later turn of the io_context. A failed or unknown
  // argument completes the task's result as failed and `ready` never runs.
  // Resolves from `task.args_resolved` on: to resolve stored arguments again,
  // set it to the first of them and drop the `task.stored` entries from there.
  void ResolveThen(Task& task, Ready ready);

 private:
  ObjectTable& objects_;
  boost::asio::io_context& io_;
  const std::string local_object_address_;
};

}  // namespace rayx::detail
