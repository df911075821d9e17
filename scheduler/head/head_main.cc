// rayx-head: the control-plane daemon. Started by `rayx start --head`, which
// passes the cluster token in RAYX_CLUSTER_TOKEN (never on the command line,
// where `ps` would show it) and a --ready-fd for the start-up handshake.
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "common/flags.h"
#include "common/logging.h"
#include "common/parent_watch.h"
#include "common/ready_pipe.h"
#include "head/cluster_report.h"
#include "head/head_server.h"
#include "head/head_store.h"
#include "head/job_manager.h"
#include "head/kv_store.h"
#include "rayx/ids.h"
#include "web/dashboard.h"
#include "web/http_server.h"
#include "worker/worker_env.h"

namespace {
// The dashboard's port: Ray's (8265), or a free one when another cluster on
// this machine has it; a port given with --dashboard-port must be free.
constexpr int64_t kDefaultDashboardPort = 8265;
constexpr int64_t kDashboardPortDefault = -2;  // --dashboard-port not given
}  // namespace

int main(int argc, char** argv) {
  using namespace rayx;
  detail::SetLogProgramName("rayx-head");
  std::signal(SIGPIPE, SIG_IGN);

  std::string bind_host;
  std::string node_ip = "127.0.0.1";
  std::string wire_security = "authenticated";
  int64_t port = kDefaultHeadPort;
  int64_t heartbeat_ms = 250;
  int64_t timeout_ms = 1500;
  int64_t ready_fd = -1;
  std::string package_dir = "packages";
  int64_t dashboard_port = kDashboardPortDefault;
  int64_t metrics_port = -1;
  std::string state_dir;
  FlagParser flags("rayx-head");
  flags.AddString("state-dir", &state_dir,
                  "keep the head's tables in DIR/head_state.sqlite3 and restore them from it "
                  "when it exists (default: in memory only)");
  flags.AddString("package-dir", &package_dir,
                  "where uploaded working directories are kept (default ./packages)");
  flags.AddString("bind-host", &bind_host,
                  "address to listen on (default: --node-ip-address; 0.0.0.0 for all)");
  flags.AddString("wire-security", &wire_security,
                  "how workers' and object servers' connections are protected: authenticated "
                  "(default) or encrypted (CURVE; the head's own socket is always encrypted)");
  flags.AddString("node-ip-address", &node_ip, "this head's address, for messages");
  flags.AddInt("port", &port, 0, 65535, "port to listen on; 0 picks a free one (default 6380)");
  flags.AddInt("heartbeat-period-ms", &heartbeat_ms, 10, 60000,
               "how often agents heartbeat (default 250)");
  flags.AddInt("node-timeout-ms", &timeout_ms, 50, 3600000,
               "silence after which a node is declared dead (default 1500)");
  flags.AddInt("dashboard-port", &dashboard_port, kDashboardPortDefault, 65535,
               "serve the dashboard, its JSON API and /metrics on this port of the head's "
               "address; 0 picks a free one, -1 serves none (default 8265, or a free one "
               "when 8265 is taken)");
  flags.AddInt("metrics-port", &metrics_port, -1, 65535,
               "also serve /metrics (and the rest) on this port; 0 picks a free one "
               "(default: only the dashboard port)");
  flags.AddInt("ready-fd", &ready_fd, -1, 1 << 20, "fd to report start-up on");
  // Caps on what peers can make the head keep (defaults in JobManager::Options
  // and KvLimits).
  const scheduler::JobManager::Options job_defaults;
  const scheduler::KvLimits kv_defaults;
  auto bytes_flag = [&flags](const std::string& name, auto default_value, const std::string& help) {
    auto value = std::make_shared<int64_t>(static_cast<int64_t>(default_value));
    flags.AddInt(name, value.get(), 1, int64_t{1} << 60,
                 help + " (default " + std::to_string(default_value) + ")");
    return value;
  };
  auto max_package = bytes_flag("max-package-bytes", job_defaults.max_package_bytes,
                                "the largest working directory package an upload may be");
  auto max_package_store =
      bytes_flag("max-package-store-bytes", job_defaults.max_store_bytes,
                 "packages and uploads kept in all; the least recently used packages nobody "
                 "keeps go first");
  auto upload_expiry = bytes_flag("package-upload-expiry-ms", job_defaults.upload_expiry_ms,
                                  "drop an upload that sent no chunk for this long");
  auto kv_job_bytes = bytes_flag("kv-max-job-bytes", kv_defaults.max_job_bytes,
                                 "KV bytes (keys and values) one job's job-scoped keys may hold");
  auto kv_job_keys = bytes_flag("kv-max-job-keys", kv_defaults.max_job_keys,
                                "KV keys one job's job-scoped keys may number");
  auto kv_ns_bytes = bytes_flag("kv-max-namespace-bytes", kv_defaults.max_namespace_total_bytes,
                                "KV bytes one namespace may hold");
  auto kv_ns_keys = bytes_flag("kv-max-namespace-keys", kv_defaults.max_namespace_keys,
                               "KV keys one namespace may hold");
  auto kv_total_bytes = bytes_flag("kv-max-total-bytes", kv_defaults.max_total_bytes,
                                   "KV bytes the whole store may hold");
  auto kv_total_keys = bytes_flag("kv-max-total-keys", kv_defaults.max_total_keys,
                                  "KV keys the whole store may hold");
  std::vector<std::string> args(argv + 1, argv + argc);
  Status parsed = flags.Parse(args, nullptr);
  ReadyPipe ready(static_cast<int>(ready_fd));
  if (!parsed.ok()) {
    std::cerr << parsed.message() << "\n" << flags.Usage();
    ready.Fail(parsed.message());
    return 2;
  }
  const char* token_var = std::getenv("RAYX_CLUSTER_TOKEN");
  if (token_var == nullptr || *token_var == '\0') {
    std::string msg = "rayx-head: RAYX_CLUSTER_TOKEN is not set: start the head with `rayx start --head`";
    std::cerr << msg << "\n";
    ready.Fail(msg);
    return 2;
  }
  // Kept in memory only: nothing this process starts inherits it (before any
  // thread runs: the environment is not thread-safe).
  const std::string token = token_var;
  for (const char* name : WorkerEnv::kClusterTokenVariables) ::unsetenv(name);
  if (timeout_ms <= heartbeat_ms) {
    std::string msg = "rayx-head: --node-timeout-ms must be longer than --heartbeat-period-ms";
    std::cerr << msg << "\n";
    ready.Fail(msg);
    return 2;
  }

  boost::asio::io_context io(1);
  SystemClock clock;
  scheduler::HeadServerOptions options;
  options.bind_host = bind_host.empty() ? node_ip : bind_host;
  auto mode = transport::ParseWireSecurity(wire_security);
  if (!mode.ok()) {
    std::string msg = "rayx-head: --wire-security: " + mode.status().message();
    std::cerr << msg << "\n";
    ready.Fail(msg);
    return 2;
  }
  options.service.wire_security = *mode;
  options.port = static_cast<uint16_t>(port);
  options.service.token = token;
  options.service.cluster_id = NodeId::FromRandom().Short();
  options.service.heartbeat_period_ms = heartbeat_ms;
  options.service.nodes.node_timeout_ms = timeout_ms;
  options.service.where = "head " + node_ip;
  options.service.jobs.package_dir = package_dir;
  options.service.jobs.max_package_bytes = static_cast<uint64_t>(*max_package);
  options.service.jobs.max_store_bytes = static_cast<uint64_t>(*max_package_store);
  options.service.jobs.upload_expiry_ms = *upload_expiry;
  options.service.kv.max_job_bytes = static_cast<uint64_t>(*kv_job_bytes);
  options.service.kv.max_job_keys = static_cast<uint64_t>(*kv_job_keys);
  options.service.kv.max_namespace_total_bytes = static_cast<uint64_t>(*kv_ns_bytes);
  options.service.kv.max_namespace_keys = static_cast<uint64_t>(*kv_ns_keys);
  options.service.kv.max_total_bytes = static_cast<uint64_t>(*kv_total_bytes);
  options.service.kv.max_total_keys = static_cast<uint64_t>(*kv_total_keys);
  // A driver's job ends when its agent sees the driver exit (WatchDriverRequest);
  // silence ends it only after a minute, so a driver paused in a debugger or by
  // SIGSTOP for 30 s keeps its job (and one off the cluster's machines is
  // cleaned up after that minute).
  options.service.leases.job_timeout_ms = std::max<int64_t>(timeout_ms * 2, 60000);
  std::unique_ptr<scheduler::HeadStore> store;
  if (!state_dir.empty()) {
    std::string path = state_dir + "/head_state.sqlite3";
    auto opened = scheduler::HeadStore::Open(path);
    Result<scheduler::HeadState> state =
        opened.ok() ? (*opened)->Load() : Result<scheduler::HeadState>(opened.status());
    if (!state.ok()) {
      std::string msg = "rayx-head: " + state.status().message();
      std::cerr << msg << "\n";
      ready.Fail(msg);
      return 1;
    }
    store = std::move(*opened);
    options.service.store = store.get();
    options.service.restored = std::move(*state);
  }
  scheduler::HeadServer server(io, options, clock);
  Status started = server.Start();
  if (!started.ok()) {
    RAYX_LOG(Error) << started.message();
    std::cerr << "rayx-head: " << started.message() << "\n";
    ready.Fail(started.message());
    return 1;
  }
  // Workers reach the head at the address it advertises.
  server.SetHeadAddress(node_ip + ":" + std::to_string(server.port()));

  // The web port: read-only, on the head's thread (the handler reads the
  // service's tables directly), bound where the head's socket is.
  web::Dashboard dashboard(
      web::DashboardOptions{.token = token},
      web::DashboardSource{
          .metrics = [&] { return scheduler::PrometheusText(server.service()); },
          .state = [&] { return scheduler::StateJson(server.service()); },
          .job_output = [&](const std::string& job) {
            return server.service().output_tail().Json(job);
          }},
      clock);
  auto handler = [&dashboard](const web::HttpRequest& r) { return dashboard.Handle(r); };
  std::vector<std::unique_ptr<web::HttpServer>> web_servers;
  std::map<std::string, std::string> ready_fields = {{"port", std::to_string(server.port())},
                                                     {"cluster_id", server.cluster_id()}};
  auto serve = [&](int64_t web_port, bool fall_back, const char* what) -> Status {
    web::HttpServerOptions web_options;
    web_options.host = options.bind_host;
    web_options.port = static_cast<uint16_t>(web_port);
    auto web = std::make_unique<web::HttpServer>(io, web_options, handler);
    Status s = web->Start();
    if (!s.ok() && fall_back) {
      RAYX_LOG(Warning) << "the dashboard's default port " << web_port
                        << " is taken: serving it on a free port instead";
      web_options.port = 0;
      web = std::make_unique<web::HttpServer>(io, web_options, handler);
      s = web->Start();
    }
    if (!s.ok()) return Status::Unavailable(std::string(what) + " " + s.message());
    std::string url = "http://" + node_ip + ":" + std::to_string(web->port());
    ready_fields[what] = url;
    if (web_servers.empty()) server.service().SetDashboardUrl(url);
    RAYX_LOG(Info) << what << " at " << url;
    web_servers.push_back(std::move(web));
    return Status::OK();
  };
  Status web_started = Status::OK();
  if (dashboard_port != -1) {
    bool fall_back = dashboard_port == kDashboardPortDefault;
    web_started = serve(fall_back ? kDefaultDashboardPort : dashboard_port, fall_back, "dashboard");
  }
  if (web_started.ok() && metrics_port != -1) web_started = serve(metrics_port, false, "metrics");
  if (!web_started.ok()) {
    std::cerr << "rayx-head: " << web_started.message() << "\n";
    ready.Fail(web_started.message());
    return 1;
  }
  RAYX_LOG(Info) << "rayx " << kRayxVersion << " head of cluster " << server.cluster_id()
                 << " listening on " << bind_host << ":" << server.port() << " (heartbeat "
                 << heartbeat_ms << " ms, node timeout " << timeout_ms << " ms)";
  ready.Ready(ready_fields);

  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    RAYX_LOG(Info) << "signal " << signo << ": shutting down";
    io.stop();
  });
  ParentWatch parent(io, [&] {
    RAYX_LOG(Info) << "the process this head belongs to exited: shutting down";
    io.stop();
  });
  io.run();
  return 0;
}
