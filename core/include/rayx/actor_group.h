// Actor groups: N actors of one class placed as one placement group, ranked by
// node and device, with torch's environment and, optionally, a collective group
// connected before Create returns. The building block of Train and of inference
// groups that keep a model loaded between jobs.
//
//   auto group = rayx::ActorGroup<Model>::Create(
//       Model::Create, {.name = "llm", .num_actors = 4, .resources = {{"GPU", 1}},
//                       .lifetime = rayx::Detached},
//       "/models/llm");
//   auto refs = group.Task(&Model::Generate).Remote(prompt);   // one ref per rank
//   ... a later job:
//   auto same = rayx::GetActorGroup<Model>("llm");
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "rayx/placement_group.h"
#include "rayx/rayx.h"

namespace rayx {

struct ActorGroupOptions {
  // Names the group so a later job finds it (GetActorGroup); also names its
  // placement group and collective group. Required with `lifetime = Detached`.
  std::string name;
  // Actors in the group. REQUIRES: > 0.
  int num_actors = 1;
  // Per actor. Default: {CPU: 1}.
  ResourceMap resources;
  // How the actors' bundles spread over nodes. Default: PACK.
  PlacementStrategy strategy = PlacementStrategy::PACK;
  // Detached: the group (actors, placement group, collective group) outlives
  // the job that created it, until Kill.
  ActorLifetime lifetime = NonDetached;
  // Connect a collective group over the ranks before Create returns: NCCL when
  // the actors hold GPUs, else Gloo.
  bool collective = true;
  // How long Create waits for resources, actors and the collective group to
  // connect.
  int64_t timeout_ms = 60000;
  // The deadline of every operation on the collective group, in ms, for the
  // group's lifetime (its GroupOptions::timeout_ms). Default: 30 s.
  int64_t collective_timeout_ms = 30000;
};

// Thrown by ActorGroup::Create when no set of nodes could ever hold the group
// (what() says which resources are missing).
class ActorGroupInfeasibleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where a rank runs, as its environment describes it.
struct RankInfo {
  int rank = 0;              // RANK
  int local_rank = 0;        // LOCAL_RANK: index among the group's ranks on its node
  int local_world_size = 1;  // LOCAL_WORLD_SIZE
  int node_rank = 0;         // NODE_RANK: index of its node among the group's nodes
  std::string node_ip;
  std::vector<int> gpu_ids;  // the node's device ids the rank holds
  int32_t pid = 0;
  int world_size = 1;             // WORLD_SIZE
  std::string collective_group;   // the group's collective group; empty: none
  // The CUDA device index of the rank's own GPU (what cudaSetDevice takes: its
  // position in CUDA_VISIBLE_DEVICES, which lists the group's devices on the
  // node; also RAYX_LOCAL_RANK); -1 when it holds none.
  int device = -1;
  MSGPACK_DEFINE_MAP(rank, local_rank, local_world_size, node_rank, node_ip, gpu_ids, pid,
                     world_size, collective_group, device)
};

namespace detail {

struct ActorGroupCore {
  std::string name;
  std::string placement_group_id;
  std::string collective_group;  // empty: none
  std::string master_addr;
  uint32_t master_port = 0;
  bool detached = false;
  std::vector<RankInfo> ranks;
  std::vector<ActorPtr> actors;  // in rank order
};
using ActorGroupPtr = std::shared_ptr<ActorGroupCore>;

struct ActorGroupSpec {
  std::string factory;
  std::vector<Arg> args;
  ActorGroupOptions options;
  // Refuse a placement where two ranks hold the same GPU (fractional GPUs):
  // NCCL needs a device of its own for each rank ("Duplicate GPU detected").
  // Implied when the group's own collective group is NCCL (GPUs and
  // options.collective); a trainer whose ranks run torch's NCCL sets it.
  bool one_device_per_rank = false;
};

// Places the group, creates its actors, ranks them, sets their environment and
// connects the collective group. Throws std::invalid_argument on bad options,
// std::runtime_error naming what failed (an infeasible group with its reason, a
// rank whose actor did not start, a rank that did not join the collective group);
// nothing is left behind when it throws.
ActorGroupPtr CreateActorGroup(ActorGroupSpec spec);
// Throws std::runtime_error when no live group has that name.
ActorGroupPtr GetActorGroup(const std::string& name);
// Stops every actor, frees the placement group, destroys the collective group
// and forgets the name.
void KillActorGroup(const ActorGroupCore& group);

}  // namespace detail

template <typename C>
class ActorGroup;

// Calls one method on every rank: one ObjectRef per rank, in rank order.
template <typename C, typename M>
class ActorGroupTaskCaller {
 public:
  using Return = typename detail::FunctionTraits<M>::Return;
  ActorGroupTaskCaller(detail::ActorGroupPtr group, M method)
      : group_(std::move(group)), fn_(&detail::Lookup(method)) {}

