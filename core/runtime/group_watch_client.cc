#include "runtime/group_watch_client.h"

#include <mutex>

#include "common/logging.h"
#include "runtime/runtime.h"

namespace rayx::detail {
namespace {

struct HandlerSlot {
  std::mutex mu;
  GroupMemberDiedHandler handler;
};

HandlerSlot& Slot() {
  static HandlerSlot* slot = new HandlerSlot();  // never destroyed: used at exit
  return *slot;
}

}  // namespace

Status WatchGroup(const GroupMembership& m, int64_t timeout_ms) {
  Runtime& runtime = RequireRuntime();
  const LeaseId& lease_id = runtime.config().host_lease_id;
  if (lease_id.IsNil()) return Status::OK();  // a driver: only leased workers are watched
  protocol::WatchGroupRequest req;
  req.group = m.group;
  req.attempt_id = m.attempt_id;
  req.world_size = m.world_size;
  req.rank = m.rank;
  req.lease_id = lease_id;
  auto reply = runtime.CallHead<protocol::WatchGroupReply>(req, timeout_ms);
  return reply.ok() ? Status::OK() : reply.status();
}

void UnwatchGroup(const GroupMembership& m) {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr || runtime->config().host_lease_id.IsNil()) return;
  protocol::UnwatchGroupRequest req;
  req.group = m.group;
  req.attempt_id = m.attempt_id;
  req.rank = m.rank;
  // Short: a head that is down must not hold up a group's destruction.
  auto reply = runtime->CallHead<protocol::UnwatchGroupReply>(req, 2000);
  if (!reply.ok()) {
    RAYX_LOG(Warning) << "collective group '" << m.group << "' rank " << m.rank
                      << ": the head did not confirm the end of its watch: " << reply.status();
  }
}

void SetGroupMemberDiedHandler(GroupMemberDiedHandler handler) {
  HandlerSlot& slot = Slot();
  std::lock_guard<std::mutex> lock(slot.mu);
  slot.handler = std::move(handler);
}

void DispatchGroupMemberDied(const protocol::GroupMemberDiedNotice& notice) {
  HandlerSlot& slot = Slot();
  std::lock_guard<std::mutex> lock(slot.mu);
  if (slot.handler) slot.handler(notice);
}

}  // namespace rayx::detail
