// The runtime's link to the head: calls with callbacks or deadlines, heartbeats.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/address.h"
#include "common/clock.h"
#include "common/work_counters.h"
#include "protocol/codec.h"
#include "protocol/group_messages.h"
#include "protocol/messages.h"
#include "runtime/head_link.h"
#include "runtime/lease_client.h"
#include "transport/frame.h"
#include "transport/security.h"
#include "transport/zmq_fwd.h"

namespace rayx::detail {

// One DEALER socket to the head, watched on the runtime's io_context. A call
// is sent with a fresh request id and answered by the reply carrying that id
// (an ErrorReply becomes its Status); replies to unknown ids are dropped.
// Drivers also send a heartbeat every period so the head keeps their job.
//
// Head restarts: the socket has a fixed routing id (so the head's records of
// what this client owns stay valid across a restart) and ZeroMQ reconnects by
// itself. A restarted head refuses calls from a connection that has not
// registered ("register first"); the client then registers again with the
// request given to SetRegistration (same job) and sends again every call it
// sent before that and that is still unanswered (refused, or lost with the
// old head). While the head is down, calls wait in the socket's queue. With
// heartbeats running, a head silent for longer than head_timeout_ms fails the
// waiting calls with Unavailable naming the head and how long it was silent.
//
// Thread safety: Start before the io_context runs on its thread; Call,
// StartHeartbeats and Stop on the I/O thread; CallSync and StopHeartbeats
// from any other thread. Callbacks run on the I/O thread.
//
// Ownership: owns the socket; `io` and `context` must outlive it. Calls still
// unanswered when it stops (or is destroyed) are dropped without a callback.
class HeadClient final : public LeaseClient {
 public:
  struct Options {
    // How long calls wait for a silent head (down, restarting) before they
    // fail; only enforced while heartbeats run. Default: 60 s.
    int64_t head_timeout_ms = 60000;
    // What the head's silence is measured with (tests step a ManualClock);
    // nullptr: the system's. Must outlive the client.
    const Clock* clock = nullptr;
  };
  // `security`: the credential this process proves to the head (CURVE).
  HeadClient(boost::asio::io_context& io, zmq::context_t& context, HostPort head,
             transport::ClientSecurity security, Options options);
  // Over `link` (tests: a fake; head_link.h), to the head at `head`.
  HeadClient(boost::asio::io_context& io, std::unique_ptr<HeadLink> link, HostPort head,
             Options options);
  HeadClient(boost::asio::io_context& io, zmq::context_t& context, HostPort head,
             transport::ClientSecurity security)
      : HeadClient(io, context, std::move(head), std::move(security), Options()) {}
  ~HeadClient() override;
  HeadClient(const HeadClient&) = delete;
  HeadClient& operator=(const HeadClient&) = delete;

  // Connects and starts watching the socket.
  void Start();
  // Stops heartbeats and the socket's watch; later calls fail Unavailable.
  void Stop();

  // Sends `request`; `done` runs with the decoded Reply, the head's error, or
  // Unavailable when it cannot be sent. Internal for a reply of another type.
  template <typename Reply, typename Request>
  void Call(const Request& request, std::function<void(Result<Reply>)> done);
  // Call from another thread, waiting at most `timeout_ms` for the answer.
  // Unavailable with advice when the head does not answer in time.
  // REQUIRES: not on the I/O thread (it would wait on itself).
  template <typename Reply, typename Request>
  Result<Reply> CallSync(const Request& request, int64_t timeout_ms);
  // Call and CallSync with the request already encoded: `body` is a message of
  // type `type`, and the answer is the body of a reply of type `reply_type`
  // (Internal for a reply of another type). For callers that should not see
  // this header's templates (the Runtime facade).
  void CallEncoded(uint16_t type, std::string body, uint16_t reply_type,
                   std::function<void(Result<std::string>)> done);
  Result<std::string> CallSyncEncoded(uint16_t type, std::string body, uint16_t reply_type,
                                      int64_t timeout_ms);
  // Sends a notice, a message the head does not answer (request id 0); false
  // when it cannot be sent now. A notice sent on a connection that drops may
  // be lost, and a restarted head refuses it until this client registered
  // again: what it says must be a state that OnRestored sends again.
  template <typename Notice>
  bool Notify(const Notice& notice) {
    return NotifyEncoded(static_cast<uint16_t>(Notice::kType), protocol::Encode(notice));
  }
  bool NotifyEncoded(uint16_t type, const std::string& body);

  // Runs `handler` (on the I/O thread) for each LeasesLostNotice: the head
  // declared the node of some of this process's leases dead.
  void OnLeasesLost(std::function<void(const protocol::LeasesLostNotice&)> handler) {
    on_leases_lost_ = std::move(handler);
  }
  // Runs `handler` (on the I/O thread) for each GroupMemberDiedNotice: a rank
  // of a collective group this process watches died.
  void OnGroupMemberDied(std::function<void(const protocol::GroupMemberDiedNotice&)> handler) {
    on_group_member_died_ = std::move(handler);
  }

  // Runs `handler` (on the I/O thread) for each WorkerOutputNotice: lines
  // this job's workers wrote (sent when this process registered with
  // log_to_driver).
  void OnWorkerOutput(std::function<void(const protocol::WorkerOutputNotice&)> handler) {
    on_worker_output_ = std::move(handler);
  }

