// A user's program built against an installed rayx with find_package(rayx):
// runs tasks and an actor on whatever cluster rayx::Init finds (or starts).
#include <rayx/rayx.h>

#include <iostream>
#include <set>
#include <unistd.h>

int Triple(int x) { return 3 * x; }
int AgentOf() { return getppid(); }

class Accumulator {
 public:
  static Accumulator* Create() { return new Accumulator(); }
  int Add(int x) { return total_ += x; }

 private:
  int total_ = 0;
};

RAYX_REMOTE(Triple, AgentOf, Accumulator::Create, &Accumulator::Add);

int main(int argc, char** argv) {
  rayx::Init(argc, argv);
  int sum = 0;
  std::vector<rayx::ObjectRef<int>> refs;
  for (int i = 0; i < 20; ++i) refs.push_back(rayx::Task(Triple).Remote(i));
  for (auto& v : rayx::Get(refs)) sum += *v;
  auto acc = rayx::Actor(Accumulator::Create).Remote();
  for (int i = 1; i <= 10; ++i) acc.Task(&Accumulator::Add).Remote(i);
  int total = *acc.Task(&Accumulator::Add).Remote(0).Get();
  // Which agents ran tasks: several nodes when the cluster has them.
  std::vector<rayx::ObjectRef<int>> where;
  for (int i = 0; i < 8; ++i) where.push_back(rayx::Task(AgentOf).Remote());
  std::set<int> agents;
  for (auto& a : rayx::Get(where)) agents.insert(*a);
  rayx::Shutdown();
  std::cout << "sum " << sum << " total " << total << " agents " << agents.size() << "\n";
  return sum == 570 && total == 55 ? 0 : 1;
}
