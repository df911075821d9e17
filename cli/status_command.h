// `rayx status`: asks the head for the cluster's nodes, usage and pending
// demands and prints them.
#pragma once

#include <string>
#include <vector>

namespace rayx::cli {

// Runs `rayx status ARGS` (the words after "status"); returns the exit code.
int StatusCommand(const std::vector<std::string>& args);

}  // namespace rayx::cli
