// FlagParser: value forms, booleans, errors and positional arguments.
#include "common/flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rayx {
namespace flags_test {  // this file's own (unit tests compile in batches)

class FlagParserTest : public ::testing::Test {
 protected:
  FlagParserTest() : parser_("rayx start") {
    parser_.AddString("address", &address_, "head address");
    parser_.AddInt("port", &port_, 1, 65535, "port");
    parser_.AddDouble("num-cpus", &cpus_, "CPUs");
    parser_.AddBool("head", &head_, "start a head");
  }

  Status Parse(const std::vector<std::string>& args,
               std::vector<std::string>* positional = nullptr) {
    return parser_.Parse(args, positional);
  }

  void ExpectError(const std::vector<std::string>& args, const std::string& what) {
    Status s = Parse(args);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(what), std::string::npos) << s;
  }

  FlagParser parser_;
  std::string address_ = "unset";
  int64_t port_ = -1;
  double cpus_ = -1;
  bool head_ = false;
};

TEST_F(FlagParserTest, ParsesSpaceSeparatedValues) {
  ASSERT_TRUE(Parse({"--address", "10.0.0.1:6380", "--port", "7000", "--num-cpus", "2.5"}).ok());
  EXPECT_EQ(address_, "10.0.0.1:6380");
  EXPECT_EQ(port_, 7000);
  EXPECT_DOUBLE_EQ(cpus_, 2.5);
  EXPECT_FALSE(head_);
}

TEST_F(FlagParserTest, ParsesEqualsValues) {
  ASSERT_TRUE(Parse({"--address=h:1", "--port=80", "--num-cpus=0"}).ok());
  EXPECT_EQ(address_, "h:1");
  EXPECT_EQ(port_, 80);
  EXPECT_DOUBLE_EQ(cpus_, 0);
}

TEST_F(FlagParserTest, EqualsValueMayContainEqualsAndBeEmpty) {
  ASSERT_TRUE(Parse({"--address=a=b"}).ok());
  EXPECT_EQ(address_, "a=b");
  ASSERT_TRUE(Parse({"--address="}).ok());
  EXPECT_EQ(address_, "");
}

TEST_F(FlagParserTest, BoolFlagSetsTrue) {
  ASSERT_TRUE(Parse({"--head"}).ok());
  EXPECT_TRUE(head_);
}

TEST_F(FlagParserTest, BoolFlagRejectsInlineValue) {
  ExpectError({"--head=true"}, "--head takes no value");
  EXPECT_FALSE(head_);
}

TEST_F(FlagParserTest, UnknownFlagErrorNamesTheFlag) {
  ExpectError({"--num-gpu", "1"}, "unknown flag --num-gpu");
  ExpectError({"--bogus=3"}, "unknown flag --bogus");
}

TEST_F(FlagParserTest, ErrorsNameTheCommand) { ExpectError({"--nope"}, "rayx start: "); }

TEST_F(FlagParserTest, MissingValueIsAnError) {
  ExpectError({"--address"}, "--address needs a value");
  ExpectError({"--head", "--port"}, "--port needs a value");
}

TEST_F(FlagParserTest, IntOutOfRangeIsAnError) {
  ExpectError({"--port", "0"}, "--port must be between 1 and 65535, got 0");
  ExpectError({"--port", "65536"}, "between 1 and 65535");
  ExpectError({"--port", "-5"}, "between 1 and 65535");
  EXPECT_EQ(port_, -1);  // unchanged by a refused value
}

TEST_F(FlagParserTest, MalformedIntIsAnError) {
  ExpectError({"--port", "80x"}, "--port expects an integer, got '80x'");
  ExpectError({"--port", ""}, "expects an integer");
  ExpectError({"--port", "1.5"}, "expects an integer");
  ExpectError({"--port", "99999999999999999999999"}, "expects an integer");
}

