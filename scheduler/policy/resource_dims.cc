// Resource name interning.
#include "policy/resource_dims.h"

#include "rayx/resources.h"

namespace rayx::scheduler::policy {

ResourceDims::ResourceDims() {
  Intern(rayx::kCpu);
  Intern(rayx::kGpu);
  Intern(rayx::kMemory);
}

uint32_t ResourceDims::Intern(const std::string& name) {
  auto [it, added] = index_.try_emplace(name, static_cast<uint32_t>(names_.size()));
  if (added) names_.push_back(name);
  return it->second;
}

std::optional<uint32_t> ResourceDims::Find(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

}  // namespace rayx::scheduler::policy
