// Creating, finding and killing actor groups (rayx/actor_group.h).
//
// Design: the group is one placement group of `num_actors` equal bundles, so
// every rank's resources are reserved at once or not at all. Each actor is
// created in its own bundle and, when it holds GPUs, sees every device the
// group holds on its node (CUDA peer-to-peer and NVLink between ranks). Ranks
// are not known until the actors run: each one describes where it landed, and
// the driver orders them by node (nodes in the order of their first bundle)
// and then by device, so ranks of one node are contiguous and LOCAL_RANK is the
// index of the rank's own device in CUDA_VISIBLE_DEVICES. MASTER_PORT is
// reserved by rank 0's agent. Named groups are recorded in the head's KV (in
// the "rayx" namespace), job-scoped unless detached, so a later job finds a
// detached group by name.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <stdexcept>

#include "collective/collective_driver.h"
#include "common/address.h"
#include "group/rank_setup.h"
#include "protocol/process_messages.h"
#include "rayx/actor_group.h"
#include "rayx/collective.h"
#include "rayx/kv.h"
#include "runtime/kv_client.h"
#include "transport/message.h"
#include "transport/sync_client.h"

namespace rayx::detail {
namespace {

constexpr const char* kKvNamespace = "rayx";

std::string RecordKey(const std::string& name) { return "actor_group/" + name; }

// A named group as kept in the KV.
struct GroupRecord {
  std::string placement_group_id;
  std::string collective_group;
  std::string master_addr;
  uint32_t master_port = 0;
  bool detached = false;
  std::vector<RankInfo> ranks;
  std::vector<std::string> actors;  // SerializeActor, in rank order
  MSGPACK_DEFINE_MAP(placement_group_id, collective_group, master_addr, master_port, detached,
                     ranks, actors)
};

class Deadline {
 public:
  explicit Deadline(int64_t ms)
      : end_(std::chrono::steady_clock::now() + std::chrono::milliseconds(ms)) {}
  int64_t LeftMs() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    end_ - std::chrono::steady_clock::now())
                    .count();
    return left > 0 ? left : 0;
  }

 private:
  std::chrono::steady_clock::time_point end_;
};

