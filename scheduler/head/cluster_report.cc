// Prometheus metrics and the dashboard's JSON, from the head's tables.
#include "head/cluster_report.h"

#include <charconv>
#include <cmath>
#include <map>

#include "common/json.h"
#include "protocol/codec.h"
#include "protocol/enums.h"
#include "protocol/train_record.h"

namespace rayx::scheduler {

namespace {

// Train runs shown at most, and metrics per run exported to Prometheus.
constexpr size_t kMaxTrainRuns = 100;
constexpr size_t kMaxTrainMetrics = 32;

// The Train runs' records in the KV (written by their ranks: decoded with
// bounds, and one that does not decode is skipped).
std::vector<protocol::TrainRunRecord> TrainRuns(const HeadService& head) {
  std::vector<protocol::TrainRunRecord> runs;
  auto keys = head.kv().List(protocol::kTrainRecordNamespace, "", kMaxTrainRuns);
  if (!keys.ok()) return runs;
  protocol::DecodeLimits limits;
  limits.max_depth = 4;
  for (const auto& key : keys->keys) {
    auto value = head.kv().Get(protocol::kTrainRecordNamespace, key);
    if (!value.ok() || !value->has_value()) continue;
    auto record = protocol::Decode<protocol::TrainRunRecord>(**value, limits);
    if (record.ok()) runs.push_back(std::move(*record));
  }
  return runs;
}

// A label value: backslash, quote and newline escaped.
std::string LabelValue(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// The shortest text that reads back as `value` (Go's strconv, which
// Prometheus parses with, reads it exactly).
std::string Number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char text[32];
  auto [end, ec] = std::to_chars(text, text + sizeof(text), value);
  return std::string(text, end);
}

// `value` without an exponent ("0.0001", not "1e-04"), as bucket bounds are
// conventionally written.
std::string Fixed(double value) {
  char text[64];
  auto [end, ec] = std::to_chars(text, text + sizeof(text), value, std::chars_format::fixed);
  return std::string(text, end);
}

// Writes one metric family: HELP and TYPE once, then its samples.
class Family {
 public:
  Family(std::string* out, std::string name, const char* type, const char* help)
      : out_(out), name_(std::move(name)) {
    *out_ += "# HELP " + name_ + " " + help + "\n# TYPE " + name_ + " " + type + "\n";
  }
  using Labels = std::initializer_list<std::pair<const char*, std::string_view>>;
  void Sample(Labels labels, double value) { Sample("", labels, value); }
  // A sample of the family's `name_ + suffix` series (a histogram's _bucket,
  // _sum and _count).
  void Sample(std::string_view suffix, Labels labels, double value) {
    *out_ += name_;
    *out_ += suffix;
    if (labels.size() > 0) {
      *out_ += '{';
      bool first = true;
      for (const auto& [key, v] : labels) {
        if (!first) *out_ += ',';
        first = false;
        *out_ += key;
        *out_ += "=\"" + LabelValue(v) + "\"";
      }
      *out_ += '}';
    }
    *out_ += ' ' + Number(value) + '\n';
  }

