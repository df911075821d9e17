// `rayx status` output.
#include "status_format.h"

#include <algorithm>
#include <ctime>
#include <set>
#include <sstream>

namespace rayx::cli {
namespace {

std::string FormatQuantity(const std::string& name, double amount) {
  return name == kMemory ? FormatBytes(amount) : FormatAmount(amount);
}

std::string FormatDuration(int64_t ms) {
  int64_t s = ms / 1000;
  std::ostringstream out;
  if (s >= 3600) out << s / 3600 << "h ";
  if (s >= 60) out << (s % 3600) / 60 << "m ";
  out << s % 60 << "s";
  return out.str();
}

// CPU, GPU, memory first, then custom resources by name.
std::vector<std::string> ResourceOrder(const ResourceMap& resources) {
  std::vector<std::string> order = {kCpu, kGpu, kMemory};
  for (const auto& [name, amount] : resources) {
    if (name != kCpu && name != kGpu && name != kMemory) order.push_back(name);
  }
  return order;
}

// `cpu_over`: CPU leased beyond the total (blocked workers that resumed).
std::string UsageLines(const ResourceMap& total, const ResourceMap& available,
                       const std::string& indent, double cpu_over = 0) {
  std::ostringstream out;
  for (const auto& name : ResourceOrder(total)) {
    double t = total.count(name) ? total.at(name) : 0;
    double a = available.count(name) ? available.at(name) : t;
    double over = name == kCpu ? cpu_over : 0;
    out << indent << FormatQuantity(name, t - a + over) << "/" << FormatQuantity(name, t) << " "
        << name << (over > 0 ? " (over-committed by workers that resumed from get)" : "")
        << "\n";
  }
  return out.str();
}

std::string Labels(const LabelMap& labels) {
  std::string out;
  for (const auto& [k, v] : labels) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out;
}

}  // namespace

std::string FormatResourceList(const ResourceMap& resources) {
  std::string out;
  for (const auto& name : ResourceOrder(resources)) {
    if (!resources.count(name)) continue;
    if (!out.empty()) out += ", ";
    out += name + " " + FormatQuantity(name, resources.at(name));
  }
  return out;
}

std::string FormatClusterStatus(const ClusterStatus& status, const std::string& address,
                                int64_t now_wall_ms, bool verbose) {
  std::ostringstream out;
  std::time_t t = static_cast<std::time_t>(now_wall_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
  const std::string rule(63, '-');
  out << "======== Cluster status: " << stamp << " ========\n";
  out << "Cluster " << status.cluster_id << " at " << address << " (rayx " << status.rayx_version
      << ", head up " << FormatDuration(status.head_uptime_ms) << ")\n";
  if (!status.dashboard_url.empty()) {
    out << "Dashboard and metrics: " << status.dashboard_url << "/ (`rayx dashboard`)\n";
  }
  out << "\n";
  out << "Node status\n" << rule << "\n";
  out << "Alive:\n";
  size_t dead = 0;
  for (const auto& node : status.nodes) {
    if (!node.alive) {
      ++dead;
      continue;
    }
    out << " node_" << node.node_id.Hex() << "  " << node.address
        << (node.is_head_node ? "  (head)" : "") << "\n";
  }
  if (status.AliveNodeCount() == 0) out << " (no alive nodes)\n";
  out << "Dead:\n";
  for (const auto& node : status.nodes) {
    if (node.alive) continue;
    out << " node_" << node.node_id.Hex() << "  " << node.address << "  " << node.death_reason
        << "\n";
  }
  if (dead == 0) out << " (no dead nodes)\n";
  out << "\nResources\n" << rule << "\n";
  out << "Total Usage:\n";
  double cpu_over = 0;
  for (const auto& node : status.nodes) cpu_over += node.alive ? node.cpu_overcommitted : 0;
  out << UsageLines(status.TotalResources(), status.AvailableResources(), " ", cpu_over);
  if (status.blocked_workers > 0) {
    out << " (" << status.blocked_workers << " worker" << (status.blocked_workers == 1 ? "" : "s")
        << " blocked in get/wait, lending " << FormatAmount(status.lent_cpu)
        << " CPU to other work)\n";
  }
  uint64_t stored = 0, capacity = 0, spilled = 0, objects = 0, spilled_objects = 0;
  for (const auto& node : status.nodes) {
    if (!node.alive) continue;
    stored += node.object_store_bytes;
    capacity += node.object_store_capacity;
    objects += node.object_store_objects;
    spilled += node.object_spilled_bytes;
    spilled_objects += node.object_spilled_objects;
  }
  out << " " << FormatBytes(static_cast<double>(stored));
  if (capacity != 0) out << "/" << FormatBytes(static_cast<double>(capacity));
  out << " object store (" << objects << " objects), "
      << FormatBytes(static_cast<double>(spilled)) << " spilled to disk (" << spilled_objects
      << " objects): per node, `rayx list objects`\n";
  out << "\nDemands:\n";
  if (status.pending_demands.empty() && status.infeasible_demands.empty()) {
    out << " (no resource demands)\n";
  }
  for (const auto& [shape, count] : status.pending_demands) {
    out << " " << shape << ": " << count << " pending\n";
  }
  for (const auto& [shape, why] : status.infeasible_demands) {
    out << " " << shape << ": infeasible: " << why << "\n";
  }
  if (verbose) {
    for (const auto& node : status.nodes) {
      out << "\nNode: node_" << node.node_id.Hex() << (node.alive ? "" : " (dead)") << "\n";
      out << "  address: " << node.address << "   hostname: " << node.hostname
          << "   agent pid: " << node.agent_pid << "   rayx " << node.rayx_version << "\n";
      if (!node.labels.empty()) out << "  labels: " << Labels(node.labels) << "\n";
      if (node.alive) {
        out << "  last heartbeat: " << node.last_heartbeat_age_ms << " ms ago\n";
        out << "  object store: " << FormatBytes(static_cast<double>(node.object_store_bytes));
        if (node.object_store_capacity != 0) {
          out << " of " << FormatBytes(static_cast<double>(node.object_store_capacity));
        }
        out << " in " << (node.store_dir.empty() ? "(none)" : node.store_dir) << " ("
            << node.object_store_objects << " objects); spilled to disk: "
            << FormatBytes(static_cast<double>(node.object_spilled_bytes)) << " ("
            << node.object_spilled_objects << " objects)\n";
        out << "  Usage:\n"
            << UsageLines(node.total, node.available, "   ", node.cpu_overcommitted);
      } else {
        out << "  died: " << node.death_reason << "\n";
        out << "  Resources: " << FormatResourceList(node.total) << "\n";
      }
    }
  }
  return out.str();
}

std::string FormatWallTime(int64_t ms) {
  if (ms <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string FormatTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      out += row[i];
      if (i + 1 < row.size()) out += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += "\n";
  }
  return out;
}

}  // namespace rayx::cli
