// The head's outbox encoded into wire frames.
#include "head/frame_outbox.h"

#include "transport/message.h"

namespace rayx::scheduler {

void FrameOutbox::Answer(const Requester& to, transport::Frames frames) {
  if (on_answer_) on_answer_(to, frames);
  send_(to.peer, std::move(frames));
}

void FrameOutbox::GrantLease(const Requester& to, const protocol::RequestLeaseReply& grant) {
  Answer(to, transport::MakeMessage(grant, to.request_id));
}

void FrameOutbox::Fail(const Requester& to, const Status& status) {
  Answer(to, transport::MakeErrorMessage(status, where_, to.request_id));
}

void FrameOutbox::PlacementGroupWaitDone(const Requester& to,
                                         const protocol::WaitPlacementGroupReply& reply) {
  Answer(to, transport::MakeMessage(reply, to.request_id));
}

void FrameOutbox::KvWaitDone(const Requester& to, const protocol::KvWaitReply& reply) {
  Answer(to, transport::MakeMessage(reply, to.request_id));
}

void FrameOutbox::ActorFound(const Requester& to, const protocol::GetActorReply& reply) {
  if (!actor_keys_ || reply.actor.job_id.IsNil()) {
    Answer(to, transport::MakeMessage(reply, to.request_id));
    return;
  }
  protocol::GetActorReply keyed = reply;
  actor_keys_(keyed.actor);
  Answer(to, transport::MakeMessage(keyed, to.request_id));
}

void FrameOutbox::ProcessExited(const std::string& owner_peer,
                                const protocol::ProcessExitedNotice& notice) {
  transport::Frames frames = transport::MakeMessage(notice, 0);
  if (hold_ && hold_(owner_peer, frames)) return;
  send_(owner_peer, std::move(frames));
}

void FrameOutbox::LeasesLost(const std::string& owner_peer,
                             const protocol::LeasesLostNotice& notice) {
  transport::Frames frames = transport::MakeMessage(notice, 0);
  if (hold_ && hold_(owner_peer, frames)) return;
  send_(owner_peer, std::move(frames));
}

void FrameOutbox::GroupMemberDied(const std::string& member_peer,
                                  const protocol::GroupMemberDiedNotice& notice) {
  send_(member_peer, transport::MakeMessage(notice, 0));
}

void FrameOutbox::WorkerOutput(const std::string& driver_peer,
                               const protocol::WorkerOutputNotice& notice) {
  send_(driver_peer, transport::MakeMessage(notice, 0));
}

void FrameOutbox::FlushOutput(const std::string& agent_peer, uint64_t request_id,
                              const protocol::FlushOutputRequest& request) {
  send_(agent_peer, transport::MakeMessage(request, request_id));
}

void FrameOutbox::OutputFlushed(const Requester& to, const protocol::FlushOutputReply& reply) {
  Answer(to, transport::MakeMessage(reply, to.request_id));
}

void FrameOutbox::StartWorker(const std::string& agent_peer, uint64_t request_id,
                              const protocol::StartWorkerRequest& request) {
  send_(agent_peer, transport::MakeMessage(request, request_id));
}

void FrameOutbox::KillWorkers(const std::string& agent_peer, uint64_t request_id,
                              const protocol::KillWorkersRequest& request) {
  send_(agent_peer, transport::MakeMessage(request, request_id));
}

void FrameOutbox::WatchDriver(const std::string& agent_peer, uint64_t request_id,
                              const protocol::WatchDriverRequest& request) {
  send_(agent_peer, transport::MakeMessage(request, request_id));
}

void FrameOutbox::JobFinished(const std::string& agent_peer, uint64_t request_id,
                              const protocol::JobFinishedNotice& notice) {
  send_(agent_peer, transport::MakeMessage(notice, request_id));
}

void FrameOutbox::JobCredential(const std::string& agent_peer,
                                const protocol::JobCredentialNotice& notice) {
  send_(agent_peer, transport::MakeMessage(notice, 0));
}

}  // namespace rayx::scheduler
