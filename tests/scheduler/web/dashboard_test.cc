// The web port's gate and routes, without sockets: who may read what, sessions
// that expire and are bounded, read-only methods.
#include "web/dashboard.h"

#include <gtest/gtest.h>

#include "transport/security.h"

namespace rayx::web {
namespace {

constexpr char kToken[] = "0123456789abcdef0123456789abcdef";

class DashboardTest : public ::testing::Test {
 protected:
  DashboardTest()
      : dashboard_(Options(), DashboardSource{.metrics = [] { return std::string("rayx_up 1\n"); },
                                              .state = [] { return std::string("{\"ok\":1}"); },
                                              .job_output = [](const std::string& job)
                                                  -> Result<std::string> {
                                                if (job == "aa") return std::string("{}");
                                                return Status::NotFound("no job " + job);
                                              }},
                   clock_) {}
  static DashboardOptions Options() {
    DashboardOptions o;
    o.token = kToken;
    o.max_sessions = 3;
    o.session_ttl_ms = 1000;
    return o;
  }
  HttpResponse Get(const std::string& path, const std::string& authorization = "",
                   const std::string& cookie = "") {
    HttpRequest r;
    r.method = "GET";
    r.target = path;
    r.authorization = authorization;
    r.cookie = cookie;
    return dashboard_.Handle(r);
  }
  // The cookie a login with `credential` gets ("" when refused).
  std::string Login(const std::string& body) {
    HttpRequest r;
    r.method = "POST";
    r.target = "/api/login";
    r.body = body;
    HttpResponse answer = dashboard_.Handle(r);
    if (answer.status != 204) return "";
    for (const auto& [name, value] : answer.headers) {
      if (name == "Set-Cookie") return value.substr(0, value.find(';'));
    }
    return "";
  }
  std::string Credential() const {
    return transport::Credential::DashboardCredential(kToken);
  }

  ManualClock clock_;
  Dashboard dashboard_;
};

TEST_F(DashboardTest, NothingButTheLoginPageWithoutTheCredential) {
  EXPECT_EQ(Get("/metrics").status, 401);
  EXPECT_EQ(Get("/api/state").status, 401);
  EXPECT_EQ(Get("/api/jobs/aa/output").status, 401);
  EXPECT_EQ(Get("/dashboard.js").status, 401);
  HttpResponse root = Get("/");
  EXPECT_EQ(root.status, 303);
  EXPECT_EQ(Get("/login").status, 200);
  EXPECT_EQ(Get("/login.js").status, 200);
  EXPECT_EQ(Get("/metrics", "Bearer " + std::string(64, '0')).status, 401);
  EXPECT_EQ(Get("/metrics", "Basic " + Credential()).status, 401);
  EXPECT_EQ(Get("/metrics", "Bearer").status, 401);
}

TEST_F(DashboardTest, TheCredentialOrTheTokenOpensEveryRoute) {
  for (const std::string& secret : {Credential(), std::string(kToken)}) {
    HttpResponse metrics = Get("/metrics?x=1", "Bearer " + secret);
    EXPECT_EQ(metrics.status, 200);
    EXPECT_EQ(metrics.body, "rayx_up 1\n");
    EXPECT_EQ(metrics.content_type.rfind("text/plain; version=0.0.4", 0), 0u);
    EXPECT_EQ(Get("/api/state", "Bearer " + secret).body, "{\"ok\":1}");
    EXPECT_EQ(Get("/api/jobs/aa/output", "Bearer " + secret).status, 200);
    EXPECT_EQ(Get("/api/jobs/bb/output", "Bearer " + secret).status, 404);
    EXPECT_EQ(Get("/", "Bearer " + secret).content_type, "text/html; charset=utf-8");
    EXPECT_EQ(Get("/no-such-page", "Bearer " + secret).status, 404);
  }
}

TEST_F(DashboardTest, ALoginLastsItsTimeAndLogoutEndsIt) {
  EXPECT_EQ(Login("wrong"), "");
  std::string cookie = Login("credential=" + Credential() + "\n");
  ASSERT_FALSE(cookie.empty());
  EXPECT_EQ(Get("/api/state", "", "theme=dark; " + cookie).status, 200);
  clock_.Advance(999);
  EXPECT_EQ(Get("/api/state", "", cookie).status, 200);
  clock_.Advance(1);
  EXPECT_EQ(Get("/api/state", "", cookie).status, 401) << "expired";

  cookie = Login(Credential());
  HttpRequest logout;
  logout.method = "POST";
  logout.target = "/api/logout";
  logout.cookie = cookie;
  EXPECT_EQ(dashboard_.Handle(logout).status, 204);
  EXPECT_EQ(Get("/api/state", "", cookie).status, 401);
}

TEST_F(DashboardTest, SessionsAreBoundedTheOldestGoesFirst) {
  std::string first = Login(Credential());
  clock_.Advance(1);
  std::string second = Login(Credential());
  clock_.Advance(1);
  Login(Credential());
  clock_.Advance(1);
  Login(Credential());
  EXPECT_EQ(dashboard_.session_count(), 3u);
  EXPECT_EQ(Get("/api/state", "", first).status, 401);
  EXPECT_EQ(Get("/api/state", "", second).status, 200);
}

TEST_F(DashboardTest, ReadOnly) {
  for (const char* method : {"PUT", "DELETE", "PATCH"}) {
    HttpRequest r;
    r.method = method;
    r.target = "/api/state";
    r.authorization = "Bearer " + Credential();
    EXPECT_EQ(dashboard_.Handle(r).status, 405) << method;
  }
  HttpRequest post;
  post.method = "POST";
  post.target = "/metrics";
  post.authorization = "Bearer " + Credential();
  EXPECT_EQ(dashboard_.Handle(post).status, 405);
}

}  // namespace
}  // namespace rayx::web
