#include "common/text.h"

#include <gtest/gtest.h>

#include <string>

namespace rayx {
namespace text_test {  // this file's own (unit tests compile in batches)

TEST(Utf8Prefix, KeepsShortTextAndCutsLongAsciiAtTheLimit) {
  EXPECT_EQ(Utf8Prefix("stopped", 200), "stopped");
  EXPECT_EQ(Utf8Prefix("abcdef", 4), "abcd");
  EXPECT_EQ(Utf8Prefix("", 0), "");
}

TEST(Utf8Prefix, NeverEndsInsideACharacter) {
  const std::string text = "ab\xe8\xae\xad\xe7\xbb\x83";  // "ab" + two 3-byte characters
  EXPECT_EQ(Utf8Prefix(text, 2), "ab");
  EXPECT_EQ(Utf8Prefix(text, 3), "ab");
  EXPECT_EQ(Utf8Prefix(text, 4), "ab");
  EXPECT_EQ(Utf8Prefix(text, 5), "ab\xe8\xae\xad");
  EXPECT_EQ(Utf8Prefix(text, 7), "ab\xe8\xae\xad");
  EXPECT_EQ(Utf8Prefix("\xf0\x9f\x98\x80!", 3), "");  // a 4-byte emoji does not fit
  EXPECT_EQ(Utf8Prefix("\xf0\x9f\x98\x80!", 4), "\xf0\x9f\x98\x80");
}

TEST(Utf8Prefix, InvalidTextIsStillBounded) {
  const std::string junk(10, '\x80');  // continuation bytes only
  EXPECT_EQ(Utf8Prefix(junk, 8).size(), 5u);
}

}  // namespace
}  // namespace rayx
