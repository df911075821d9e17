// GlooGroup::OpScope: one operation in progress on a GlooGroup (internal to
// the Gloo backend).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include <gloo/transport/unbound_buffer.h>

#include "collective/gloo_group.h"

namespace rayx::collective {

// The kinds of operation a header names.
enum OpKind : uint32_t {
  kOpAllReduce = 1,
  kOpAllGather,
  kOpReduceScatter,
  kOpBroadcast,
  kOpReduce,
  kOpBarrier,
  kOpSend,
};
const char* OpKindName(uint32_t kind);

// Holds the group's operation lock, publishes the deadline to the watchdog and
// owns the operation's buffers (registered so that an abort can wake their
// waits). Used only by the thread running the operation.
class GlooGroup::OpScope {
 public:
  OpScope(GlooGroup& group, const char* name);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

  GlooGroup& group_;
  const char* const name_;
  std::unique_lock<std::mutex> lock_;
  std::chrono::steady_clock::time_point deadline_;
  bool aborted_before_ = false;
  uint64_t seq_ = 0;
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> buffers_;
};

}  // namespace rayx::collective
