// HostReduce: element-wise reduction of host buffers for the Gloo backend.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "rayx/collective.h"

namespace rayx::collective {

template <typename T>
void HostReduceTyped(T* acc, const T* in, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      for (size_t i = 0; i < n; ++i) acc[i] += in[i];
      break;
    case ReduceOp::kProduct:
      for (size_t i = 0; i < n; ++i) acc[i] *= in[i];
      break;
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; ++i) acc[i] = std::min(acc[i], in[i]);
      break;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], in[i]);
      break;
  }
}

// acc[i] = acc[i] (op) in[i] for n elements of `type`.
// REQUIRES: type is int32, int64, float or double.
inline void HostReduce(void* acc, const void* in, size_t n, DataType type, ReduceOp op) {
  switch (type) {
    case DataType::kInt32:
      HostReduceTyped(static_cast<int32_t*>(acc), static_cast<const int32_t*>(in), n, op);
      break;
    case DataType::kInt64:
      HostReduceTyped(static_cast<int64_t*>(acc), static_cast<const int64_t*>(in), n, op);
      break;
    case DataType::kFloat:
      HostReduceTyped(static_cast<float*>(acc), static_cast<const float*>(in), n, op);
      break;
    case DataType::kDouble:
      HostReduceTyped(static_cast<double*>(acc), static_cast<const double*>(in), n, op);
      break;
    case DataType::kHalf:
    case DataType::kBFloat16:
      break;
  }
}

}  // namespace rayx::collective
