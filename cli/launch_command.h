// `rayx launch`: torchrun-style programs on the cluster.
#pragma once

#include <string>
#include <vector>

#include "rayx/resources.h"

namespace rayx::cli {

// Runs `rayx launch ARGS` (the words after "launch"); returns the exit code.
int LaunchCommand(const std::vector<std::string>& args);

}  // namespace rayx::cli
