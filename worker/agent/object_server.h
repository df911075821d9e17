// A node agent's object server: serves pieces of the node's stored objects to
// other nodes, and deletes objects their owners have freed.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <zmq.hpp>

#include "agent/object_pins.h"
#include "agent/port_reserver.h"
#include "agent/process_runner.h"
#include "common/clock.h"
#include "object_store/shared_memory_store.h"
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
};

}  // namespace rayx::worker
