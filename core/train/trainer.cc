// DataParallelTrainer::Fit: attempts of an actor group running the loop.
//
// Design: one attempt is one actor group (one placement group, one collective
// group) whose every rank runs the loop. The driver waits on the ranks' results
// and watches the cluster once a second (an elastic run grows when more ranks
// fit). When a rank fails (its worker or node died, or the loop threw), the
// group is killed: the surviving ranks' collectives fail at once (their peer's
// connections close), so no rank waits out a timeout, and the next attempt
// starts from the latest checkpoint rank 0 reported, on whatever nodes fit.
// Growth restarts the same way but does not count against max_failures. While
// an elastic attempt runs below max_workers, its missing workers wait as a
// placement group of their bundles (MissingWorkers): `rayx status` shows it
// under Demands, and once the head reserves it the run grows to full size.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <optional>
#include <set>
#include <stdexcept>

#include "rayx/actor_group.h"
#include "rayx/cluster_status.h"
#include "rayx/train.h"
#include "common/logging.h"
#include "rayx/placement_group.h"
#include "runtime/kv_client.h"
#include "train/checkpoint_shards.h"
#include "train/train_session.h"

namespace rayx::train::detail {
namespace {

// How long an attempt waits for its ranks to be placed and connected.
constexpr int64_t kGroupTimeoutMs = 120000;
// The deadline of each collective operation of a run (Report's barrier among
// them): the other ranks wait in it while rank 0 stores a checkpoint (up to
// 1 GiB through the head). Python's RunConfig.report_timeout_s defaults to the
// same.
constexpr int64_t kCollectiveTimeoutMs = 120000;
// How often a running attempt looks for room to grow.
constexpr int64_t kWatchPeriodMs = 1000;

struct Plan {
  ResourceMap per_worker;
  int min = 1, max = 1;
  bool elastic = false;
};

Plan Validate(const FitSpec& spec) {
  const ScalingConfig& s = spec.scaling;
  Plan plan;
  plan.elastic = s.min_workers > 0 || s.max_workers > 0;
  if (plan.elastic) {
    if (s.min_workers < 1) {
      throw std::invalid_argument("ScalingConfig: min_workers is " + std::to_string(s.min_workers) +
                                  ": an elastic run needs at least 1");
    }
    if (s.max_workers < s.min_workers) {
      throw std::invalid_argument("ScalingConfig: min_workers (" + std::to_string(s.min_workers) +
                                  ") is more than max_workers (" + std::to_string(s.max_workers) +
                                  ")");
    }
    plan.min = s.min_workers;
    plan.max = s.max_workers;
  } else {
    if (s.num_workers < 1) {
      throw std::invalid_argument("ScalingConfig: num_workers is " + std::to_string(s.num_workers) +
                                  ": a run needs at least 1 worker");
    }
    plan.min = plan.max = s.num_workers;
  }
  if (spec.failure.max_failures < 0) {
    throw std::invalid_argument("FailureConfig: max_failures is " +
                                std::to_string(spec.failure.max_failures) + ": it must be >= 0");
  }
  if (spec.run.num_replicas < 0 || spec.run.num_replicas > 16) {
    throw std::invalid_argument("RunConfig: num_replicas is " +
                                std::to_string(spec.run.num_replicas) +
                                ": 1 to 16 copies of each shard on the nodes, or 0 for the "
                                "head's package store");
  }
  if (spec.run.num_to_keep < 0) {
    throw std::invalid_argument("RunConfig: num_to_keep is " + std::to_string(spec.run.num_to_keep) +
                                ": keep at least 1 checkpoint, or 0 to keep all");
  }
  plan.per_worker = s.resources_per_worker;
  if (plan.per_worker.empty()) plan.per_worker["CPU"] = 1;
  if (s.use_gpu && plan.per_worker["GPU"] <= 0) plan.per_worker["GPU"] = 1;
  return plan;
}

// How many ranks of `per_worker` the alive nodes have room for now, under
// `strategy`, counting the `held` ranks of a running attempt (on the nodes at
// `hosting`) as free. STRICT_PACK needs them all on one node; STRICT_SPREAD
// one per node. Two nodes on one address count as hosting both: an estimate
// that errs low for STRICT_SPREAD; one too high for STRICT_PACK ends in an
// infeasible group, which Fit answers by trying smaller.
int RanksThatFit(const ResourceMap& per_worker, PlacementStrategy strategy, int held = 0,
                 const std::set<std::string>& hosting = {}) {
  auto status = rayx::detail::CurrentClusterStatus(2000);
  if (!status.ok()) return held;
  int sum = held, most_on_one = held, spread = held;
  for (const auto& node : status->nodes) {
    if (!node.alive) continue;
    int n = 1 << 20;
    for (const auto& [k, need] : per_worker) {
      if (need <= 0) continue;
      auto it = node.available.find(k);
      double have = it == node.available.end() ? 0 : it->second;
      n = std::min(n, static_cast<int>(std::floor(have / need + 1e-9)));
    }
    bool hosts = hosting.count(node.address) > 0;
    sum += n;
    most_on_one = std::max(most_on_one, n + (hosts ? held : 0));
    if (n >= 1 && !hosts) ++spread;
  }
  switch (strategy) {
    case PlacementStrategy::STRICT_PACK:
      return most_on_one;
    case PlacementStrategy::STRICT_SPREAD:
      return spread;
    default:
      return sum;
  }
}

// The workers a running elastic attempt lacks: a placement group of their
// bundles, pending while the cluster has no room (the run's demand), reserved
// once nodes join. Dropped before the next attempt places its own group.
class MissingWorkers {
 public:
  MissingWorkers() = default;
  MissingWorkers(const MissingWorkers&) = delete;
  MissingWorkers& operator=(const MissingWorkers&) = delete;
  ~MissingWorkers() { Drop(); }

