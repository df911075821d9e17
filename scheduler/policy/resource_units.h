// Fixed-point resource amounts, so taking and giving back shares is exact.
#pragma once

#include <cstdint>
#include <optional>

#include "rayx/resources.h"

namespace rayx::scheduler::policy {

// Amounts are kept as integers in units of 1/10,000 (Ray's FixedPoint does the
// same): taking 0.1 GPU ten times and giving it back leaves exactly one device,
// and sums never drift. Amounts finer than 0.0001 are rounded to the nearest unit.
inline constexpr int64_t kUnitsPerWhole = 10'000;

// The largest amount of one resource accepted: 1e14 (100 TB of memory in
// bytes), so that eight such amounts still add up inside an int64. The same
// bound ParseResourcesJson applies to what users type.
inline constexpr double kMaxAmount = rayx::kMaxResourceAmount;

// `amount` in units, or nullopt when it is negative, not finite or above kMaxAmount.
std::optional<int64_t> ToUnits(double amount);

// Units back to an amount.
inline double FromUnits(int64_t units) {
  return static_cast<double>(units) / static_cast<double>(kUnitsPerWhole);
}

// a + b, stopping at the int64 limits instead of overflowing (cluster-wide sums
// of memory can exceed them).
int64_t SaturatingAdd(int64_t a, int64_t b);

}  // namespace rayx::scheduler::policy
