// A node agent's object server: serves pieces of the node's stored objects to
// other nodes, and deletes objects their owners have freed.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <zmq.hpp>

#include "agent/object_pins.h"
#include "agent/port_reserver.h"
#include "agent/process_runner.h"
#include "agent/work_thread.h"
#include "object_store/checkpoint_files.h"
#include "object_store/object_server_directory.h"
#include "common/clock.h"
#include "object_store/shared_memory_store.h"
#include "object_store/store_ledger.h"
#include "object_store/store_spiller.h"
#include "rayx/status.h"
#include "transport/security.h"
#include "transport/zap_server.h"
#include "transport/zmq_socket_loop.h"

namespace rayx::worker {

// A ROUTER socket on the node's address, run by the agent's event loop.
// Only the cluster and admitted jobs connect (ZAP, `verifier`): the cluster
// may do everything; a job reads stored objects, deletes its own job's and
// reserves ports, and reads no logs. Objects that ObjectRefs inside values
// point at are held (HoldObjects, ObjectPins): a delete of a held object lets
// go of one hold, and the file goes with the last. Requests name objects by path; a path
// outside this node's store is refused, so a peer can never read or delete
// another file. Pulls are answered with at most kMaxChunk bytes each: the
// puller asks for chunks and keeps several in flight. It also serves the
// output of process leases (ReadLog: only logs the lookup knows, never an
// arbitrary path) and the files of the node's log directory (ListLogs, and
// ReadLog by file name; regular files only, never a path), and hands out rendezvous ports (ReservePort, through a
// PortReserver). Not thread-safe.
class ObjectServer {
 public:
  static constexpr uint64_t kMaxChunk = 8 << 20;

  ObjectServer(boost::asio::io_context& io, SharedMemoryStore store);
  ~ObjectServer();

  // Binds on `ip` (a free port), admitting whom `verifier` admits over `mode`
  // (presenting `server`'s CURVE key when encrypted). Returns the
  // "tcp://ip:port" address.
  Result<std::string> Start(const std::string& ip, transport::WireSecurity mode,
                            const transport::Credential& server,
                            std::shared_ptr<const transport::Verifier> verifier);
  const SharedMemoryStore& store() const { return store_; }
  // The store has a ledger (its capacity): MakeRoomRequests spill objects to
  // the store's spill directory, on a thread of the server's own (copying
  // gigabytes must not stop the agent's loop).
  void EnableSpilling(std::shared_ptr<StoreLedger> ledger, StoreSpiller::Options options);
  // The store's use as last counted (objects, bytes, spilled), and a new
  // count started on the spill thread (the heartbeat's figures). Without
  // spilling, counted now.
  StoreSpiller::Usage StoreUsage();
  // Train's checkpoint shards are kept in `files` (the node's checkpoint
  // directory): pulls of its files are served (the cluster's peers, and a
  // job's own shards), ReplicateShardRequests pull a shard from another node
  // on a thread of their own (through `servers`, proving `pull_security`),
  // and DeleteShardsRequests remove shards.
  // A job reads and removes its own job's shards, and those of jobs that are
  // no longer live (`live` says which are): a run's checkpoints outlive the
  // job that wrote them, and a later job resumes the run by its name (after a
  // whole cluster's restart too), as Ray Train resumes from a run's storage
  // path. A live job's shards are its own.
  using JobLive = std::function<bool(const JobId&)>;
  void EnableCheckpoints(CheckpointFiles files, transport::ClientSecurity pull_security,
                         std::shared_ptr<ObjectServerDirectory> servers, JobLive live);
  // Job `job_hex` ended: its objects go, held or not. Returns how many files.
  size_t RemoveJob(const std::string& job_hex);
  const ObjectPins& pins() const { return pins_; }
  using LogLookup = std::function<std::optional<ProcessRunner::LogInfo>(const LeaseId&, uint32_t)>;
  void SetLogLookup(LogLookup lookup) { log_lookup_ = std::move(lookup); }
  // The node's log directory, whose files ListLogs lists and ReadLog's `file`
  // reads (by plain file name only). Empty: none are served.
  void SetLogDirectory(std::string dir) { log_dir_ = std::move(dir); }

 private:
  void OnMessage(transport::Frames& frames);
  // A delete of `path`: one hold let go, or the file removed when unheld.
  void Delete(const std::string& path);
  // Answers request `id` of the peer `routing` from a work thread, through
  // the loop (dropped once the server is gone).
  void AnswerLater(std::shared_ptr<transport::Frame> routing, transport::Frames message);
  // Runs `job` on `thread` and sends its answer to the peer of `reply` (its
  // routing frame, taken); when the thread's queue is full, answers
  // Unavailable(`busy`) at once.
  void AnswerFromThread(WorkThread& thread, transport::Frames& reply, uint64_t id,
                        std::function<transport::Frames()> job, const std::string& busy);
  // `status` as an error reply to request `id`, naming this node.
  transport::Frames ErrorFromNode(const Status& status, uint64_t id) const;
  // A ReplicateShardRequest, on the transfer thread.
  Status Replicate(const protocol::ReplicateShardRequest& req, uint64_t* bytes);
  // Whether `who` may read or remove the checkpoint path `relative`: the
  // cluster; a job, its own job's and those of jobs no longer live.
  bool MayTouchCheckpoint(const transport::Principal& who, const std::string& relative) const;
  // Serves a chunk of a checkpoint file (`relative` to the checkpoint
  // directory) to `who`.
  transport::Frames ServeCheckpointFile(const transport::Principal& who,
                                        const std::string& relative, uint64_t offset,
                                        uint64_t length, uint64_t id);
  static constexpr size_t kMaxSpillJobs = 256;
  static constexpr size_t kMaxTransfers = 64;

  boost::asio::io_context& io_;
  SharedMemoryStore store_;
  ObjectPins pins_;
  zmq::context_t context_{1};
  std::unique_ptr<transport::ZapServer> zap_;
  zmq::socket_t router_;
  std::unique_ptr<transport::ZmqSocketLoop> loop_;
  LogLookup log_lookup_;
  std::string log_dir_;
  std::string ip_;
  SystemClock clock_;
  transport::Credential credential_;  // the cluster's: checks read grants
  std::unique_ptr<PortReserver> ports_;  // set by Start

  // Spilling (EnableSpilling): the spiller is used by the spill thread only.
  std::unique_ptr<StoreSpiller> spiller_;
  std::mutex usage_mu_;
  bool count_queued_ = false;  // guarded by usage_mu_
  StoreSpiller::Usage usage_;  // guarded by usage_mu_
  // Checkpoints (EnableCheckpoints).
  std::optional<CheckpointFiles> checkpoints_;
  transport::ClientSecurity pull_security_;
  std::shared_ptr<ObjectServerDirectory> servers_;
  JobLive job_live_;
  zmq::context_t pull_context_{1};  // the transfer thread's pulls
  // Last: stopped (joined) before anything their jobs use goes.
  std::unique_ptr<WorkThread> spill_thread_;
  std::unique_ptr<WorkThread> transfer_thread_;
  // False once the server is gone: replies the spill thread posts to the loop
  // after that are dropped.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // pins_.size(), published by the loop for the spill thread's store-full error.
  std::shared_ptr<std::atomic<uint64_t>> held_objects_ =
      std::make_shared<std::atomic<uint64_t>>(0);
};

}  // namespace rayx::worker
