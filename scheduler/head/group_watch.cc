#include "head/group_watch.h"

#include <algorithm>

namespace rayx::scheduler {

Result<std::optional<protocol::GroupMemberDiedNotice>> GroupWatch::Add(
    const std::string& peer, const protocol::WatchGroupRequest& req) {
  const std::string what = "watching rank " + std::to_string(req.rank) + " of collective group '" +
                           req.group + "'";
  if (req.group.empty()) return Status::InvalidArgument(what + ": the group name is empty");
  if (req.lease_id.IsNil()) {
    return Status::InvalidArgument(what + ": no lease (only leased workers are watched)");
  }
  if (req.world_size < 1 || req.world_size > limits_.max_world_size) {
    return Status::InvalidArgument(what + ": world size " + std::to_string(req.world_size) +
                                   " is not in 1.." + std::to_string(limits_.max_world_size));
  }
  if (req.rank < 0 || req.rank >= req.world_size) {
    return Status::InvalidArgument(what + ": the rank is not in 0.." +
                                   std::to_string(req.world_size - 1));
  }
  Key key{req.group, req.attempt_id};
  if (auto failed = failed_.find(key); failed != failed_.end()) {
    if (failed->second.failed_rank == req.rank) {
      return Status::InvalidArgument(what + ": that rank's lease already ended");
    }
    return std::optional<protocol::GroupMemberDiedNotice>(failed->second);
  }
  auto it = groups_.find(key);
  if (it != groups_.end() && it->second.world_size != req.world_size) {
    return Status::InvalidArgument(what + ": the group was watched with world size " +
                                   std::to_string(it->second.world_size) + ", not " +
                                   std::to_string(req.world_size));
  }
  bool replacing = it != groups_.end() && it->second.members.count(req.rank) > 0;
  if (!replacing && members_ >= limits_.max_members) {
    return Status::Unavailable(what + ": the head watches " + std::to_string(members_) +
                               " ranks already, its limit");
  }
  auto& lease_groups = by_lease_[req.lease_id];
  bool indexed = std::find(lease_groups.begin(), lease_groups.end(), key) != lease_groups.end();
  if (!indexed && lease_groups.size() >= limits_.max_groups_per_lease) {
    if (lease_groups.empty()) by_lease_.erase(req.lease_id);
    return Status::Unavailable(what + ": lease " + req.lease_id.Hex() + " holds ranks of " +
                               std::to_string(limits_.max_groups_per_lease) +
                               " groups already, the limit");
  }
  if (!indexed) lease_groups.push_back(key);
  Group& group = groups_[key];
  group.world_size = req.world_size;
  if (replacing) {
    Member& old = group.members[req.rank];
    if (old.lease_id != req.lease_id) Unindex(old.lease_id, key);
  } else {
    ++members_;
  }
  group.members[req.rank] = Member{peer, req.lease_id};
  if (store_) {
    store_->PutGroupWatch(
        {req.group, req.attempt_id, req.world_size, req.rank, req.lease_id, peer});
  }
  return std::optional<protocol::GroupMemberDiedNotice>();
}

void GroupWatch::Restore(const std::vector<StoredGroupWatch>& watches) {
  HeadStore* store = store_;
  store_ = nullptr;  // what is restored is stored already
  for (const auto& w : watches) {
    protocol::WatchGroupRequest req{w.group, w.attempt_id, w.world_size, w.rank, w.lease_id};
    auto added = Add(w.peer, req);
    if ((!added.ok() || added->has_value()) && store) {
      store->DeleteGroupWatch(w.group, w.attempt_id, w.rank);
    }
  }
  store_ = store;
}

bool GroupWatch::Remove(const protocol::UnwatchGroupRequest& req) {
  Key key{req.group, req.attempt_id};
  auto it = groups_.find(key);
  if (it == groups_.end()) return false;
  auto member = it->second.members.find(req.rank);
  if (member == it->second.members.end()) return false;
  LeaseId lease_id = member->second.lease_id;
  it->second.members.erase(member);
  --members_;
  if (store_) store_->DeleteGroupWatch(req.group, req.attempt_id, req.rank);
  bool lease_still_holds = false;
  for (const auto& [rank, m] : it->second.members) lease_still_holds |= m.lease_id == lease_id;
  if (!lease_still_holds) Unindex(lease_id, key);
  if (it->second.members.empty()) groups_.erase(it);
  return true;
}

GroupWatch::Notices GroupWatch::OnLeaseEnded(const LeaseId& lease_id, const std::string& cause) {
  Notices out;
  auto held = by_lease_.find(lease_id);
  if (held == by_lease_.end()) return out;
  std::vector<Key> keys = std::move(held->second);
  by_lease_.erase(held);
  for (const Key& key : keys) {
    auto it = groups_.find(key);
    if (it == groups_.end()) continue;
    Group group = std::move(it->second);
    groups_.erase(it);
    members_ -= group.members.size();
    if (store_) store_->DeleteGroupWatches(key.first, key.second);
    protocol::GroupMemberDiedNotice notice;
    notice.group = key.first;
    notice.attempt_id = key.second;
    notice.lease_id = lease_id;
    notice.cause = cause;
    for (const auto& [rank, member] : group.members) {
      if (member.lease_id == lease_id) {
        notice.failed_rank = rank;
        break;
      }
    }
    for (const auto& [rank, member] : group.members) {
      if (member.lease_id == lease_id) continue;
      out.push_back({member.peer, member.lease_id, notice});
      Unindex(member.lease_id, key);
    }
    RememberFailure(key, notice);
  }
  return out;
}

std::vector<protocol::CollectiveGroupInfo> GroupWatch::List(size_t limit,
                                                            size_t ended_limit) const {
  std::vector<protocol::CollectiveGroupInfo> out;
  for (const auto& [key, group] : groups_) {
    if (out.size() >= limit) return out;
    protocol::CollectiveGroupInfo& info = out.emplace_back();
    info.group = key.first;
    info.attempt_id = key.second;
    info.world_size = group.world_size;
    for (const auto& [rank, member] : group.members) info.members.push_back({rank, member.lease_id});
  }
  const size_t end = std::min(limit, out.size() + ended_limit);
  for (auto it = failed_order_.rbegin(); it != failed_order_.rend() && out.size() < end; ++it) {
    auto failed = failed_.find(*it);
    if (failed == failed_.end()) continue;
    protocol::CollectiveGroupInfo& info = out.emplace_back();
    info.group = it->first;
    info.attempt_id = it->second;
    info.ended = "rank " + std::to_string(failed->second.failed_rank) + ": " +
                  failed->second.cause;
  }
  return out;
}

void GroupWatch::Unindex(const LeaseId& lease_id, const Key& key) {
  auto it = by_lease_.find(lease_id);
  if (it == by_lease_.end()) return;
  std::erase(it->second, key);
  if (it->second.empty()) by_lease_.erase(it);
}

void GroupWatch::RememberFailure(const Key& key, const protocol::GroupMemberDiedNotice& notice) {
  if (limits_.remembered_failures == 0) return;
  if (failed_.insert_or_assign(key, notice).second) failed_order_.push_back(key);
  while (failed_order_.size() > limits_.remembered_failures) {
    failed_.erase(failed_order_.front());
    failed_order_.pop_front();
  }
}

}  // namespace rayx::scheduler
