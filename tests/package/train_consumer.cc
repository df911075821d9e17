// A user's Train program built against an installed rayx with
// find_package(rayx), run by run_package_test.sh on a loopback cluster started
// with the installed `rayx start`. One mode per run:
//   train          2 ranks; rank 1 SIGKILLs itself once mid-run: the run resumes
//                  from its checkpoint with the weights of one process
//   elastic FILE   min 2, max 4 ranks: rank 0 touches FILE once inside the loop
//                  (the script then adds two nodes); the run grows to 4 ranks
//   serve-create   a detached actor group "loads a model" and keeps it
//   serve-use      a later job finds the group by name: same processes, state
//                  kept, collective group connected; then kills it
// Prints what it saw and exits 0 only when every check holds.
#include <rayx/actor_group.h>
#include <rayx/collective.h>
#include <rayx/kv.h>
#include <rayx/rayx.h>
#include <rayx/train.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <string>

#include "linear_sgd.h"

namespace {

struct Config {
  linear_sgd::Config sgd;
  std::string mode;
  std::string started_file;  // elastic: touched by rank 0 inside the loop
  MSGPACK_DEFINE_MAP(sgd, mode, started_file)
};

double WorstDifference(const rayx::train::Result& r, const linear_sgd::Config& c) {
  std::vector<double> want = linear_sgd::Reference(c);
  double worst = 0;
  for (size_t j = 0; j < want.size(); ++j) {
    auto it = r.metrics.find("w" + std::to_string(j));
    if (it == r.metrics.end()) return INFINITY;
    worst = std::max(worst, std::abs(it->second - want[j]));
  }
  return worst;
}

}  // namespace

void Loop(Config c) {
  auto ctx = rayx::train::GetContext();
  linear_sgd::RunRank(c.sgd, [&](int epoch) {
    if (c.mode == "train" && epoch == 2 && ctx.GetWorldRank() == 1 &&
        rayx::kv::Put("package-train/killed", std::to_string(getpid()), /*overwrite=*/false)) {
      ::kill(getpid(), SIGKILL);  // once: the run's first attempt loses a rank mid-run
    }
    if (c.mode == "elastic" && ctx.GetWorldRank() == 0 && !c.started_file.empty()) {
      std::ofstream(c.started_file) << epoch << "\n";
    }
  });
}

class Model {
 public:
  static Model* Create() { return new Model(); }
  int Load(int weights) { return weights_ = weights; }
  int Weights() const { return weights_; }
  int Pid() const { return getpid(); }
  int64_t Sum(int64_t x) {
    std::vector<int64_t> v{x};
    rayx::collective::AllReduce(v, rayx::collective::ReduceOp::kSum,
                                rayx::GetRankInfo().collective_group);
    return v[0];
  }

 private:
  int weights_ = 0;
};

RAYX_REMOTE(Loop, Model::Create, &Model::Load, &Model::Weights, &Model::Pid, &Model::Sum);

int main(int argc, char** argv) {
  rayx::Init(argc, argv);  // in a worker process this serves calls and never returns
  const std::string mode = argc > 1 ? argv[1] : "";
  bool ok = false;
  if (mode == "train" || mode == "elastic") {
    Config c;
    c.mode = mode;
    c.sgd.epochs = mode == "train" ? 12 : 60;
    c.sgd.epoch_ms = 100;
    if (mode == "elastic" && argc > 2) c.started_file = argv[2];
    rayx::train::ScalingConfig scaling;
    if (mode == "train") {
      scaling.num_workers = 2;
    } else {
      scaling.min_workers = 2;
      scaling.max_workers = 4;
    }
    scaling.placement_strategy = rayx::PlacementStrategy::SPREAD;
    rayx::train::RunConfig run{.name = "package-" + mode};
    rayx::train::Result r =
        rayx::train::DataParallelTrainer(Loop, c, scaling, run, {.max_failures = 3}).Fit();
    double worst = WorstDifference(r, c.sgd);
    int largest = 0;
    for (const auto& m : r.metrics_history) largest = std::max(largest, int(m.at("world_size")));
    std::cout << mode << ": error '" << r.error << "' restarts " << r.num_restarts
              << " largest world " << largest << " difference from one process " << worst << "\n";
    ok = r.error.empty() && worst < 1e-9 &&
         (mode == "train" ? r.num_restarts == 1 : largest == 4);
  } else if (mode == "serve-create") {
    rayx::ActorGroupOptions options;
    options.name = "package-served";
    options.num_actors = 2;
    options.lifetime = rayx::Detached;
    auto group = rayx::ActorGroup<Model>::Create(Model::Create, options);
    std::string pids;
    for (auto& r : group.Task(&Model::Load).Remote(42)) ok = *r.Get() == 42;
    for (int i = 0; i < group.Size(); ++i) {
      pids += std::to_string(*group.Rank(i).Task(&Model::Pid).Remote().Get()) + " ";
    }
    rayx::kv::Put("package-served/pids", pids);
    std::cout << "serve-create: loaded on pids " << pids << "\n";
  } else if (mode == "serve-use") {
    auto group = rayx::GetActorGroup<Model>("package-served");
    std::string pids;
    ok = group.Size() == 2;
    for (int i = 0; i < group.Size(); ++i) {
      pids += std::to_string(*group.Rank(i).Task(&Model::Pid).Remote().Get()) + " ";
      ok = ok && *group.Rank(i).Task(&Model::Weights).Remote().Get() == 42;
    }
    ok = ok && pids == rayx::kv::Get("package-served/pids").value_or("");
    for (auto& s : group.Task(&Model::Sum).Remote(int64_t{5})) ok = ok && *s.Get() == 10;
    group.Kill();
    std::cout << "serve-use: pids " << pids << (ok ? "kept, model loaded" : "CHANGED or lost")
              << "\n";
  } else {
    std::cerr << "usage: train_consumer train | elastic FILE | serve-create | serve-use\n";
  }
  rayx::Shutdown();
  return ok ? 0 : 1;
}
