// Typed ids: their form, parsing, wire encoding, and the kinds kept apart by the type system.
#include "rayx/ids.h"

#include <gtest/gtest.h>

#include <map>
#include <type_traits>

#include "protocol/codec.h"

namespace rayx {
namespace ids_test {  // this file's own (unit tests compile in batches)

TEST(UniqueId, RandomIdsAre32LowercaseHexDigitsAndDistinct) {
  for (const LeaseId& id : {LeaseId::FromSecureRandom(), LeaseId::FromRandom()}) {
    EXPECT_EQ(id.Hex().size(), 32u);
    EXPECT_TRUE(detail::IsLowerHex(id.Hex())) << id.Hex();
  }
  EXPECT_NE(LeaseId::FromSecureRandom(), LeaseId::FromSecureRandom());
}

TEST(UniqueId, FromHexTakesOnlyItsOwnForm) {
  LeaseId id = LeaseId::FromSecureRandom();
  auto parsed = LeaseId::FromHex(id.Hex());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, id);
  EXPECT_FALSE(LeaseId::FromHex("x").ok());
  EXPECT_FALSE(LeaseId::FromHex(std::string(32, 'A')).ok());
  EXPECT_TRUE(LeaseId().IsNil());
}

TEST(UniqueId, KindsAreDistinctTypes) {
  static_assert(!std::is_convertible_v<NodeId, LeaseId>);
  static_assert(!std::is_convertible_v<LeaseId, NodeId>);
  static_assert(!std::is_convertible_v<JobId, LeaseId>);
  static_assert(!std::is_convertible_v<LeaseId, JobId>);
  static_assert(!std::is_convertible_v<PlacementGroupId, LeaseId>);
  static_assert(!std::is_convertible_v<std::string, PlacementGroupId>);
  static_assert(!std::is_convertible_v<PlacementGroupId, std::string>);
  static_assert(!std::is_convertible_v<ActorId, LeaseId>);
  static_assert(!std::is_convertible_v<std::string, ActorId>);
  static_assert(!std::is_convertible_v<ActorId, std::string>);
  static_assert(!std::is_convertible_v<ObjectId, ActorId>);
  static_assert(!std::is_convertible_v<std::string, ObjectId>);
  static_assert(!std::is_convertible_v<ObjectId, std::string>);
  // Nor is any kind a string, either way.
  static_assert(!std::is_convertible_v<std::string, LeaseId>);
  static_assert(!std::is_convertible_v<const char*, LeaseId>);
  static_assert(!std::is_convertible_v<LeaseId, std::string>);
}

// On the wire an id is the str its hex would be as a std::string field: the
// typed fields did not change the protocol.
TEST(UniqueId, PacksAsAPlainStr) {
  LeaseId id = LeaseId::FromSecureRandom();
  EXPECT_EQ(protocol::Encode(id), protocol::Encode(id.Hex()));
  EXPECT_EQ(protocol::Encode(LeaseId()), protocol::Encode(std::string()));
  std::map<std::string, LeaseId> typed{{"lease_id", id}};
  std::map<std::string, std::string> plain{{"lease_id", id.Hex()}};
  EXPECT_EQ(protocol::Encode(typed), protocol::Encode(plain));
  auto back = protocol::Decode<LeaseId>(protocol::Encode(id.Hex()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, id);
}

// Whatever str a peer sends is read as it is: a made-up id names nothing
// (a lookup answers NotFound); it is not malformed input.
TEST(UniqueId, ReadsAnyStrUncheckedAndNothingElse) {
  for (const std::string& text :
       {std::string("x"), std::string("../../etc/passwd"), std::string(), std::string(100, 'A')}) {
    auto id = protocol::Decode<LeaseId>(protocol::Encode(text));
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(id->Hex(), text);
  }
  EXPECT_FALSE(protocol::Decode<LeaseId>(protocol::Encode(42)).ok());
  EXPECT_FALSE(protocol::Decode<LeaseId>(protocol::Encode(std::map<int, int>{})).ok());
}

// NodeId was packed as a one-element array ([hex]) before; head state files
// written then still load. Other kinds were plain strings and take no array.
TEST(UniqueId, NodeIdAlsoReadsTheLegacyOneElementArray) {
  NodeId id = NodeId::FromRandom();
  auto legacy = protocol::Decode<NodeId>(protocol::Encode(std::vector<std::string>{id.Hex()}));
  ASSERT_TRUE(legacy.ok()) << legacy.status();
  EXPECT_EQ(*legacy, id);
  EXPECT_EQ(protocol::Encode(id), protocol::Encode(id.Hex())) << "written as str from now on";
  EXPECT_FALSE(
      protocol::Decode<LeaseId>(protocol::Encode(std::vector<std::string>{id.Hex()})).ok());
  EXPECT_FALSE(protocol::Decode<NodeId>(protocol::Encode(std::vector<std::string>{"a", "b"})).ok());
}

// Each kind has its own length: FromHex takes only that many digits.
TEST(UniqueId, FromHexTakesEachKindsLength) {
  EXPECT_EQ(JobId::FromSecureRandom().Hex().size(), 16u);
  EXPECT_TRUE(JobId::FromHex("0123456789abcdef").ok());
  EXPECT_FALSE(JobId::FromHex("0123456789abcdef0123456789abcdef").ok());
  EXPECT_FALSE(LeaseId::FromHex("0123456789abcdef").ok());
  EXPECT_NE(JobId::FromHex("0123").status().message().find("expected 16 lowercase hex digits"),
            std::string::npos);
}

TEST(UniqueId, ShortIsTheFirstEightDigits) {
  auto id = LeaseId::FromHex("0123456789abcdef0123456789abcdef");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->Short(), "01234567");
}

}  // namespace
}  // namespace rayx
