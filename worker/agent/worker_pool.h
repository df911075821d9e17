// The worker processes a node agent runs for leases.
#pragma once

#include <sys/types.h>

#include <functional>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>

#include "common/work_counters.h"
#include "protocol/messages.h"
#include "rayx/status.h"

namespace rayx::worker {

// Starts one worker process per lease and stops it when the lease ends.
//
// A worker is the lease's executable started again with RAYX_WORKER_MODE=1
// (rayx::Init then serves tasks instead of returning). It runs in its own
// process group, so stopping a lease kills everything the worker started, and
// with PR_SET_PDEATHSIG, so a worker never outlives its agent. Start-up uses
// the same READY/ERROR line handshake as the daemons, read asynchronously so
// the agent's loop never blocks on a starting worker.
//
// Single-threaded: everything runs on the agent's io_context.
class WorkerPool {
 public:
  struct Options {
    std::string node_ip;
    std::string log_dir;   // worker-<lease>.log files go here
    // The cluster token: each worker gets its job's credential derived from it
    // (WorkerEnv::job_secret), never the token itself.
    std::string token;
    std::string wire_security = "authenticated";  // WorkerEnv::wire_security
    std::string store_dir; // the node's object store, for large results
    std::string checkpoint_dir;  // the node's checkpoint directory (Train)
    int64_t start_timeout_ms = 30000;
    // Workers starting at once (forked, not READY yet); more wait in FIFO
    // order. A burst of starts (100 Python interpreters on 2 cores) would
    // otherwise starve the agent's own loop past the node timeout. 0: the
    // machine's cores, at least 2.
    size_t max_starting = 0;
    // The device of each GPU the head hands out (NodeResources::gpu_devices):
    // what CUDA_VISIBLE_DEVICES and RAYX_GPU_IDS name. Empty: GPU i is device i.
    std::vector<int> gpu_devices;
    // The memory monitor's threshold, told to workers
    // (RAYX_MEMORY_USAGE_THRESHOLD): a Python worker asked to give up its
    // call raises OutOfMemoryError only while memory is still above it.
    // 0: not told.
    double memory_usage_threshold = 0;
    // The interface that holds node_ip: GLOO_SOCKET_IFNAME and
    // NCCL_SOCKET_IFNAME (WorkerEnv::kSocketInterfaceVariables). Empty: unset.
    std::string socket_interface;
  };
  using StartCallback = std::function<void(Result<protocol::StartWorkerReply>)>;
  // What a worker started with StartWorkerRequest::report_construction says
  // of its actor's constructor after it is ready (lease_id, stage and error
  // filled in).
  using ConstructionCallback = std::function<void(const protocol::ActorConstructionNotice&)>;

  // EOF on a reporting worker's pipe: how long its exit may take to be seen
  // before it counts as a worker that closed the pipe and lives on.
  static constexpr int64_t kUnfollowedAfterEofMs = 2000;

  WorkerPool(boost::asio::io_context& io, Options options);
  void SetConstructionCallback(ConstructionCallback callback) {
    on_construction_ = std::move(callback);
  }
  ~WorkerPool();  // kills every worker

  void Start(const protocol::StartWorkerRequest& request, StartCallback done);
  // The node's object server, told to workers.
  void SetObjectAddress(const std::string& address) { object_address_ = address; }
  // SIGKILLs the lease's worker process group and returns the worker's pid
  // (its group's id), or 0 for an unknown lease.
  pid_t Kill(const LeaseId& lease_id);
  void KillAll();
  // The pids of every worker (starting or running).
  std::vector<pid_t> Pids() const;
  // The lease whose worker is `pid`, if any.
  std::optional<LeaseId> LeaseOf(pid_t pid) const;
  // Running workers (ready), for the memory monitor: pid, lease, whether an
  // actor's, and the order they were started in.
  struct Running {
    pid_t pid = 0;
    LeaseId lease_id;
    bool for_actor = false;
    uint64_t started = 0;
    JobId job_id;
    std::string log_path;  // its stdout and stderr
  };
  std::vector<Running> RunningWorkers() const;
  // Running workers that exited by themselves since the last call (at most
  // kMaxExited are kept).
  std::vector<Running> TakeExitedWorkers() { return std::exchange(exited_, {}); }
  // What OnChildExit found `pid` to be.
  enum class ChildExit { kNotOurs, kDuringStart, kRunning };
  // Forgets worker `pid`, which exited; what it left in its process group is
  // SIGKILLed. A worker that was still starting fails its start.
  ChildExit OnChildExit(pid_t pid, int wait_status);

