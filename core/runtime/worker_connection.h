// One leased worker as the caller sees it: calls queued, sent in batches, answered.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "protocol/push_tasks.h"
#include "runtime/object_table.h"
#include "runtime/task.h"
#include "runtime/worker_link.h"

namespace rayx::detail {

class WorkerSendQueue;

// Calls pipelined to one worker (task or actor) at most.
inline constexpr size_t kMaxInFlight = 256;

// The calls in flight to one worker (a task lease or an actor's worker). Queue
// adds a call; the WorkerSendQueue sends every connection's queued calls once
// the I/O thread's current work is done, many per PushTasks message. Replies
// complete the calls' objects in the ObjectTable (one lock per message), then
// the owner hears of them; when the worker is lost or refuses the protocol,
// the owner decides what becomes of the calls.
//
// Thread safety: the I/O thread only. Ownership: shared by its owner (which
// holds it while it leases the worker) and the send queue (until it flushes);
// owns its link. `owner`, `objects`, `send_queue` and `clock` outlive it.
class WorkerConnection : public std::enable_shared_from_this<WorkerConnection> {
 public:
  // The submitter side of a connection: a task shape's pool or an actor.
  class Owner {
   public:
    virtual ~Owner() = default;
    // Replies to some calls were recorded; more calls may be sent.
    virtual void OnReplies(WorkerConnection& conn) = 0;
    // An actor creation call failed on the worker with `message`.
    virtual void OnCreationFailed(WorkerConnection& conn, const std::string& message) = 0;
    // The worker is gone (called once). Calls never sent are still in the
    // connection (TakeUnsent); the owner fails the rest (FailInFlight).
    virtual void OnLost(WorkerConnection& conn) = 0;
    // A call that retries exceptions raised one and has retries left: the
    // owner runs it again (its result is not completed).
    virtual void OnRetry(WorkerConnection& conn, Task task) = 0;
    // Lineage: how to run `task` again should its stored result be lost (it
    // has retries left); nullptr: it cannot be (actor calls).
    virtual std::function<void()> Recompute(Task task) {
      (void)task;
      return nullptr;
    }
    // A task did not run: the worker could not read `lost`, the stored copy
    // of an argument. Returns nullopt when the owner brings the argument back
    // and runs the task again (it takes `task`), else why it cannot, and the
    // task fails with ObjectLost. (Actor calls fail at once.)
    virtual std::optional<std::string> OnArgumentLost(WorkerConnection& conn, Task& task,
                                                      const protocol::ObjectLocation& lost) {
      (void)conn, (void)task, (void)lost;
      return "this caller does not compute lost arguments again";
    }
  };
  struct Info {
    LeaseId lease_id;
    std::string address;
    std::string node;
    int32_t pid = 0;
    JobId job;  // the worker's job; nil: this process's own
    // Set for another job's actor: the key that opens its worker to us.
    std::optional<transport::ActorKey> actor_key;
    // Set for another job's worker: signs the read grant each stored
    // argument carries to it (SubmitterOptions::grant_read).
    std::function<std::string(std::string_view object_name)> grant_read;
  };

  WorkerConnection(Info info, Owner* owner, ObjectTable& objects, WorkerSendQueue& send_queue,
                   const Clock& clock);
  WorkerConnection(const WorkerConnection&) = delete;
  WorkerConnection& operator=(const WorkerConnection&) = delete;

  // Connects through `connector`; replies and the loss arrive from then on.
  void Open(WorkerConnector& connector);

  // Queues `task`; it is sent with the connection's next batch.
  void Queue(Task task);
  // Sends every queued call, up to kMaxCallsPerMessage per message (called by
  // WorkerSendQueue). A failed send means the worker is gone: Lose().
  void SendQueued(protocol::PushTasksWriter& writer, std::string& body,
                  const std::string& job_id);

  // A message from the worker: results (PushTasksReply) or a refusal.
  void OnMessage(transport::Frames& frames);
  // The worker refused the protocol: every call fails with ProtocolError and
  // the connection is lost.
  void Refuse(const std::string& why);
  // `result` is an item the generator call `task` yielded: queued in
  // completions_ as item result.item_index of the task's result (its stream).
  void AddItem(const Task& task, const protocol::TaskResultView& result);
  // The worker is gone: marks the connection lost and tells the owner (once).
  // `why`, when known (the head declared its node dead), is in loss_reason().
  // `cause`: the error kind its calls fail with (OutOfMemory), when the head
  // said one (WorkerCrashed: it did not).
  void Lose(std::string why = "",
            protocol::TaskErrorKind cause = protocol::TaskErrorKind::kWorkerCrashed);
  // The head reports the worker gone (`why`, `cause` as for Lose): the
  // replies it sent before it went count first. Its answers and the report
  // travel different ways, so the connection is lost at its own disconnect
  // (which follows the answers), or after kReportedLossWaitMs when none
  // comes (its node unreachable), with the report's reason either way.
  void LoseReported(std::string why,
                    protocol::TaskErrorKind cause = protocol::TaskErrorKind::kWorkerCrashed);
  static constexpr int64_t kReportedLossWaitMs = 1000;

  // Takes the calls never sent, in their order (for another worker).
  std::vector<Task> TakeUnsent();
  // Takes every call in flight (sent or not), in the order they were queued.
  std::vector<Task> TakeInFlight();
  // Fails every call in flight (sent or not) with {type, message} and forgets them.
  void FailInFlight(protocol::TaskErrorKind kind, const std::string& message);

  const Info& info() const { return info_; }
  size_t in_flight() const { return in_flight_.size(); }
  // Lost, or reported lost and awaiting its disconnect: no more calls go to it.
  bool lost() const { return lost_ || reported_; }
  // Its worker handed calls back because the call it runs waits in a get or
  // wait (Requeued): it takes no more until one of its calls ends.
  bool blocked() const { return blocked_; }
  const std::string& loss_reason() const { return loss_reason_; }
  protocol::TaskErrorKind loss_cause() const { return loss_cause_; }
  // "the worker process (pid P) on node N" and how it was lost: "died" or the reason.
  std::string DescribeLoss() const;
  // When the last call in flight was answered (the clock's time).
  int64_t idle_since() const { return idle_since_; }
  // Set by WorkerSendQueue while the connection waits in its queue.
  bool flush_queued = false;

 private:
  Info info_;
  Owner* owner_;
  ObjectTable& objects_;
  WorkerSendQueue& send_queue_;
  const Clock& clock_;
  std::unique_ptr<WorkerLink> link_;
  std::unordered_map<uint64_t, Task> in_flight_;  // sent or queued to send
  std::vector<uint64_t> unsent_;                  // ids in in_flight_ not sent yet, in order
  uint64_t next_id_ = 1;
  bool blocked_ = false;  // see blocked()
  int64_t idle_since_ = 0;
  bool lost_ = false;
  std::string loss_reason_;
  protocol::TaskErrorKind loss_cause_ = protocol::TaskErrorKind::kWorkerCrashed;
  // What the head reported (LoseReported) while the disconnect is awaited.
  bool reported_ = false;
  std::string reported_why_;
  protocol::TaskErrorKind reported_cause_ = protocol::TaskErrorKind::kWorkerCrashed;
  // Reused from reply to reply.
  std::vector<std::string_view> payload_views_;
  std::vector<protocol::TaskResultView> results_;
  std::vector<ObjectTable::Completion> completions_;
  std::vector<Task> retries_;
  struct LostArgument {
    Task task;
    protocol::ObjectLocation lost;  // the copy the worker could not read
    std::string message;
  };
  std::vector<LostArgument> lost_arguments_;
};

}  // namespace rayx::detail
