// `rayx list`: nodes, actors (and other workers) and placement groups.
#pragma once

#include <string>
#include <vector>

#include "protocol/placement_messages.h"

namespace rayx::cli {

// Runs `rayx list ARGS`; returns the exit code.
int ListCommand(const std::vector<std::string>& args);

// The table for `what` ("nodes", "actors", "workers", "placement-groups").
std::string FormatList(const protocol::ListStateReply& state, const std::string& what);

}  // namespace rayx::cli
