// The head's record of which leases hold ranks of which collective groups, so
// that a rank's death reaches the group's other ranks at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "head/head_store.h"
#include "protocol/group_messages.h"
#include "protocol/placement_messages.h"
#include "rayx/status.h"

namespace rayx::scheduler {

struct GroupWatchLimits {
  // Watched ranks over all groups; more are refused (Unavailable).
  size_t max_members = size_t{1} << 20;
  // The largest world size a group may have.
  int32_t max_world_size = 1 << 16;
  // Groups one lease may hold ranks of.
  size_t max_groups_per_lease = 256;
  // Groups that lost a member, remembered so that a rank watching late hears
  // of the death at once.
  size_t remembered_failures = 1024;
};

// Design: a group is keyed by (name, attempt id); each watched rank is its
// lease and the routing id its notices go to. When a lease ends, every group
// it held a rank of is dropped and each of that group's other ranks gets one
// GroupMemberDiedNotice: the work is O(ranks of the groups of that lease), not
// O(groups). A rank that leaves (Remove) is never told about, nor told. The
// watched ranks are written through to the HeadStore: a restarted head still
// tells the ranks (their runtimes keep their routing ids), also of a rank
// whose lease did not come back with its node. Remembered failures are kept
// in memory only.
//
// Owned by the head's event loop; not thread-safe.
class GroupWatch {
 public:
  // A notice for the caller to send to `peer`, the rank held by lease
  // `member_lease_id`.
  struct Notice {
    std::string peer;
    LeaseId member_lease_id;
    protocol::GroupMemberDiedNotice notice;
  };
  using Notices = std::vector<Notice>;

  explicit GroupWatch(GroupWatchLimits limits = {}) : limits_(limits) {}

  // Writes watched ranks through to `store` (nullptr: none), which must
  // outlive this object.
  void SetStore(HeadStore* store) { store_ = store; }
  // Watches what a previous head life stored (before any Add). Entries the
  // limits refuse are dropped from the store.
  void Restore(const std::vector<StoredGroupWatch>& watches);

  // Watches rank req.rank of (req.group, req.attempt_id), held by lease
  // req.lease_id and reached at `peer`; a rank watched again replaces its
  // entry. When that group attempt already lost a member, nothing is added
  // and the notice for `peer` is returned. InvalidArgument for a rank or
  // world size out of range or unlike the group's; Unavailable at a bound.
  Result<std::optional<protocol::GroupMemberDiedNotice>> Add(
      const std::string& peer, const protocol::WatchGroupRequest& req);

  // Stops watching a rank; false when it was not watched.
  bool Remove(const protocol::UnwatchGroupRequest& req);

  // Lease `lease_id` ended because of `cause`: the notices to send.
  Notices OnLeaseEnded(const LeaseId& lease_id, const std::string& cause);

  // The watched groups (by name, then attempt), then at most `ended_limit` of
  // the remembered ones that lost a member (newest first), `limit` in all;
  // job ids left nil. O(limit + ranks listed).
  std::vector<protocol::CollectiveGroupInfo> List(size_t limit, size_t ended_limit) const;

  size_t member_count() const { return members_; }
  size_t group_count() const { return groups_.size(); }

 private:
  using Key = std::pair<std::string, std::string>;  // (group, attempt_id)
  struct Member {
    std::string peer;
    LeaseId lease_id;
  };
  struct Group {
    int32_t world_size = 0;
    std::map<int32_t, Member> members;
  };

  // Drops `key`'s entry of lease `lease_id`'s index.
  void Unindex(const LeaseId& lease_id, const Key& key);
  void RememberFailure(const Key& key, const protocol::GroupMemberDiedNotice& notice);

  GroupWatchLimits limits_;
  HeadStore* store_ = nullptr;
  std::map<Key, Group> groups_;
  std::unordered_map<LeaseId, std::vector<Key>> by_lease_;
  size_t members_ = 0;
  std::map<Key, protocol::GroupMemberDiedNotice> failed_;
  std::deque<Key> failed_order_;  // oldest first, bounds failed_
};

}  // namespace rayx::scheduler
