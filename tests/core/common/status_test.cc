// Status, Result<T> and RAYX_RETURN_IF_ERROR.
#include "rayx/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>

namespace rayx {
namespace status_test {  // this file's own (unit tests compile in batches)

TEST(Status, DefaultIsOkWithEmptyMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s, Status::OK());
}

TEST(Status, ToStringOfOkIsOk) { EXPECT_EQ(Status::OK().ToString(), "OK"); }

TEST(Status, ToStringPrefixesCodeName) {
  EXPECT_EQ(Status::InvalidArgument("bad port").ToString(), "InvalidArgument: bad port");
  EXPECT_EQ(Status::Unauthenticated("wrong token").ToString(), "Unauthenticated: wrong token");
}

TEST(Status, FactoriesSetTheirCodes) {
  struct Case {
    Status status;
    StatusCode code;
    const char* name;
  };
  const Case cases[] = {
      {Status::InvalidArgument("m"), StatusCode::kInvalidArgument, "InvalidArgument"},
      {Status::NotFound("m"), StatusCode::kNotFound, "NotFound"},
      {Status::AlreadyExists("m"), StatusCode::kAlreadyExists, "AlreadyExists"},
      {Status::Unavailable("m"), StatusCode::kUnavailable, "Unavailable"},
      {Status::TimedOut("m"), StatusCode::kTimedOut, "TimedOut"},
      {Status::Cancelled("m"), StatusCode::kCancelled, "Cancelled"},
      {Status::Internal("m"), StatusCode::kInternal, "Internal"},
      {Status::Unauthenticated("m"), StatusCode::kUnauthenticated, "Unauthenticated"},
  };
  for (const auto& c : cases) {
    EXPECT_FALSE(c.status.ok()) << c.name;
    EXPECT_EQ(c.status.code(), c.code) << c.name;
    EXPECT_EQ(c.status.message(), "m") << c.name;
    EXPECT_EQ(StatusCodeName(c.code), c.name);
    EXPECT_EQ(c.status.ToString(), std::string(c.name) + ": m");
  }
}

TEST(Status, UnknownCodeNameIsUnknown) {
  EXPECT_EQ(StatusCodeName(static_cast<StatusCode>(200)), "Unknown");
}

TEST(Status, EqualityComparesCodeAndMessage) {
  EXPECT_EQ(Status::NotFound("x"), Status::NotFound("x"));
  EXPECT_NE(Status::NotFound("x"), Status::NotFound("y"));
  EXPECT_NE(Status::NotFound("x"), Status::Internal("x"));
}

TEST(Status, StreamsAsToString) {
  std::ostringstream out;
  out << Status::TimedOut("slow");
  EXPECT_EQ(out.str(), "TimedOut: slow");
}

TEST(Result, HoldsValue) {
  Result<int> r = 42;
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.status().ok());
  EXPECT_EQ(r.value(), 42);
  EXPECT_EQ(*r, 42);
}

TEST(Result, HoldsError) {
  Result<int> r = Status::NotFound("no such node");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "no such node");
}

TEST(Result, FromOkStatusBecomesInternalError) {
  Result<std::string> r = Status::OK();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(Result, ArrowAndMoveOutOfValue) {
  Result<std::string> r = std::string("hello");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 5u);
  std::string moved = std::move(r).value();
  EXPECT_EQ(moved, "hello");
}

TEST(Result, HoldsMoveOnlyValue) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(**r, 7);
}

int g_calls = 0;

Status Step(Status s) {
  ++g_calls;
  return s;
}

Status TwoSteps(Status first, bool* reached_second) {
  RAYX_RETURN_IF_ERROR(Step(first));
  *reached_second = true;
  RAYX_RETURN_IF_ERROR(Step(Status::OK()));
  return Status::Cancelled("end");
}

TEST(ReturnIfError, PropagatesFirstErrorAndStops) {
  g_calls = 0;
  bool reached = false;
  Status s = TwoSteps(Status::Unavailable("head down"), &reached);
  EXPECT_EQ(s, Status::Unavailable("head down"));
  EXPECT_FALSE(reached);
  EXPECT_EQ(g_calls, 1);  // the expression is evaluated exactly once
}

TEST(ReturnIfError, ContinuesOnOk) {
  g_calls = 0;
  bool reached = false;
  Status s = TwoSteps(Status::OK(), &reached);
  EXPECT_TRUE(reached);
  EXPECT_EQ(s, Status::Cancelled("end"));
  EXPECT_EQ(g_calls, 2);
}

}  // namespace
}  // namespace rayx
