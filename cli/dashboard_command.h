// `rayx dashboard`: where the cluster's dashboard and /metrics are, and the
// read-only credential to open them with.
#pragma once

#include <string>
#include <vector>

namespace rayx::cli {

// Runs `rayx dashboard ARGS`; returns the exit code.
int DashboardCommand(const std::vector<std::string>& args);

}  // namespace rayx::cli
