// `rayx status`: resolves the cluster (flags, environment, or this machine's
// session), queries the head and prints the table.
#include "status_command.h"

#include <iostream>

#include "cluster_client.h"
#include "command_error.h"
#include "common/clock.h"
#include "common/flags.h"
#include "common/json.h"
#include "common/session_dir.h"
#include "status_format.h"

namespace rayx::cli {

int StatusCommand(const std::vector<std::string>& args) {
  std::string address, temp_dir = detail::DefaultTempDir();
  TokenFlags token_flags;
  bool verbose = false, help = false;
  std::string format = "table";
  int64_t timeout_ms = 5000;
  FlagParser flags("rayx status");
  flags.AddString("address", &address, "the head, HOST:PORT (default: $RAYX_ADDRESS, else the "
                                       "cluster this machine belongs to)");
  token_flags.Add(flags);
  flags.AddBool("verbose", &verbose, "-v: a block per node");
  flags.AddString("format", &format,
                  "table (default) or json (the dashboard's /api/state \"status\" field)");
  flags.AddInt("timeout-ms", &timeout_ms, 100, 600000, "how long to wait for the head (default 5000)");
  flags.AddString("temp-dir", &temp_dir, "session directory root (default /tmp/rayx)");
  flags.AddBool("help", &help, "show this help");
  if (Status s = flags.Parse(args, nullptr); !s.ok()) return Fail("status", s.message(), 2);
  if (help) {
    std::cout << "usage: rayx status [FLAGS]\n" << flags.Usage();
    return 0;
  }
  if (format != "table" && format != "json") {
    return Fail("status", "--format is table or json, not '" + format + "'", 2);
  }
  auto cluster = ResolveCluster(address, token_flags, temp_dir);
  if (!cluster.ok()) {
    // A malformed address or a missing token is a usage error; no cluster is not.
    bool usage = cluster.status().code() == StatusCode::kInvalidArgument;
    return Fail("status", cluster.status().message(), usage ? 2 : 1);
  }
  address = cluster->first;
  auto status = QueryClusterStatus(address, cluster->second, timeout_ms);
  if (!status.ok()) return Fail("status", status.status().message());
  if (format == "json") {
    std::cout << ToJson(*status) << "\n";
    return 0;
  }
  std::cout << FormatClusterStatus(*status, address, SystemClock().WallMs(), verbose);
  return 0;
}

}  // namespace rayx::cli
