// `rayx microbenchmark`'s allreduce metrics: a Gloo collective group over rank
// actors of the cluster, next to torch.distributed (gloo) run in the same
// rounds on this machine.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "torch_allreduce_runner.h"

namespace rayx::bench {

// Where torch's side comes from; an empty script skips it.
struct TorchBaseline {
  std::string python;  // an interpreter that sees torch
  std::string script;  // bench/torch_allreduce.py
};

// One round: rayx's figures (rank 0's medians) and the baseline's measured
// right after (torch gloo here, raw NCCL in microbenchmark_nccl.h), or why
// the baseline's are missing.
struct AllReduceRound {
  AllReduceFigures rayx;
  std::optional<AllReduceFigures> baseline;
  std::string baseline_error;
};

// Starts `ranks` actors (a hundredth of a CPU each, so they fit on any
// cluster), connects them as one Gloo group, and runs a warm-up round and then
// `rounds` rounds of `small` 4-byte and `big` 64 MiB allreduces on every rank,
// each round followed by torch's. Kills the actors before returning. Throws
// std::runtime_error when a rank fails.
std::vector<AllReduceRound> MeasureAllReduce(int ranks, int rounds, int small, int big,
                                             const TorchBaseline& torch);

}  // namespace rayx::bench
