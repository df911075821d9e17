// Fakes for the submitters' unit tests: a head that answers lease requests when
// told, and workers whose sent calls the test reads and answers.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "protocol/push_tasks.h"
#include "runtime/argument_resolver.h"
#include "runtime/lease_client.h"
#include "runtime/object_table.h"
#include "runtime/worker_link.h"
#include "runtime/worker_send_queue.h"
#include "transport/message.h"

namespace rayx::detail::testing {

class FakeHead final : public LeaseClient {
 public:
  struct Pending {
    protocol::RequestLeaseRequest request;
    LeaseCallback done;
  };
  void RequestLease(const protocol::RequestLeaseRequest& request, LeaseCallback done) override {
    requests.push_back({request, std::move(done)});
  }
  void ReturnLease(const LeaseId& lease_id) override { returned.push_back(lease_id.Hex()); }
  void RegisterActor(const protocol::ActorInfo& actor) override { registered.push_back(actor); }
  void DropActorName(const std::string& name, const ActorId& actor_id) override {
    dropped.push_back(name + "/" + actor_id.Hex());
  }
  void LookupActor(const protocol::GetActorRequest& request, ActorCallback done) override {
    lookups.push_back({request.name, std::move(done)});
    lookup_requests.push_back(request);
  }

  // Grants the oldest request: a worker at `address` under `lease_id`.
  void Grant(const std::string& lease_id, const std::string& address) {
    ASSERT_FALSE(requests.empty()) << "no lease request to grant";
    Pending pending = std::move(requests.front());
    requests.pop_front();
    protocol::RequestLeaseReply reply;
    reply.lease_id = LeaseId::FromWire(lease_id);
    reply.worker_address = address;
    reply.node_address = "10.0.0.7";
    reply.worker_pid = 4242;
    pending.done(reply);
  }
  void Refuse(const Status& status) {
    ASSERT_FALSE(requests.empty()) << "no lease request to refuse";
    Pending pending = std::move(requests.front());
    requests.pop_front();
    pending.done(status);
  }

  std::deque<Pending> requests;
  std::vector<std::string> returned;
  std::vector<protocol::ActorInfo> registered;
  std::deque<std::pair<std::string, ActorCallback>> lookups;
  std::vector<protocol::GetActorRequest> lookup_requests;
  std::vector<std::string> dropped;  // "name/actor id"
};

// One call as a worker received it.
struct ReceivedCall {
  uint64_t call_id = 0;
  std::string function, actor_id, return_id;
  std::vector<std::string> args;  // inline or frame bytes; "stored:PATH" for a stored one
};

class FakeWorkerConnector final : public WorkerConnector {
 public:
  class Worker final : public WorkerLink {
   public:
    Worker(FakeWorkerConnector* connector, std::string address, MessageHandler on_message,
           LostHandler on_lost)
        : connector_(connector),
          address_(std::move(address)),
          on_message_(std::move(on_message)),
          on_lost_(std::move(on_lost)) {}
    ~Worker() override { connector_->workers_.erase(address_); }
    bool Send(transport::Frames& frames) override {
      if (gone) return false;
      std::vector<std::string_view> payload;
      for (size_t i = 2; i < frames.size(); ++i) payload.push_back(transport::FrameView(frames[i]));
      protocol::PushTasksView view;
      Status parsed =
          protocol::ParsePushTasksRequest(transport::FrameView(frames[1]), payload, &view);
      EXPECT_TRUE(parsed.ok()) << parsed;
      ++messages;
      for (const auto& call : view.calls) {
        ReceivedCall received{call.call_id, std::string(call.function),
                              std::string(call.actor_id), std::string(call.return_id), {}};
        for (uint32_t a = 0; a < call.arg_count; ++a) {
          const protocol::WireValueView& arg = view.args[call.first_arg + a];
          received.args.push_back(arg.kind == protocol::WireValue::kStored
                                      ? "stored:" + arg.stored.path
                                      : std::string(arg.bytes));
        }
        calls.push_back(std::move(received));
      }
      return true;
    }
    // Answers `call_id` with `value`.
    void Reply(uint64_t call_id, const std::string& value) {
      protocol::PushTasksWriter writer;
      std::string body;
      writer.BeginReply(&body);
      writer.InlineResult(call_id, value);
      writer.Finish();
      Deliver(call_id, body);
    }
    // Answers `call_id` with an error that happened on `node`: one of rayx's
    // kinds when `type` is its name ("Requeued"), else an exception.
    void ReplyError(uint64_t call_id, const std::string& type, const std::string& message,
                    const std::string& node = "10.0.0.7") {
      protocol::PushTasksWriter writer;
      std::string body;
      writer.BeginReply(&body);
      auto kind = protocol::Parse<protocol::TaskErrorKind>(type);
      if (kind.ok() && *kind != protocol::TaskErrorKind::kException) {
        writer.ErrorResult(call_id, *kind, message, node);
      } else {
        writer.ExceptionResult(call_id, type, message, node);
      }
      writer.Finish();
      Deliver(call_id, body);
    }
    // The worker process dies.
    void Die() { on_lost_(); }

    bool gone = false;  // sends fail (no peer left)
    int messages = 0;   // PushTasks messages received
    std::vector<ReceivedCall> calls;

   private:
    void Deliver(uint64_t id, const std::string& body) {
      protocol::Envelope env;
      env.t = static_cast<uint16_t>(protocol::MessageType::kPushTasksReply);
      env.id = id;
      transport::Frames frames;
      frames.push_back(transport::MakeFrame(protocol::Encode(env)));
      frames.push_back(transport::MakeFrame(body));
      on_message_(frames);
    }
    FakeWorkerConnector* connector_;
    std::string address_;
    MessageHandler on_message_;
    LostHandler on_lost_;
  };

  std::unique_ptr<WorkerLink> Connect(const std::string& address, const JobId& job,
                                      const std::optional<transport::ActorKey>& actor_key,
                                      MessageHandler on_message, LostHandler on_lost) override {
    jobs_connected[address] = job;
    if (actor_key) keys_connected[address] = *actor_key;
    auto worker = std::make_unique<Worker>(this, address, std::move(on_message), std::move(on_lost));
    workers_[address] = worker.get();
    if (gone_addresses.count(address)) worker->gone = true;
    return worker;
  }
  // The job each address was connected as (nil: the caller's own).
  std::map<std::string, JobId> jobs_connected;
  std::map<std::string, transport::ActorKey> keys_connected;  // another job's actors
  // The live link to `address`, or nullptr.
  Worker* At(const std::string& address) {
    auto it = workers_.find(address);
    return it == workers_.end() ? nullptr : it->second;
  }

  std::map<std::string, bool> gone_addresses;  // links to these fail every send

 private:
  std::map<std::string, Worker*> workers_;
};

}  // namespace rayx::detail::testing
