// ParseResourcesJson, ParseLabels, FormatAmount and FormatBytes.
#include "rayx/resources.h"

#include <gtest/gtest.h>

#include <string>

namespace rayx {
namespace resources_test {  // this file's own (unit tests compile in batches)

// Expects `json` to be refused with InvalidArgument whose message contains `what`.
void ExpectRejected(const std::string& json, const std::string& what) {
  auto r = ParseResourcesJson(json);
  ASSERT_FALSE(r.ok()) << "accepted: " << json;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << json;
  EXPECT_NE(r.status().message().find(what), std::string::npos)
      << "for " << json << ": " << r.status().message();
}

void ExpectBadLabels(const std::string& text, const std::string& what) {
  auto r = ParseLabels(text);
  ASSERT_FALSE(r.ok()) << "accepted: " << text;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(what), std::string::npos)
      << "for " << text << ": " << r.status().message();
}

TEST(ParseResourcesJson, AcceptsIntegerAndFractionalAmounts) {
  auto r = ParseResourcesJson(R"({"tpu": 4, "ssd": 1.5})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (ResourceMap{{"tpu", 4}, {"ssd", 1.5}}));
}

TEST(ParseResourcesJson, AcceptsEmptyObject) {
  auto r = ParseResourcesJson("{}");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->empty());
}

TEST(ParseResourcesJson, AcceptsWhitespaceEverywhere) {
  auto r = ParseResourcesJson(" \n\t{ \"tpu\" :\t4 ,\n\"x\":0 } \n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (ResourceMap{{"tpu", 4}, {"x", 0}}));
  auto empty = ParseResourcesJson("  {  }  ");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
}

TEST(ParseResourcesJson, AcceptsExponentNotation) {
  auto r = ParseResourcesJson(R"({"bytes": 1.5e3})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->at("bytes"), 1500);
}

TEST(ParseResourcesJson, RejectsMissingOpeningBrace) {
  ExpectRejected(R"("tpu": 4})", "expected '{'");
}

TEST(ParseResourcesJson, RejectsMissingClosingBrace) {
  ExpectRejected(R"({"tpu": 4)", "expected ',' or '}'");
}

TEST(ParseResourcesJson, RejectsEmptyInput) { ExpectRejected("", "expected '{'"); }

TEST(ParseResourcesJson, RejectsTrailingGarbage) {
  ExpectRejected(R"({"tpu": 4} x)", "unexpected text after '}'");
  ExpectRejected(R"({}{})", "unexpected text after '}'");
}

TEST(ParseResourcesJson, RejectsTrailingComma) {
  ExpectRejected(R"({"tpu": 4,})", "quoted resource name");
}

TEST(ParseResourcesJson, RejectsUnquotedName) {
  ExpectRejected(R"({tpu: 4})", "quoted resource name");
}

TEST(ParseResourcesJson, RejectsMissingColon) { ExpectRejected(R"({"tpu" 4})", "':'"); }

TEST(ParseResourcesJson, RejectsUnterminatedName) {
  ExpectRejected(R"({"tpu)", "unterminated string");
}

TEST(ParseResourcesJson, RejectsEmptyName) { ExpectRejected(R"({"": 1})", "empty resource name"); }

TEST(ParseResourcesJson, RejectsEscapesInName) {
  ExpectRejected(R"({"t\"pu": 1})", "escapes");
}

TEST(ParseResourcesJson, RejectsNonNumberAmount) {
  ExpectRejected(R"({"tpu": "4"})", "\"tpu\" must be a number");
  ExpectRejected(R"({"tpu": true})", "\"tpu\" must be a number");
  ExpectRejected(R"({"tpu": })", "\"tpu\" must be a number");
  ExpectRejected(R"({"tpu": 1-2})", "\"tpu\" is not a number");
  ExpectRejected(R"({"tpu": 0x10})", "expected ',' or '}'");
}

TEST(ParseResourcesJson, RejectsNegativeAmount) {
  ExpectRejected(R"({"tpu": -1})", "\"tpu\" is negative");
  ExpectRejected(R"({"tpu": -0.5})", "negative");
}

TEST(ParseResourcesJson, RejectsNanAndInfinity) {
  ExpectRejected(R"({"tpu": NaN})", "\"tpu\"");
  ExpectRejected(R"({"tpu": nan})", "\"tpu\"");
  ExpectRejected(R"({"tpu": inf})", "\"tpu\"");
  ExpectRejected(R"({"tpu": Infinity})", "\"tpu\"");
  ExpectRejected(R"({"tpu": 1e999})", "\"tpu\" is not a number");
  ExpectRejected(R"({"tpu": -1e999})", "\"tpu\" is not a number");
}

TEST(ParseResourcesJson, RejectsDuplicateName) {
  ExpectRejected(R"({"tpu": 1, "tpu": 2})", "\"tpu\" is given twice");
}

TEST(ParseResourcesJson, RejectsReservedNames) {
  ExpectRejected(R"({"CPU": 1})", "\"CPU\" cannot be set through --resources");
  ExpectRejected(R"({"tpu": 1, "GPU": 1})", "\"GPU\"");
  ExpectRejected(R"({"memory": 100})", "--memory");
}

TEST(ParseResourcesJson, ErrorQuotesInputAndOffset) {
  auto r = ParseResourcesJson(R"({"a": -3})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(R"('{"a": -3}')"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("at offset 8"), std::string::npos)
      << r.status().message();
}

TEST(ParseResourcesJson, RejectsAmountsOverTheSchedulersLimit) {
  ExpectRejected(R"({"tpu": 1e15})", "\"tpu\" is 1e15, over the limit of 100000000000000");
  auto at_limit = ParseResourcesJson(R"({"bytes": 1e14})");
  ASSERT_TRUE(at_limit.ok()) << at_limit.status();
  EXPECT_DOUBLE_EQ(at_limit->at("bytes"), kMaxResourceAmount);
}

TEST(ParseResourcesJson, RejectsTextNamesAndCountsOverTheBounds) {
  ExpectRejected("{" + std::string(kMaxResourceTextBytes, ' ') + "}", "longer than 65536 bytes");
  ExpectRejected("{\"" + std::string(kMaxResourceNameBytes + 1, 'n') + "\": 1}",
                 "a resource name is longer than 256 bytes");
  std::string many = "{";
  for (size_t i = 0; i <= kMaxResourceEntries; ++i) {
    many += (i ? ",\"r" : "\"r") + std::to_string(i) + "\":1";
  }
  ExpectRejected(many + "}", "more than 1024 resources");
  ExpectRejected(R"({"tpu": )" + std::string(100, '1') + "}", "\"tpu\" is not a number");
}

TEST(ParseResourcesJson, ErrorsQuoteLongInputCutShort) {
  auto r = ParseResourcesJson("{\"tpu\": -1" + std::string(10'000, ' ') + "}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("...' (10011 bytes)"), std::string::npos) << r.status();
  EXPECT_LT(r.status().message().size(), 500u);
}

TEST(ParseLabels, RejectsTextKeysValuesAndCountsOverTheBounds) {
  ExpectBadLabels("a=" + std::string(kMaxResourceTextBytes, 'v'), "longer than 65536 bytes");
  ExpectBadLabels("a=" + std::string(kMaxResourceNameBytes + 1, 'v'),
                  "a key or value is longer than 256 bytes");
  std::string many;
  for (size_t i = 0; i <= kMaxResourceEntries; ++i) {
    many += (i ? ",k" : "k") + std::to_string(i) + "=v";
  }
  ExpectBadLabels(many, "more than 1024 labels");
}

TEST(ParseLabels, ParsesPairs) {
  auto r = ParseLabels("accelerator=H100,zone=us-east/1a,v=1.2_x");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (LabelMap{{"accelerator", "H100"}, {"zone", "us-east/1a"}, {"v", "1.2_x"}}));
}

TEST(ParseLabels, EmptyTextGivesNoLabels) {
  auto r = ParseLabels("");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->empty());
}

TEST(ParseLabels, RejectsMissingEquals) { ExpectBadLabels("zone", "missing '='"); }

TEST(ParseLabels, RejectsEmptyKeyOrValue) {
  ExpectBadLabels("=a", "empty key or value");
  ExpectBadLabels("a=", "empty key or value");
}

TEST(ParseLabels, RejectsBadCharacters) {
  ExpectBadLabels("zone=a b", "only letters");
  ExpectBadLabels("k=v=w", "only letters");
  ExpectBadLabels("k\"=v", "only letters");
}

TEST(ParseLabels, RejectsDuplicateKey) { ExpectBadLabels("a=1,a=2", "key given twice"); }

TEST(ParseLabels, RejectsEmptyPairs) {
  ExpectBadLabels("a=1,", "trailing ','");
  ExpectBadLabels("a=1,,b=2", "missing '='");
  ExpectBadLabels(",a=1", "missing '='");
}

TEST(ParseLabels, ErrorNamesTheBadPair) {
  auto r = ParseLabels("good=1,bad pair");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'bad pair'"), std::string::npos) << r.status();
}

TEST(FormatAmount, TrimsNeedlessDecimals) {
  EXPECT_EQ(FormatAmount(4), "4");
  EXPECT_EQ(FormatAmount(0), "0");
  EXPECT_EQ(FormatAmount(0.25), "0.25");
  EXPECT_EQ(FormatAmount(1.5), "1.5");
  EXPECT_EQ(FormatAmount(1.0 / 3), "0.3333");
  EXPECT_EQ(FormatAmount(1e20), "1e+20");
}

TEST(FormatBytes, UsesBinaryUnits) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1024), "1.00 KiB");
  EXPECT_EQ(FormatBytes(1.5 * 1024 * 1024), "1.50 MiB");
  EXPECT_EQ(FormatBytes(1.5 * 1024 * 1024 * 1024), "1.50 GiB");
  EXPECT_EQ(FormatBytes(2.0 * 1024 * 1024 * 1024 * 1024), "2.00 TiB");
}

TEST(FormatBytes, StopsAtPebibytes) {
  EXPECT_EQ(FormatBytes(2048.0 * 1024 * 1024 * 1024 * 1024 * 1024), "2048.00 PiB");
}

}  // namespace
}  // namespace rayx
