// The public collective API (rayx/collective.h) over the process-wide group
// registry.
#include <map>
#include <mutex>

#include "collective/gloo_group.h"
#include "collective/group_registry.h"
#include "collective/nccl_group.h"
#include "rayx/collective.h"

namespace rayx::collective {

namespace {

struct Registry {
  std::mutex mu;
  detail::CollectiveEnvironment env;
  // nullptr while the group is connecting.
  std::map<std::string, std::shared_ptr<CollectiveGroup>> groups;
};

Registry& GetRegistry() {
  static Registry* registry = new Registry();  // never destroyed: used at exit
  return *registry;
}

}  // namespace

namespace detail {

void SetCollectiveEnvironment(CollectiveEnvironment env) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.env = std::move(env);
}

void InitCollectiveGroup(const GroupSpec& spec, std::shared_ptr<RendezvousStore> store) {
  ValidateSpec(spec);
  const std::string& name = spec.options.name;
  Registry& registry = GetRegistry();
  {
    std::lock_guard<std::mutex> lock(registry.mu);
    if (registry.groups.count(name) > 0) {
      throw CollectiveError("InitCollectiveGroup('" + name +
                            "'): invalid argument: this process already has a group of that "
                            "name; destroy it first");
    }
    registry.groups[name] = nullptr;
  }
  std::shared_ptr<CollectiveGroup> group;
  try {
    if (spec.options.backend == Backend::kGloo) {
      group = GlooGroup::Connect(spec, std::move(store));
    } else {
      group = ConnectNcclGroup(spec, std::move(store));
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(registry.mu);
    registry.groups.erase(name);
    throw;
  }
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.groups[name] = std::move(group);
}

std::shared_ptr<CollectiveGroup> FindGroup(const std::string& name) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto it = registry.groups.find(name);
  if (it == registry.groups.end() || it->second == nullptr) {
    throw CollectiveError("collective group '" + name +
                          "' is not initialised in this process: call InitCollectiveGroup "
                          "first");
  }
  return it->second;
}

bool AbortCollectiveGroup(const std::string& name, const std::string& reason, int failed_rank) {
  std::shared_ptr<CollectiveGroup> group;
  {
    Registry& registry = GetRegistry();
    std::lock_guard<std::mutex> lock(registry.mu);
    auto it = registry.groups.find(name);
    if (it == registry.groups.end() || it->second == nullptr) return false;
    group = it->second;
  }
  group->Abort(reason, failed_rank);
  return true;
}

std::vector<char> AllGatherBytes(const void* in, size_t count, DataType type,
                                 const std::string& group) {
  std::vector<char> out;
  const size_t esize = DataTypeSize(type);
  FindGroup(group)->AllGather(
      in, count, type,
      [&](const std::vector<size_t>& counts) -> void* {
        size_t total = 0;
        for (size_t c : counts) total += c;
        out.resize(total * esize);
        return out.data();
      },
      nullptr);
  return out;
}

std::vector<char> ReduceScatterBytes(const void* in, size_t count, DataType type, ReduceOp op,
                                     const std::string& group) {
  auto g = FindGroup(group);
  std::vector<char> out(SliceOf(count, g->world_size(), g->rank()).second * DataTypeSize(type));
  g->ReduceScatter(in, count, out.data(), type, op, nullptr);
  return out;
}

}  // namespace detail

void InitCollectiveGroup(int world_size, int rank, const GroupOptions& options) {
  detail::CollectiveEnvironment env;
  {
    Registry& registry = GetRegistry();
    std::lock_guard<std::mutex> lock(registry.mu);
    env = registry.env;
  }
  if (!env.store_factory) {
    throw CollectiveError("InitCollectiveGroup('" + options.name +
                          "'): no rendezvous store: collective groups run inside a rayx "
                          "driver or worker (call rayx::Init first)");
  }
  GroupSpec spec;
  spec.options = options;
  spec.world_size = world_size;
  spec.rank = rank;
  spec.node_ip = env.node_ip;
  if (env.attempt_id) spec.attempt_id = env.attempt_id(options.name);
  detail::InitCollectiveGroup(spec, env.store_factory());
}

void DestroyCollectiveGroup(const std::string& name) {
  std::shared_ptr<CollectiveGroup> group;
  std::function<bool(const std::string&)> destroy_remote;
  {
    Registry& registry = GetRegistry();
    std::lock_guard<std::mutex> lock(registry.mu);
    auto it = registry.groups.find(name);
    if (it == registry.groups.end() || it->second == nullptr) {
      destroy_remote = registry.env.destroy_remote;
    } else {
      group = std::move(it->second);
      registry.groups.erase(it);
    }
  }
  if (!group) {
    // A group this driver made over actors: its members leave.
    if (destroy_remote && destroy_remote(name)) return;
    throw CollectiveError("DestroyCollectiveGroup('" + name +
                          "'): invalid argument: no such group in this process or made by it");
  }
  // An operation in progress holds its own reference: make it fail now.
  // Otherwise the group goes here, closing its connections softly.
  if (group.use_count() > 1) group->Abort("DestroyCollectiveGroup was called");
  group.reset();
}

bool IsGroupInitialized(const std::string& name) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto it = registry.groups.find(name);
  return it != registry.groups.end() && it->second != nullptr;
}

int GetRank(const std::string& group) { return detail::FindGroup(group)->rank(); }
int GetWorldSize(const std::string& group) { return detail::FindGroup(group)->world_size(); }

void AllReduce(void* data, size_t count, DataType type, ReduceOp op, const std::string& group,
               void* stream) {
  detail::FindGroup(group)->AllReduce(data, count, type, op, stream);
}

void AllGather(const void* in, void* out, size_t count, DataType type, const std::string& group,
               void* stream) {
  auto g = detail::FindGroup(group);
  g->AllGather(
      in, count, type,
      [&](const std::vector<size_t>& counts) -> void* {
        for (size_t r = 0; r < counts.size(); ++r) {
          if (counts[r] != count) {
            throw CollectiveError(DescribeOp(g->spec(), "AllGather") +
                                  ": lengths differ across ranks: rank " + std::to_string(r) +
                                  " has " + std::to_string(counts[r]) +
                                  " elements, this rank has " + std::to_string(count));
          }
        }
        return out;
      },
      stream);
}

void ReduceScatter(const void* in, void* out, size_t count, DataType type, ReduceOp op,
                   const std::string& group, void* stream) {
  auto g = detail::FindGroup(group);
  g->ReduceScatter(in, count * g->world_size(), out, type, op, stream);
}

void Broadcast(void* data, size_t count, DataType type, int root, const std::string& group,
               void* stream) {
  detail::FindGroup(group)->Broadcast(data, count, type, root, stream);
}

void Reduce(void* data, size_t count, DataType type, ReduceOp op, int root,
            const std::string& group, void* stream) {
  detail::FindGroup(group)->Reduce(data, count, type, op, root, stream);
}

void Send(const void* data, size_t count, DataType type, int dst, const std::string& group,
          void* stream) {
  detail::FindGroup(group)->Send(data, count, type, dst, stream);
}

void Recv(void* data, size_t count, DataType type, int src, const std::string& group,
          void* stream) {
  detail::FindGroup(group)->Recv(data, count, type, src, stream);
}

void Barrier(const std::string& group) { detail::FindGroup(group)->Barrier(); }

}  // namespace rayx::collective
