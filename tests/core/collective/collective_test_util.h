// Helpers for collective tests: N ranks as N threads of this process, each
// bound to its own loopback address, rendezvousing through an in-memory store.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collective/gloo_group.h"
#include "collective/rendezvous_store.h"

namespace rayx::collective::testing {

// Runs f(rank) on n threads and returns each rank's error message ("" if none).
inline std::vector<std::string> OnEveryRank(int n, const std::function<void(int)>& f) {
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        f(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        if (errors[r].empty()) errors[r] = "empty error";
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

inline GroupSpec MakeSpec(int n, int rank, const std::string& name, int64_t timeout_ms,
                          const std::string& attempt) {
  GroupSpec spec;
  spec.options.name = name;
  spec.options.timeout_ms = timeout_ms;
  spec.world_size = n;
  spec.rank = rank;
  spec.attempt_id = attempt;
  spec.node_ip = "127.0.0." + std::to_string(rank + 1);
  for (int r = 0; r < n; ++r) {
    spec.members.push_back({"actor-" + std::to_string(r), "node-" + std::to_string(r)});
  }
  return spec;
}

// Connects n Gloo ranks of group `name`; every rank must connect.
inline std::vector<std::shared_ptr<GlooGroup>> ConnectGloo(
    int n, const std::shared_ptr<RendezvousStore>& store, const std::string& name = "g",
    int64_t timeout_ms = 20000, const std::string& attempt = "1") {
  std::vector<std::shared_ptr<GlooGroup>> groups(n);
  auto errors = OnEveryRank(n, [&](int r) {
    groups[r] = GlooGroup::Connect(MakeSpec(n, r, name, timeout_ms, attempt), store);
  });
  for (const auto& e : errors) {
    if (!e.empty()) throw std::runtime_error("connect failed: " + e);
  }
  return groups;
}

inline bool AllEmpty(const std::vector<std::string>& errors) {
  for (const auto& e : errors) {
    if (!e.empty()) return false;
  }
  return true;
}

}  // namespace rayx::collective::testing
