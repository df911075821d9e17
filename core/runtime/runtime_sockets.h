// The ZeroMQ context a Runtime owns and what lives on it (runtime.cc and
// runtime_objects.cc only; runtime.h names no ZeroMQ type).
#pragma once

#include "object_store/object_pull.h"
#include "runtime/runtime.h"
#include "transport/zmq_fwd.h"

namespace rayx::detail {

struct Runtime::Sockets {
  transport::ZmqContext context;
  ObjectDeleter deleter{context.get()};
};

}  // namespace rayx::detail
