// The built-in actor methods an actor group's driver calls on its actors.
#include "group/rank_setup.h"

#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include "rayx/detail/registry.h"

namespace rayx::detail {
namespace {

std::mutex& SetupMutex() {
  static std::mutex mu;
  return mu;
}
std::optional<RankSetup>& SetupSlot() {
  static std::optional<RankSetup> setup;
  return setup;
}

std::string EnvOr(const char* name, const char* fallback = "") {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

std::vector<int> ParseIds(const std::string& text) {
  std::vector<int> ids;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) ids.push_back(std::atoi(text.substr(start, comma - start).c_str()));
    start = comma + 1;
  }
  return ids;
}

RankDescription DescribeRank() {
  RankDescription d;
  d.node_ip = EnvOr("RAYX_NODE_IP");
  d.object_address = EnvOr("RAYX_OBJECT_ADDRESS");
  d.gpu_ids = ParseIds(EnvOr("RAYX_GPU_IDS"));
  d.pid = static_cast<int32_t>(::getpid());
  if (!d.gpu_ids.empty()) {
    std::vector<int> visible = ParseIds(EnvOr("CUDA_VISIBLE_DEVICES"));
    for (size_t i = 0; i < visible.size(); ++i) {
      if (visible[i] == d.gpu_ids[0]) d.device_position = static_cast<int32_t>(i);
    }
  }
  return d;
}

// Sets torch's variables (env:// init works unchanged) and keeps the setup for
// GetRankInfo and Train. Runs before any user method of the group is called.
bool SetupRank(RankSetup setup) {
  auto set = [](const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); };
  set("RANK", std::to_string(setup.info.rank));
  set("WORLD_SIZE", std::to_string(setup.world_size));
  set("LOCAL_RANK", std::to_string(setup.info.local_rank));
  set("LOCAL_WORLD_SIZE", std::to_string(setup.info.local_world_size));
  set("NODE_RANK", std::to_string(setup.info.node_rank));
  set("GROUP_RANK", std::to_string(setup.info.node_rank));
  set("MASTER_ADDR", setup.master_addr);
  set("MASTER_PORT", std::to_string(setup.master_port));
  std::lock_guard<std::mutex> lock(SetupMutex());
  SetupSlot() = std::move(setup);
  return true;
}

[[maybe_unused]] const bool kRegistered = [] {
  RegisterOne(kDescribeRankMethod, &DescribeRank);
  RegisterOne(kSetupRankMethod, &SetupRank);
  return true;
}();

}  // namespace

std::optional<RankSetup> CurrentRankSetup() {
  std::lock_guard<std::mutex> lock(SetupMutex());
  return SetupSlot();
}

}  // namespace rayx::detail

namespace rayx {

RankInfo GetRankInfo() {
  auto setup = detail::CurrentRankSetup();
  if (!setup) {
    throw std::runtime_error("GetRankInfo: this process is not a rank of an actor group");
  }
  return setup->info;
}

}  // namespace rayx
