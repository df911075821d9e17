// `rayx job`: submit, follow, stop and list jobs the cluster runs.
#pragma once

#include <string>
#include <vector>

namespace rayx::cli {

// Runs `rayx job ARGS` (the words after "job"); returns the exit code.
int JobCommand(const std::vector<std::string>& args);

}  // namespace rayx::cli
