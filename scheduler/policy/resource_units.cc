// Fixed-point resource amounts.
#include "policy/resource_units.h"

#include <cmath>
#include <limits>

namespace rayx::scheduler::policy {

std::optional<int64_t> ToUnits(double amount) {
  if (!std::isfinite(amount) || amount < 0 || amount > kMaxAmount) return std::nullopt;
  return static_cast<int64_t>(std::llround(amount * static_cast<double>(kUnitsPerWhole)));
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) {
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return sum;
}

}  // namespace rayx::scheduler::policy
