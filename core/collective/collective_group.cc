// Helpers shared by the collective backends: names, spec checks, slices.
#include "collective/collective_group.h"

#include <cstring>

namespace rayx::collective {

size_t DataTypeSize(DataType type) {
  switch (type) {
    case DataType::kInt32: return 4;
    case DataType::kInt64: return 8;
    case DataType::kFloat: return 4;
    case DataType::kDouble: return 8;
    case DataType::kHalf: return 2;
    case DataType::kBFloat16: return 2;
  }
  return 1;
}

const char* DataTypeName(DataType type) {
  switch (type) {
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kFloat: return "float";
    case DataType::kDouble: return "double";
    case DataType::kHalf: return "half";
    case DataType::kBFloat16: return "bfloat16";
  }
  return "unknown type";
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kProduct: return "product";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
  }
  return "unknown op";
}

const char* BackendName(Backend backend) {
  return backend == Backend::kGloo ? "gloo" : "nccl";
}

std::string DescribeRank(const GroupSpec& spec, int rank) {
  std::string out = "rank " + std::to_string(rank);
  if (rank >= 0 && static_cast<size_t>(rank) < spec.members.size()) {
    const MemberInfo& m = spec.members[rank];
    std::string extra;
    if (!m.actor.empty()) extra = "actor " + m.actor;
    if (!m.node.empty()) extra += (extra.empty() ? "" : ", ") + ("node " + m.node);
    if (!extra.empty()) out += " (" + extra + ")";
  }
  return out;
}

std::string DescribeOp(const GroupSpec& spec, const char* op) {
  return std::string("collective group '") + spec.options.name + "' " + op + " on rank " +
         std::to_string(spec.rank) + " of " + std::to_string(spec.world_size);
}

void CheckPeer(const GroupSpec& spec, const char* op, int peer, const char* what) {
  if (peer < 0 || peer >= spec.world_size || (peer == spec.rank && std::strcmp(what, "root"))) {
    throw CollectiveError(DescribeOp(spec, op) + ": " + what + " " + std::to_string(peer) +
                          " is not another rank of this group (world size " +
                          std::to_string(spec.world_size) + ")");
  }
}

void ValidateSpec(const GroupSpec& spec) {
  const std::string where = "InitCollectiveGroup('" + spec.options.name + "')";
  if (spec.options.name.empty() || spec.options.name.find('/') != std::string::npos) {
    throw CollectiveError(where + ": invalid argument: a group name is non-empty and has no '/'");
  }
  if (spec.world_size <= 0) {
    throw CollectiveError(where + ": invalid argument: world_size must be positive, got " +
                          std::to_string(spec.world_size));
  }
  if (spec.rank < 0 || spec.rank >= spec.world_size) {
    throw CollectiveError(where + ": invalid argument: rank " + std::to_string(spec.rank) +
                          " is out of range [0, " + std::to_string(spec.world_size) + ")");
  }
  if (spec.options.timeout_ms <= 0) {
    throw CollectiveError(where + ": invalid argument: timeout_ms must be positive");
  }
  if (spec.connect_timeout_ms < 0) {
    throw CollectiveError(where + ": invalid argument: connect_timeout_ms must not be negative");
  }
  if (!spec.members.empty() && spec.members.size() != static_cast<size_t>(spec.world_size)) {
    throw CollectiveError(where + ": invalid argument: members lists " +
                          std::to_string(spec.members.size()) + " ranks, world_size is " +
                          std::to_string(spec.world_size));
  }
}

std::pair<size_t, size_t> SliceOf(size_t count, int n, int i) {
  const size_t base = count / n;
  const size_t extra = count % n;
  const size_t index = static_cast<size_t>(i);
  const size_t offset = index * base + std::min(index, extra);
  return {offset, base + (index < extra ? 1 : 0)};
}

}  // namespace rayx::collective
