// Speaking the wire protocol to a real cluster as an authenticated driver.
#include "util/authenticated_peer.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <zmq.hpp>

#include "common/address.h"
#include "protocol/codec.h"
#include "rayx/version.h"
#include "transport/message.h"
#include "transport/security.h"
#include "transport/zmq_frame.h"

namespace rayx::testing {

Result<std::unique_ptr<AuthenticatedPeer>> AuthenticatedPeer::Connect(
    const std::string& head_address, const std::string& token) {
  auto hp = ParseHostPort(head_address);
  if (!hp.ok()) return hp.status();
  auto client =
      transport::SyncClient::Connect(*hp, transport::ClientSecurity::ClusterToHead(token));
  if (!client.ok()) return client.status();
  std::unique_ptr<AuthenticatedPeer> peer(new AuthenticatedPeer());
  peer->token_ = token;
  peer->head_ = std::move(*client);
  protocol::RegisterDriverRequest hello;
  hello.token = token;
  hello.rayx_version = kRayxVersion;
  hello.node_ip = "127.0.0.1";
  hello.pid = static_cast<int32_t>(::getpid());
  auto registered = peer->head_->Call<protocol::RegisterDriverReply>(hello, 15000);
  if (!registered.ok()) return registered.status();
  peer->job_id_ = registered->job_id;
  peer->wire_security_ = registered->wire_security ? transport::WireSecurity::kEncrypted
                                                    : transport::WireSecurity::kAuthenticated;
  return peer;
}

Result<protocol::RequestLeaseReply> AuthenticatedPeer::LeaseWorker(const std::string& executable,
                                                                   double cpus) {
  protocol::RequestLeaseRequest req;
  req.job_id = job_id_;
  req.resources = {{"CPU", cpus}};
  req.executable = executable;
  char cwd[4096];
  req.working_dir = ::getcwd(cwd, sizeof cwd) ? cwd : "/";
  return head_->Call<protocol::RequestLeaseReply>(req, 60000);
}

Result<std::vector<PushedResult>> AuthenticatedPeer::Push(const std::string& worker_address,
                                                          const std::vector<PushedCall>& calls,
                                                          const std::string& job,
                                                          int64_t timeout_ms) {
  if (calls.empty()) return std::vector<PushedResult>();
  std::string body;
  protocol::PushTasksWriter writer;
  writer.BeginRequest(&body, job.empty() ? job_id_.Hex() : job);
  for (const PushedCall& call : calls) {
    std::string return_id = call.return_id;
    if (return_id.empty()) {
      char hex[33];
      std::snprintf(hex, sizeof hex, "%016llx%016llx",
                    static_cast<unsigned long long>(::getpid()),
                    static_cast<unsigned long long>(next_object_++));
      return_id = hex;
    }
    writer.Call(call.call_id, call.actor_creation, call.function, call.actor_id, return_id,
                static_cast<uint32_t>(call.args.size()));
    for (const auto& arg : call.args) {
      if (arg.stored) {
        writer.StoredArg(*arg.stored);
      } else {
        writer.InlineArg(arg.bytes);
      }
    }
  }
  writer.Finish();
  protocol::Envelope env;
  env.t = static_cast<uint16_t>(protocol::MessageType::kPushTasksRequest);
  env.id = calls.front().call_id;

  zmq::context_t context(1);
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  // The worker admits its own job's credential (whatever job the request's
  // body then names) and presents its job's key.
  auto credential = transport::Credential::Cluster(token_).ForJob(job_id_);
  if (!credential.ok()) return credential.status();
  std::string worker_key = credential->CurvePublicKey();
  transport::MakeClient(socket, wire_security_, *credential, worker_key);
  std::vector<PushedResult> out;
  try {
    socket.connect(worker_address);
    transport::Frames frames;
    frames.push_back(transport::MakeFrame(protocol::Encode(env)));
    frames.push_back(transport::MakeFrame(body));
    transport::SendFrames(socket, frames);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (out.size() < calls.size()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return Status::TimedOut("the worker at " + worker_address + " answered " +
                                std::to_string(out.size()) + " of " +
                                std::to_string(calls.size()) + " calls within " +
                                std::to_string(timeout_ms) + " ms");
      }
      zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, left);
      if (!(item.revents & ZMQ_POLLIN)) continue;
      transport::Frames reply = transport::ReceiveFrames(socket);
      if (reply.size() < 2) return Status::Internal("a reply of fewer than 2 frames");
      auto reply_env = protocol::Decode<protocol::Envelope>(transport::FrameView(reply[0]));
      if (!reply_env.ok()) return reply_env.status();
      if (reply_env->t == static_cast<uint16_t>(protocol::MessageType::kErrorReply)) {
        auto error = protocol::Decode<protocol::ErrorReply>(transport::FrameView(reply[1]));
        return error.ok() ? error->ToStatus() : error.status();
      }
      std::vector<std::string_view> payload;
      for (size_t i = 2; i < reply.size(); ++i) payload.push_back(transport::FrameView(reply[i]));
      std::vector<protocol::TaskResultView> results;
      RAYX_RETURN_IF_ERROR(
          protocol::ParsePushTasksReply(transport::FrameView(reply[1]), payload, &results));
      for (const auto& r : results) {
        PushedResult result;
        result.call_id = r.call_id;
        result.kind = r.value.kind;
        result.bytes = std::string(r.value.bytes);
        result.stored = r.value.stored;
        result.error_type = std::string(r.error_type);
        result.error_message = std::string(r.error_message);
        result.error_node = std::string(r.error_node);
        out.push_back(std::move(result));
      }
    }
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("pushing to " + worker_address + ": " + e.what());
  }
  return out;
}

Result<protocol::KvPutReply> AuthenticatedPeer::KvPut(const std::string& ns,
                                                      const std::string& key,
                                                      const std::string& value, bool job_scoped) {
  protocol::KvPutRequest req;
  req.ns = ns;
  req.key = key;
  req.value = value;
  req.overwrite = true;
  if (job_scoped) req.job_id = job_id_;
  return head_->Call<protocol::KvPutReply>(req, 10000);
}

Status AuthenticatedPeer::FinishJob() {
  protocol::FinishJobRequest req;
  req.job_id = job_id_;
  auto reply = head_->Call<protocol::FinishJobReply>(req, 10000);
  return reply.ok() ? Status::OK() : reply.status();
}

}  // namespace rayx::testing
