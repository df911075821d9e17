// What an actor group's driver learns from and tells each of its actors, and
// the built-in actor methods that carry it (registered in every rayx program).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "rayx/actor_group.h"

namespace rayx::detail {

// An actor's answer to "where do you run": the first step of ranking.
struct RankDescription {
  std::string node_ip;
  std::string object_address;      // its agent's object server: names the node
  std::vector<int> gpu_ids;        // the node's devices it holds
  int32_t device_position = -1;    // its device's index in CUDA_VISIBLE_DEVICES; -1: none
  int32_t pid = 0;
  MSGPACK_DEFINE_MAP(node_ip, object_address, gpu_ids, device_position, pid)
};

// What the driver tells each actor once ranks are known.
struct RankSetup {
  RankInfo info;
  int32_t world_size = 1;
  std::string master_addr;
  uint32_t master_port = 0;
  std::string group_name;
  std::string collective_group;
  MSGPACK_DEFINE_MAP(info, world_size, master_addr, master_port, group_name, collective_group)
};

// Built-in actor methods, callable on an actor of any class by name.
inline constexpr const char* kDescribeRankMethod = "rayx.group.describe";
inline constexpr const char* kSetupRankMethod = "rayx.group.setup";

// This process's rank setup, once the driver sent it; nullopt before.
std::optional<RankSetup> CurrentRankSetup();

}  // namespace rayx::detail