 private:
  std::string* out_;
  std::string name_;
};

}  // namespace

std::string PrometheusText(const HeadService& head) {
  std::string out;
  // One snapshot of the nodes (StatusSnapshot's); the leases and groups beside it.
  ClusterStatus status = head.StatusSnapshot();
  const std::vector<protocol::LeaseListEntry> leases = head.leases().ListLeases();
  const std::vector<protocol::PlacementGroupInfo> groups = head.groups().List();

  Family uptime(&out, "rayx_head_uptime_seconds", "gauge", "Time since the head started.");
  uptime.Sample({}, static_cast<double>(status.head_uptime_ms) / 1000.0);
  Family messages(&out, "rayx_head_messages_total", "counter",
                  "Messages the head handled (the data path bypasses it).");
  messages.Sample({}, static_cast<double>(status.head_messages));

  const WorkCounts& work = head.work_totals();
  Family tasks(&out, "rayx_tasks_total", "counter",
               "Tasks and actor calls that drivers and workers (nested tasks) submitted, "
               "finished (a value), failed (an error) and retried, from drivers' and agents' "
               "heartbeats.");
  const protocol::TaskCounters& counts = work.tasks;
  tasks.Sample({{"state", "submitted"}}, static_cast<double>(counts.submitted));
  tasks.Sample({{"state", "finished"}}, static_cast<double>(counts.finished));
  tasks.Sample({{"state", "failed"}}, static_cast<double>(counts.failed));
  tasks.Sample({{"state", "retried"}}, static_cast<double>(counts.retried));

  Family op_time(&out, "rayx_collective_operation_duration_seconds", "histogram",
                 "Collective operations that ended (failed ones included), by operation and "
                 "duration (for NCCL, the host's call; the GPU work runs on its stream).");
  for (size_t i = 0; i < WorkCounts::kOps; ++i) {
    const WorkCounts::Op& op = work.ops[i];
    const std::string_view name = protocol::kCollectiveOpNames[i];
    uint64_t cumulative = 0;
    for (size_t k = 0; k < WorkCounts::kBuckets; ++k) {
      cumulative += op.buckets[k];
      const bool last = k + 1 == WorkCounts::kBuckets;
      const std::string le = last ? "+Inf" : Fixed(protocol::kCollectiveLatencyBounds[k]);
      op_time.Sample("_bucket", {{"op", name}, {"le", le}}, static_cast<double>(cumulative));
    }
    op_time.Sample("_sum", {{"op", name}}, static_cast<double>(op.micros) / 1e6);
    op_time.Sample("_count", {{"op", name}}, static_cast<double>(op.count));
  }
  Family op_failed(&out, "rayx_collective_operations_failed_total", "counter",
                   "Collective operations that failed (a timeout, an abort, a dead peer).");
  for (size_t i = 0; i < WorkCounts::kOps; ++i) {
    op_failed.Sample({{"op", protocol::kCollectiveOpNames[i]}},
                     static_cast<double>(work.ops[i].failed));
  }

  size_t alive = 0, dead = 0;
  for (const auto& n : status.nodes) (n.alive ? alive : dead)++;
  Family nodes(&out, "rayx_nodes", "gauge", "Nodes the head knows, by state.");
  nodes.Sample({{"state", "alive"}}, static_cast<double>(alive));
  nodes.Sample({{"state", "dead"}}, static_cast<double>(dead));

  Family node_total(&out, "rayx_node_resources", "gauge",
                    "Resources an alive node offers (memory in bytes).");
  ResourceMap cluster_total, cluster_used;
  for (const auto& n : status.nodes) {
    if (!n.alive) continue;
    std::string id = n.node_id.Hex();
    for (const auto& [resource, amount] : n.total) {
      node_total.Sample({{"node_id", id}, {"address", n.address}, {"resource", resource}}, amount);
      auto available = n.available.find(resource);
      double used = amount - (available == n.available.end() ? 0.0 : available->second);
      cluster_total[resource] += amount;
      cluster_used[resource] += used;
    }
  }
  // Each family's samples follow its HELP line: a second pass for used.
  Family node_used(&out, "rayx_node_resources_used", "gauge",
                   "Resources of an alive node held by leases and placement groups.");
  for (const auto& n : status.nodes) {
    if (!n.alive) continue;
    std::string id = n.node_id.Hex();
    for (const auto& [resource, amount] : n.total) {
      auto available = n.available.find(resource);
      double used = amount - (available == n.available.end() ? 0.0 : available->second);
      node_used.Sample({{"node_id", id}, {"address", n.address}, {"resource", resource}}, used);
    }
  }
  Family total(&out, "rayx_resources", "gauge", "Resources alive nodes offer, in all.");
  for (const auto& [resource, amount] : cluster_total) total.Sample({{"resource", resource}}, amount);
  Family used(&out, "rayx_resources_used", "gauge",
              "Resources held by leases and placement groups, in all.");
  for (const auto& [resource, amount] : cluster_used) used.Sample({{"resource", resource}}, amount);

  Family store(&out, "rayx_node_object_store_bytes", "gauge",
               "Bytes in a node's object store, as of its last heartbeat.");
  for (const auto& n : status.nodes) {
    if (!n.alive) continue;
    store.Sample({{"node_id", n.node_id.Hex()}, {"address", n.address}},
                 static_cast<double>(n.object_store_bytes));
  }
  Family capacity(&out, "rayx_node_object_store_capacity_bytes", "gauge",
                  "Bytes a node's object store holds before it spills (0: unbounded).");
  Family spilled(&out, "rayx_node_object_spilled_bytes", "gauge",
                 "Bytes of objects a node spilled to its disk, as of its last heartbeat.");
  for (const auto& n : status.nodes) {
    if (!n.alive) continue;
    capacity.Sample({{"node_id", n.node_id.Hex()}, {"address", n.address}},
                    static_cast<double>(n.object_store_capacity));
    spilled.Sample({{"node_id", n.node_id.Hex()}, {"address", n.address}},
                   static_cast<double>(n.object_spilled_bytes));
  }
  Family age(&out, "rayx_node_heartbeat_age_seconds", "gauge",
             "Time since the head last heard from a node.");
  for (const auto& n : status.nodes) {
    if (!n.alive) continue;
    age.Sample({{"node_id", n.node_id.Hex()}, {"address", n.address}},
               static_cast<double>(n.last_heartbeat_age_ms) / 1000.0);
  }

  // GPUs as NVML reports them (nodes without NVML have no samples: no lines).
  struct GpuFamily {
    const char* name;
    const char* help;
    double (*value)(const GpuUsage&);
  };
  const GpuFamily gpu_families[] = {
      {"rayx_gpu_utilization_ratio", "The fraction of the last sample period a kernel ran.",
       [](const GpuUsage& g) { return g.utilization; }},
      {"rayx_gpu_memory_used_bytes", "GPU memory in use.",
       [](const GpuUsage& g) { return static_cast<double>(g.memory_used_bytes); }},
      {"rayx_gpu_memory_total_bytes", "GPU memory in all.",
       [](const GpuUsage& g) { return static_cast<double>(g.memory_total_bytes); }},
      {"rayx_gpu_temperature_celsius", "GPU temperature.",
       [](const GpuUsage& g) { return g.temperature_celsius; }},
      {"rayx_gpu_power_watts", "GPU power draw.", [](const GpuUsage& g) { return g.power_watts; }},
  };
  for (const GpuFamily& f : gpu_families) {
    Family family(&out, f.name, "gauge", f.help);
    for (const auto& n : status.nodes) {
      if (!n.alive) continue;
      std::string id = n.node_id.Hex();
      for (const GpuUsage& g : n.gpu_usage) {
        family.Sample({{"node_id", id}, {"address", n.address},
                       {"device", std::to_string(g.device)}, {"name", g.name}},
                      f.value(g));
      }
    }
  }

  Family pending(&out, "rayx_pending_demands", "gauge",
                 "Requests waiting for resources, by shape.");
  for (const auto& [shape, count] : status.pending_demands) {
    pending.Sample({{"shape", shape}}, count);
  }
  Family infeasible(&out, "rayx_infeasible_demands", "gauge",
                    "Shapes no set of alive nodes could ever hold (1 per shape).");
  for (const auto& [shape, why] : status.infeasible_demands) {
    infeasible.Sample({{"shape", shape}}, 1);
  }

  std::map<std::pair<std::string, std::string>, int> lease_counts;
  for (const auto& l : leases) {
    lease_counts[{std::string(protocol::Name(l.kind)), std::string(protocol::Name(l.state))}]++;
  }
  Family lease_family(&out, "rayx_leases", "gauge",
                      "Leased workers (kind task worker, actor or process), by state.");
  for (const auto& [key, count] : lease_counts) {
    lease_family.Sample({{"kind", key.first}, {"state", key.second}}, count);
  }
  Family blocked(&out, "rayx_blocked_workers", "gauge",
                 "Workers blocked in get/wait, lending their CPU.");
  blocked.Sample({}, status.blocked_workers);

  std::map<std::string_view, int> group_counts;
  for (const auto& g : groups) group_counts[protocol::Name(g.state)]++;
  Family group_family(&out, "rayx_placement_groups", "gauge", "Placement groups, by state.");
  for (const auto& [name, count] : group_counts) group_family.Sample({{"state", name}}, count);

  Family collective_groups(&out, "rayx_collective_groups", "gauge",
                           "Collective groups whose ranks run in leased workers (the head "
                           "watches them).");
  collective_groups.Sample({}, static_cast<double>(head.group_watch().group_count()));
  Family group_ranks(&out, "rayx_collective_group_ranks", "gauge",
                     "Ranks of those groups that joined.");
  group_ranks.Sample({}, static_cast<double>(head.group_watch().member_count()));

  std::map<std::string, int> jobs;
  for (const auto& j : head.jobs().List()) jobs[std::string(protocol::Name(j.state))]++;
  Family job_family(&out, "rayx_submitted_jobs", "gauge",
                    "Jobs submitted with `rayx job submit`, by state.");
  for (const auto& [name, count] : jobs) job_family.Sample({{"state", name}}, count);
  Family admitted(&out, "rayx_jobs_admitted", "gauge",
                  "Jobs the cluster admits (drivers running, or leases left).");
  admitted.Sample({}, static_cast<double>(head.admitted_jobs().size()));

  std::vector<protocol::TrainRunRecord> runs = TrainRuns(head);
  Family reports(&out, "rayx_train_reports_total", "counter",
                 "Reports a Train run's ranks made (of runs whose job runs).");
  for (const auto& r : runs) reports.Sample({{"job", r.job}, {"run", r.run}}, r.reports);
  Family attempt(&out, "rayx_train_attempt", "gauge",
                 "A Train run's attempt: 0, then one more per restart.");
  for (const auto& r : runs) attempt.Sample({{"job", r.job}, {"run", r.run}}, r.attempt);
  Family checkpoints(&out, "rayx_train_checkpoints_total", "counter",
                     "Checkpoints a Train run stored (with its reports).");
  for (const auto& r : runs) {
    checkpoints.Sample({{"job", r.job}, {"run", r.run}}, static_cast<double>(r.checkpoints));
  }
  Family checkpoint_bytes(&out, "rayx_train_checkpoint_bytes_total", "counter",
                          "Bytes of the checkpoints a Train run stored (packed), in all.");
  for (const auto& r : runs) {
    checkpoint_bytes.Sample({{"job", r.job}, {"run", r.run}},
                            static_cast<double>(r.checkpoint_bytes));
  }
  Family last_checkpoint(&out, "rayx_train_last_checkpoint_bytes", "gauge",
                         "Bytes of a Train run's newest checkpoint (packed).");
  for (const auto& r : runs) {
    last_checkpoint.Sample({{"job", r.job}, {"run", r.run}},
                           static_cast<double>(r.last_checkpoint_bytes));
  }
  Family last(&out, "rayx_train_metric", "gauge", "A Train run's last reported metrics.");
  for (const auto& r : runs) {
    if (r.history.empty()) continue;
    size_t n = 0;
    for (const auto& [name, value] : r.history.back()) {
      if (++n > kMaxTrainMetrics) break;
      last.Sample({{"job", r.job}, {"run", r.run}, {"metric", name}}, value);
    }
  }
  return out;
}

std::string StateJson(const HeadService& head) {
  // One snapshot of the nodes (StatusSnapshot's); the leases and groups beside it.
  ClusterStatus status = head.StatusSnapshot();
  const std::vector<protocol::LeaseListEntry> leases = head.leases().ListLeases();
  const std::vector<protocol::PlacementGroupInfo> groups = head.groups().List();
  std::string out = "{\"status\":" + ToJson(status);
  out += ",\"nodes\":" + ToJson(status.nodes);
  out += ",\"leases\":" + ToJson(leases);
  out += ",\"placement_groups\":" + ToJson(groups);
  out += ",\"collective_groups\":" + ToJson(head.ListCollectiveGroups());
  out += ",\"jobs\":" + ToJson(head.jobs().List());
  out += ",\"train_runs\":" + ToJson(TrainRuns(head));
  // The wire enums' names, indexed by value (the JSON above carries the names
  // themselves; a client holding numbers from elsewhere maps them here).
  auto names = [](const auto& list) {
    std::string text = "[";
    for (size_t i = 0; i < list.size(); ++i) {
      if (i) text += ',';
      AppendJsonString(&text, list[i]);
    }
    return text + "]";
  };
  out += ",\"enums\":{\"placement_group_state\":" +
         names(protocol::EnumNames<protocol::PlacementGroupState>::kNames) +
         ",\"placement_strategy\":" +
         names(protocol::EnumNames<protocol::PlacementStrategy>::kNames) + "}}";
  return out;
}

}  // namespace rayx::scheduler
