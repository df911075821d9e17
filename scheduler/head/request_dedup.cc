// RequestDedup: a runtime's repeated requests answered once.
#include "head/request_dedup.h"

#include "protocol/messages.h"

namespace rayx::scheduler {

bool RequestDedup::Remembers(uint16_t type) {
  using protocol::MessageType;
  switch (static_cast<MessageType>(type)) {
    case MessageType::kFinishJobRequest:
    case MessageType::kRequestLeaseRequest:
    case MessageType::kReturnLeaseRequest:
    case MessageType::kRegisterActorRequest:
    case MessageType::kDropActorNameRequest:
    case MessageType::kCreatePlacementGroupRequest:
    case MessageType::kRemovePlacementGroupRequest:
    case MessageType::kSubmitJobRequest:
    case MessageType::kStopJobRequest:
    case MessageType::kPutPackageRequest:
    case MessageType::kKeepPackageRequest:
    case MessageType::kKvPutRequest:
    case MessageType::kKvDeleteRequest:
    case MessageType::kWatchGroupRequest:
    case MessageType::kUnwatchGroupRequest:
      return true;
    default:
      return false;
  }
}

void RequestDedup::AddPeer(const std::string& peer) { peers_.try_emplace(peer); }

void RequestDedup::RemovePeer(const std::string& peer) { peers_.erase(peer); }

RequestDedup::Seen RequestDedup::Check(const std::string& peer, uint64_t id,
                                       transport::Frames* reply) const {
  auto p = peers_.find(peer);
  if (p == peers_.end()) return Seen::kNew;
  auto it = p->second.calls.find(id);
  if (it == p->second.calls.end()) return Seen::kNew;
  if (!it->second.answered) return Seen::kParked;
  reply->clear();
  for (const auto& frame : it->second.frames) reply->push_back(transport::MakeFrame(frame));
  return Seen::kAnswered;
}

void RequestDedup::Handled(const std::string& peer, uint64_t id, const transport::Frames* reply) {
  auto p = peers_.find(peer);
  if (p == peers_.end()) return;
  if (reply == nullptr) {
    p->second.calls.try_emplace(id);  // parked, unless already answered through the outbox
    return;
  }
  Answer(p->second, id, *reply);
}

void RequestDedup::AnsweredLater(const std::string& peer, uint64_t id,
                                 const transport::Frames& reply) {
  auto p = peers_.find(peer);
  if (p == peers_.end()) return;
  // Also when the request is not known yet: its handler may answer it
  // through the outbox before Handled marks it parked.
  Answer(p->second, id, reply);
}

void RequestDedup::Answer(PeerCalls& calls, uint64_t id, const transport::Frames& reply) {
  Entry& entry = calls.calls[id];
  if (entry.answered) return;
  entry.answered = true;
  entry.frames.reserve(reply.size());
  for (const auto& frame : reply) entry.frames.emplace_back(transport::FrameView(frame));
  calls.answered_order.push_back(id);
  while (calls.answered_order.size() > kMaxAnsweredPerPeer) {
    calls.calls.erase(calls.answered_order.front());
    calls.answered_order.pop_front();
  }
}

size_t RequestDedup::remembered(const std::string& peer) const {
  auto p = peers_.find(peer);
  return p == peers_.end() ? 0 : p->second.calls.size();
}

}  // namespace rayx::scheduler