  template <typename... A>
  std::vector<ObjectRef<Return>> Remote(A&&... args) {
    static_assert(sizeof...(A) == detail::FunctionTraits<M>::kArity,
                  "Remote() needs exactly the method's arguments");
    std::vector<detail::Arg> packed = detail::MakeArgs(std::forward<A>(args)...);
    std::vector<ObjectRef<Return>> refs;
    refs.reserve(group_->actors.size());
    for (const auto& actor : group_->actors) {
      refs.emplace_back(detail::SubmitActorTask(actor, fn_->name, packed));
    }
    return refs;
  }

 private:
  detail::ActorGroupPtr group_;
  const detail::RemoteFunction* fn_;
};

template <typename C>
class ActorGroup {
 public:
  ActorGroup() = default;
  explicit ActorGroup(detail::ActorGroupPtr core) : core_(std::move(core)) {}

  // Creates the group; `factory` is a registered `C* (Args...)`. See
  // detail::CreateActorGroup for what it throws.
  template <typename F, typename... A>
  static ActorGroup Create(F factory, ActorGroupOptions options, A&&... args) {
    using Made = std::remove_pointer_t<typename detail::FunctionTraits<F>::Return>;
    static_assert(std::is_same_v<Made, C>, "the factory makes another class");
    static_assert(sizeof...(A) == detail::FunctionTraits<F>::kArity,
                  "Create() needs exactly the factory's arguments");
    detail::ActorGroupSpec spec;
    spec.factory = detail::Lookup(factory).name;
    spec.args = detail::MakeArgs(std::forward<A>(args)...);
    spec.options = std::move(options);
    return ActorGroup(detail::CreateActorGroup(std::move(spec)));
  }

  template <typename M>
  ActorGroupTaskCaller<C, M> Task(M method) const {
    static_assert(std::is_same_v<typename detail::FunctionTraits<M>::Class, C>,
                  "the method belongs to another class");
    return ActorGroupTaskCaller<C, M>(core_, method);
  }
  // Rank i's actor. Throws std::out_of_range.
  ActorHandle<C> Rank(int i) const { return ActorHandle<C>(core_->actors.at(static_cast<size_t>(i))); }
  int Size() const { return static_cast<int>(core_->actors.size()); }
  const RankInfo& Info(int i) const { return core_->ranks.at(static_cast<size_t>(i)); }
  const std::string& Name() const { return core_->name; }
  // The collective group's name (empty without one): what the ranks pass to
  // rayx::collective calls.
  const std::string& CollectiveGroup() const { return core_->collective_group; }
  const std::string& MasterAddr() const { return core_->master_addr; }
  uint32_t MasterPort() const { return core_->master_port; }
  void Kill() const { detail::KillActorGroup(*core_); }

 private:
  detail::ActorGroupPtr core_;
};

// The live group named `name`, created by this or an earlier job, with its
// collective group still connected. Throws std::runtime_error when there is none.
template <typename C>
ActorGroup<C> GetActorGroup(const std::string& name) {
  return ActorGroup<C>(detail::GetActorGroup(name));
}

// Inside a rank of an actor group: where it runs. Throws std::runtime_error
// outside one.
RankInfo GetRankInfo();

}  // namespace rayx
