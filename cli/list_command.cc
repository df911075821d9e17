// `rayx list nodes|actors|workers|placement-groups|collective-groups`: where
// everything is.
#include "list_command.h"

#include <iomanip>
#include <map>
#include <iostream>
#include <sstream>

#include "cluster_client.h"
#include "common/address.h"
#include "common/flags.h"
#include "common/json.h"
#include "common/session_dir.h"
#include "launch_command.h"
#include "status_format.h"
#include "protocol/placement_messages.h"
#include "transport/sync_client.h"
#include "worker/worker_env.h"

namespace rayx::cli {

namespace {

std::string Join(const std::vector<int>& ids) {
  return ids.empty() ? "-" : WorkerEnv::JoinIdList(ids);
}

}  // namespace

std::string FormatList(const protocol::ListStateReply& state, const std::string& what) {
  std::ostringstream out;
  std::vector<std::vector<std::string>> rows;
  std::map<std::string, std::string> node_address;
  std::map<std::string, const NodeInfo*> node_of;
  for (const auto& n : state.nodes) {
    node_address[n.node_id.Hex()] = n.address;
    node_of[n.node_id.Hex()] = &n;
  }
  // A node's GPUs as its processes see them (CUDA_VISIBLE_DEVICES).
  auto devices = [&](const std::string& node_id, const std::vector<int>& gpu_ids) {
    auto it = node_of.find(node_id);
    return Join(it == node_of.end() ? gpu_ids : it->second->DevicesOf(gpu_ids));
  };
  if (what == "nodes") {
    rows.push_back({"NODE_ID", "ADDRESS", "STATE", "HEAD", "TOTAL", "AVAILABLE", "LABELS"});
    for (const auto& n : state.nodes) {
      std::string labels;
      for (const auto& [k, v] : n.labels) labels += (labels.empty() ? "" : ",") + k + "=" + v;
      if (!n.gpu_devices.empty()) {
        labels +=
            std::string(labels.empty() ? "" : ",") + "(GPU devices " + Join(n.gpu_devices) + ")";
      }
      rows.push_back({n.node_id.Hex().substr(0, 12), n.address, n.alive ? "ALIVE" : "DEAD",
                      n.is_head_node ? "yes" : "", FormatResourceShape(n.total),
                      n.alive ? FormatResourceShape(n.available) : "-",
                      labels.empty() ? "-" : labels});
    }
  } else if (what == "objects") {
    // Per node: what its store holds (of its capacity) and what it spilled.
    rows.push_back({"NODE_ID", "ADDRESS", "STORED", "CAPACITY", "OBJECTS", "SPILLED",
                    "SPILLED_OBJECTS", "STORE"});
    for (const auto& n : state.nodes) {
      if (!n.alive) continue;
      rows.push_back({n.node_id.Hex().substr(0, 12), n.address,
                      FormatBytes(static_cast<double>(n.object_store_bytes)),
                      n.object_store_capacity == 0
                          ? "-"
                          : FormatBytes(static_cast<double>(n.object_store_capacity)),
                      std::to_string(n.object_store_objects),
                      FormatBytes(static_cast<double>(n.object_spilled_bytes)),
                      std::to_string(n.object_spilled_objects),
                      n.store_dir.empty() ? "-" : n.store_dir});
    }
  } else if (what == "actors" || what == "workers") {
    rows.push_back({"LEASE_ID", "KIND", "NAME", "CLASS", "JOB", "STATE", "NODE", "PID",
                    "RESOURCES", "GPUS", "PLACEMENT_GROUP", "DETACHED"});
    for (const auto& l : state.leases) {
      if (what == "actors" && l.kind != protocol::LeaseKind::kActor) continue;
      rows.push_back(
          {l.lease_id.Hex().substr(0, 12), std::string(protocol::Name(l.kind)),
           l.actor_name.empty() ? "-" : l.actor_name, l.class_name.empty() ? "-" : l.class_name,
           l.job_id.Hex(), std::string(protocol::Name(l.state)), l.node_address,
           std::to_string(l.pid), FormatResourceShape(l.resources), devices(l.node_id, l.gpu_ids),
           l.placement_group_id.IsNil()
               ? "-"
               : l.placement_group_id.Short() + "[" + std::to_string(l.bundle_index) + "]",
           l.detached ? "yes" : ""});
    }
  } else if (what == "collective-groups") {
    std::map<LeaseId, const protocol::LeaseListEntry*> lease_of;
    for (const auto& l : state.leases) lease_of[l.lease_id] = &l;
    rows.push_back({"GROUP", "ATTEMPT", "JOB", "STATE", "RANKS"});
    for (const auto& g : state.collective_groups) {
      std::string ranks;
      for (const auto& m : g.members) {
        auto lease = lease_of.find(m.lease_id);
        ranks += (ranks.empty() ? "" : " ") + std::to_string(m.rank) + "@" +
                 (lease == lease_of.end() ? m.lease_id.Short()
                                          : lease->second->node_address + ":" +
                                                std::to_string(lease->second->pid));
      }
      std::string joined = std::to_string(g.members.size()) + "/" + std::to_string(g.world_size);
      rows.push_back({g.group, g.attempt_id.substr(0, 12), g.job_id.IsNil() ? "-" : g.job_id.Hex(),
                      g.ended.empty() ? "RUNNING (" + joined + " joined)" : "ENDED",
                      g.ended.empty() ? ranks : g.ended});
    }
  } else {
    rows.push_back({"PLACEMENT_GROUP_ID", "NAME", "JOB", "STRATEGY", "STATE", "BUNDLES"});
    for (const auto& g : state.placement_groups) {
      std::string bundles;
      for (size_t i = 0; i < g.bundles.size(); ++i) {
        bundles += (i ? " " : "") + std::to_string(i) + ":" + FormatResourceShape(g.bundles[i]);
        if (i < g.locations.size()) {
          bundles += "@" + g.locations[i].node_address;
          if (!g.locations[i].gpu_ids.empty()) {
            bundles += "(GPU " + devices(g.locations[i].node_id, g.locations[i].gpu_ids) + ")";
          }
        }
      }
      rows.push_back({g.placement_group_id.Hex(), g.name.empty() ? "-" : g.name, g.job_id.Hex(),
                      std::string(protocol::Name(g.strategy)), std::string(protocol::Name(g.state)),
                      bundles});
      if (!g.reason.empty()) rows.push_back({"", "", "", "", "", "why: " + g.reason});
    }
  }
  out << FormatTable(rows);
  return out.str();
}

int ListCommand(const std::vector<std::string>& args) {
  std::string address, temp_dir = detail::DefaultTempDir();
  TokenFlags token;
  bool help = false;
  std::string format = "table";
  FlagParser flags("rayx list");
  flags.AddString("format", &format, "table (default) or json (the dashboard's /api/state fields)");
  flags.AddString("address", &address, "the head, HOST:PORT (default: $RAYX_ADDRESS, else this "
                                       "machine's cluster)");
  token.Add(flags);
  flags.AddString("temp-dir", &temp_dir, "session directory root (default /tmp/rayx)");
  flags.AddBool("help", &help, "show this help");
  std::vector<std::string> what;
  auto usage =
      "usage: rayx list (nodes | actors | workers | objects | placement-groups | "
      "collective-groups) [FLAGS]\n";
  if (Status s = flags.Parse(args, &what); !s.ok()) {
    std::cerr << "rayx list: " << s.message() << "\n";
    return 2;
  }
  if (help) {
    std::cout << usage << flags.Usage();
    return 0;
  }
  if (what.size() != 1 || (what[0] != "nodes" && what[0] != "actors" && what[0] != "workers" &&
                           what[0] != "placement-groups" && what[0] != "collective-groups" &&
                           what[0] != "objects")) {
    std::cerr << "rayx list: say what to list.\n" << usage;
    return 2;
  }
  if (format != "table" && format != "json") {
    std::cerr << "rayx list: --format is table or json, not '" << format << "'\n";
    return 2;
  }
  auto cluster = ResolveCluster(address, token, temp_dir);
  if (!cluster.ok()) {
    std::cerr << "rayx list: " << cluster.status().message() << "\n";
    return 1;
  }
  auto hp = ParseHostPort(cluster->first);
  auto client = transport::SyncClient::Connect(
      *hp, transport::ClientSecurity::ClusterToHead(cluster->second));
  if (!client.ok()) {
    std::cerr << "rayx list: " << client.status().message() << "\n";
    return 1;
  }
  protocol::ListStateRequest req;
  req.token = cluster->second;
  auto reply = (*client)->Call<protocol::ListStateReply>(req, 5000);
  if (!reply.ok()) {
    std::cerr << "rayx list: " << reply.status().message() << "\n";
    return 1;
  }
  if (format == "json") {
    // The same fields as the dashboard's GET /api/state.
    if (what[0] == "nodes" || what[0] == "objects") {
      std::cout << ToJson(reply->nodes) << "\n";
    } else if (what[0] == "placement-groups") {
      std::cout << ToJson(reply->placement_groups) << "\n";
    } else if (what[0] == "collective-groups") {
      std::cout << ToJson(reply->collective_groups) << "\n";
    } else {
      if (what[0] == "actors") {
        std::erase_if(reply->leases,
                      [](const auto& l) { return l.kind != protocol::LeaseKind::kActor; });
      }
      std::cout << ToJson(reply->leases) << "\n";
    }
    return 0;
  }
  std::cout << FormatList(*reply, what[0]);
  return 0;
}

}  // namespace rayx::cli
