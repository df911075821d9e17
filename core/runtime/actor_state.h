// One actor as its submitter keeps it (ActorSubmitter::ActorState), shared by
// actor_submitter.cc and actor_submitter_restart.cc only.
#pragma once

#include <climits>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/steady_timer.hpp>

#include "runtime/actor_name_lookup.h"
#include "runtime/actor_submitter.h"
#include "runtime/task_submitter.h"

namespace rayx::detail {

// A count of retries or restarts from the user's number (-1: no limit).
inline int32_t Allowance(int n) { return n < 0 ? INT32_MAX : n; }

struct ActorSubmitter::ActorState final : WorkerConnection::Owner {
  ActorSubmitter* submitter = nullptr;
  ActorId actor_id;
  JobId job;  // the actor's job when it is another job's (a detached actor); nil: ours
  // The key to call it when it is another job's (ActorInfo::call_secret):
  // what opens its worker to a process that holds only its own job's credential.
  std::optional<transport::ActorKey> key;
  std::string name;
  std::string class_name;
  LeaseId lease_id;
  bool owner = false;
  bool detached = false;
  std::deque<Task> queue;    // calls not yet sent, in order
  size_t resolved_front = 0; // the first entries of `queue` are resolved (sent again after a loss)
  bool resolving = false;    // the first call after them waits for its arguments
  bool pumping = false;      // Pump is running
  std::shared_ptr<WorkerConnection> conn;
  std::string dead_reason;   // set once the actor is gone for good
  // The owner's name at the head: reserved at creation (Runtime::CreateActor),
  // registered once the constructor ran; dropped again if it never does.
  enum class Name { kNone, kReserved, kRegistered } name_state = Name::kNone;
  std::string metadata;      // ActorOptions::metadata, registered with the name
  bool kill_when_found = false;  // a handle killed it before it had a worker
  // While `restarting` and it has no worker of its own to wait for: the
  // lookup of its name (one per wait), and which wait a reply belongs to.
  std::unique_ptr<ActorNameLookup> lookup;
  uint64_t lookups = 0;
  bool released = false;     // its owner's last handle went away (Release)

  // Restarts. The owner keeps what it needs to create the actor again.
  int32_t restarts_left = 0;  // INT32_MAX: no limit
  int32_t max_restarts = 0;   // as the user set it (-1: no limit), for messages
  int32_t restarts_done = 0;
  int32_t max_task_retries = 0;
  bool restarting = false;    // a new worker is being leased (owner) or looked up (handle)
  bool constructor_shared = false;  // its reservation carries its constructor (ShareConstructor)
  protocol::RequestLeaseRequest lease_request;
  std::optional<Task> creation;  // the constructor call, resolved, once sent
  ObjectHandle creation_object;  // the first constructor's result, until a name is registered
  std::unique_ptr<boost::asio::steady_timer> lookup_timer;

  void OnReplies(WorkerConnection& c) override {
    if (conn.get() != &c) return;
    submitter->Pump(*this);
    submitter->EndIfReleasedAndIdle(*this);
  }
  void OnCreationFailed(WorkerConnection& c, const std::string& message) override {
    // Calls already sent fail on the worker with this reason too; the lease
    // goes back. A constructor that fails is never run again.
    dead_reason = "the actor's constructor failed: " + message;
    creation.reset();
    submitter->deps_.head.ReturnLease(c.info().lease_id);
  }
  void OnLost(WorkerConnection& c) override { submitter->OnWorkerLost(*this, c); }
  void OnRetry(WorkerConnection&, Task task) override {
    // Actor calls never retry exceptions (Submit does not set it).
    FailTask(submitter->deps_.objects, task, protocol::TaskErrorKind::kInternal, "an actor call asked for a retry", "");
  }

  std::string RestartCount() const {
    return std::to_string(restarts_done) +
           (max_restarts < 0 ? "" : " of " + std::to_string(max_restarts));
  }
};

}  // namespace rayx::detail
