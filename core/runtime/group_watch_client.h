// Collective groups' member watches as this process's runtime reaches the
// head (protocol/group_messages.h). The collective layer watches each group a
// leased worker joins and sets the handler; the runtime hands the head's
// notices to it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "protocol/group_messages.h"
#include "rayx/status.h"

namespace rayx::detail {

// One rank of one group attempt, held by this process.
struct GroupMembership {
  std::string group;
  std::string attempt_id;
  int32_t world_size = 0;
  int32_t rank = -1;
};

// Asks the head to tell this process when another rank of `m`'s group dies.
// Only a leased worker (an actor, a task) can be watched: elsewhere (a driver)
// this does nothing and returns OK. Waits up to `timeout_ms` for the head.
// Thread-safe; not on the runtime's I/O thread.
Status WatchGroup(const GroupMembership& m, int64_t timeout_ms);
// Stops the watch (the rank left the group); errors are logged, not returned.
void UnwatchGroup(const GroupMembership& m);

using GroupMemberDiedHandler = std::function<void(const protocol::GroupMemberDiedNotice&)>;
// What runs for each notice, on the runtime's I/O thread: it must neither
// block nor call the head. Thread-safe; an empty handler drops notices.
void SetGroupMemberDiedHandler(GroupMemberDiedHandler handler);
// Runs the handler (the runtime calls it for each GroupMemberDiedNotice).
void DispatchGroupMemberDied(const protocol::GroupMemberDiedNotice& notice);

}  // namespace rayx::detail
