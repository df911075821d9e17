// What one process's work adds up to (tasks it submitted, collective
// operations it ran), counted where its node's agent can read it.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "protocol/messages.h"
#include "rayx/status.h"

namespace rayx {

// Counts, not increments: what a process, a node or the cluster did, as plain
// values. The wire form is TaskCounters + CollectiveCounters.
struct WorkCounts {
  static constexpr size_t kOps = std::size(protocol::kCollectiveOpNames);
  static constexpr size_t kBuckets = protocol::kCollectiveLatencyBuckets;
  struct Op {
    uint64_t count = 0;
    uint64_t failed = 0;
    uint64_t micros = 0;
    std::array<uint64_t, kBuckets> buckets{};
  };
  protocol::TaskCounters tasks;
  std::array<Op, kOps> ops{};

  // The wire form of `ops`: the ops that ran, by name.
  std::vector<protocol::CollectiveCounters> Collectives() const;
  // From the wire: unknown op names, an op named twice (after the first) and
  // histograms of another size are ignored.
  static WorkCounts FromWire(const protocol::TaskCounters& tasks,
                             const std::vector<protocol::CollectiveCounters>& collectives);
  // Adds what `now` grew by since `before` to these totals, counter by
  // counter; one smaller than before is a new life of its source (a process
  // started again under an old name): all of it. Sums wrap, never trap.
  void AddGrowth(const WorkCounts& now, const WorkCounts& before);
};

// Design: a worker process counts into one shared page that its node agent
// made (CreateShared) and handed over as an inherited file descriptor
// (WorkerEnv::counters_fd); the agent reads the pages of its running workers
// with the heartbeats that want a reply (about once a second) and sends the
// node's sums: nothing travels per task or per operation, and a worker never
// waits for anyone. A driver counts in its own memory and sends its counts
// with its own heartbeats. The cells are lock-free atomics, so counting costs
// one relaxed add.
//
// A page is written by one process and read by another: what a reader gets
// are numbers another process chose (a worker may lie about its own work,
// nothing more); readers never trust them for anything but sums.
//
// Thread-safe: count from any thread.
class WorkCounters {
 public:
  enum class Op : uint8_t {  // index into protocol::kCollectiveOpNames
    kAllReduce,
    kAllGather,
    kReduceScatter,
    kBroadcast,
    kReduce,
    kSend,
    kRecv,
    kBarrier,
  };

  // Counts in memory of its own.
  WorkCounters();
  ~WorkCounters();
  WorkCounters(const WorkCounters&) = delete;
  WorkCounters& operator=(const WorkCounters&) = delete;

  // A new shared page (an anonymous memory file) and counters over it; fd()
  // is the file to hand to the worker (close-on-exec: the caller dup2s it
  // into the child). Internal when the system refuses.
  static Result<std::unique_ptr<WorkCounters>> CreateShared();
  // Counters over the page `fd` made by CreateShared in another process;
  // takes the descriptor over. InvalidArgument when `fd` is not such a page.
  static Result<std::unique_ptr<WorkCounters>> MapShared(int fd);
  // The shared page's file descriptor; -1 for counters in own memory.
  int fd() const { return fd_; }

  void TaskSubmitted();
  void TaskEnded(bool failed);
  void TaskRetried();
  void CollectiveOpDone(Op op, std::chrono::steady_clock::duration took, bool failed);

  WorkCounts Read() const;

  // This process's counters: its shared page once UseSharedPage made one
  // current, memory of its own before.
  static WorkCounters& Process();
  // A worker, before it runs any work: counts from now on go to the page
  // `fd` its agent gave it. InvalidArgument (and counting stays in memory)
  // when `fd` is not a page.
  static Status UseSharedPage(int fd);

 private:
  struct Cells;
  explicit WorkCounters(Cells* cells, int fd) : cells_(cells), fd_(fd) {}

  Cells* cells_;
  int fd_ = -1;  // >= 0: cells_ is a mapping of this file
};

}  // namespace rayx
