// ASSERT_OK and friends: they pass on OK and print the Status when they fail.
#include "util/status_matchers.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace rayx::testing {
namespace status_matchers_test {  // this file's own (unit tests compile in batches)

Result<int> Answer(bool ok) {
  if (!ok) return Status::NotFound("no answer here");
  return 42;
}

TEST(StatusMatchers, PassOnOkStatusAndResult) {
  EXPECT_OK(Status::OK());
  ASSERT_OK(Answer(true));
  EXPECT_STATUS_CODE(Answer(false), StatusCode::kNotFound);
  ASSERT_STATUS_CODE(Status::OK(), StatusCode::kOk);
}

TEST(StatusMatchers, FailuresPrintTheStatus) {
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(Status::Unavailable("head is down")),
                          "Unavailable: head is down");
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(Answer(false)), "NotFound: no answer here");
  EXPECT_FATAL_FAILURE(ASSERT_OK(Answer(false)), "NotFound: no answer here");
  EXPECT_NONFATAL_FAILURE(EXPECT_STATUS_CODE(Answer(false), StatusCode::kTimedOut),
                          "NotFound: no answer here, expected code TimedOut");
}

TEST(StatusMatchers, AssignMovesTheValueOut) {
  ASSERT_OK_AND_ASSIGN(int answer, Answer(true));
  EXPECT_EQ(answer, 42);
  std::unique_ptr<int> owned;
  ASSERT_OK_AND_ASSIGN(owned, Result<std::unique_ptr<int>>(std::make_unique<int>(7)));
  EXPECT_EQ(*owned, 7);
}

// EXPECT_FATAL_FAILURE needs a statement that can only see globals and statics.
void AssignFromError() {
  ASSERT_OK_AND_ASSIGN(int answer, Answer(false));
  (void)answer;
}

TEST(StatusMatchers, AssignFailsWithTheStatusAndReturns) {
  EXPECT_FATAL_FAILURE(AssignFromError(), "NotFound: no answer here");
}

TEST(StatusMatchers, EvaluateTheExpressionOnce) {
  static int calls = 0;
  auto counted = [] {
    ++calls;
    return Status::OK();
  };
  EXPECT_OK(counted());
  ASSERT_OK_AND_ASSIGN(int answer, (++calls, Answer(true)));
  EXPECT_EQ(answer, 42);
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace rayx::testing
