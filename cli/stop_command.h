// `rayx stop`: stops exactly the rayx processes this machine's sessions
// recorded, node agents before heads.
#pragma once

#include <string>
#include <vector>

namespace rayx::cli {

// Runs `rayx stop ARGS` (the words after "stop"); returns the exit code.
int StopCommand(const std::vector<std::string>& args);

}  // namespace rayx::cli
