// rayx quickstart: tasks, an actor, and objects passed between them.
//
//   ./build/bin/rayx-quickstart              # joins the cluster of this machine, or starts one
//   RAYX_ADDRESS=10.0.0.1:6380 RAYX_TOKEN=... ./build/bin/rayx-quickstart
#include <rayx/rayx.h>

#include <iostream>
#include <numeric>
#include <string>
#include <unistd.h>
#include <vector>

// A task: runs on any node with a free CPU.
int Square(int x) { return x * x; }

// A task that takes the results of other tasks (passed as ObjectRefs).
int Sum(std::vector<int> values) { return std::accumulate(values.begin(), values.end(), 0); }

std::string WhereAmI() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return std::string(host) + " pid " + std::to_string(getpid());
}

// An actor: state that lives in one worker process.
class Counter {
 public:
  explicit Counter(int start) : total_(start) {}
  static Counter* Create(int start) { return new Counter(start); }
  int Add(int x) {
    total_ += x;
    return total_;
  }
  int Get() const { return total_; }

 private:
  int total_;
};

RAYX_REMOTE(Square, Sum, WhereAmI, Counter::Create, &Counter::Add, &Counter::Get);

int main(int argc, char** argv) {
  rayx::Init(argc, argv);  // in a worker process this serves tasks and never returns

  // 1. Tasks run in parallel on the cluster's workers.
  std::vector<rayx::ObjectRef<int>> squares;
  for (int i = 0; i < 10; ++i) squares.push_back(rayx::Task(Square).Remote(i));
  int total = 0;
  for (auto& v : rayx::Get(squares)) total += *v;
  std::cout << "sum of squares 0..9 = " << total << "\n";

  // 2. Objects: put a value once, pass the reference to a task.
  auto numbers = rayx::Put(std::vector<int>{1, 2, 3, 4, 5});
  std::cout << "Sum(Put([1..5])) = " << *rayx::Task(Sum).Remote(numbers).Get() << "\n";

  // 3. An actor keeps state across calls; calls run in order.
  auto counter = rayx::Actor(Counter::Create).Remote(100);
  for (int i = 1; i <= 5; ++i) counter.Task(&Counter::Add).Remote(i);
  std::cout << "counter = " << *counter.Task(&Counter::Get).Remote().Get() << "\n";

  // 4. A task result feeds an actor call without coming back first.
  auto nine = rayx::Task(Square).Remote(3);
  std::cout << "counter + 9 = " << *counter.Task(&Counter::Add).Remote(nine).Get() << "\n";

  std::cout << "a task ran in: " << *rayx::Task(WhereAmI).Remote().Get() << "\n";
  rayx::Shutdown();
  return total == 285 ? 0 : 1;
}