std::string Describe(const ResourceMap& resources) {
  std::string s = "{";
  for (const auto& [k, v] : resources) {
    s += (s.size() > 1 ? ", " : "") + k + ": " + std::to_string(v);
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s + "}";
}

void Validate(const ActorGroupOptions& o) {
  if (o.num_actors <= 0) {
    throw std::invalid_argument("ActorGroup: num_actors is " + std::to_string(o.num_actors) +
                                ": a group needs at least one actor");
  }
  if (o.lifetime == ActorLifetime::kDetached && o.name.empty()) {
    throw std::invalid_argument(
        "ActorGroup: a detached group needs a name (ActorGroupOptions::name): a later job "
        "finds it by name");
  }
  if (o.timeout_ms <= 0) {
    throw std::invalid_argument("ActorGroup: timeout_ms is " + std::to_string(o.timeout_ms) +
                                ": it must be positive");
  }
  if (o.collective && o.collective_timeout_ms <= 0) {
    throw std::invalid_argument("ActorGroup: collective_timeout_ms is " +
                                std::to_string(o.collective_timeout_ms) + ": it must be positive");
  }
  for (const auto& [k, v] : o.resources) {
    if (!(v >= 0)) {
      throw std::invalid_argument("ActorGroup: resource " + k + " is " + std::to_string(v) +
                                  ": amounts must be at least 0");
    }
  }
}

// Orders the described actors into ranks: returns rank -> bundle index and
// fills each rank's info.
std::vector<size_t> Rank(const std::vector<RankDescription>& described,
                         std::vector<RankInfo>* infos) {
  // Nodes in the order of their first bundle.
  std::vector<std::string> nodes;
  for (const auto& d : described) {
    if (std::find(nodes.begin(), nodes.end(), d.object_address) == nodes.end()) {
      nodes.push_back(d.object_address);
    }
  }
  std::vector<size_t> order(described.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto node_of = [&](size_t i) {
    return std::find(nodes.begin(), nodes.end(), described[i].object_address) - nodes.begin();
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (node_of(a) != node_of(b)) return node_of(a) < node_of(b);
    return described[a].device_position < described[b].device_position;
  });
  std::map<std::string, int> per_node;
  for (const auto& d : described) per_node[d.object_address]++;
  infos->assign(order.size(), RankInfo{});
  std::map<std::string, int> next_local;
  for (size_t r = 0; r < order.size(); ++r) {
    const RankDescription& d = described[order[r]];
    RankInfo& info = (*infos)[r];
    info.rank = static_cast<int>(r);
    info.local_rank = next_local[d.object_address]++;
    info.local_world_size = per_node[d.object_address];
    info.node_rank = static_cast<int>(node_of(order[r]));
    info.node_ip = d.node_ip;
    info.gpu_ids = d.gpu_ids;
    if (!d.gpu_ids.empty()) info.device = d.device_position >= 0 ? d.device_position : 0;
    info.pid = d.pid;
  }
  return order;
}

// Throws when two ranks on one node hold a common GPU (see
// ActorGroupSpec::one_device_per_rank), naming both ranks, the device and the node.
void RequireOwnDevices(const std::string& label, const ResourceMap& resources,
                       const std::vector<RankDescription>& described,
                       const std::vector<size_t>& order, const std::vector<RankInfo>& ranks) {
  std::map<std::pair<std::string, int>, size_t> holder;  // (node, device) -> rank
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (int device : ranks[r].gpu_ids) {
      auto [it, fresh] =
          holder.emplace(std::make_pair(described[order[r]].object_address, device), r);
      if (fresh) continue;
      throw std::invalid_argument(
          label + ": ranks " + std::to_string(it->second) + " and " + std::to_string(r) +
          " both hold GPU " + std::to_string(device) + " of node " + ranks[r].node_ip + " (" +
          Describe(resources) +
          " per rank), but NCCL needs a GPU of its own for each rank (its \"Duplicate GPU "
          "detected\" error): ask for at least GPU 1 per rank");
    }
  }
}

uint32_t ReserveMasterPort(const std::string& object_address, int64_t timeout_ms) {
  auto where = ParseHostPort(object_address.substr(object_address.find("//") == std::string::npos
                                                       ? 0
                                                       : object_address.find("//") + 2),
                             0);
  if (!where.ok()) throw std::runtime_error("bad agent address " + object_address);
  auto client = transport::SyncClient::Connect(*where, rayx::detail::CurrentObjectServerSecurity());
  if (!client.ok()) throw std::runtime_error(client.status().message());
  auto reply = (*client)->Call<protocol::ReservePortReply>(protocol::ReservePortRequest{},
                                                           std::min<int64_t>(timeout_ms, 5000));
  if (!reply.ok()) {
    throw std::runtime_error("cannot reserve MASTER_PORT on " + object_address + ": " +
                             reply.status().message());
  }
  return reply->port;
}

// Undoes a half-made group when creation throws.
class Rollback {
 public:
  ~Rollback() {
    if (done_) return;
    for (const auto& a : actors) {
      try {
        KillActor(a);
      } catch (...) {
      }
    }
    if (!placement_group_id.empty()) {
      try {
        RemovePlacementGroup(placement_group_id);
      } catch (...) {
      }
    }
  }
  void Commit() { done_ = true; }
  std::vector<ActorPtr> actors;
  std::string placement_group_id;

 private:
  bool done_ = false;
};

}  // namespace

