// The head's outbox encoded into wire frames: the ZeroMQ edge of the managers.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "head/head_outbox.h"
#include "transport/frame.h"

namespace rayx::scheduler {

// Encodes each call as [Envelope][body] and hands it to a send function.
// Not thread-safe.
class FrameOutbox final : public HeadOutbox {
 public:
  using SendFn = std::function<void(const std::string& peer, transport::Frames frames)>;

  // `where` names the head in error replies. Default send: dropped.
  explicit FrameOutbox(std::string where) : where_(std::move(where)) {}
  void SetSend(SendFn send) { send_ = std::move(send); }
  // Sees each answer to a request (not notices, not requests to agents) just
  // before it is sent: RequestDedup keeps it for a repeat of that request.
  using AnswerFn = std::function<void(const Requester& to, const transport::Frames& frames)>;
  void SetAnswerObserver(AnswerFn observer) { on_answer_ = std::move(observer); }
  // Adds the key to call the actor (ActorInfo::call_secret, worker_key) to
  // each GetActorReply; the head derives it from the cluster token.
  using ActorKeyFn = std::function<void(protocol::ActorInfo& actor)>;
  void SetActorKeys(ActorKeyFn keys) { actor_keys_ = std::move(keys); }
  // May keep a notice to a lease's owner (ProcessExited, LeasesLost) for
  // later instead of sending it: returns true when it took `frames`.
  using HoldFn = std::function<bool(const std::string& peer, transport::Frames& frames)>;
  void SetOwnerNoticeHold(HoldFn hold) { hold_ = std::move(hold); }

  void GrantLease(const Requester& to, const protocol::RequestLeaseReply& grant) override;
  void Fail(const Requester& to, const Status& status) override;
  void PlacementGroupWaitDone(const Requester& to,
                              const protocol::WaitPlacementGroupReply& reply) override;
  void KvWaitDone(const Requester& to, const protocol::KvWaitReply& reply) override;
  void ActorFound(const Requester& to, const protocol::GetActorReply& reply) override;
  void ProcessExited(const std::string& owner_peer,
                     const protocol::ProcessExitedNotice& notice) override;
  void LeasesLost(const std::string& owner_peer,
                  const protocol::LeasesLostNotice& notice) override;
  void GroupMemberDied(const std::string& member_peer,
                       const protocol::GroupMemberDiedNotice& notice) override;
  void WorkerOutput(const std::string& driver_peer,
                    const protocol::WorkerOutputNotice& notice) override;
  void FlushOutput(const std::string& agent_peer, uint64_t request_id,
                   const protocol::FlushOutputRequest& request) override;
  void OutputFlushed(const Requester& to, const protocol::FlushOutputReply& reply) override;
  void StartWorker(const std::string& agent_peer, uint64_t request_id,
                   const protocol::StartWorkerRequest& request) override;
  void KillWorkers(const std::string& agent_peer, uint64_t request_id,
                   const protocol::KillWorkersRequest& request) override;
  void JobFinished(const std::string& agent_peer, uint64_t request_id,
                   const protocol::JobFinishedNotice& notice) override;
  // Tells an agent to admit (or stop admitting) a job's credential.
  void JobCredential(const std::string& agent_peer, const protocol::JobCredentialNotice& notice);
  void WatchDriver(const std::string& agent_peer, uint64_t request_id,
                   const protocol::WatchDriverRequest& request) override;

 private:
  void Answer(const Requester& to, transport::Frames frames);

  std::string where_;
  AnswerFn on_answer_;
  ActorKeyFn actor_keys_;
  HoldFn hold_;
  SendFn send_ = [](const std::string&, transport::Frames) {};
};

}  // namespace rayx::scheduler
