// GoogleTest assertions for rayx's Status and Result<T> that print the Status
// when they fail, instead of `ASSERT_TRUE(x.ok())`'s bare "false".
//
//   ASSERT_OK(session->WriteConfig(config));      // Status or Result<T>
//   EXPECT_OK(ProcessRecord::Parse("1 2"));
//   ASSERT_OK_AND_ASSIGN(auto session, Session::Create(dir));  // session is a Session
//   EXPECT_STATUS_CODE(Session::Create(""), StatusCode::kInvalidArgument);
//
// Every macro evaluates its expression exactly once. Like ASSERT_*, the ASSERT_
// forms return from the current function, so they work only in functions that
// return void.
#pragma once

#include <gtest/gtest.h>

#include <utility>

#include "rayx/status.h"

namespace rayx::testing {

// The Status of a Status or of a Result<T>.
inline const Status& StatusOf(const Status& status) { return status; }
template <typename T>
const Status& StatusOf(const Result<T>& result) {
  return result.status();
}

// An AssertionResult that carries the failed expression and its Status.
template <typename T>
::testing::AssertionResult IsOk(const char* expr_text, const T& value) {
  const Status& status = StatusOf(value);
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << expr_text << " returned " << status.ToString();
}

// Passes when `value`'s Status has code `code`; prints the Status otherwise.
template <typename T>
::testing::AssertionResult HasStatusCode(const char* expr_text, const char* /*code_text*/,
                                         const T& value, StatusCode code) {
  const Status& status = StatusOf(value);
  if (status.code() == code) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << expr_text << " returned " << status.ToString() << ", expected code "
         << StatusCodeName(code);
}

}  // namespace rayx::testing

#define EXPECT_OK(expr) EXPECT_PRED_FORMAT1(::rayx::testing::IsOk, expr)
#define ASSERT_OK(expr) ASSERT_PRED_FORMAT1(::rayx::testing::IsOk, expr)

#define EXPECT_STATUS_CODE(expr, code) \
  EXPECT_PRED_FORMAT2(::rayx::testing::HasStatusCode, expr, code)
#define ASSERT_STATUS_CODE(expr, code) \
  ASSERT_PRED_FORMAT2(::rayx::testing::HasStatusCode, expr, code)

// Evaluates `rexpr` (a Result<T>); on error fails the test with its Status and
// returns, else moves the value into `lhs` (a declaration or an lvalue).
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  RAYX_ASSERT_OK_AND_ASSIGN_IMPL(RAYX_STATUS_CONCAT(_rayx_result_, __LINE__), lhs, rexpr)

#define RAYX_ASSERT_OK_AND_ASSIGN_IMPL(result, lhs, rexpr)                   \
  auto result = (rexpr);                                                     \
  ASSERT_TRUE(result.ok()) << #rexpr " returned " << result.status().ToString(); \
  lhs = std::move(result).value()
