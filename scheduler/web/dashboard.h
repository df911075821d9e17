// The head's web port: who may look (the dashboard credential, a session
// cookie) and what each path shows (the dashboard, its JSON API, /metrics).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "common/clock.h"
#include "web/http_server.h"

namespace rayx::web {

// What the dashboard shows, read when a request asks (on the head's thread).
struct DashboardSource {
  std::function<std::string()> metrics;     // Prometheus' text format
  std::function<std::string()> state;       // the cluster as JSON (GET /api/state)
  // A job's recent output as JSON (GET /api/jobs/JOB/output); NotFound for a
  // job the head does not know.
  std::function<Result<std::string>(const std::string& job)> job_output;
};

struct DashboardOptions {
  // The cluster token: its dashboard credential (Credential::DashboardCredential)
  // or the token itself opens the port.
  std::string token;
  // Logged-in browsers the head remembers (the oldest goes first), and how
  // long a login lasts. Defaults: 256, 12 hours.
  size_t max_sessions = 256;
  int64_t session_ttl_ms = 12 * 3600 * 1000;
};

// Routes requests. Nothing is served to a client that has not proved the
// credential, but the login page and the static files it needs (which hold
// no data). Read-only: the only writes are logging in and out.
//   GET  /               the dashboard (a redirect to /login without a session)
//   GET  /login          the login page
//   POST /api/login      body: the credential (or credential=... form-encoded);
//                        sets the session cookie
//   POST /api/logout     forgets the session
//   GET  /api/state      the cluster as JSON
//   GET  /api/jobs/JOB/output  a job's recent output as JSON
//   GET  /metrics        Prometheus' text format
// A request proves the credential with `Authorization: Bearer CREDENTIAL` or
// the session cookie. Not thread-safe: call from the thread that owns `source`.
class Dashboard {
 public:
  Dashboard(DashboardOptions options, DashboardSource source, const Clock& clock);

  HttpResponse Handle(const HttpRequest& request);

  size_t session_count() const { return sessions_.size(); }

 private:
  bool Authorized(const HttpRequest& request);
  HttpResponse Login(const HttpRequest& request);
  HttpResponse Logout(const HttpRequest& request);
  std::string SessionOf(const HttpRequest& request) const;

  DashboardOptions options_;
  DashboardSource source_;
  const Clock& clock_;
  std::string credential_;  // the dashboard credential
  std::map<std::string, int64_t> sessions_;  // session id -> expiry (clock ms)
};

}  // namespace rayx::web
