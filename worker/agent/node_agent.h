// The node agent: joins the cluster, heartbeats, and (with later issues) starts
// and supervises this node's worker processes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <zmq.hpp>

#include "common/address.h"
#include "agent/object_server.h"
#include "agent/package_cache.h"
#include "agent/process_runner.h"
#include "agent/worker_pool.h"
#include "common/clock.h"
#include "protocol/messages.h"
#include "transport/zmq_socket_loop.h"

namespace rayx::worker {

struct NodeAgentOptions {
  HostPort head;                 // where the head listens
  std::string token;             // the cluster token
  std::string node_ip;           // the address this node is reached at
  std::string hostname;
  bool is_head_node = false;
  ResourceMap resources;
  LabelMap labels;
  // Give up joining when the head has not answered within this. Default 15 s.
  int64_t connect_timeout_ms = 15000;
  // Exit when the head has not answered any heartbeat for this long (the head is
  // gone for good; a restarted head would not know this node). Default 60 s.
  int64_t head_lost_timeout_ms = 60000;
  // Sent instead of kRayxVersion; only tests of the version check change it.
  std::string announced_version = kRayxVersion;
  uint32_t announced_protocol = kProtocolVersion;
  // Where worker log files go. Default: the current directory.
  std::string log_dir = ".";
  // The node's shared-memory object store directory (created; removed at exit).
  std::string store_dir;
  // Where job working directories fetched from the head are unpacked.
  std::string package_dir = "node-packages";
};

// Single-threaded: everything runs on `io`. Calls `on_joined` once after the
// first successful registration and `on_fatal` when the agent must exit (refused,
// head unreachable); the caller stops `io` then.
class NodeAgent {
 public:
  struct Callbacks {
    std::function<void(const protocol::RegisterNodeReply&)> on_joined;
    std::function<void(const Status&)> on_fatal;
  };

  NodeAgent(boost::asio::io_context& io, NodeAgentOptions options, const Clock& clock,
            Callbacks callbacks);
  ~NodeAgent();

  // Starts the object server and joins. Returns Unavailable when the object
  // server cannot listen.
  Status Start();
  // Tells the head this node is leaving, waiting at most `timeout_ms` for its
  // acknowledgement (closing a socket does not guarantee delivery), then calls
  // `done`.
  void Leave(const std::string& reason, int64_t timeout_ms, std::function<void()> done);

  const NodeId& node_id() const { return node_id_; }
  // Reaps exited worker processes (call on SIGCHLD).
  void ReapWorkers();

 private:
  void SendRegister();
  void SendHeartbeat();
  void OnMessage(transport::Frames& frames);
  template <typename T>
  void Send(const T& body);
  void Fatal(const Status& status);
  void StartDeadline();
  void OnStartWorker(const protocol::StartWorkerRequest& req, uint64_t id);
  // Starts the lease's worker or processes once its packages are on this node.
  void StartWithPackages(protocol::StartWorkerRequest req, uint64_t id);

  boost::asio::io_context& io_;
  NodeAgentOptions options_;
  const Clock& clock_;
  Callbacks callbacks_;
  zmq::context_t context_{1};
  zmq::socket_t dealer_;
  std::unique_ptr<transport::ZmqSocketLoop> loop_;
  boost::asio::steady_timer heartbeat_timer_;
  boost::asio::steady_timer deadline_timer_;

  NodeId node_id_;
  bool joined_once_ = false;
  bool registering_ = false;
  bool leaving_ = false;
  int64_t heartbeat_period_ms_ = 250;
  int64_t last_reply_ms_ = 0;
  uint64_t next_id_ = 0;
  uint64_t register_id_ = 0;
  uint64_t unregister_id_ = 0;
  uint64_t heartbeat_seq_ = 0;
  std::function<void()> leave_done_;
  ObjectServer objects_;
  std::string object_address_;
  WorkerPool workers_;
  ProcessRunner processes_;
  PackageCache packages_;
};

}  // namespace rayx::worker
