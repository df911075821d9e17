// Resource names interned as small dense indexes ("dimensions").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace rayx::scheduler::policy {

// Maps each resource name a node ever declared to a dimension index, so that a
// node's resources are a plain vector and a fit check is a loop over integers.
// CPU, GPU and memory are always dimensions 0, 1 and 2. Names are never
// forgotten (a cluster sees few distinct names). Not thread-safe.
class ResourceDims {
 public:
  static constexpr uint32_t kCpu = 0;
  static constexpr uint32_t kGpu = 1;
  static constexpr uint32_t kMemory = 2;

  ResourceDims();

  // The dimension of `name`, adding it when new.
  uint32_t Intern(const std::string& name);
  // The dimension of `name`, or nullopt when no node ever declared it.
  std::optional<uint32_t> Find(const std::string& name) const;
  const std::string& Name(uint32_t dim) const { return names_[dim]; }
  size_t size() const { return names_.size(); }

 private:
  std::unordered_map<std::string, uint32_t> index_;
  std::vector<std::string> names_;
};

}  // namespace rayx::scheduler::policy