  // Asks for `count` bundles of `per_worker` for run `run`, placed with the
  // run's `strategy`. Nothing for STRICT_PACK and STRICT_SPREAD: their missing
  // workers are not a group of their own (their nodes depend on where the
  // others are), so such runs grow by free room alone.
  void Want(int count, const ResourceMap& per_worker, PlacementStrategy strategy,
            const std::string& run) {
    Drop();
    if (strategy == PlacementStrategy::STRICT_PACK ||
        strategy == PlacementStrategy::STRICT_SPREAD) {
      return;
    }
    PlacementGroupCreationOptions options;
    options.name = "train run " + run + ": " + std::to_string(count) + " missing worker(s)";
    options.bundles.assign(static_cast<size_t>(count), per_worker);
    options.strategy = strategy;
    try {
      group_ = CreatePlacementGroup(options);
    } catch (const std::exception& e) {
      RAYX_LOG(Warning) << "run " << run << ": cannot ask for its missing workers: " << e.what();
    }
  }
  // True once the head reserved every missing worker's bundle.
  bool Reserved() {
    if (group_.GetID().empty()) return false;
    try {
      return group_.Wait(0);
    } catch (const std::exception&) {
      return false;  // infeasible as a group: growth goes by free room alone
    }
  }
  void Drop() {
    if (!group_.GetID().empty()) RemovePlacementGroup(group_.GetID());
    group_ = PlacementGroup();
  }