ActorGroupPtr CreateActorGroup(ActorGroupSpec spec) {
  const ActorGroupOptions& o = spec.options;
  Validate(o);
  const std::string label = o.name.empty() ? std::string("actor group") : "actor group " + o.name;
  if (!o.name.empty() && KvGet(kKvNamespace, RecordKey(o.name)).has_value()) {
    throw std::invalid_argument(label + " already exists: Kill it first or choose another name");
  }
  ResourceMap resources = o.resources.empty() ? ResourceMap{{"CPU", 1}} : o.resources;
  auto gpu = resources.find("GPU");
  const bool uses_gpus = gpu != resources.end() && gpu->second > 0;
  Deadline deadline(o.timeout_ms);
  Rollback rollback;

  // 1. Every rank's resources at once.
  PlacementGroupCreationOptions pg_options;
  pg_options.name = o.name.empty() ? "actor-group" : "actor-group:" + o.name;
  pg_options.bundles.assign(static_cast<size_t>(o.num_actors), resources);
  pg_options.strategy = o.strategy;
  pg_options.detached = o.lifetime == ActorLifetime::kDetached;
  PlacementGroup pg = CreatePlacementGroup(pg_options);
  rollback.placement_group_id = pg.GetID();
  bool placed = false;
  try {
    // In slices: while it waits, the driver says what for whenever the head's
    // reason changes (which node has what free), as `rayx launch` does.
    std::string said;
    while (!placed && deadline.LeftMs() > 0) {
      placed = pg.Wait(static_cast<int>(std::min<int64_t>(deadline.LeftMs() + 999, 5000) / 1000));
      if (placed || deadline.LeftMs() <= 0) break;
      std::string reason = pg.Reason();
      if (!reason.empty() && reason != said) {
        std::cerr << "rayx: " << label << " waits for " << o.num_actors << " actors of "
                  << Describe(resources) << " (" << (deadline.LeftMs() + 999) / 1000
                  << " s left): " << reason << "\n"
                  << std::flush;
        said = std::move(reason);
      }
    }
  } catch (const std::exception& e) {
    throw ActorGroupInfeasibleError(label + ": " + std::to_string(o.num_actors) + " actors of " +
                                    Describe(resources) + " can never be placed: " + e.what());
  }
  if (!placed) {
    throw std::runtime_error(label + ": no room for " + std::to_string(o.num_actors) +
                             " actors of " + Describe(resources) + " within " +
                             std::to_string(o.timeout_ms) + " ms: " + pg.Reason());
  }

  // 2. One actor per bundle.
  std::vector<ActorPtr> by_bundle;
  for (int i = 0; i < o.num_actors; ++i) {
    ActorOptions ao;
    ao.detached = o.lifetime == ActorLifetime::kDetached;
    if (!o.name.empty()) ao.name = o.name + "/" + std::to_string(i);
    ao.resources = resources;
    ao.placement.placement_group_id = pg.GetID();
    ao.placement.bundle_index = i;
    ao.placement.group_visible_devices = uses_gpus;
    by_bundle.push_back(CreateActor(spec.factory, spec.args, ao));
    rollback.actors.push_back(by_bundle.back());
  }

  // 3. Where each landed, then ranks.
  std::vector<ObjectHandle> asked;
  for (const auto& a : by_bundle) asked.push_back(SubmitActorTask(a, kDescribeRankMethod, {}));
  std::vector<RankDescription> described;
  for (size_t i = 0; i < asked.size(); ++i) {
    try {
      described.push_back(Unpack<RankDescription>(GetBytes(asked[i], deadline.LeftMs()).view));
    } catch (const GetTimeoutError&) {
      throw std::runtime_error(label + ": the actor of bundle " + std::to_string(i) +
                               " did not start within " + std::to_string(o.timeout_ms) + " ms");
    } catch (const std::exception& e) {
      throw std::runtime_error(label + ": the actor of bundle " + std::to_string(i) +
                               " failed to start: " + e.what());
    }
  }
  auto core = std::make_shared<ActorGroupCore>();
  core->name = o.name;
  core->placement_group_id = pg.GetID();
  core->detached = o.lifetime == ActorLifetime::kDetached;
  std::vector<size_t> order = Rank(described, &core->ranks);
  for (size_t b : order) core->actors.push_back(by_bundle[b]);
  if (uses_gpus && (o.collective || spec.one_device_per_rank)) {
    RequireOwnDevices(label, resources, described, order, core->ranks);
  }

  // 4. torch's environment in every rank.
  core->master_addr = core->ranks[0].node_ip;
  core->master_port = ReserveMasterPort(described[order[0]].object_address, deadline.LeftMs());
  if (o.collective) {
    core->collective_group = o.name.empty() ? "actor-group-" + pg.GetID().substr(0, 12) : o.name;
  }
  for (auto& info : core->ranks) {
    info.world_size = o.num_actors;
    info.collective_group = core->collective_group;
  }
  std::vector<ObjectHandle> setups;
  for (size_t r = 0; r < core->actors.size(); ++r) {
    RankSetup setup;
    setup.info = core->ranks[r];
    setup.world_size = o.num_actors;
    setup.master_addr = core->master_addr;
    setup.master_port = core->master_port;
    setup.group_name = o.name;
    setup.collective_group = core->collective_group;
    setups.push_back(SubmitActorTask(core->actors[r], kSetupRankMethod, {Arg{Pack(setup), nullptr}}));
  }
  for (size_t r = 0; r < setups.size(); ++r) {
    try {
      GetBytes(setups[r], deadline.LeftMs());
    } catch (const std::exception& e) {
      throw std::runtime_error(label + ": rank " + std::to_string(r) + " on " +
                               core->ranks[r].node_ip + " could not be set up: " + e.what());
    }
  }

  // 5. The collective group, connected before the user's first call: what is
  // left of Create's deadline bounds the connect, the collective timeout every
  // operation.
  if (o.collective) {
    collective::GroupOptions g;
    g.name = core->collective_group;
    g.backend = uses_gpus ? collective::Backend::kNccl : collective::Backend::kGloo;
    g.timeout_ms = o.collective_timeout_ms;
    collective::detail::CreateGroupOverActors(core->actors, g, core->detached,
                                              std::max<int64_t>(deadline.LeftMs(), 1000));
  }

  // 6. Findable by name.
  if (!o.name.empty()) {
    GroupRecord record;
    record.placement_group_id = core->placement_group_id;
    record.collective_group = core->collective_group;
    record.master_addr = core->master_addr;
    record.master_port = core->master_port;
    record.detached = core->detached;
    record.ranks = core->ranks;
    for (const auto& a : core->actors) record.actors.push_back(SerializeActor(a));
    if (!KvPut(kKvNamespace, RecordKey(o.name), Pack(record), /*overwrite=*/false,
               /*job_scoped=*/!core->detached)) {
      throw std::invalid_argument(label + " already exists: Kill it first or choose another name");
    }
  }
  rollback.Commit();
  return core;
}

ActorGroupPtr GetActorGroup(const std::string& name) {
  auto bytes = KvGet(kKvNamespace, RecordKey(name));
  if (!bytes) {
    throw std::runtime_error("there is no actor group named " + name +
                             " (a group that is not detached ends with its job)");
  }
  auto record = Unpack<GroupRecord>(*bytes);
  auto core = std::make_shared<ActorGroupCore>();
  core->name = name;
  core->placement_group_id = record.placement_group_id;
  core->collective_group = record.collective_group;
  core->master_addr = record.master_addr;
  core->master_port = record.master_port;
  core->detached = record.detached;
  core->ranks = record.ranks;
  for (const auto& a : record.actors) core->actors.push_back(DeserializeActor(a));
  return core;
}

void KillActorGroup(const ActorGroupCore& group) {
  for (const auto& a : group.actors) KillActor(a);
  if (!group.collective_group.empty()) {
    collective::detail::ForgetGroup(group.collective_group);
  }
  if (!group.placement_group_id.empty()) RemovePlacementGroup(group.placement_group_id);
  if (!group.name.empty()) KvDelete(kKvNamespace, RecordKey(group.name));
}

}  // namespace rayx::detail
