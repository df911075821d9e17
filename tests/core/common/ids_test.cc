// Typed ids: their form, parsing, and the kinds kept apart by the type system.
#include "rayx/ids.h"

#include <gtest/gtest.h>

#include <type_traits>

namespace rayx {
namespace {

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
}

}  // namespace
}  // namespace rayx
