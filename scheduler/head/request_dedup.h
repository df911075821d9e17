// Requests a driver's runtime sends again after its connection to the head
// dropped: answered once, whatever number of times they arrive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/frame.h"

namespace rayx::scheduler {

// Design: a runtime's HeadClient keeps every call it may send again (all but
// heartbeats and its registration) until answered. When its TCP connection to
// the head drops and ZeroMQ reconnects it (same routing id), a reply the head
// sent meanwhile is lost, and so is a request still in the dead connection: the
// client sends its unanswered calls again, under their own ids. For each
// registered runtime (`AddPeer`), this remembers the requests it sent by id:
//
//  - answered: the reply's frames, sent again for a repeat (a lease must not
//    be granted twice, a placement group not created twice);
//  - parked (answered later through the outbox: a lease request waiting for
//    room, a KV or placement-group wait, an actor lookup): a repeat is
//    dropped, the answer reaches the new connection when it comes;
//  - unknown: the request was lost, and is handled as new.
//
// Only requests that change state are remembered (Remembers); their replies
// are small (a grant, an id, a flag).
//
// Bounded: at most kMaxAnsweredPerPeer replies per runtime are kept (the
// oldest go first; a client resends right after it reconnects, so the replies
// it can miss are the latest ones), and a runtime's entries go with it
// (RemovePeer, when its job ends). Parked entries are bounded by the requests
// the head parks. Agents are never added: their request ids and the head's
// requests to them share one id space. Owned by the head's event loop.
class RequestDedup {
 public:
  static constexpr size_t kMaxAnsweredPerPeer = 1024;

  enum class Seen { kNew, kParked, kAnswered };

  // Whether requests of `type` are remembered: those that change the
  // cluster's state (a lease, a name, a group, a KV entry, a job, a package,
  // a group watch). Reads (lookups, status, waits for a key, a name or a
  // group) are handled again: a repeat costs a second answer the client
  // drops, and their replies (a KV value of up to 1 MiB) are not kept.
  static bool Remembers(uint16_t type);

  // Starts remembering the requests of runtime `peer` (a routing id).
  void AddPeer(const std::string& peer);
  void RemovePeer(const std::string& peer);
  bool Tracks(const std::string& peer) const { return peers_.count(peer) > 0; }

  // What is known of request `id` of `peer`. For kAnswered, `reply` is set to
  // the frames to send again.
  Seen Check(const std::string& peer, uint64_t id, transport::Frames* reply) const;
  // After handling request `id` of a tracked `peer`: its reply now, or
  // nullptr when it was parked (or has no reply).
  void Handled(const std::string& peer, uint64_t id, const transport::Frames* reply);
  // A request of `peer` answered through the outbox: a parked one answered
  // later, or one its handler answered at once that way.
  void AnsweredLater(const std::string& peer, uint64_t id, const transport::Frames& reply);

  size_t peer_count() const { return peers_.size(); }
  size_t remembered(const std::string& peer) const;

 private:
  struct Entry {
    bool answered = false;
    std::vector<std::string> frames;  // the reply, when answered
  };
  struct PeerCalls {
    std::unordered_map<uint64_t, Entry> calls;
    std::deque<uint64_t> answered_order;  // oldest answer first
  };
  void Answer(PeerCalls& calls, uint64_t id, const transport::Frames& reply);

  std::unordered_map<std::string, PeerCalls> peers_;
};

}  // namespace rayx::scheduler
