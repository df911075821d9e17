// Normal tasks: pools of leased workers per resource shape, pipelining, idle returns.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/clock.h"
#include "rayx/detail/runtime_api.h"
#include "runtime/argument_resolver.h"
#include "runtime/lease_client.h"
#include "runtime/submitter_deps.h"
#include "runtime/worker_connection.h"
#include "runtime/worker_send_queue.h"

namespace rayx::detail {

// Sends tasks to workers leased from the head. Tasks of one resource shape
// (resources plus placement) share a pool of workers; each task goes to the
// least-loaded worker of its pool.
//
// Design: a shape asks the head for one worker at a time while work waits, so
// a burst costs the head one request per worker, not per task. Until a lease
// request has waited longer than a worker takes to start (twice the fastest
// grant seen, at least kSaturatedAfterMs: a Python worker starts in ~100 ms, a
// C++ one in a few) the cluster may have free slots, and each worker gets one
// task at a time, which spreads slow tasks over the cluster; after that, up to
// kMaxInFlight are pipelined per worker. A worker idle for
// kIdleLeaseMs is given back (Tick). A lost worker's unsent tasks go to the
// pool's other workers in order; those it was running fail (WorkerCrashed).
// A task whose worker could not read a stored argument (its node died) waits
// until the task that made the argument has run again (lineage), then goes
// again; with nothing to run again it fails with ObjectLost naming the node.
//
// Thread safety: the I/O thread only. Ownership: owns the shapes and, through
// them, the connections; every dependency outlives it.
class TaskSubmitter {
 public:
  static constexpr int64_t kIdleLeaseMs = 1000;   // an idle worker is given back after this
  static constexpr int64_t kSaturatedAfterMs = 50;  // the floor of the threshold
  // A task whose stored arguments are lost more often than this fails (a loop
  // guard for tasks with unlimited retries whose outputs keep being lost).
  static constexpr int32_t kMaxArgumentRecoveries = 8;

  using Deps = SubmitterDeps;
  using Options = SubmitterOptions;

  TaskSubmitter(Deps deps, Options options);
  ~TaskSubmitter();
  TaskSubmitter(const TaskSubmitter&) = delete;
  TaskSubmitter& operator=(const TaskSubmitter&) = delete;

  // Resolves `task`'s arguments, then queues it on its shape's pool (none:
  // {CPU: 1}). Its result is completed in the ObjectTable; a lease the head
  // refuses fails it (Infeasible or WorkerStartFailed).
  void Submit(Task& task, const std::optional<ResourceMap>& resources, const Placement& placement);
  // Gives back leases idle for more than kIdleLeaseMs and sends waiting work
  // (saturation may allow deeper queues now). Call every ~100 ms.
  void Tick();
  // The head says lease `lease_id`'s worker is lost (`why`; `cause`, when
  // not empty, is the error kind its calls fail with: "OutOfMemory"): its
  // node was declared dead, or the worker exited. False when no worker or
  // unexplained loss here has it.
  bool LoseLease(const LeaseId& lease_id, const std::string& why,
                 protocol::TaskErrorKind cause = protocol::TaskErrorKind::kWorkerCrashed);
  // How long the runtime lets the calls of a worker whose connection
  // dropped wait for the head to say why (LoseLease) before they fail as a
  // plain crash (Options::loss_reason_wait_ms).
  static constexpr int64_t kLossReasonWaitMs = 1000;
  // Drops every worker connection (shutdown).
  void Clear();

  // Workers leased for tasks without resources or placement (for tests).
  size_t TEST_default_workers();

 private:
  struct Shape;

  Shape* ShapeFor(const std::optional<ResourceMap>& resources, const Placement& placement);
  void Pump(Shape& shape);
  void RequestLease(Shape& shape);
  void OnWorkerLost(Shape& shape, WorkerConnection& conn);
  // A closure (callable from any thread) that queues `task` on `shape` again,
  // using one of its retries: lineage for its stored result.
  std::function<void()> RecomputeLater(Shape* shape, Task task);
  // A worker of `shape` could not read `lost`, a stored argument of `task`:
  // that argument and the others on the same agent are taken as lost; runs
  // again the tasks that made them and queues `task` once they are back.
  // Returns why not when one of them cannot be made again.
  std::optional<std::string> RecoverArguments(Shape& shape, Task& task,
                                              const protocol::ObjectLocation& lost);
  // How long a lease request waits before the cluster counts as saturated.
  int64_t SaturatedAfterMs() const;

  Deps deps_;
  Options options_;
  std::unordered_map<std::string, std::unique_ptr<Shape>> shapes_;
  Shape* default_shape_ = nullptr;  // {CPU: 1}, the shape of tasks without resources
  int64_t fastest_grant_ms_ = -1;   // the quickest lease grant so far (a worker's start)
  // The calls a lost worker leaves to fail; those of workers whose
  // connection dropped before the head said why wait here, by lease (at most
  // loss_reason_wait_ms each: OnWorkerLost, LoseLease).
  struct Unexplained {
    std::vector<Task> tasks;
    std::string node;
    std::string lost;   // WorkerConnection::DescribeLoss()
    bool told = false;  // `lost` names the head's reason already
    LeaseId lease;  // given back when the wait ends without the head's word
    std::shared_ptr<boost::asio::steady_timer> timer;
  };
  std::unordered_map<std::string, Unexplained> unexplained_;
  // Fails `u`'s calls, with the head's `why` and `cause` when they came after
  // the drop (cause: the error kind, WorkerCrashed unless the head said).
  void FailUnexplained(Unexplained& u, const std::string& why, protocol::TaskErrorKind cause);
  // Expires with this submitter: a recompute closure kept in an object entry
  // does nothing once it is gone.
  std::shared_ptr<char> alive_ = std::make_shared<char>();
};

// Copies `placement` into a lease request.
void ApplyPlacement(const Placement& placement, protocol::RequestLeaseRequest* request);

}  // namespace rayx::detail