  // Runs `handler` (on the I/O thread) once this process registered again
  // with a restarted head, before the calls still waiting are sent again:
  // what the new head must learn from us (name reservations) goes first.
  void OnReregistered(std::function<void()> handler) { on_reregistered_ = std::move(handler); }
  // Runs `handler` (on the I/O thread) whenever notices sent before may not
  // have reached the head: after this process registered again with a
  // restarted head (after the OnReregistered handler), and after a dropped
  // connection to the same head came back.
  void OnRestored(std::function<void()> handler) { on_restored_ = std::move(handler); }

  // What to send to register again with a restarted head (the registration
  // that succeeded, with its job id). I/O thread.
  void SetRegistration(protocol::RegisterDriverRequest request);
  // Sends a DriverHeartbeat for `job_id` now and every `period_ms`.
  // `counts` (may be empty) gives what the driver did (tasks it submitted,
  // collective operations it ran), sent with every heartbeat
  // (DriverHeartbeatRequest::tasks and ::collectives).
  void StartHeartbeats(JobId job_id, int64_t period_ms, std::function<WorkCounts()> counts = {});
  // No heartbeat is sent after this returns (any thread), and a call the head
  // refuses with "register first" fails instead of registering again: the
  // program is ending (Runtime::Stop), and its FinishJob made the head forget
  // it, which is no head restart.
  void StopHeartbeats();

  // LeaseClient.
  void RequestLease(const protocol::RequestLeaseRequest& request, LeaseCallback done) override;
  void ReturnLease(const LeaseId& lease_id) override;
  void RegisterActor(const protocol::ActorInfo& actor) override;
  void DropActorName(const std::string& name, const ActorId& actor_id) override;
  void LookupActor(const protocol::GetActorRequest& request, ActorCallback done) override;

  const HostPort& head() const { return head_; }

 private:
  // The reply's type and body.
  using RawReply = std::pair<uint16_t, std::string>;
  using RawCallback = std::function<void(Result<RawReply>)>;

  // A call waiting for its answer, with its frames to send again after a
  // head restart (`resend`).
  struct Pending {
    RawCallback done;
    std::vector<std::string> frames;
    bool resend = true;
  };

  uint64_t NextRequestId() { return next_request_++; }
  // Sends again the calls sent before `sent_before` and still unanswered,
  // after a dropped connection to a head that did not restart.
  void ResendAfterReconnect(uint64_t sent_before);
  // Sends the waiting calls `ids` again, oldest first; one that cannot be sent
  // fails with Unavailable.
  void SendAgain(std::vector<uint64_t> ids);
  // Registers `done` under `id` and sends `frames`. `resend`: send it again
  // after registering with a restarted head (heartbeats and the registration
  // itself are not).
  void Send(uint64_t id, transport::Frames& frames, RawCallback done, bool resend = true);
  bool SendFrames(const std::vector<std::string>& frames);
  void OnMessage(transport::Frames& frames);
  void Heartbeat();
  // The head forgot this connection (it restarted): register again, then send
  // the calls still unanswered again.
  void Reregister();
  // Fails every call still waiting with `status`, except the registration.
  void FailWaiting(const Status& status);
  // A connection event of the link: after a reconnect, asks the head whether
  // it still knows this connection (a DriverHeartbeat); a restarted head says
  // "register first", which starts Reregister at once instead of at this
  // process's next call (a worker's runtime never heartbeats; a call parked
  // in the old head, a KV wait, would be lost).
  void OnLinkEvent(HeadLink::Event event);
  // Sends `frames` over the link; false when it is not started or cannot send.
  bool SendOnSocket(transport::Frames& frames);
  int64_t NowMs() const { return clock_.NowMs(); }

  boost::asio::io_context& io_;
  const HostPort head_;
  Options options_;
  SystemClock system_clock_;
  const Clock& clock_;  // options_.clock, or system_clock_
  std::unique_ptr<HeadLink> link_;  // ZeroMQ's unless a test gave another
  bool disconnected_ = false;  // since the last connect
  std::unordered_map<uint64_t, Pending> calls_;
  std::optional<protocol::RegisterDriverRequest> registration_;
  uint64_t reregister_id_ = 0;  // the registration in flight, or 0
  int64_t last_heard_ms_ = 0;
  bool timed_out_ = false;      // the waiting calls failed for this silence
  uint64_t next_request_ = 1;
  boost::asio::steady_timer heartbeat_timer_;
  JobId heartbeat_job_;
  std::function<WorkCounts()> heartbeat_counts_;
  int64_t heartbeat_period_ms_ = 1000;
  std::atomic<bool> heartbeats_stopped_{false};
  std::function<void(const protocol::LeasesLostNotice&)> on_leases_lost_;
  std::function<void(const protocol::WorkerOutputNotice&)> on_worker_output_;
  std::function<void(const protocol::GroupMemberDiedNotice&)> on_group_member_died_;
  std::function<void()> on_reregistered_;
  std::function<void()> on_restored_;
};

template <typename Reply, typename Request>
void HeadClient::Call(const Request& request, std::function<void(Result<Reply>)> done) {
  CallEncoded(static_cast<uint16_t>(Request::kType), protocol::Encode(request),
              static_cast<uint16_t>(Reply::kType),
              [done = std::move(done)](Result<std::string> body) {
                if (!body.ok()) return done(body.status());
                done(protocol::Decode<Reply>(*body));
              });
}

template <typename Reply, typename Request>
Result<Reply> HeadClient::CallSync(const Request& request, int64_t timeout_ms) {
  Result<std::string> body =
      CallSyncEncoded(static_cast<uint16_t>(Request::kType), protocol::Encode(request),
                      static_cast<uint16_t>(Reply::kType), timeout_ms);
  if (!body.ok()) return body.status();
  return protocol::Decode<Reply>(*body);
}

}  // namespace rayx::detail
