// The public collective API (rayx/collective.h) over the process-wide group
// registry.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "common/logging.h"
#include "common/work_counters.h"

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

// Runs aborts asked for by threads that must not block, one at a time, on a
// thread started on first use. Never destroyed (like the registry), so its
// thread may sleep through the process's exit.
class Aborter {
 public:
  static constexpr size_t kMaxQueued = 1024;

  void Post(std::function<void()> abort) {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= kMaxQueued) {
      RAYX_LOG(Warning) << "dropped a collective group abort: " << kMaxQueued
                        << " are queued already";
      return;
    }
    queue_.push_back(std::move(abort));
    if (!started_) {
      started_ = true;
      std::thread([this] { Run(); }).detach();
    }
    cv_.notify_one();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return !queue_.empty(); });
      std::function<void()> abort = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      abort();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool started_ = false;
};

Aborter& GetAborter() {
  static Aborter* aborter = new Aborter();  // never destroyed: see Aborter
  return *aborter;
}

// Runs collective operation `op` through `run`, counted in the process's
// WorkCounters (failed when it throws). For NCCL the time is the host's: the
// call returns once the operation is queued on its stream.
template <typename Run>
void Counted(WorkCounters::Op op, Run&& run) {
  WorkCounters& counters = WorkCounters::Process();
  const auto start = std::chrono::steady_clock::now();
  try {
    run();
  } catch (...) {
    counters.CollectiveOpDone(op, std::chrono::steady_clock::now() - start, true);
    throw;
  }
  counters.CollectiveOpDone(op, std::chrono::steady_clock::now() - start, false);
}

using Op = WorkCounters::Op;

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
  std::function<void(const GroupSpec&)> on_joined;
  {
    std::lock_guard<std::mutex> lock(registry.mu);
    registry.groups[name] = group;
    on_joined = registry.env.on_joined;
  }
  if (on_joined) on_joined(group->spec());
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

void AbortCollectiveGroupSoon(const std::string& name, const std::string& attempt_id,
                              const std::string& reason, int failed_rank) {
  GetAborter().Post([name, attempt_id, reason, failed_rank] {
    std::shared_ptr<CollectiveGroup> group;
    {
      Registry& registry = GetRegistry();
      std::lock_guard<std::mutex> lock(registry.mu);
      auto it = registry.groups.find(name);
      if (it == registry.groups.end() || it->second == nullptr ||
          it->second->spec().attempt_id != attempt_id) {
        return;  // gone, or another attempt of the name
      }
      group = it->second;
    }
    group->Abort(reason, failed_rank);
  });
}

std::vector<char> AllGatherBytes(const void* in, size_t count, DataType type,
                                 const std::string& group) {
  std::vector<char> out;
  const size_t esize = DataTypeSize(type);
  auto g = FindGroup(group);
  Counted(Op::kAllGather, [&] {
    g->AllGather(
        in, count, type,
        [&](const std::vector<size_t>& counts) -> void* {
          size_t total = 0;
          for (size_t c : counts) total += c;
          out.resize(total * esize);
          return out.data();
        },
        nullptr);
  });
  return out;
}

std::vector<char> ReduceScatterBytes(const void* in, size_t count, DataType type, ReduceOp op,
                                     const std::string& group) {
  auto g = FindGroup(group);
  std::vector<char> out(SliceOf(count, g->world_size(), g->rank()).second * DataTypeSize(type));
  Counted(Op::kReduceScatter, [&] { g->ReduceScatter(in, count, out.data(), type, op, nullptr); });
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
  // Bad arguments fail before an attempt is agreed on: a call refused here
  // must not claim this rank's place in one.
  ValidateSpec(spec);
  {
    Registry& registry = GetRegistry();
    std::lock_guard<std::mutex> lock(registry.mu);
    if (registry.groups.count(options.name) > 0) {
      throw CollectiveError("InitCollectiveGroup('" + options.name +
                            "'): invalid argument: this process already has a group of that "
                            "name; destroy it first");
    }
  }
  std::shared_ptr<RendezvousStore> store = env.store_factory();
  if (env.attempt_id) spec.attempt_id = env.attempt_id(spec, *store);
  detail::InitCollectiveGroup(spec, std::move(store));
}

void DestroyCollectiveGroup(const std::string& name) {
  std::shared_ptr<CollectiveGroup> group;
  std::function<bool(const std::string&)> destroy_remote;
  std::function<void(const GroupSpec&)> on_left;
  {
    Registry& registry = GetRegistry();
    std::lock_guard<std::mutex> lock(registry.mu);
    auto it = registry.groups.find(name);
    if (it == registry.groups.end() || it->second == nullptr) {
      destroy_remote = registry.env.destroy_remote;
    } else {
      group = std::move(it->second);
      registry.groups.erase(it);
      on_left = registry.env.on_left;
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
  if (on_left) on_left(group->spec());
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
  auto g = detail::FindGroup(group);
  Counted(Op::kAllReduce, [&] { g->AllReduce(data, count, type, op, stream); });
}

void AllGather(const void* in, void* out, size_t count, DataType type, const std::string& group,
               void* stream) {
  auto g = detail::FindGroup(group);
  Counted(Op::kAllGather, [&] {
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
  });
}

void ReduceScatter(const void* in, void* out, size_t count, DataType type, ReduceOp op,
                   const std::string& group, void* stream) {
  auto g = detail::FindGroup(group);
  Counted(Op::kReduceScatter,
          [&] { g->ReduceScatter(in, count * g->world_size(), out, type, op, stream); });
}

void Broadcast(void* data, size_t count, DataType type, int root, const std::string& group,
               void* stream) {
  auto g = detail::FindGroup(group);
  Counted(Op::kBroadcast, [&] { g->Broadcast(data, count, type, root, stream); });
}

void Reduce(void* data, size_t count, DataType type, ReduceOp op, int root,
            const std::string& group, void* stream) {
  auto g = detail::FindGroup(group);
  Counted(Op::kReduce, [&] { g->Reduce(data, count, type, op, root, stream); });
}

void Send(const void* data, size_t count, DataType type, int dst, const std::string& group,
          void* stream) {
  auto g = detail::FindGroup(group);
  Counted(Op::kSend, [&] { g->Send(data, count, type, dst, stream); });
}

void Recv(void* data, size_t count, DataType type, int src, const std::string& group,
          void* stream) {
  auto g = detail::FindGroup(group);
  Counted(Op::kRecv, [&] { g->Recv(data, count, type, src, stream); });
}

void Barrier(const std::string& group) {
  auto g = detail::FindGroup(group);
  Counted(Op::kBarrier, [&] { g->Barrier(); });
}

}  // namespace rayx::collective