 private:
  PlacementGroup group_;  // no id: none asked for
};

std::optional<LatestReport> ReadLatest(const std::string& run) {
  auto bytes = rayx::detail::KvGet(kKvNamespace, LatestReportKey(run));
  if (!bytes) return std::nullopt;
  return rayx::detail::Unpack<LatestReport>(*bytes);
}

// A run this job has no report of resumes from the checkpoints kept of it
// (`where`: the nodes' records, an earlier job's or from before the whole
// cluster restarted; or its storage path's list), as Ray Train resumes a run
// found under its storage path: they become the run's kept checkpoints
// (num_to_keep drops them as new ones come).
void ResumeRecordedCheckpoints(const std::string& run, const FitSpec& spec) {
  if (rayx::detail::KvGet(kKvNamespace, LatestReportKey(run))) return;
  const bool by_nodes = spec.run.storage_path.empty();
  if (by_nodes && spec.run.num_replicas <= 0) return;
  std::vector<std::string> recorded = by_nodes
                                          ? RecordedCheckpoints(run)
                                          : StoredCheckpoints(spec.run.storage_path, run);
  if (recorded.empty()) return;
  LatestReport latest;
  latest.kept = recorded;
  latest.checkpoint_id = recorded.back();
  latest.checkpoints = static_cast<int64_t>(recorded.size());
  rayx::detail::KvPut(kKvNamespace, LatestReportKey(run), PackLatestReport(latest),
                      /*overwrite=*/false, /*job_scoped=*/true);
  std::cerr << "run " << run << ": resuming from the " << recorded.size() << " checkpoint(s) "
            << (by_nodes ? std::string("the nodes keep of it")
                         : "kept under " + spec.run.storage_path)
            << " (newest " << recorded.back() << ")\n";
}

// Why an attempt failed: the first rank whose own failure it was (a dead
// worker, the loop's exception) rather than a peer's collective error.
struct Failure {
  int rank = -1;
  std::string text;
  bool primary = false;
};

}  // namespace

Result Fit(const FitSpec& input) {
  FitSpec spec = input;
  Plan plan = Validate(spec);
  if (rayx::detail::FunctionRegistry::Instance().FindByName(spec.loop) == nullptr) {
    throw std::invalid_argument("train loop " + spec.loop + " is not registered: RAYX_REMOTE it");
  }
  if (spec.run.name.empty()) {
    spec.run.name = "train-" + std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
  }
  ResumeRecordedCheckpoints(spec.run.name, spec);
  Result result;
  int failures = 0;
  const PlacementStrategy strategy = spec.scaling.placement_strategy;
  // Sizes an elastic run tries: what fits, never above one found infeasible.
  auto fitting = [&] {
    return std::clamp(RanksThatFit(plan.per_worker, strategy), plan.min, plan.max);
  };
  int size = plan.elastic ? fitting() : plan.min;
  // Past the attempts of the checkpoints the run keeps (an earlier Fit of it
  // in this job, or those it resumes from): report ids are never reused.
  int first_attempt = 0;
  if (auto latest = ReadLatest(spec.run.name)) {
    first_attempt = detail::FirstAttempt(latest->kept, rayx::detail::CurrentJobId(),
                                         spec.run.name, spec.run.storage_path);
  }
  for (int attempt = first_attempt;; ++attempt) {
    ActorGroupOptions options;
    options.num_actors = size;
    options.resources = plan.per_worker;
    options.strategy = spec.scaling.placement_strategy;
    options.collective = true;
    options.timeout_ms = kGroupTimeoutMs;
    options.collective_timeout_ms = kCollectiveTimeoutMs;
    rayx::detail::ActorGroupSpec group_spec;
    group_spec.factory = kTrainWorkerFactory;
    group_spec.options = options;
    rayx::detail::ActorGroupPtr group;
    try {
      group = rayx::detail::CreateActorGroup(group_spec);
    } catch (const std::invalid_argument&) {
      throw;
    } catch (const ActorGroupInfeasibleError& e) {
      if (plan.elastic && size > plan.min) {
        // No set of alive nodes holds this many under the strategy (the
        // estimate was high, or a node left): fewer, never this many again.
        RAYX_LOG(Info) << "run " << spec.run.name << ": " << size
                       << " ranks cannot be placed (" << e.what() << "); trying fewer";
        plan.max = size - 1;
        size = std::min(fitting(), plan.max);
        continue;
      }
      result.error = std::string("run ") + spec.run.name + ": " + e.what();
      return result;
    } catch (const std::exception& e) {
      // A rank died while the group started (its node, say): a failure like
      // any other, retried while max_failures allows.
      if (++failures > spec.failure.max_failures) {
        result.error = std::string("run ") + spec.run.name + ": " + e.what();
        return result;
      }
      result.num_restarts++;
      if (plan.elastic) size = fitting();
      continue;
    }
    RunRequest request;
    request.loop = spec.loop;
    request.config = spec.config;
    request.run_name = spec.run.name;
    request.attempt = attempt;
    request.storage_path = spec.run.storage_path;
    request.num_to_keep = spec.run.num_to_keep;
    request.num_replicas = spec.run.num_replicas;
    if (auto latest = ReadLatest(spec.run.name)) {
      request.checkpoint_id = latest->checkpoint_id;
      if (request.checkpoint_id.rfind(kNodesPrefix, 0) == 0) {
        // The newest checkpoint every shard of which has a live copy.
        if (auto status = rayx::detail::CurrentClusterStatus(5000); status.ok()) {
          std::string skipped;
          request.checkpoint_id = NewestRestorable(latest->kept, *status, &skipped);
          if (!skipped.empty()) {
            std::cerr << "run " << spec.run.name << ": " << skipped << "; resuming from "
                      << (request.checkpoint_id.empty() ? std::string("the start")
                                                        : request.checkpoint_id)
                      << "\n";
          }
        }
      }
    }
    std::vector<rayx::detail::ObjectHandle> pending;
    std::vector<int> rank_of;
    for (size_t r = 0; r < group->actors.size(); ++r) {
      pending.push_back(rayx::detail::SubmitActorTask(
          group->actors[r], kTrainWorkerRun, {rayx::detail::Arg{rayx::detail::Pack(request), nullptr}}));
      rank_of.push_back(static_cast<int>(r));
    }
    result.num_workers = size;
    Failure failure;
    bool grow = false;
    MissingWorkers missing;
    // Under STRICT_PACK/STRICT_SPREAD the missing workers' own group says
    // nothing of whether all fit together: growth then goes by the estimate.
    const bool strict =
        strategy == PlacementStrategy::STRICT_PACK || strategy == PlacementStrategy::STRICT_SPREAD;
    if (plan.elastic && size < plan.max && !strict) {
      missing.Want(plan.max - size, plan.per_worker, strategy, spec.run.name);
    }
    while (!pending.empty()) {
      std::vector<bool> ready = rayx::detail::WaitObjects(pending, 1, kWatchPeriodMs);
      for (size_t i = ready.size(); i-- > 0;) {
        if (!ready[i]) continue;
        try {
          rayx::detail::GetBytes(pending[i], 0);
        } catch (const TaskError& e) {
          const int r = rank_of[i];
          bool primary = e.type().find("CollectiveError") == std::string::npos;
          if (failure.rank < 0 || (primary && !failure.primary)) {
            const RankInfo& info = group->ranks[static_cast<size_t>(r)];
            failure.rank = r;
            failure.primary = primary;
            failure.text = "rank " + std::to_string(r) + " (node " + info.node_ip + ", pid " +
                           std::to_string(info.pid) + ") failed: " + e.type() + ": " +
                           e.remote_message();
          }
        }
        pending.erase(pending.begin() + static_cast<long>(i));
        rank_of.erase(rank_of.begin() + static_cast<long>(i));
      }
      if (failure.rank >= 0) break;
      if (plan.elastic && size < plan.max && !pending.empty()) {
        std::set<std::string> hosting;
        for (const auto& info : group->ranks) hosting.insert(info.node_ip);
        int fit = missing.Reserved()
                      ? plan.max
                      : std::min(plan.max, RanksThatFit(plan.per_worker, strategy, size, hosting));
        if (fit > size) {
          grow = true;
          size = fit;
          break;
        }
      }
    }
    missing.Drop();  // its reservation is the next attempt's room
    rayx::detail::KillActorGroup(*group);
    if (auto latest = ReadLatest(spec.run.name)) {
      result.metrics = latest->metrics;
      result.metrics_history = latest->history;
      if (!latest->checkpoint_id.empty()) result.checkpoint = Checkpoint::FromId(latest->checkpoint_id, "");
    }
    if (failure.rank < 0 && !grow) return result;  // every rank finished
    result.num_restarts++;
    if (!grow) {
      if (++failures > spec.failure.max_failures) {
        result.num_restarts--;
        result.error = failure.text + (spec.failure.max_failures > 0
                                           ? " (after " + std::to_string(spec.failure.max_failures) +
                                                 " restart(s))"
                                           : "");
        return result;
      }
      if (plan.elastic) size = fitting();
    }
  }
}

}  // namespace rayx::train::detail
