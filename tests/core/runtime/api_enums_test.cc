// The public API's enums and the wire's: the same numbers, one table of names.
#include "runtime/api_enums.h"

#include <gtest/gtest.h>

#include <string>

namespace rayx::detail {
namespace api_enums_test {  // this file's own (unit tests compile in batches)

TEST(ApiEnums, EveryPlacementStrategyCrossesTheWireAsItselfUnderOneName) {
  for (auto s : {PlacementStrategy::PACK, PlacementStrategy::SPREAD,
                 PlacementStrategy::STRICT_PACK, PlacementStrategy::STRICT_SPREAD}) {
    EXPECT_EQ(FromWire(ToWire(s)), s);
    auto parsed = protocol::Parse<protocol::PlacementStrategy>(protocol::Name(ToWire(s)));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(FromWire(*parsed), s);
  }
  EXPECT_EQ(protocol::Name(ToWire(PlacementStrategy::STRICT_SPREAD)), "STRICT_SPREAD");
}

TEST(ApiEnums, PlacementGroupStatesAreNamedAsTheWireNamesThem) {
  EXPECT_EQ(PlacementGroupStateName(PlacementGroupState::PENDING), "PENDING");
  EXPECT_EQ(PlacementGroupStateName(PlacementGroupState::CREATED), "CREATED");
  EXPECT_EQ(PlacementGroupStateName(PlacementGroupState::INFEASIBLE), "INFEASIBLE");
  EXPECT_EQ(PlacementGroupStateName(PlacementGroupState::REMOVED), "REMOVED");
  for (auto wire : {protocol::PlacementGroupState::kPending, protocol::PlacementGroupState::kCreated,
                    protocol::PlacementGroupState::kInfeasible,
                    protocol::PlacementGroupState::kRemoved}) {
    EXPECT_EQ(PlacementGroupStateName(FromWire(wire)), std::string(protocol::Name(wire)));
    EXPECT_EQ(ToWire(FromWire(wire)), wire);
  }
  // A value outside the table (a newer peer's) has a name that says so.
  EXPECT_EQ(PlacementGroupStateName(static_cast<PlacementGroupState>(9)), "?");
}

TEST(ApiEnums, SchedulingStrategyKindsAreTheLeaseStrategies) {
  EXPECT_EQ(ToWire(StrategyKind::kDefault), protocol::LeaseStrategy::kDefault);
  EXPECT_EQ(ToWire(StrategyKind::kSpread), protocol::LeaseStrategy::kSpread);
  EXPECT_EQ(ToWire(StrategyKind::kNodeAffinity), protocol::LeaseStrategy::kNodeAffinity);
  auto empty = protocol::Parse<protocol::LeaseStrategy>("");  // Python's default
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(FromWire(*empty), StrategyKind::kDefault);
  auto bad = protocol::Parse<protocol::LeaseStrategy>("EVERYWHERE");
  EXPECT_EQ(bad.status().message(),
            "unknown scheduling strategy 'EVERYWHERE': use DEFAULT, SPREAD or NODE_AFFINITY");
}

}  // namespace api_enums_test
}  // namespace rayx::detail
