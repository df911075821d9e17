// Reading a node's role in a platform's multi-node job (platform_env.h).
#include "platform_env.h"

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "common/address.h"
#include "common/text.h"

namespace rayx::cli {
namespace {

constexpr int kMaxNodes = 100000;

// The first of `names` that is set, with its name.
std::optional<std::pair<std::string, std::string>> FirstSet(const EnvLookup& env,
                                                            const std::vector<std::string>& names) {
  for (const auto& name : names) {
    if (auto value = env(name); value && !value->empty()) return std::make_pair(name, *value);
  }
  return std::nullopt;
}

// `value` of variable `name` as an integer in [min, max].
Result<int> ParseInt(const std::string& name, const std::string& value, int min, int max,
                     const std::string& meaning) {
  char* end = nullptr;
  errno = 0;
  long n = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || end == value.c_str() || *end != '\0' || errno == ERANGE || n < min ||
      n > max) {
    return Status::InvalidArgument(name + "=" + value.substr(0, 64) + " is not " + meaning +
                                   " (an integer from " + std::to_string(min) + " to " +
                                   std::to_string(max) + ")");
  }
  return static_cast<int>(n);
}

Result<PlatformRole> FromSlurm(const EnvLookup& env) {
  PlatformRole role;
  role.source = "SLURM";
  auto nodes = FirstSet(env, {"SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"});
  if (!nodes) {
    return Status::InvalidArgument(
        "SLURM_PROCID is set but SLURM_NNODES is not: run `rayx start --from-env` with srun, "
        "one task per node (srun --ntasks-per-node=1 rayx start --from-env ...)");
  }
  auto num_nodes = ParseInt(nodes->first, nodes->second, 1, kMaxNodes, "a node count");
  RAYX_RETURN_IF_ERROR(num_nodes.status());
  role.num_nodes = *num_nodes;
  if (auto tasks = FirstSet(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"})) {
    auto num_tasks = ParseInt(tasks->first, tasks->second, 1, 1 << 30, "a task count");
    RAYX_RETURN_IF_ERROR(num_tasks.status());
    if (*num_tasks != role.num_nodes) {
      return Status::InvalidArgument(
          "SLURM runs " + std::to_string(*num_tasks) + " tasks on " +
          std::to_string(role.num_nodes) +
          " nodes: rayx start needs exactly one task per node (srun --ntasks-per-node=1 rayx "
          "start --from-env ...); the node's agent then runs all the processes of that node");
    }
  }
  auto rank = FirstSet(env, {"SLURM_NODEID", "SLURM_PROCID"});
  auto node_rank = ParseInt(rank->first, rank->second, 0, role.num_nodes - 1,
                            "a node index below " + nodes->first + "=" + nodes->second);
  RAYX_RETURN_IF_ERROR(node_rank.status());
  role.node_rank = *node_rank;
  auto list = FirstSet(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  if (!list) {
    return Status::InvalidArgument(
        "SLURM_PROCID is set but SLURM_NODELIST is not: run `rayx start --from-env` with srun");
  }
  auto first = FirstSlurmHost(list->second);
  if (!first.ok()) {
    return Status::InvalidArgument(list->first + ": " + first.status().message());
  }
  role.head_host = *first;
  return role;
}

Result<PlatformRole> FromTorchVariables(const EnvLookup& env) {
  PlatformRole role;
  role.source = "RANK/WORLD_SIZE";
  auto world = env("WORLD_SIZE");
  auto rank = env("RANK");
  auto master = env("MASTER_ADDR");
  std::vector<std::string> missing;
  if (!world || world->empty()) missing.push_back("WORLD_SIZE");
  if (!rank || rank->empty()) missing.push_back("RANK");
  if (!master || master->empty()) missing.push_back("MASTER_ADDR");
  if (missing.size() == 3) {
    return Status::NotFound(
        "--from-env found neither SLURM's variables (SLURM_PROCID, SLURM_NNODES, "
        "SLURM_NODELIST: run it under srun) nor a platform's (RANK, WORLD_SIZE, MASTER_ADDR, "
        "optionally MASTER_PORT, set on every node)");
  }
  if (!missing.empty()) {
    std::string names;
    for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
    return Status::InvalidArgument(
        "--from-env: " + names + (missing.size() == 1 ? " is" : " are") +
        " not set; a platform that runs one `rayx start --from-env` per node must set RANK "
        "(the node's index), WORLD_SIZE (the node count) and MASTER_ADDR (node 0's address) "
        "on every node");
  }
  auto num_nodes = ParseInt("WORLD_SIZE", *world, 1, kMaxNodes, "a node count");
  RAYX_RETURN_IF_ERROR(num_nodes.status());
  role.num_nodes = *num_nodes;
  auto node_rank =
      ParseInt("RANK", *rank, 0, role.num_nodes - 1, "a node index below WORLD_SIZE=" + *world);
  RAYX_RETURN_IF_ERROR(node_rank.status());
  role.node_rank = *node_rank;
  role.head_host = *master;
  if (auto port = env("MASTER_PORT"); port && !port->empty()) {
    auto p = ParseInt("MASTER_PORT", *port, 1, 65535, "a port");
    RAYX_RETURN_IF_ERROR(p.status());
    role.head_port = static_cast<uint16_t>(*p);
  }
  return role;
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

Result<PlatformRole> DetectPlatformRole(const EnvLookup& env) {
  if (auto procid = env("SLURM_PROCID"); procid && !procid->empty()) return FromSlurm(env);
  return FromTorchVariables(env);
}

bool NodeZeroMayAdvertise(const std::string& ip) {
  return ip.rfind("127.", 0) != 0 && ip != "0.0.0.0" && IsLocalAddress(ip);
}

Result<std::string> FirstSlurmHost(std::string_view nodelist) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("node list '" + Utf8Prefix(nodelist, 200) +
                                   "' is malformed: " + why);
  };
  if (nodelist.empty()) return bad("it is empty");
  // The first entry ends at a comma outside brackets.
  size_t end = 0;
  int depth = 0;
  for (; end < nodelist.size(); ++end) {
    char c = nodelist[end];
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) return bad("']' without '['");
    if (c == ',' && depth == 0) break;
  }
  if (depth != 0) return bad("'[' without ']'");
  std::string_view entry = nodelist.substr(0, end);
  size_t open = entry.find('[');
  if (open == std::string_view::npos) {
    if (entry.empty()) return bad("its first host is empty");
    return std::string(entry);
  }
  size_t close = entry.find(']', open);
  std::string_view prefix = entry.substr(0, open);
  std::string_view suffix = entry.substr(close + 1);
  if (suffix.find('[') != std::string_view::npos) {
    return bad("several bracketed ranges in one host name are not supported");
  }
  // The first number of the first range: "07-09,12" -> "07".
  std::string_view ranges = entry.substr(open + 1, close - open - 1);
  size_t digits = 0;
  while (digits < ranges.size() && ranges[digits] >= '0' && ranges[digits] <= '9') ++digits;
  if (digits == 0) return bad("a range must start with a number");
  if (digits < ranges.size() && ranges[digits] != '-' && ranges[digits] != ',') {
    return bad("unexpected '" + std::string(1, ranges[digits]) + "' in a range");
  }
  if (prefix.empty() && suffix.empty()) return bad("a host name is only a number");
  return std::string(prefix) + std::string(ranges.substr(0, digits)) + std::string(suffix);
}

}  // namespace rayx::cli
