// Collective groups: allreduce, allgather, broadcast, ... over a set of ranks
// (Gloo on CPUs, NCCL on GPUs), named like Ray's ray.util.collective.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "rayx/rayx.h"

namespace rayx::collective {

enum class Backend { kGloo, kNccl };
enum class ReduceOp { kSum, kProduct, kMin, kMax };
// Element types. kHalf and kBFloat16 are NCCL only (raw-pointer overloads).
enum class DataType { kInt32, kInt64, kFloat, kDouble, kHalf, kBFloat16 };

size_t DataTypeSize(DataType type);
const char* DataTypeName(DataType type);
const char* ReduceOpName(ReduceOp op);
const char* BackendName(Backend backend);

struct GroupOptions {
  // The group's name; one process holds at most one group of a name at a time.
  std::string name = "default";
  // Default: Gloo (host memory). kNccl needs rayx built with NCCL and a GPU.
  Backend backend = Backend::kGloo;
  // Deadline of every operation and of the connection itself, in ms.
  // Default: 30 s.
  int64_t timeout_ms = 30000;
};

// Every failure of a collective: its message names the group, the operation,
// this rank and, when known, the rank that failed (with its actor and node when
// the group was told them).
class CollectiveError : public std::runtime_error {
 public:
  explicit CollectiveError(const std::string& message, int failed_rank = -1)
      : std::runtime_error(message), failed_rank_(failed_rank) {}
  // The rank whose death, absence or abort caused this error, or -1.
  int failed_rank() const { return failed_rank_; }

