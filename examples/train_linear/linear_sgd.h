// Data-parallel linear regression: synthetic data, full-batch gradient descent
// with each rank computing the gradient of its shard and AllReduce summing
// them. Shared by the train_linear example and the Train tests, which compare
// its result with the same computation in one process (Reference).
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>
#include <random>
#include <string>
#include <vector>

#include <msgpack.hpp>
#include <rayx/collective.h>
#include <rayx/train.h>

namespace linear_sgd {

struct Config {
  int32_t epochs = 20;
  double lr = 0.1;
  int32_t samples = 4096;
  int32_t dim = 8;
  uint32_t seed = 7;
  int32_t epoch_ms = 0;        // extra work per epoch (to make room for a failure)
  std::string checkpoint_root;  // where ranks write checkpoints before reporting
  MSGPACK_DEFINE_MAP(epochs, lr, samples, dim, seed, epoch_ms, checkpoint_root)
};

struct Data {
  std::vector<double> x;  // samples x dim, row-major
  std::vector<double> y;
};

// The same data on every rank: y = x . w_true + noise, from `seed`.
inline Data MakeData(const Config& c) {
  std::mt19937_64 gen(c.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> w_true(static_cast<size_t>(c.dim));
  for (auto& w : w_true) w = normal(gen);
  Data d;
  d.x.resize(static_cast<size_t>(c.samples) * c.dim);
  d.y.resize(static_cast<size_t>(c.samples));
  for (int i = 0; i < c.samples; ++i) {
    double dot = 0;
    for (int j = 0; j < c.dim; ++j) {
      double v = normal(gen);
      d.x[static_cast<size_t>(i) * c.dim + j] = v;
      dot += v * w_true[static_cast<size_t>(j)];
    }
    d.y[static_cast<size_t>(i)] = dot + 0.01 * normal(gen);
  }
  return d;
}

// Sum over samples [begin, end) of the squared-error gradient (not averaged),
// with the summed squared error in the last element.
inline std::vector<double> ShardGradient(const Data& d, const std::vector<double>& w, int dim,
                                         int begin, int end) {
  std::vector<double> g(static_cast<size_t>(dim) + 1, 0.0);
  for (int i = begin; i < end; ++i) {
    const double* row = &d.x[static_cast<size_t>(i) * dim];
    double err = -d.y[static_cast<size_t>(i)];
    for (int j = 0; j < dim; ++j) err += row[j] * w[static_cast<size_t>(j)];
    for (int j = 0; j < dim; ++j) g[static_cast<size_t>(j)] += 2 * err * row[j];
    g[static_cast<size_t>(dim)] += err * err;
  }
  return g;
}

// Rank r of n holds samples [Begin(r), Begin(r + 1)).
inline int ShardBegin(int samples, int rank, int world) {
  return static_cast<int>(static_cast<int64_t>(samples) * rank / world);
}

// One step from a summed gradient; returns the mean loss before the step.
inline double Step(std::vector<double>& w, const std::vector<double>& summed, const Config& c) {
  for (int j = 0; j < c.dim; ++j) {
    w[static_cast<size_t>(j)] -= c.lr * summed[static_cast<size_t>(j)] / c.samples;
  }
  return summed[static_cast<size_t>(c.dim)] / c.samples;
}

// The whole computation in one process.
inline std::vector<double> Reference(const Config& c, double* final_loss = nullptr) {
  Data d = MakeData(c);
  std::vector<double> w(static_cast<size_t>(c.dim), 0.0);
  double loss = 0;
  for (int e = 0; e < c.epochs; ++e) {
    loss = Step(w, ShardGradient(d, w, c.dim, 0, c.samples), c);
  }
  if (final_loss != nullptr) *final_loss = loss;
  return w;
}

// A checkpoint: the epoch done and the weights, in a directory.
inline void SaveCheckpoint(const std::string& dir, int epoch, const std::vector<double>& w) {
  std::ofstream out(dir + "/state.txt", std::ios::trunc);
  out.precision(17);
  out << epoch << "\n";
  for (double v : w) out << v << "\n";
}
inline int LoadCheckpoint(const std::string& dir, std::vector<double>* w) {
  std::ifstream in(dir + "/state.txt");
  int epoch = -1;
  in >> epoch;
  for (auto& v : *w) in >> v;
  return epoch;
}

// The training loop every rank runs: this rank's shard, AllReduce of the
// gradients, a checkpoint from rank 0 after each epoch (under `checkpoint_root`,
// else the temp dir), and a report with the loss and the weights. Resumes from
// the run's latest checkpoint. `after_report(epoch)` runs after each report.
inline void RunRank(const Config& c, const std::function<void(int epoch)>& after_report = {}) {
  auto ctx = rayx::train::GetContext();
  Data data = MakeData(c);
  std::vector<double> w(static_cast<size_t>(c.dim), 0.0);
  int start = 0;
  if (auto ckpt = rayx::train::GetCheckpoint()) start = LoadCheckpoint(ckpt->path(), &w) + 1;
  const int begin = ShardBegin(c.samples, ctx.GetWorldRank(), ctx.GetWorldSize());
  const int end = ShardBegin(c.samples, ctx.GetWorldRank() + 1, ctx.GetWorldSize());
  for (int epoch = start; epoch < c.epochs; ++epoch) {
    std::vector<double> g = ShardGradient(data, w, c.dim, begin, end);
    rayx::collective::AllReduce(g, rayx::collective::ReduceOp::kSum, ctx.GetCollectiveGroup());
    double loss = Step(w, g, c);
    if (c.epoch_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(c.epoch_ms));
    std::optional<rayx::train::Checkpoint> checkpoint;
    if (ctx.GetWorldRank() == 0) {
      std::filesystem::path root = c.checkpoint_root.empty()
                                       ? std::filesystem::temp_directory_path() / "rayx-train-linear"
                                       : std::filesystem::path(c.checkpoint_root);
      std::string dir = (root / ctx.GetRunName() / std::to_string(getpid()) /
                         ("epoch-" + std::to_string(epoch)))
                            .string();
      std::filesystem::create_directories(dir);
      SaveCheckpoint(dir, epoch, w);
      checkpoint = rayx::train::Checkpoint::FromDirectory(dir);
    }
    rayx::train::Metrics metrics{{"epoch", static_cast<double>(epoch)},
                                 {"loss", loss},
                                 {"world_size", static_cast<double>(ctx.GetWorldSize())}};
    for (size_t j = 0; j < w.size(); ++j) metrics["w" + std::to_string(j)] = w[j];
    rayx::train::Report(metrics, checkpoint);
    if (after_report) after_report(epoch);
  }
}

}  // namespace linear_sgd
