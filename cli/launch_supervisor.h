// Runs the ranks of a `rayx launch` group on its reserved nodes and supervises
// them: streams their output, stops every rank when one fails, and restarts
// the whole group up to a limit.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "cluster_client.h"
#include "protocol/placement_messages.h"
#include "rayx/resources.h"
#include "rayx/status.h"
#include "transport/message.h"

namespace rayx::cli {

// One rank: where it runs and how far its output has been read.
struct LaunchRank {
  int rank = 0, local_rank = 0, node_rank = 0;
  std::string node_address, object_address, node_id;
  LeaseId lease_id;
  uint32_t index = 0;      // its process in the node's lease
  uint64_t offset = 0;     // output read so far
  std::string partial;     // an unfinished output line
  std::string log_path;    // on its node
  bool exited = false;     // the agent reported its exit
  bool drained = false;    // and all its output was read
  int exit_code = 0, signal = 0;
  std::string tail;
  std::string lost;        // why its node is gone (LeasesLostNotice), if it is
  std::string output_lost;  // why the rest of its output could not be read, if so
};

// What to run where: the group is reserved (its placement group CREATED), node
// rank b is bundle node_bundle[b] (b when empty), and ranks b * nproc_per_node
// .. + nproc_per_node - 1 run on it.
struct LaunchPlan {
  std::vector<std::string> command;  // argv of every rank
  std::string cwd;                   // must exist on every node
  std::map<std::string, std::string> user_env;  // --env K=V
  ResourceMap per_node;              // one node's bundle: all its ranks' resources
  protocol::PlacementGroupInfo group;  // state CREATED, one location per node
  int nnodes = 1;
  int nproc_per_node = 1;
  int64_t max_restarts = 0;
  int64_t master_port = 0;  // --master-port; 0: reserve one on rank 0's node
  std::vector<size_t> node_bundle;  // node rank -> bundle index; empty: the same

  size_t BundleOf(int node_rank) const {
    const auto b = static_cast<size_t>(node_rank);
    return node_bundle.empty() ? b : node_bundle.at(b);
  }
  const protocol::BundleLocation& NodeLocation(int node_rank) const {
    return group.locations.at(BundleOf(node_rank));
  }
};

// Node ranks for a launch's bundles: when every bundle's node has a numeric
// `rayx.io/node-rank` label (`rayx start --from-env`: the platform's own node
// numbering), the bundles in the order of that label, so that node rank 0 (and
// MASTER_ADDR) is the platform's node 0; otherwise placement order (empty).
// `labels_of` maps node ids (hex) to their labels.
std::vector<size_t> NodeOrderByRankLabel(const std::vector<protocol::BundleLocation>& locations,
                                         const std::map<std::string, LabelMap>& labels_of);

// The ranks of `plan`, in rank order, not yet started.
std::vector<LaunchRank> PlanRanks(const LaunchPlan& plan);

// MASTER_PORT: the plan's fixed port, else a free port reserved on rank 0's
// node (Unavailable and friends when its agent does not answer).
Result<uint32_t> ReserveMasterPort(ClusterClient& client, const LaunchPlan& plan);

// Starts a launch group's ranks (one process lease per node, holding the node's
// bundle), prints their output with a "[rank N IP]" prefix, and supervises
// them until all exit with 0, one fails (the others are stopped, then the group
// restarts while restarts remain), the job dies, or a stop signal arrives.
//
// Owns nothing but the ranks' state; `client` must outlive it. Single-threaded:
// everything runs on the caller's thread, through `client`.
class LaunchSupervisor {
 public:
  // From now on SIGINT, SIGTERM and SIGHUP only set a flag that Run() polls:
  // Run() then stops every rank and returns 128 + the signal.
  static void CatchStopSignals();
  // Whether a stop signal came since CatchStopSignals.
  static bool StopRequested();

  LaunchSupervisor(ClusterClient& client, LaunchPlan plan);

  // Runs the group with MASTER_PORT `master_port` until done; ends the job
  // (FinishJob) before returning. Returns the launch's exit code: 0 when every
  // rank exited with 0, else the failed rank's status (or 128 + its signal),
  // 128 + a stop signal, or 1.
  int Run(uint32_t master_port);

 private:
  // The RequestLease for node rank `b` in restart `attempt`.
  protocol::RequestLeaseRequest LeaseRequest(int b, int attempt, uint32_t master_port) const;
  // Sends every node's lease request and waits for the grants. Returns an
  // error message ("" when all started or a stop signal arrived).
  std::string StartRanks(int attempt, uint32_t master_port);
  // Streams output until all ranks exit, one fails, the job dies or a signal
  // arrives; returns the first failed rank, or nullptr.
  const LaunchRank* Supervise();
  // Returns every granted lease: the agents stop their processes.
  void StopAll();
  // Reads what is new in every rank's output and prints whole lines.
  void PumpOutput(bool final_pass);
  // Prints why `failed` failed; returns the launch's exit code for it.
  int ReportFailure(const LaunchRank& failed);

  ClusterClient& client_;
  const LaunchPlan plan_;
  const int world_;
  std::vector<LaunchRank> ranks_;
  std::vector<LeaseId> leases_;          // per node rank, this attempt
  std::deque<transport::Frames> early_;  // exits reported before every node started
  size_t exited_ok_ = 0;
};

}  // namespace rayx::cli