  // What this pool's workers did since it started: tasks they submitted and
  // collective operations they ran, read from each worker's counter page
  // (WorkCounters) now, plus what the gone ones had counted when they went.
  // O(workers).
  WorkCounts ReadCounters();

  size_t size() const { return workers_.size(); }
  // Starts waiting for a free start-up slot.
  size_t queued() const { return queued_.size(); }

 private:
  struct StartPipe {
    StartPipe(boost::asio::io_context& io, int fd) : pipe(io, fd), buffer(4096) {}
    boost::asio::posix::stream_descriptor pipe;
    boost::asio::streambuf buffer;
  };
  struct Worker {
    pid_t pid = 0;
    LeaseId lease_id;
    JobId job_id;
    std::string log_path;
    bool ready = false;
    bool constructing = false;  // said CONSTRUCTING: no start limit, no start slot
    bool reports_construction = false;  // its pipe stays open after READY
    bool for_actor = false;             // StartWorkerRequest::for_actor
    uint64_t started = 0;               // the pool's start counter
    StartCallback on_start;
    // The start-up pipe, shared with the read in flight on it: a read ended
    // by closing the pipe still writes to the buffer, after the entry may be
    // gone (a start that timed out or was killed).
    std::shared_ptr<StartPipe> start;
    std::unique_ptr<boost::asio::steady_timer> timer;
    std::unique_ptr<WorkCounters> counters;  // its page; nullptr: uncounted
    WorkCounts counted;                      // the page when last read
  };
  // Adds what worker `w`'s page grew by since it was last read to counts_.
  void Count(Worker& w);
  // Counts worker `it` a last time and forgets it.
  void Erase(std::map<LeaseId, Worker>::iterator it);
  void FinishStart(const LeaseId& lease_id, Result<protocol::StartWorkerReply> result);
  // Reads the starting worker's next line: CONSTRUCTING (then again), or its
  // READY or ERROR line, or EOF (it died).
  void ReadStartLine(const LeaseId& lease_id);
  // After READY, for a worker that reports its constructor: its CONSTRUCTOR
  // lines, until one says how the constructor ended (or EOF).
  void ReadConstructionLine(const LeaseId& lease_id);
  // The worker of `lease_id` lives on but its reports cannot be read any
  // more (`why`): the head hears so (kUnfollowed) and stops waiting for them.
  void StopFollowing(const LeaseId& lease_id, const std::string& why);
  void StartNow(const protocol::StartWorkerRequest& request, StartCallback done);
  // A start finished (ready, failed or killed): the next queued one may go.
  void StartEnded();
  size_t MaxStarting() const;

  boost::asio::io_context& io_;
  Options options_;
  std::string object_address_;
  ConstructionCallback on_construction_;
  std::map<LeaseId, Worker> workers_;
  WorkCounts counts_;           // ReadCounters: every worker's, summed
  bool pages_refused_ = false;  // said once that workers go uncounted
  static constexpr size_t kMaxExited = 4096;
  std::vector<Running> exited_;  // TakeExitedWorkers
  uint64_t starts_ = 0;  // workers started so far (Worker::started)
  struct Queued {
    protocol::StartWorkerRequest request;
    StartCallback done;
  };
  std::deque<Queued> queued_;  // waiting for a start-up slot, in arrival order
  size_t starting_ = 0;        // workers forked and not yet READY (or failed)
  bool stopping_ = false;      // in the destructor
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // posted work checks it
};

}  // namespace rayx::worker
