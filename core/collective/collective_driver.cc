// Collective groups over actors: joining through built-in actor methods and
// the head's KV.
//
// Design: the driver picks a fresh attempt id for every group it creates, so a
// group created again under the same name never reads the keys of an earlier
// attempt (Ray #25737's stale rendezvous). Each member joins from a built-in
// actor method that runs on the actor's own thread, like any call, so it is
// ordered with the user's calls: a call made after CreateCollectiveGroup
// returns sees the group. The record in the KV lets DestroyCollectiveGroup and
// a later job find the members.
#include "collective/collective_driver.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>

#include "collective/attempt_agreement.h"
#include "collective/group_registry.h"
#include "collective/kv_rendezvous_store.h"
#include "rayx/ids.h"
#include "rayx/detail/registry.h"
#include "rayx/errors.h"
#include "common/logging.h"
#include "runtime/group_watch_client.h"
#include "runtime/kv_client.h"

namespace rayx::collective::detail {
namespace {

// How long a rank waits for the head to confirm its watch.
constexpr int64_t kWatchTimeoutMs = 10000;

rayx::detail::GroupMembership MembershipOf(const GroupSpec& spec) {
  return {spec.options.name, spec.attempt_id, spec.world_size, spec.rank};
}

using rayx::detail::ActorPtr;

std::string MetaKey(const std::string& name) { return name + "/meta"; }

bool Join(JoinRequest request) {
  GroupSpec spec;
  spec.options.name = request.name;
  spec.options.backend = static_cast<Backend>(request.backend);
  spec.options.timeout_ms = request.timeout_ms;
  spec.world_size = request.world_size;
  spec.rank = request.rank;
  spec.attempt_id = request.attempt_id;
  spec.connect_timeout_ms = request.connect_timeout_ms;
  spec.node_ip = rayx::detail::CurrentNodeIp();
  for (const auto& actor : request.member_actors) spec.members.push_back(MemberInfo{actor, ""});
  InitCollectiveGroup(spec, std::make_shared<KvRendezvousStore>());
  return true;
}

bool Leave(std::string name) {
  if (!IsGroupInitialized(name)) return false;
  DestroyCollectiveGroup(name);
  return true;
}

[[maybe_unused]] const bool kRegistered = [] {
  rayx::detail::RegisterOne(kJoinGroupMethod, &Join);
  rayx::detail::RegisterOne(kLeaveGroupMethod, &Leave);
  return true;
}();

// Asks every member to leave `name` and, with `wait`, waits for their answers
// (a dead member's call fails: it has left already).
void LeaveAll(const std::vector<ActorPtr>& actors, const std::string& name, bool wait = true) {
  std::vector<rayx::detail::ObjectHandle> leaves;
  for (const auto& a : actors) {
    try {
      leaves.push_back(rayx::detail::SubmitActorTask(
          a, kLeaveGroupMethod, {rayx::detail::Arg{rayx::detail::Pack(name), nullptr}}));
    } catch (const std::exception&) {
    }
  }
  if (!wait) return;
  for (auto& leave : leaves) {
    try {
      rayx::detail::GetBytes(leave, 10000);
    } catch (const std::exception&) {
    }
  }
}

void DeleteKeys(const std::string& name) {
  rayx::detail::KvDeletePrefix(KvRendezvousStore::kNamespace, name + "/");
}

}  // namespace

void CreateGroupOverActors(const std::vector<ActorPtr>& actors, const GroupOptions& options,
                           bool detached) {
  CreateGroupOverActors(actors, options, detached, options.timeout_ms);
}

void CreateGroupOverActors(const std::vector<ActorPtr>& actors, const GroupOptions& options,
                           bool detached, int64_t connect_timeout_ms) {
  const std::string where = "CreateCollectiveGroup('" + options.name + "')";
  if (actors.empty()) throw CollectiveError(where + ": world size 0: give at least one actor");
  if (options.name.empty() || options.name.find('/') != std::string::npos) {
    throw CollectiveError(where + ": a group name must be non-empty and without '/'");
  }
  if (options.timeout_ms <= 0) {
    throw CollectiveError(where + ": timeout_ms must be positive");
  }
  if (connect_timeout_ms <= 0) {
    throw CollectiveError(where + ": the connect timeout must be positive");
  }
  GroupRecord record;
  record.attempt_id = rayx::detail::RandomHex(8);
  std::vector<std::string> short_ids;
  std::set<std::string> seen;
  for (size_t i = 0; i < actors.size(); ++i) {
    std::string id = rayx::detail::ActorIdOf(actors[i]);
    if (!seen.insert(id).second) {
      throw CollectiveError(where + ": actor " + id.substr(0, 12) + " is listed twice (ranks " +
                            std::to_string(std::find(short_ids.begin(), short_ids.end(),
                                                     id.substr(0, 12)) - short_ids.begin()) +
                            " and " + std::to_string(i) + "): each actor can hold one rank");
    }
    short_ids.push_back(id.substr(0, 12));
  }
  // Claims the name first (its members are recorded once they joined: a handle
  // can be passed on only once its actor runs).
  if (!rayx::detail::KvPut(KvRendezvousStore::kNamespace, MetaKey(options.name),
                           rayx::detail::Pack(record), /*overwrite=*/false,
                           /*job_scoped=*/!detached)) {
    throw CollectiveError(where + ": a group of that name exists already: destroy it first "
                          "(DestroyCollectiveGroup) or choose another name");
  }
  std::vector<rayx::detail::ObjectHandle> joins;
  for (size_t i = 0; i < actors.size(); ++i) {
    JoinRequest join;
    join.name = options.name;
    join.backend = static_cast<int32_t>(options.backend);
    join.timeout_ms = options.timeout_ms;
    join.world_size = static_cast<int32_t>(actors.size());
    join.rank = static_cast<int32_t>(i);
    join.attempt_id = record.attempt_id;
    join.member_actors = short_ids;
    join.connect_timeout_ms = connect_timeout_ms;
    joins.push_back(rayx::detail::SubmitActorTask(actors[i], kJoinGroupMethod,
                                                  {rayx::detail::Arg{rayx::detail::Pack(join), nullptr}}));
  }
  // Every rank answers within the connect timeout (it fails its own join then);
  // the margin covers the calls' travel.
  std::string failure;
  for (size_t i = 0; i < joins.size(); ++i) {
    try {
      rayx::detail::GetBytes(joins[i], connect_timeout_ms + 5000);
    } catch (const rayx::detail::Interrupted&) {
      // The caller gave up (Ctrl-C): nothing of the group is left. The members
      // leave once they answer; the caller does not wait for that.
      LeaveAll(actors, options.name, /*wait=*/false);
      ForgetGroup(options.name);
      throw;
    } catch (const std::exception& e) {
      if (failure.empty()) {
        failure = where + ": rank " + std::to_string(i) + " (actor " + short_ids[i] +
                  ") did not join: " + e.what();
      }
    }
  }
  if (!failure.empty()) {
    // A member whose actor never got a worker did not fail: it waits for
    // resources, and that is what the caller needs to hear.
    std::string unplaced;
    std::vector<ActorPtr> waiting, running;
    for (size_t i = 0; i < actors.size(); ++i) {
      bool placed = true;
      try {
        placed = rayx::detail::ActorPlaced(actors[i]);
      } catch (const std::exception&) {
      }
      (placed ? running : waiting).push_back(actors[i]);
      if (!placed) {
        unplaced += (unplaced.empty() ? "" : ", ") + std::to_string(i) + " (actor " +
                    short_ids[i] + ")";
      }
    }
    LeaveAll(running, options.name);
    LeaveAll(waiting, options.name, /*wait=*/false);  // they leave once they start, if ever
    ForgetGroup(options.name);
    if (!unplaced.empty()) {
      throw CollectiveError(where + ": rank(s) " + unplaced +
                            " never started: their actors still wait for resources (`rayx "
                            "status` shows what the cluster waits for, and why); " + failure);
    }
    throw CollectiveError(failure);
  }
  for (const auto& a : actors) record.actors.push_back(rayx::detail::SerializeActor(a));
  rayx::detail::KvPut(KvRendezvousStore::kNamespace, MetaKey(options.name),
                      rayx::detail::Pack(record), /*overwrite=*/true, /*job_scoped=*/!detached);
}

bool DestroyGroupOverActors(const std::string& name) {
  auto bytes = rayx::detail::KvGet(KvRendezvousStore::kNamespace, MetaKey(name));
  if (!bytes) return false;
  auto record = rayx::detail::Unpack<GroupRecord>(*bytes);
  std::vector<ActorPtr> actors;
  for (const auto& a : record.actors) {
    try {
      actors.push_back(rayx::detail::DeserializeActor(a));
    } catch (const std::exception&) {
      // A member that is gone has left already.
    }
  }
  LeaveAll(actors, name);
  ForgetGroup(name);
  return true;
}

void ForgetGroup(const std::string& name) {
  DeleteKeys(name);
  rayx::detail::KvDelete(KvRendezvousStore::kNamespace, MetaKey(name));
}

void InstallRuntimeEnvironment(const std::string& node_ip) {
  CollectiveEnvironment env;
  env.store_factory = [] { return std::make_shared<KvRendezvousStore>(); };
  env.node_ip = node_ip;
  env.destroy_remote = [](const std::string& name) { return DestroyGroupOverActors(name); };
  // Groups made inside actors (InitCollectiveGroup) have no driver to pick an
  // attempt id: the ranks agree on one through the KV, so that a group made
  // again (by the same processes, or after a member's process was replaced)
  // uses fresh keys.
  env.attempt_id = [](const GroupSpec& spec, RendezvousStore& store) {
    return AgreeOnAttempt(spec, store,
                          std::chrono::steady_clock::now() +
                              std::chrono::milliseconds(spec.options.timeout_ms));
  };
  // A leased rank asks the head to report the other ranks' deaths, so that a
  // dead or cut-off member aborts the group at once, not at the deadline (a
  // dead NCCL peer is not seen otherwise; a stopped node's sockets stay open).
  env.on_joined = [](const GroupSpec& spec) {
    Status watched = rayx::detail::WatchGroup(MembershipOf(spec), kWatchTimeoutMs);
    if (!watched.ok()) {
      RAYX_LOG(Warning) << "collective group '" << spec.options.name << "' rank " << spec.rank
                        << ": the head will not report the other ranks' deaths (only the "
                        << "deadline ends an operation stuck on a dead rank): " << watched;
    }
  };
  env.on_left = [](const GroupSpec& spec) { rayx::detail::UnwatchGroup(MembershipOf(spec)); };
  rayx::detail::SetGroupMemberDiedHandler([](const protocol::GroupMemberDiedNotice& notice) {
    AbortCollectiveGroupSoon(notice.group, notice.attempt_id,
                             "the head reports rank " + std::to_string(notice.failed_rank) +
                                 " gone: its lease ended: " + notice.cause,
                             notice.failed_rank);
  });
  SetCollectiveEnvironment(std::move(env));
}

}  // namespace rayx::collective::detail
