// `rayx microbenchmark`'s NCCL metrics: an actor group of GPU ranks (one GPU
// each, every rank seeing the group's devices on its node) connected as an
// NCCL group and timed through the public raw-pointer AllReduce on device
// memory, next to raw NCCL called by the same rank processes on the same
// devices right after (ncclCommInitRank, ncclAllReduce, cudaStreamSynchronize).
#pragma once

#include <string>
#include <vector>

#include "microbenchmark_allreduce.h"

namespace rayx::bench {

// The GPUs CUDA shows this process; 0 with `why` set when there are none or
// rayx was built without NCCL.
int NcclBenchGpus(std::string* why);

// Creates an actor group of `gpus` ranks ({GPU: 1} each, NCCL), runs a warm-up
// round and then `rounds` rounds of `small` 4-byte and `big` 64 MiB allreduces
// on every rank, rayx's and then raw NCCL's (the rounds' baseline; rank 0's
// medians). Kills the group before returning.
// Throws std::runtime_error when a rank fails or a result is wrong.
std::vector<AllReduceRound> MeasureNcclAllReduce(int gpus, int rounds, int small, int big);

}  // namespace rayx::bench
