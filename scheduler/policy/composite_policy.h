// The single-request front door: picks the policy a request's strategy names.
#pragma once

#include "policy/hybrid_policy.h"
#include "policy/node_affinity_policy.h"
#include "policy/scheduling_policy.h"
#include "policy/spread_policy.h"

namespace rayx::scheduler::policy {

// Dispatches DefaultStrategy to HybridPolicy, SpreadStrategy to SpreadPolicy and
// NodeAffinityStrategy to NodeAffinityPolicy (whose soft fallback is the same
// hybrid policy); every one of them applies the request's label selector.
// Owns the policies and the only policy state (SPREAD's round-robin cursor), so
// the head keeps one CompositePolicy for its lifetime. Not thread-safe.
class CompositePolicy : public SchedulingPolicy {
 public:
  CompositePolicy() : CompositePolicy(HybridPolicy::Options{}) {}
  explicit CompositePolicy(HybridPolicy::Options hybrid) : hybrid_(hybrid), affinity_(hybrid_) {}
  CompositePolicy(const CompositePolicy&) = delete;
  CompositePolicy& operator=(const CompositePolicy&) = delete;

  SchedulingDecision Schedule(const ClusterResourceView& view,
                              const SchedulingRequest& request) override;

 private:
  HybridPolicy hybrid_;
  SpreadPolicy spread_;
  NodeAffinityPolicy affinity_;
};

}  // namespace rayx::scheduler::policy
