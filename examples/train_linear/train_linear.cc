// Data-parallel training with rayx Train: linear regression by gradient
// descent, gradients averaged with AllReduce, a checkpoint every epoch, and
// restarts from the latest checkpoint when a rank fails.
//
//   ./build/bin/rayx-train-linear --workers 4 --epochs 20
//   ./build/bin/rayx-train-linear --workers 2 --use-gpu   # a GPU per rank, NCCL
//   rayx job submit --working-dir . -- ./bin/rayx-train-linear --workers 4
#include <rayx/collective.h>
#include <rayx/rayx.h>
#include <rayx/train.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>

#include "linear_sgd.h"

void TrainLinear(linear_sgd::Config c) { linear_sgd::RunRank(c); }
RAYX_REMOTE(TrainLinear);

int main(int argc, char** argv) {
  rayx::Init(argc, argv);  // in a worker process this serves calls and never returns
  int workers = 2, epochs = 20;
  bool use_gpu = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--use-gpu") {
      use_gpu = true;
    } else if ((flag == "--workers" || flag == "--epochs") && i + 1 < argc) {
      (flag == "--workers" ? workers : epochs) = std::atoi(argv[++i]);
    } else {
      std::cerr << "usage: rayx-train-linear [--workers N] [--epochs N] [--use-gpu]\n";
      rayx::Shutdown();
      return 2;
    }
  }
  linear_sgd::Config config;
  config.epochs = epochs;
  rayx::train::ScalingConfig scaling;
  scaling.num_workers = workers;
  scaling.use_gpu = use_gpu;  // then the gradients' AllReduce runs on NCCL
  rayx::train::RunConfig run;
  run.name = "train-linear";
  rayx::train::FailureConfig failure;
  failure.max_failures = 2;
  rayx::train::DataParallelTrainer trainer(TrainLinear, config, scaling, run, failure);
  rayx::train::Result result = trainer.Fit();
  for (const auto& m : result.metrics_history) {
    std::cout << "epoch " << m.at("epoch") << "  loss " << m.at("loss") << "\n";
  }
  if (!result.error.empty()) {
    std::cerr << "training failed: " << result.error << "\n";
    rayx::Shutdown();
    return 1;
  }
  std::vector<double> expected = linear_sgd::Reference(config);
  double worst = 0;
  for (size_t j = 0; j < expected.size(); ++j) {
    worst = std::max(worst, std::abs(result.metrics.at("w" + std::to_string(j)) - expected[j]));
  }
  std::cout << "trained on " << result.num_workers << " ranks, " << result.num_restarts
            << " restart(s); largest difference from one process: " << worst << "\n";
  rayx::Shutdown();
  return worst < 1e-9 ? 0 : 1;
}