 private:
  int failed_rank_;
};

// Joins this process to group `options.name` as `rank` of `world_size` and
// returns once every rank is connected. Throws CollectiveError on bad
// arguments (world_size <= 0, rank out of range, name already initialised in
// this process), when no rayx runtime provides a rendezvous store, or when a
// rank does not join within options.timeout_ms (naming it). Thread-safe.
void InitCollectiveGroup(int world_size, int rank, const GroupOptions& options = {});
// Leaves and frees group `name`; an operation in progress on it fails with
// CollectiveError, and so do the other ranks' operations in progress. Throws
// CollectiveError when no such group exists here.
void DestroyCollectiveGroup(const std::string& name = "default");
bool IsGroupInitialized(const std::string& name = "default");
int GetRank(const std::string& group = "default");
int GetWorldSize(const std::string& group = "default");

// Raw-pointer operations. Gloo groups take host memory; NCCL groups take
// device memory and run on `stream` (a cudaStream_t, or the group's own
// stream when null), returning once the operation has completed.
// Every rank must call the same operations in the same order; every call
// throws CollectiveError on failure and never blocks past the group's timeout.
void AllReduce(void* data, size_t count, DataType type, ReduceOp op,
               const std::string& group = "default", void* stream = nullptr);
// `out` holds world_size * count elements: rank i's `count` at i * count.
void AllGather(const void* in, void* out, size_t count, DataType type,
               const std::string& group = "default", void* stream = nullptr);
// `in` holds world_size * count elements; rank i gets in `out` the reduction
// of every rank's elements [i * count, (i + 1) * count).
void ReduceScatter(const void* in, void* out, size_t count, DataType type, ReduceOp op,
                   const std::string& group = "default", void* stream = nullptr);
void Broadcast(void* data, size_t count, DataType type, int root,
               const std::string& group = "default", void* stream = nullptr);
// The reduction lands in `data` on `root`; other ranks' `data` is unchanged.
void Reduce(void* data, size_t count, DataType type, ReduceOp op, int root,
            const std::string& group = "default", void* stream = nullptr);
void Send(const void* data, size_t count, DataType type, int dst,
          const std::string& group = "default", void* stream = nullptr);
void Recv(void* data, size_t count, DataType type, int src,
          const std::string& group = "default", void* stream = nullptr);
void Barrier(const std::string& group = "default");

namespace detail {
template <typename T>
constexpr DataType DataTypeOf() {
  if constexpr (std::is_same_v<T, int32_t>) {
    return DataType::kInt32;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return DataType::kInt64;
  } else if constexpr (std::is_same_v<T, float>) {
    return DataType::kFloat;
  } else {
    static_assert(std::is_same_v<T, double>, "collectives take int32, int64, float or double");
    return DataType::kDouble;
  }
}
// Allgather of vectors whose lengths may differ across ranks: returns the
// ranks' bytes concatenated in rank order.
std::vector<char> AllGatherBytes(const void* in, size_t count, DataType type,
                                 const std::string& group);
// Reduce-scatter of `count` elements split as evenly as possible: rank i gets
// count / n elements, plus one when i < count % n.
std::vector<char> ReduceScatterBytes(const void* in, size_t count, DataType type, ReduceOp op,
                                     const std::string& group);
}  // namespace detail

// Vector operations (host memory; on an NCCL group they go through the device).
// Lengths must match across ranks except for AllGather; a mismatch is an error
// on every rank.
template <typename T>
void AllReduce(std::vector<T>& data, ReduceOp op, const std::string& group = "default") {
  AllReduce(data.data(), data.size(), detail::DataTypeOf<T>(), op, group);
}

// The ranks' vectors (which may differ in length) concatenated in rank order.
template <typename T>
std::vector<T> AllGather(const std::vector<T>& data, const std::string& group = "default") {
  std::vector<char> bytes =
      detail::AllGatherBytes(data.data(), data.size(), detail::DataTypeOf<T>(), group);
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// Rank i gets the reduction of every rank's i-th slice of `data` (slices as
// even as possible: the first data.size() % n ranks get one more element).
template <typename T>
std::vector<T> ReduceScatter(const std::vector<T>& data, ReduceOp op,
                             const std::string& group = "default") {
  std::vector<char> bytes =
      detail::ReduceScatterBytes(data.data(), data.size(), detail::DataTypeOf<T>(), op, group);
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

template <typename T>
void Broadcast(std::vector<T>& data, int root, const std::string& group = "default") {
  Broadcast(data.data(), data.size(), detail::DataTypeOf<T>(), root, group);
}

template <typename T>
void Reduce(std::vector<T>& data, ReduceOp op, int root, const std::string& group = "default") {
  Reduce(data.data(), data.size(), detail::DataTypeOf<T>(), op, root, group);
}

template <typename T>
void Send(const std::vector<T>& data, int dst, const std::string& group = "default") {
  Send(data.data(), data.size(), detail::DataTypeOf<T>(), dst, group);
}

// `data` must already have the sender's length.
template <typename T>
void Recv(std::vector<T>& data, int src, const std::string& group = "default") {
  Recv(data.data(), data.size(), detail::DataTypeOf<T>(), src, group);
}

// ---- Groups over actors, from a driver ---------------------------------------

namespace detail {
void CreateGroupOverActors(const std::vector<rayx::detail::ActorPtr>& actors,
                           const GroupOptions& options, bool detached);
}  // namespace detail

// Makes actor i rank i of group `options.name` and returns once every rank is
// connected, so the actors' next calls can use it. Throws CollectiveError for
// no actors, an actor listed twice or a name in use, and when a rank does not
// join in time (naming the rank and why; the others leave again).
// DestroyCollectiveGroup(name) from this driver ends it.
template <typename C>
void CreateCollectiveGroup(const std::vector<ActorHandle<C>>& actors,
                           const GroupOptions& options = {}) {
  std::vector<rayx::detail::ActorPtr> ptrs;
  ptrs.reserve(actors.size());
  for (const auto& a : actors) ptrs.push_back(a.ptr());
  detail::CreateGroupOverActors(ptrs, options, /*detached=*/false);
}
template <typename C>
void CreateCollectiveGroup(std::initializer_list<ActorHandle<C>> actors,
                           const GroupOptions& options = {}) {
  CreateCollectiveGroup(std::vector<ActorHandle<C>>(actors), options);
}

}  // namespace rayx::collective
