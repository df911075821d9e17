// What the head's managers send, as typed calls; FrameOutbox encodes them.
#pragma once

#include <cstdint>
#include <string>

#include "protocol/group_messages.h"
#include "protocol/kv_messages.h"
#include "protocol/messages.h"
#include "protocol/placement_messages.h"
#include "protocol/process_messages.h"
#include "rayx/status.h"

namespace rayx::scheduler {

// A request answered later: the caller's routing id and its request id.
struct Requester {
  std::string peer;
  uint64_t request_id = 0;
};

// Design: LeaseManager, PlacementGroupManager and the KV store never build
// frames; they say what happens (a lease is granted, a request fails with a
// Status, an agent must start a worker) and an implementation of this
// interface turns it into a message. Tests record the calls instead. Calls
// return nothing: a full or vanished peer loses the message, and its request
// times out on its side.
class HeadOutbox {
 public:
  virtual ~HeadOutbox() = default;

  // Answers to callers.
  virtual void GrantLease(const Requester& to, const protocol::RequestLeaseReply& grant) = 0;
  virtual void Fail(const Requester& to, const Status& status) = 0;
  virtual void PlacementGroupWaitDone(const Requester& to,
                                      const protocol::WaitPlacementGroupReply& reply) = 0;
  virtual void KvWaitDone(const Requester& to, const protocol::KvWaitReply& reply) = 0;
  virtual void ActorFound(const Requester& to, const protocol::GetActorReply& reply) = 0;
  // A process of `owner`'s process lease ended.
  virtual void ProcessExited(const std::string& owner_peer,
                             const protocol::ProcessExitedNotice& notice) = 0;
  // `owner`'s leases on a node declared dead are lost.
  virtual void LeasesLost(const std::string& owner_peer,
                          const protocol::LeasesLostNotice& notice) = 0;
  // Another rank of a collective group that `member_peer` watches is gone.
  virtual void GroupMemberDied(const std::string& member_peer,
                               const protocol::GroupMemberDiedNotice& notice) = 0;
  // Lines a job's workers wrote, for one of its drivers.
  virtual void WorkerOutput(const std::string& driver_peer,
                            const protocol::WorkerOutputNotice& notice) = 0;

  // Requests to node agents (`agent_peer` is the agent's routing id).
  virtual void StartWorker(const std::string& agent_peer, uint64_t request_id,
                           const protocol::StartWorkerRequest& request) = 0;
  virtual void KillWorkers(const std::string& agent_peer, uint64_t request_id,
                           const protocol::KillWorkersRequest& request) = 0;
  virtual void JobFinished(const std::string& agent_peer, uint64_t request_id,
                           const protocol::JobFinishedNotice& notice) = 0;
  virtual void WatchDriver(const std::string& agent_peer, uint64_t request_id,
                           const protocol::WatchDriverRequest& request) = 0;
  virtual void FlushOutput(const std::string& agent_peer, uint64_t request_id,
                           const protocol::FlushOutputRequest& request) = 0;
  // A driver's FlushOutputRequest is done.
  virtual void OutputFlushed(const Requester& to, const protocol::FlushOutputReply& reply) = 0;
};

}  // namespace rayx::scheduler
