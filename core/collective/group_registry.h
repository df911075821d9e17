// The process-wide registry of collective groups by name, and the hook through
// which the rayx runtime provides the rendezvous store and node address.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "collective/collective_group.h"
#include "collective/rendezvous_store.h"

namespace rayx::collective::detail {

// What InitCollectiveGroup(world_size, rank, options) needs from the runtime.
struct CollectiveEnvironment {
  // The store every rank of a group rendezvouses through (the head's KV).
  std::function<std::shared_ptr<RendezvousStore>()> store_factory;
  // This node's own address (the one it registered with).
  std::string node_ip;
  // The attempt id every rank of group `spec` agrees on, through `store`
  // (AgreeOnAttempt in a cluster); nullptr: "0". Throws CollectiveError.
  std::function<std::string(const GroupSpec& spec, RendezvousStore& store)> attempt_id;
  // Ends group `name` made from this process over other processes (a
  // driver's CreateCollectiveGroup); false when there is none.
  std::function<bool(const std::string& name)> destroy_remote;
  // Told when this process joined a group (it is connected and registered)
  // and when it left it (DestroyCollectiveGroup); e.g. so that the head
  // reports the other ranks' deaths. Must not throw.
  std::function<void(const GroupSpec& spec)> on_joined;
  std::function<void(const GroupSpec& spec)> on_left;
};

// Sets (or with an empty store_factory, clears) the environment. Thread-safe.
void SetCollectiveEnvironment(CollectiveEnvironment env);

// Connects this process as spec.rank of group spec.options.name through
// `store` and registers it. Throws CollectiveError: invalid spec, name already
// initialised here, NCCL not built, a rank not joining in time.
void InitCollectiveGroup(const GroupSpec& spec, std::shared_ptr<RendezvousStore> store);

// The registered group `name`; throws CollectiveError when there is none.
std::shared_ptr<CollectiveGroup> FindGroup(const std::string& name);

// Aborts group `name` (see CollectiveGroup::Abort); false when there is none.
bool AbortCollectiveGroup(const std::string& name, const std::string& reason,
                          int failed_rank = -1);

// Aborts group `name` if this process holds its attempt `attempt_id`, on a
// thread of the registry's own: callable from threads that must not block
// (an abort writes a notice to the store and may wait on NCCL). Requests
// beyond a bounded queue are dropped with a log line (the deadline still
// ends the operation). Thread-safe.
void AbortCollectiveGroupSoon(const std::string& name, const std::string& attempt_id,
                              const std::string& reason, int failed_rank);

}  // namespace rayx::collective::detail
