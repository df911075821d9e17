// CollectiveGroup: one rank's membership in a group, the interface that the
// Gloo and NCCL backends implement, and GroupSpec, what makes one.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "rayx/collective.h"

namespace rayx::collective {

// Who a rank is, for error messages (both optional).
struct MemberInfo {
  std::string actor;
  std::string node;
};

// Everything a rank needs to join a group attempt.
struct GroupSpec {
  GroupOptions options;
  int world_size = 0;
  int rank = 0;
  // Agreed by every rank of this attempt; keys live under "<name>/<attempt_id>/".
  std::string attempt_id = "0";
  // The address the Gloo device binds to (this node's own address).
  std::string node_ip = "127.0.0.1";
  // Per rank, when known (empty, or world_size entries).
  std::vector<MemberInfo> members;
  // How long connecting may take, in ms, when it differs from every
  // operation's deadline (options.timeout_ms). Default 0: options.timeout_ms.
  int64_t connect_timeout_ms = 0;

  std::string KeyPrefix() const { return options.name + "/" + attempt_id + "/"; }
  int64_t ConnectTimeoutMs() const {
    return connect_timeout_ms > 0 ? connect_timeout_ms : options.timeout_ms;
  }
};

// "rank 2 (actor A, node N)".
std::string DescribeRank(const GroupSpec& spec, int rank);
// "collective group 'g' AllReduce on rank 0 of 4".
std::string DescribeOp(const GroupSpec& spec, const char* op);

// Throws CollectiveError unless `peer` is a rank of the group: another rank
// for a send's destination or a receive's source, any rank for a root.
void CheckPeer(const GroupSpec& spec, const char* op, int peer, const char* what);
// Throws CollectiveError (InvalidArgument) when the spec is unusable.
void ValidateSpec(const GroupSpec& spec);

// One rank's membership in a connected group. Operations follow the public
// API's contracts (rayx/collective.h) and throw CollectiveError. Operations
// on one group are serialised; Abort may be called from any thread at any
// time. Owned by the process-wide registry (shared with calls in progress).
class CollectiveGroup {
 public:
  virtual ~CollectiveGroup() = default;
  virtual const GroupSpec& spec() const = 0;
  int rank() const { return spec().rank; }
  int world_size() const { return spec().world_size; }

  virtual void AllReduce(void* data, size_t count, DataType type, ReduceOp op, void* stream) = 0;
  // `output` is called once with every rank's count and returns where their
  // elements go (sum of counts), concatenated in rank order.
  virtual void AllGather(const void* in, size_t count, DataType type,
                         const std::function<void*(const std::vector<size_t>&)>& output,
                         void* stream) = 0;
  // `in` holds `count` elements; this rank gets slice `rank` (SliceOf) in `out`.
  virtual void ReduceScatter(const void* in, size_t count, void* out, DataType type, ReduceOp op,
                             void* stream) = 0;
  virtual void Broadcast(void* data, size_t count, DataType type, int root, void* stream) = 0;
  virtual void Reduce(void* data, size_t count, DataType type, ReduceOp op, int root,
                      void* stream) = 0;
  virtual void Send(const void* data, size_t count, DataType type, int dst, void* stream) = 0;
  virtual void Recv(void* data, size_t count, DataType type, int src, void* stream) = 0;
  virtual void Barrier() = 0;

  // Makes the operation in progress and every later one fail with
  // CollectiveError naming `reason` (and `failed_rank` when >= 0) within about
  // a second, and tells the other ranks. Idempotent; thread-safe.
  virtual void Abort(const std::string& reason, int failed_rank = -1) = 0;
};

// Slice i of `count` elements split over n ranks: {offset, length}.
std::pair<size_t, size_t> SliceOf(size_t count, int n, int i);

}  // namespace rayx::collective
