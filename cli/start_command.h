// `rayx start`: starts a head or a node agent on this machine and records
// them in a new session directory (common/session_dir.h).
#pragma once

#include <string>
#include <vector>

namespace rayx::cli {

// Runs `rayx start ARGS` (the words after "start"); returns the exit code.
int StartCommand(const std::vector<std::string>& args);

}  // namespace rayx::cli
