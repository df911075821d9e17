// `rayx dashboard`: asks the head where its web port is and derives the
// dashboard credential from the cluster token (it never leaves this machine).
#include "dashboard_command.h"

#include <iostream>

#include "cluster_client.h"
#include "command_error.h"
#include "common/flags.h"
#include "common/session_dir.h"
#include "rayx/cluster_status.h"
#include "token_flags.h"
#include "transport/security.h"

namespace rayx::cli {

int DashboardCommand(const std::vector<std::string>& args) {
  std::string address, temp_dir = detail::DefaultTempDir();
  TokenFlags token_flags;
  bool url_only = false, credential_only = false, help = false;
  int64_t timeout_ms = 5000;
  FlagParser flags("rayx dashboard");
  flags.AddString("address", &address, "the head, HOST:PORT (default: $RAYX_ADDRESS, else the "
                                       "cluster this machine belongs to)");
  token_flags.Add(flags);
  flags.AddBool("url", &url_only, "print only the dashboard's URL");
  flags.AddBool("credential", &credential_only,
                "print only the read-only credential (the login, and Prometheus' bearer token)");
  flags.AddInt("timeout-ms", &timeout_ms, 100, 600000, "how long to wait for the head (default 5000)");
  flags.AddString("temp-dir", &temp_dir, "session directory root (default /tmp/rayx)");
  flags.AddBool("help", &help, "show this help");
  if (Status s = flags.Parse(args, nullptr); !s.ok()) return Fail("dashboard", s.message(), 2);
  if (help) {
    std::cout << "usage: rayx dashboard [FLAGS]\n" << flags.Usage();
    return 0;
  }
  if (url_only && credential_only) {
    return Fail("dashboard", "pass at most one of --url and --credential", 2);
  }
  auto cluster = ResolveCluster(address, token_flags, temp_dir);
  if (!cluster.ok()) {
    bool usage = cluster.status().code() == StatusCode::kInvalidArgument;
    return Fail("dashboard", cluster.status().message(), usage ? 2 : 1);
  }
  std::string credential = transport::Credential::DashboardCredential(cluster->second);
  if (credential_only) {
    std::cout << credential << "\n";
    return 0;
  }
  auto status = QueryClusterStatus(cluster->first, cluster->second, timeout_ms);
  if (!status.ok()) return Fail("dashboard", status.status().message());
  if (status->dashboard_url.empty()) {
    return Fail("dashboard",
                "the head at " + cluster->first +
                    " serves no dashboard (it was started with --dashboard-port -1)");
  }
  if (url_only) {
    std::cout << status->dashboard_url << "/\n";
    return 0;
  }
  std::cout << "Dashboard:   " << status->dashboard_url << "/\n"
            << "Metrics:     " << status->dashboard_url << "/metrics\n"
            << "Credential:  " << credential << "\n\n"
            << "Open the dashboard and log in with the credential (it shows the cluster and "
               "nothing else: it cannot run work).\n"
            << "Prometheus scrapes /metrics with it as a bearer token:\n"
            << "  scrape_configs:\n"
            << "    - job_name: rayx\n"
            << "      authorization: {type: Bearer, credentials_file: FILE_WITH_CREDENTIAL}\n"
            << "      static_configs: [{targets: ['"
            << status->dashboard_url.substr(status->dashboard_url.find("//") + 2) << "']}]\n";
  return 0;
}

}  // namespace rayx::cli
