// A node agent's object server: serves pieces of the node's stored objects to
// other nodes, and deletes objects their owners have freed.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <zmq.hpp>

#include "agent/object_pins.h"
#include "agent/port_reserver.h"
#include "agent/process_runner.h"
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
  // The spill thread: runs queued jobs (MakeRoom, Count) until stopped.
  void SpillLoop();
  // Queues `job` for the spill thread; false when it has kMaxSpillJobs waiting.
  bool QueueSpillJob(std::function<void()> job);
  static constexpr size_t kMaxSpillJobs = 256;

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
  std::thread spill_thread_;
  std::mutex spill_mu_;
  std::condition_variable spill_cv_;
  std::deque<std::function<void()>> spill_jobs_;  // guarded by spill_mu_
  bool spill_stop_ = false;                       // guarded by spill_mu_
  bool count_queued_ = false;                     // guarded by spill_mu_
  StoreSpiller::Usage usage_;                     // guarded by spill_mu_
  // False once the server is gone: replies the spill thread posts to the loop
  // after that are dropped.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace rayx::worker
