// `rayx train list|delete|export`: the checkpoints the nodes keep for Train runs.
#pragma once

#include <string>
#include <vector>

namespace rayx::cli {

int TrainCommand(const std::vector<std::string>& args);

}  // namespace rayx::cli
