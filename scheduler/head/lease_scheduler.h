// The head's lease requests that wait, and where a request goes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>

#include "head/head_outbox.h"
#include "head/node_table.h"
#include "policy/composite_policy.h"
#include "protocol/lease_messages.h"

namespace rayx::scheduler {

// Who a lease's answers go to: a caller through the outbox, or the head
// itself, for a submitted job (its HeadLeaseOwner: JobManager) or for a
// detached actor it restarts or took over (LeaseManager's ActorRestart*).
struct LeaseOwner {
  enum class Kind : uint8_t { kCaller, kHeadJob, kHeadActor };
  Requester requester;  // the head's own request id for a head owner
  Kind kind = Kind::kCaller;
  bool head() const { return kind != Kind::kCaller; }
};

// A request for a lease and whose it is.
struct PendingLease {
  LeaseOwner owner;
  protocol::RequestLeaseRequest req;
};

// Design: the scheduler decides and queues; it grants nothing. A request is
// checked (Check), placed by the policy on the node table's view (Decide:
// where it goes now, why it must wait, or why it can never run), and, while
// it must wait, kept in a FIFO queue. LeaseManager grants: it takes the
// resources the decision names and starts the worker, and runs a Pass over
// the queue whenever resources free up or a node joins. Like Ray's
// scheduling classes, a pass tries each kind of demand once: a queue of many
// equal requests that do not fit costs a hash each, not a decision each.
//
// Owned by the head's event loop (LeaseManager); not thread-safe.
class LeaseScheduler {
 public:
  explicit LeaseScheduler(const NodeTable& nodes) : nodes_(nodes) {}

  // InvalidArgument naming what is wrong with the request as asked: a
  // negative or non-finite amount, a GPU amount that is neither a share of
  // one device nor whole, an unknown strategy, an affinity to a non-id.
  static Status Check(const protocol::RequestLeaseRequest& req);
  // The policy's decision for a request outside placement groups.
  policy::SchedulingDecision Decide(const protocol::RequestLeaseRequest& req);

  // Queues `pending` behind the others.
  void Enqueue(PendingLease pending) { pending_.push_back(std::move(pending)); }
  // One pass in FIFO order: `grant` is offered each queued request that
  // `eligible` lets through, except those asking what a request offered
  // earlier in the pass could not have; one it takes (true: granted, or
  // answered with an error) leaves the queue.
  void Pass(const std::function<bool(const PendingLease&)>& eligible,
            const std::function<bool(PendingLease&)>& grant);
  // Removes the queued requests for which `drop` is true, in order (it may
  // answer them). Returns how many.
  size_t Drop(const std::function<bool(PendingLease&)>& drop);
  // Removes the first queued request for which `match` is true; false when none.
  bool DropFirst(const std::function<bool(const PendingLease&)>& match);

  size_t size() const { return pending_.size(); }
  // Policy decisions made so far (for tests of scheduling cost).
  uint64_t decisions() const { return decisions_; }
  // Queued requests counted by resource shape, into `out` (`rayx status`).
  void CountShapes(std::map<std::string, int>* out) const;

 private:
  const NodeTable& nodes_;
  std::deque<PendingLease> pending_;
  policy::CompositePolicy policy_;  // where leases outside placement groups go
  uint64_t decisions_ = 0;
};

}  // namespace rayx::scheduler
