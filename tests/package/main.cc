// A user's program built against an installed rayx with find_package(rayx):
// runs tasks and an actor on whatever cluster rayx::Init finds (or starts).
#include <rayx/collective.h>
#include <rayx/rayx.h>

#include <iostream>
#include <set>
#include <unistd.h>

int Triple(int x) { return 3 * x; }

class Accumulator {
 public:
  static Accumulator* Create() { return new Accumulator(); }
  int Add(int x) { return total_ += x; }
  int AgentOf() { return getppid(); }  // the agent that started this worker

 private:
  int total_ = 0;
};

// A rank of a Gloo collective group.
class Ranked {
 public:
  static Ranked* Create() { return new Ranked(); }
  int64_t Sum(int64_t x) {
    std::vector<int64_t> v{x};
    rayx::collective::AllReduce(v, rayx::collective::ReduceOp::kSum, "package");
    return v[0];
  }
};

RAYX_REMOTE(Triple, Accumulator::Create, &Accumulator::Add, &Accumulator::AgentOf, Ranked::Create,
            &Ranked::Sum);

int main(int argc, char** argv) {
  rayx::Init(argc, argv);
  // Which agents host work: on the idle cluster, SPREAD places three actors
  // on different nodes when it has them (quick tasks may all run on one
  // node's worker, and once work holds a node SPREAD picks among the others).
  std::vector<rayx::ActorHandle<Accumulator>> probes;
  for (int i = 0; i < 3; ++i) {
    probes.push_back(rayx::Actor(Accumulator::Create)
                         .SetResources({{"CPU", 0.5}})
                         .SetSchedulingStrategy(rayx::SpreadSchedulingStrategy{})
                         .Remote());
  }
  std::set<int> agents;
  for (auto& probe : probes) {
    agents.insert(*probe.Task(&Accumulator::AgentOf).Remote().Get());
    probe.Kill();
  }
  int sum = 0;
  std::vector<rayx::ObjectRef<int>> refs;
  for (int i = 0; i < 20; ++i) refs.push_back(rayx::Task(Triple).Remote(i));
  for (auto& v : rayx::Get(refs)) sum += *v;
  auto acc = rayx::Actor(Accumulator::Create).Remote();
  for (int i = 1; i <= 10; ++i) acc.Task(&Accumulator::Add).Remote(i);
  int total = *acc.Task(&Accumulator::Add).Remote(0).Get();
  // A Gloo group over 4 actors: every rank gets 1 + 2 + 3 + 4.
  std::vector<rayx::ActorHandle<Ranked>> ranks;
  for (int i = 0; i < 4; ++i) ranks.push_back(rayx::Actor(Ranked::Create).Remote());
  rayx::collective::CreateCollectiveGroup(ranks, {.name = "package"});
  std::vector<rayx::ObjectRef<int64_t>> sums;
  for (int i = 0; i < 4; ++i) sums.push_back(ranks[i].Task(&Ranked::Sum).Remote(int64_t{i + 1}));
  bool allreduced = true;
  for (auto& s : rayx::Get(sums)) allreduced = allreduced && *s == 10;
  rayx::Shutdown();
  std::cout << "sum " << sum << " total " << total << " agents " << agents.size()
            << " allreduce " << (allreduced ? "ok" : "wrong") << "\n";
  return sum == 570 && total == 55 && allreduced ? 0 : 1;
}