TEST_F(FlagParserTest, NegativeDoubleIsRejected) {
  ExpectError({"--num-cpus", "-1"}, "--num-cpus cannot be negative");
  EXPECT_DOUBLE_EQ(cpus_, -1);
}

TEST_F(FlagParserTest, NonFiniteOrMalformedDoubleIsRejected) {
  ExpectError({"--num-cpus", "nan"}, "--num-cpus expects a number");
  ExpectError({"--num-cpus", "inf"}, "expects a number");
  ExpectError({"--num-cpus", "1e999"}, "expects a number");
  ExpectError({"--num-cpus", "2x"}, "expects a number");
  ExpectError({"--num-cpus="}, "expects a number");
}

TEST_F(FlagParserTest, LeadingSpacesAreNotNumbers) {
  ExpectError({"--num-cpus", " 2"}, "expects a number");
  ExpectError({"--port", " 80"}, "expects an integer");
}

TEST_F(FlagParserTest, ErrorsQuoteLongValuesCutShort) {
  const std::string huge(100'000, '7');
  Status s = Parse({"--num-cpus", huge + "x"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--num-cpus expects a number, got '7777"), std::string::npos) << s;
  EXPECT_LT(s.message().size(), 300u) << "the message quotes all of a 100 kB value";
  s = Parse({huge});
  ASSERT_FALSE(s.ok());
  EXPECT_LT(s.message().size(), 300u);
  s = Parse({"--" + huge});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("unknown flag --777"), std::string::npos) << s;
  EXPECT_LT(s.message().size(), 300u);
}

TEST_F(FlagParserTest, ArgumentsAfterDoubleDashArePositional) {
  std::vector<std::string> positional;
  ASSERT_TRUE(Parse({"--head", "--", "--port", "x"}, &positional).ok());
  EXPECT_TRUE(head_);
  EXPECT_EQ(positional, (std::vector<std::string>{"--port", "x"}));
  EXPECT_EQ(port_, -1);
  EXPECT_FALSE(parser_.WasSet("port"));
}

TEST_F(FlagParserTest, BareWordsArePositionalWhenAccepted) {
  std::vector<std::string> positional;
  ASSERT_TRUE(Parse({"a", "--head", "-x", "b"}, &positional).ok());
  EXPECT_EQ(positional, (std::vector<std::string>{"a", "-x", "b"}));
}

TEST_F(FlagParserTest, PositionalIsAnErrorWhenNotAccepted) {
  ExpectError({"stray"}, "unexpected argument 'stray'");
  ExpectError({"--", "after"}, "unexpected argument 'after'");
}

TEST_F(FlagParserTest, WasSetTracksOnlyGivenFlags) {
  ASSERT_TRUE(Parse({"--port", "6380", "--head"}).ok());
  EXPECT_TRUE(parser_.WasSet("port"));
  EXPECT_TRUE(parser_.WasSet("head"));
  EXPECT_FALSE(parser_.WasSet("address"));
  EXPECT_FALSE(parser_.WasSet("num-cpus"));
  EXPECT_FALSE(parser_.WasSet("no-such-flag"));
}

TEST_F(FlagParserTest, LastValueWins) {
  ASSERT_TRUE(Parse({"--port", "1", "--port=2"}).ok());
  EXPECT_EQ(port_, 2);
}

TEST_F(FlagParserTest, UsageListsFlagsInOrderWithHelp) {
  std::string usage = parser_.Usage();
  size_t a = usage.find("--address VALUE");
  size_t p = usage.find("--port VALUE");
  size_t h = usage.find("--head ");
  ASSERT_NE(a, std::string::npos) << usage;
  ASSERT_NE(p, std::string::npos) << usage;
  ASSERT_NE(h, std::string::npos) << usage;
  EXPECT_LT(a, p);
  EXPECT_LT(p, h);
  EXPECT_EQ(usage.find("--head VALUE"), std::string::npos);
  EXPECT_NE(usage.find("start a head"), std::string::npos);
}

}  // namespace
}  // namespace rayx
