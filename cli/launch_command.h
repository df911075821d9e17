// `rayx launch`: torchrun-style programs on the cluster.
#pragma once

#include <string>
#include <vector>

#include "rayx/resources.h"

namespace rayx::cli {

// Runs `rayx launch ARGS` (the words after "launch"); returns the exit code.
int LaunchCommand(const std::vector<std::string>& args);

// "{CPU: 2, GPU: 4}".
std::string ShapeKeyForPrint(const ResourceMap& resources);

}  // namespace rayx::cli
