// The head calls the submitters make: leasing workers, giving them back, naming actors.
#pragma once

#include <functional>
#include <string>

#include "protocol/messages.h"
#include "rayx/status.h"

namespace rayx::detail {

// The narrow view of the head that the submitters need, so that a test can
// answer lease requests itself (HeadClient is the real one).
//
// Thread safety: called and answered on the I/O thread only.
class LeaseClient {
 public:
  using LeaseCallback = std::function<void(Result<protocol::RequestLeaseReply>)>;
  virtual ~LeaseClient() = default;

  // Asks the head for a worker. `done` runs once, on the I/O thread, with the
  // grant or the head's refusal (e.g. "infeasible ..." or a start failure).
  virtual void RequestLease(const protocol::RequestLeaseRequest& request, LeaseCallback done) = 0;
  // Gives the lease back so its resources are freed; the reply is not awaited.
  virtual void ReturnLease(const LeaseId& lease_id) = 0;
  // Registers a named actor with the head; a refusal is logged, not returned.
  virtual void RegisterActor(const protocol::ActorInfo& actor) = 0;
  // Frees the name reserved for `actor_id` when it was created (its creation
  // failed or it was killed before it ran); the reply is not awaited.
  virtual void DropActorName(const std::string& name, const ActorId& actor_id) = 0;
  using ActorCallback = std::function<void(Result<protocol::ActorInfo>)>;
  // Looks up the named actor, at once or, with `request.wait_ms`, once it has
  // a worker other than `request.stale_worker` (see GetActorRequest); `done`
  // runs once, on the I/O thread.
  virtual void LookupActor(const protocol::GetActorRequest& request, ActorCallback done) = 0;
};

}  // namespace rayx::detail
