// JSON from msgpack values: what the dashboard's API and `--format json` print.
#include "common/json.h"

#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "rayx/ids.h"

namespace rayx {
namespace {

TEST(Json, EscapesQuotesControlCharactersAndBackslashes) {
  std::string out;
  AppendJsonString(&out, std::string("a\"b\\c\nd\x01\x7f<", 10));
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\nd\\u0001\\u007f<\"");
}

TEST(Json, WireStructsBecomeObjectsWithTheirFieldNames) {
  std::map<std::string, std::vector<double>> value = {
      {"b", {1.5, std::numeric_limits<double>::infinity()}}, {"a", {}}};
  EXPECT_EQ(ToJson(value), "{\"a\":[],\"b\":[1.5,null]}");
  JobId job = JobId::FromRandom();
  EXPECT_EQ(ToJson(job), "\"" + job.Hex() + "\"") << "ids travel as their hex";
  EXPECT_EQ(ToJson(std::map<int, bool>{{-3, true}}), "{\"-3\":true}")
      << "a key that is not a string becomes its text";
}

TEST(Json, BinIsHexAndDeepNestingIsCut) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  packer.pack_bin(2);
  packer.pack_bin_body("\x01\xff", 2);
  auto handle = msgpack::unpack(buffer.data(), buffer.size());
  EXPECT_EQ(MsgpackToJson(handle.get()), "\"01ff\"");

  std::string nested;
  for (int i = 0; i < 100; ++i) nested += '\x91';  // fixarray of one element
  nested += '\xc0';
  auto deep = msgpack::unpack(nested.data(), nested.size());
  std::string json = MsgpackToJson(deep.get());
  EXPECT_LT(json.size(), 200u);
  EXPECT_NE(json.find("null"), std::string::npos);
}

}  // namespace
}  // namespace rayx
