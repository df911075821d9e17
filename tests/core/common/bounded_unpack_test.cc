// UnpackBounded: one msgpack value from hostile bytes, within limits.
#include "rayx/detail/bounded_unpack.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace rayx::detail {
namespace bounded_unpack_test {  // this file's own (unit tests compile in batches)

std::string Pack(const auto& value) {
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, value);
  return std::string(buffer.data(), buffer.size());
}

// `depth` one-element arrays around a nil.
std::string Nested(size_t depth) {
  return std::string(depth, static_cast<char>(0x91)) + static_cast<char>(0xc0);
}

// Expects UnpackBounded to refuse `bytes` with a message containing `what`.
void ExpectRefused(std::string_view bytes, const std::string& what,
                   const UnpackLimits& limits = {}) {
  try {
    UnpackBounded(bytes, limits);
    ADD_FAILURE() << "accepted " << bytes.size() << " bytes; expected: " << what;
  } catch (const UnpackError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(UnpackBounded, ReadsAValueAsMsgpackUnpackDoes) {
  std::vector<std::string> words = {"a", "bc", ""};
  msgpack::object_handle h = UnpackBounded(Pack(words));
  EXPECT_EQ(h.get().as<std::vector<std::string>>(), words);
}

TEST(UnpackBounded, ValuesOwnTheirBytes) {
  std::string bytes = Pack(std::string("copied"));
  msgpack::object_handle h = UnpackBounded(bytes);
  bytes.assign(bytes.size(), 'x');
  EXPECT_EQ(h.get().as<std::string>(), "copied");
}

TEST(UnpackBounded, AcceptsNestingUpToTheDepthBound) {
  msgpack::object_handle h = UnpackBounded(Nested(kMaxValueDepth));
  EXPECT_EQ(h.get().type, msgpack::type::ARRAY);
}

TEST(UnpackBounded, RefusesNestingPastTheDepthBound) {
  ExpectRefused(Nested(kMaxValueDepth + 1), "nested deeper than 128 arrays and maps");
  UnpackLimits shallow;
  shallow.max_depth = 2;
  EXPECT_NO_THROW(UnpackBounded(Nested(2), shallow));
  ExpectRefused(Nested(3), "nested deeper than 2", shallow);
  // Maps count as arrays do: {1: [nil]} is two deep.
  EXPECT_NO_THROW(UnpackBounded(std::string("\x81\x01\x91\xc0", 4), shallow));
  ExpectRefused(std::string("\x81\x01\x91\x91\xc0", 5), "nested deeper", shallow);
}

// The input that killed a worker: a million nested arrays. Refused at the
// bound, without walking (or recursing through) the rest.
TEST(UnpackBounded, RefusesAMillionNestedArraysQuickly) {
  const std::string bytes = Nested(1'000'000);
  auto start = std::chrono::steady_clock::now();
  ExpectRefused(bytes, "nested deeper");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST(UnpackBounded, RefusesCountsTheBytesCannotHold) {
  // An array32 header declaring 2^31 - 1 elements, then one.
  ExpectRefused(std::string("\xdd\x7f\xff\xff\xff\xc0", 6),
                "an array of 2147483647 elements in a msgpack value of 6 bytes: more than "
                "its bytes can hold");
  ExpectRefused(std::string("\xdf\x00\x01\x00\x00\xc0", 6),
                "a map of 65536 entries in a msgpack value of 6 bytes");
  // Nested headers that each fit alone but not together: 100,000 elements
  // each, ten deep, in a 30-byte value (msgpack-c would allocate 2.4 MB per
  // header before noticing the value is short).
  std::string nested;
  for (int i = 0; i < 10; ++i) nested += std::string("\xdc\x86\xa0", 3);
  ExpectRefused(nested, "more than its bytes can hold");
}

TEST(UnpackBounded, AcceptsLargeValuesTheBytesDoHold) {
  std::vector<double> big(100'000, 1.5);
  msgpack::object_handle h = UnpackBounded(Pack(big));
  EXPECT_EQ(h.get().via.array.size, big.size());
  std::vector<std::vector<int>> empties(50'000);  // one byte per element
  EXPECT_EQ(UnpackBounded(Pack(empties)).get().via.array.size, empties.size());
}

TEST(UnpackBounded, AppliesPerContainerLimitsNamingThem) {
  UnpackLimits tight;
  tight.max_array = 2;
  tight.max_map = 1;
  tight.max_str = 3;
  tight.max_bin = 4;
  ExpectRefused(Pack(std::vector<int>{1, 2, 3}), "an array of 3 elements is over the limit of 2",
                tight);
  ExpectRefused(Pack(std::map<int, int>{{1, 1}, {2, 2}}),
                "a map of 2 entries is over the limit of 1", tight);
  ExpectRefused(Pack(std::string("abcd")), "a str of 4 bytes is over the limit of 3", tight);
  ExpectRefused(std::string("\xc4\x05", 2) + "12345", "a bin of 5 bytes is over the limit of 4",
                tight);
}

TEST(UnpackBounded, RefusesExtValuesOnlyWhenAskedTo) {
  const std::string fixext1("\xd4\x01\x02", 3);
  EXPECT_EQ(UnpackBounded(fixext1).get().type, msgpack::type::EXT);
  UnpackLimits no_ext;
  no_ext.max_ext = 0;
  ExpectRefused(fixext1, "ext values are not accepted", no_ext);
}

TEST(UnpackBounded, RefusesEveryTruncation) {
  const std::string valid = Pack(std::map<std::string, std::vector<int>>{{"k", {1, 300, 70000}}});
  for (size_t n = 1; n < valid.size(); ++n) {
    SCOPED_TRACE(n);
    // Cut short, or cut so short that its headers already claim more.
    try {
      UnpackBounded(std::string_view(valid).substr(0, n));
      ADD_FAILURE() << "accepted";
    } catch (const UnpackError& e) {
      std::string what = e.what();
      EXPECT_TRUE(what.find("truncated msgpack value") != std::string::npos ||
                  what.find("more than its bytes can hold") != std::string::npos)
          << what;
    }
  }
  ExpectRefused(std::string_view(valid).substr(0, valid.size() - 1),
                "truncated msgpack value: its " + std::to_string(valid.size() - 1) +
                    " bytes end inside it");
  // A str header promising more than follows.
  ExpectRefused(std::string("\xdb\xff\xff\xff\xff" "a", 6), "truncated");
}

TEST(UnpackBounded, RefusesEmptyInputTrailingBytesAndReservedBytes) {
  ExpectRefused("", "empty input");
  ExpectRefused(Pack(1) + "xy", "2 unexpected bytes after the msgpack value");
  ExpectRefused(std::string("\xc1", 1), "malformed msgpack at byte 0 of 1");
}

}  // namespace
}  // namespace rayx::detail
