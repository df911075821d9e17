// Rendering a ClusterStatus for `rayx status`, in the shape of `ray status`.
#pragma once

#include <string>
#include <vector>

#include "rayx/cluster_status.h"

namespace rayx::cli {

// `now_wall_ms` stamps the header. `verbose` adds a block per node.
std::string FormatClusterStatus(const ClusterStatus& status, const std::string& address,
                                int64_t now_wall_ms, bool verbose);

// "CPU 2, GPU 0, memory 1.5 GiB, tpu 4".
std::string FormatResourceList(const ResourceMap& resources);

// Rows as aligned columns (two spaces between), one line each.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);
// "2026-11-30 06:12:03" (local time) for a wall-clock time in ms since the
// epoch; "-" for 0 or less.
std::string FormatWallTime(int64_t ms);

}  // namespace rayx::cli
