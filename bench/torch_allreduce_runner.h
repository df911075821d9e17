// Runs bench/torch_allreduce.py (torch.distributed with the gloo backend) for
// one rank count and reads its two figures: the baseline that rayx's Gloo
// allreduce is measured against in the same run (rayx_collective_benchmark,
// `rayx microbenchmark`).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "rayx/status.h"

namespace rayx::bench {

struct AllReduceFigures {
  double latency_us = 0;  // median 4-byte float32 allreduce, on rank 0
  double gbps = 0;        // median 64 MiB algorithm bandwidth (bytes / time)
};

// `python` must see torch (Debian's /usr/bin/python3 with python3-torch).
// `small` and `big`: allreduces timed per figure. Unavailable, with the
// command and its exit status, when it fails or prints no figures.
inline Result<AllReduceFigures> MeasureTorchAllReduce(const std::string& python,
                                                      const std::string& script, int ranks,
                                                      int small, int big) {
  const std::string cmd = python + " " + script + " " + std::to_string(ranks) + " --small " +
                          std::to_string(small) + " --big " + std::to_string(big) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return Status::Unavailable("cannot run: " + cmd);
  AllReduceFigures f;
  std::string output;
  char line[512];
  while (std::fgets(line, sizeof(line), p) != nullptr) {
    char metric[64];
    int n = 0;
    double value = 0;
    if (std::sscanf(line, "%63s %d %lf", metric, &n, &value) == 3) {
      if (!std::strcmp(metric, "allreduce_4B_latency_us")) f.latency_us = value;
      if (!std::strcmp(metric, "allreduce_64MiB_GBps")) f.gbps = value;
    } else if (output.size() < 2000) {
      output += line;
    }
  }
  int status = pclose(p);
  if (status != 0 || f.gbps <= 0 || f.latency_us <= 0) {
    std::string exit = WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                         : "status " + std::to_string(status);
    return Status::Unavailable(cmd + " failed (" + exit + "): " + output);
  }
  return f;
}

}  // namespace rayx::bench
