// `rayx logs`: lists and prints any node's log files (daemons, workers,
// processes) from any machine, through the cluster's authenticated
// connections to the nodes' object servers.
#pragma once

#include <string>
#include <vector>

namespace rayx::cli {

// Runs `rayx logs ARGS`; returns the exit code.
int LogsCommand(const std::vector<std::string>& args);

}  // namespace rayx::cli
