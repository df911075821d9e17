// The head's web port: authentication and routing.
#include "web/dashboard.h"

#include <algorithm>

#include "rayx/ids.h"
#include "transport/security.h"
#include "web/dashboard_assets.h"

namespace rayx::web {

namespace {

constexpr const char* kCookieName = "rayx_session";

HttpResponse Asset(const std::string& path) {
  const StaticAsset* asset = FindStaticAsset(path);
  if (asset == nullptr) return HttpResponse::Text(404, "no such page: " + path + "\n");
  HttpResponse r;
  r.content_type = asset->content_type;
  r.body = std::string(asset->body);
  return r;
}

HttpResponse Json(std::string body) {
  HttpResponse r;
  r.content_type = "application/json";
  r.body = std::move(body);
  return r;
}

HttpResponse Unauthorized() {
  HttpResponse r = HttpResponse::Text(
      401,
      "log in: send `Authorization: Bearer CREDENTIAL` (`rayx dashboard --credential` prints "
      "it) or log in at /login\n");
  r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"rayx\"");
  return r;
}

// "%41" -> "A", "+" -> " " (form encoding).
std::string UrlDecode(std::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] == '%' && i + 2 < in.size()) {
      auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      int hi = hex(in[i + 1]), lo = hex(in[i + 2]);
      if (hi < 0 || lo < 0) {
        out += in[i];
        continue;
      }
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += in[i];
    }
  }
  return out;
}

std::string Trim(std::string s) {
  auto space = [](unsigned char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!s.empty() && space(s.back())) s.pop_back();
  size_t start = 0;
  while (start < s.size() && space(s[start])) ++start;
  return s.substr(start);
}

}  // namespace

Dashboard::Dashboard(DashboardOptions options, DashboardSource source, const Clock& clock)
    : options_(std::move(options)), source_(std::move(source)), clock_(clock),
      credential_(transport::Credential::DashboardCredential(options_.token)) {}

std::string Dashboard::SessionOf(const HttpRequest& request) const {
  // Cookie: a=b; rayx_session=ID; c=d
  std::string_view cookies = request.cookie;
  const std::string key = std::string(kCookieName) + "=";
  size_t at = 0;
  while (at < cookies.size()) {
    while (at < cookies.size() && (cookies[at] == ' ' || cookies[at] == ';')) ++at;
    size_t end = cookies.find(';', at);
    if (end == std::string_view::npos) end = cookies.size();
    std::string_view pair = cookies.substr(at, end - at);
    if (pair.substr(0, key.size()) == key) return std::string(pair.substr(key.size()));
    at = end;
  }
  return {};
}

bool Dashboard::Authorized(const HttpRequest& request) {
  constexpr std::string_view kBearer = "Bearer ";
  if (request.authorization.size() > kBearer.size() &&
      std::string_view(request.authorization).substr(0, kBearer.size()) == kBearer) {
    std::string_view given = std::string_view(request.authorization).substr(kBearer.size());
    return transport::Credential::SameSecret(given, credential_) ||
           transport::Credential::SameSecret(given, options_.token);
  }
  std::string session = SessionOf(request);
  if (session.empty()) return false;
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return false;
  if (it->second <= clock_.NowMs()) {
    sessions_.erase(it);
    return false;
  }
  return true;
}

HttpResponse Dashboard::Login(const HttpRequest& request) {
  std::string given = request.body;
  constexpr std::string_view kField = "credential=";
  if (given.rfind(kField, 0) == 0) given = UrlDecode(given.substr(kField.size()));
  given = Trim(std::move(given));
  if (!transport::Credential::SameSecret(given, credential_) &&
      !transport::Credential::SameSecret(given, options_.token)) {
    return HttpResponse::Text(401, "wrong credential: `rayx dashboard --credential` prints it\n");
  }
  int64_t now = clock_.NowMs();
  std::erase_if(sessions_, [now](const auto& s) { return s.second <= now; });
  while (sessions_.size() >= options_.max_sessions) {
    auto oldest = std::min_element(sessions_.begin(), sessions_.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
    sessions_.erase(oldest);
  }
  std::string id = detail::SecureRandomHex(32);
  sessions_[id] = now + options_.session_ttl_ms;
  HttpResponse r = HttpResponse::Text(204, "");
  r.headers.emplace_back("Set-Cookie", std::string(kCookieName) + "=" + id +
                                           "; Path=/; HttpOnly; SameSite=Strict; Max-Age=" +
                                           std::to_string(options_.session_ttl_ms / 1000));
  return r;
}

HttpResponse Dashboard::Logout(const HttpRequest& request) {
  sessions_.erase(SessionOf(request));
  HttpResponse r = HttpResponse::Text(204, "");
  r.headers.emplace_back("Set-Cookie",
                         std::string(kCookieName) + "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
  return r;
}

HttpResponse Dashboard::Handle(const HttpRequest& request) {
  std::string path = request.target.substr(0, request.target.find('?'));
  if (request.method == "POST") {
    if (path == "/api/login") return Login(request);
    if (path == "/api/logout") return Logout(request);
    return HttpResponse::Text(405, "only GET here (the dashboard is read-only)\n");
  }
  if (request.method != "GET") {
    return HttpResponse::Text(405, "only GET here (the dashboard is read-only)\n");
  }
  // The login page and its files hold no data.
  if (path == "/login") return Asset("/login.html");
  if (path == "/login.js" || path == "/dashboard.css") return Asset(path);
  if (!Authorized(request)) {
    if (path == "/" || path == "/index.html") {
      HttpResponse r = HttpResponse::Text(303, "log in at /login\n");
      r.headers.emplace_back("Location", "/login");
      return r;
    }
    return Unauthorized();
  }
  if (path == "/" || path == "/index.html") return Asset("/index.html");
  if (path == "/metrics") {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = source_.metrics();
    return r;
  }
  if (path == "/api/state") return Json(source_.state());
  constexpr std::string_view kJobs = "/api/jobs/";
  constexpr std::string_view kOutput = "/output";
  if (path.size() > kJobs.size() + kOutput.size() && path.rfind(kJobs, 0) == 0 &&
      path.compare(path.size() - kOutput.size(), kOutput.size(), kOutput) == 0) {
    std::string job = path.substr(kJobs.size(), path.size() - kJobs.size() - kOutput.size());
    auto output = source_.job_output(job);
    if (!output.ok()) return HttpResponse::Text(404, output.status().message() + "\n");
    return Json(std::move(*output));
  }
  return Asset(path);
}

}  // namespace rayx::web
