// A persistent inference group: a detached ActorGroup whose ranks load a model
// once (a deliberately slow step) and then serve requests, job after job. Run
// it twice: the first job loads the model, the second finds the group by name
// and skips the load. `--kill` ends the group.
//
//   ./build/bin/rayx-inference-group           # job 1: creates and loads (slow)
//   ./build/bin/rayx-inference-group           # job 2: reuses it (fast)
//   ./build/bin/rayx-inference-group --kill
#include <rayx/actor_group.h>
#include <rayx/collective.h>
#include <rayx/rayx.h>

#include <unistd.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>

class Model {
 public:
  static Model* Create(std::string name) { return new Model(std::move(name)); }
  explicit Model(std::string name) : name_(std::move(name)) {}

  // Loads the weights unless they are loaded; returns true when it loaded.
  bool Load(int load_ms) {
    if (loaded_) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(load_ms));  // reading weights
    loaded_ = true;
    ++loads_;
    return true;
  }
  // A "generation": this rank's share of the answer.
  std::string Generate(std::string prompt) {
    rayx::RankInfo me = rayx::GetRankInfo();
    return name_ + " rank " + std::to_string(me.rank) + " (pid " + std::to_string(getpid()) +
           "): " + std::string(prompt.rbegin(), prompt.rend());
  }
  // The ranks agree through their collective group, still connected from the
  // job that created them.
  int64_t TotalRequests(int64_t mine) {
    served_ += mine;
    std::vector<int64_t> total{served_};
    rayx::collective::AllReduce(total, rayx::collective::ReduceOp::kSum,
                                rayx::GetRankInfo().collective_group);
    return total[0];
  }
  int Loads() const { return loads_; }

 private:
  std::string name_;
  bool loaded_ = false;
  int loads_ = 0;
  int64_t served_ = 0;
};

RAYX_REMOTE(Model::Create, &Model::Load, &Model::Generate, &Model::TotalRequests, &Model::Loads);

int main(int argc, char** argv) {
  rayx::Init(argc, argv);
  const std::string name = "demo-llm";
  bool kill = argc > 1 && std::string(argv[1]) == "--kill";
  rayx::ActorGroup<Model> group;
  auto started = std::chrono::steady_clock::now();
  try {
    group = rayx::GetActorGroup<Model>(name);
    std::cout << "found the detached group " << name << " (" << group.Size()
              << " ranks): the model is loaded already\n";
  } catch (const std::runtime_error&) {
    if (kill) {
      std::cout << "no group named " << name << "\n";
      rayx::Shutdown();
      return 0;
    }
    rayx::ActorGroupOptions options;
    options.name = name;
    options.num_actors = 2;
    options.lifetime = rayx::Detached;
    group = rayx::ActorGroup<Model>::Create(Model::Create, options, std::string("tiny-llm"));
    std::cout << "created the detached group " << name << " with " << group.Size() << " ranks\n";
  }
  if (kill) {
    group.Kill();
    std::cout << "killed the group " << name << "\n";
    rayx::Shutdown();
    return 0;
  }
  int loaded = 0;
  for (auto& ref : group.Task(&Model::Load).Remote(1500)) loaded += *ref.Get() ? 1 : 0;
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << (loaded > 0 ? "loaded the model on " + std::to_string(loaded) + " ranks"
                           : std::string("skipped the load"))
            << " (" << secs << " s)\n";
  for (auto& ref : group.Task(&Model::Generate).Remote(std::string("hello rayx"))) {
    std::cout << "  " << *ref.Get() << "\n";
  }
  auto totals = group.Task(&Model::TotalRequests).Remote(int64_t{1});
  std::cout << "requests served by the group so far: " << *totals[0].Get() << "\n";
  rayx::Shutdown();
  return 0;
}
