// A client of a real cluster that holds what a driver holds (today the cluster
// token) and speaks the wire protocol itself: for integration tests of what an
// authenticated but hostile peer can send, which a runtime never would.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "protocol/job_messages.h"
#include "protocol/kv_messages.h"
#include "protocol/messages.h"
#include "protocol/push_tasks.h"
#include "rayx/status.h"
#include "transport/security.h"
#include "transport/sync_client.h"

namespace rayx::testing {

// One call of a PushTasksRequest built by hand.
struct PushedCall {
  uint64_t call_id = 1;
  std::string function;
  // Per argument: msgpack bytes sent inline, or a location (then `bytes` is unused).
  struct Arg {
    std::string bytes;
    std::optional<protocol::ObjectLocation> stored;
  };
  std::vector<Arg> args;
  std::string return_id;  // "" = a fresh object id
  std::string actor_id;
  bool actor_creation = false;
};

// One result, copied out of the worker's reply.
struct PushedResult {
  uint64_t call_id = 0;
  protocol::WireValue kind = protocol::WireValue::kInline;
  std::string bytes;  // kInline and kFrame
  protocol::ObjectLocation stored;
  std::string error_type, error_message, error_node;
};

// Design: the peer registers with the head as a driver of a new job and keeps
// that one connection (the head knows a driver by its connection); worker
// connections are opened per push. Whatever credential the cluster asks of a
// driver is proven here and only here (Connect, and the worker sockets), so
// when authentication changes, this file changes and the attacks written on
// top of it stay as they are. Blocking; one thread.
class AuthenticatedPeer {
 public:
  // Registers as the driver of a new job at `head_address` ("host:port").
  static Result<std::unique_ptr<AuthenticatedPeer>> Connect(const std::string& head_address,
                                                            const std::string& token);

  const JobId& job_id() const { return job_id_; }
  const std::string& token() const { return token_; }
  transport::SyncClient& head() { return *head_; }

  // A request to the head on the driver's connection.
  template <typename Reply, typename Request>
  Result<Reply> Call(const Request& request, int64_t timeout_ms = 10000) {
    return head_->Call<Reply>(request, timeout_ms);
  }

  // Leases a worker of this job running `executable` (in worker mode), with
  // `cpus` CPUs; returns the grant (its address, pid and node).
  Result<protocol::RequestLeaseReply> LeaseWorker(const std::string& executable, double cpus = 1);

  // Sends `calls` to the worker at `worker_address` as one PushTasksRequest
  // naming job `job` (this peer's own when empty) and returns the results of
  // every reply until each call has one, or the error reply.
  Result<std::vector<PushedResult>> Push(const std::string& worker_address,
                                         const std::vector<PushedCall>& calls,
                                         const std::string& job = "",
                                         int64_t timeout_ms = 30000);

  // Puts a KV value as this job (job-scoped when `job_scoped`).
  Result<protocol::KvPutReply> KvPut(const std::string& ns, const std::string& key,
                                     const std::string& value, bool job_scoped);

  // Ends this peer's job (FinishJobRequest), as a driver's Shutdown does.
  Status FinishJob();

 private:
  AuthenticatedPeer() = default;

  std::string token_;
  JobId job_id_;
  std::unique_ptr<transport::SyncClient> head_;
  transport::WireSecurity wire_security_ = transport::WireSecurity::kEncrypted;
  uint64_t next_object_ = 1;
};

}  // namespace rayx::testing
