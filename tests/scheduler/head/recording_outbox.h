// A HeadOutbox for tests: records every typed call, sends nothing.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "head/head_outbox.h"

namespace rayx::scheduler {

// Each call becomes one Record; tests take and inspect them. Not thread-safe.
class RecordingOutbox final : public HeadOutbox {
 public:
  enum class Kind {
    kGrantLease,
    kFail,
    kPlacementGroupWaitDone,
    kKvWaitDone,
    kActorFound,
    kProcessExited,
    kLeasesLost,
    kGroupMemberDied,
    kWorkerOutput,
    kFlushOutput,
    kOutputFlushed,
    kStartWorker,
    kKillWorkers,
    kJobFinished,
    kWatchDriver,
  };
  struct Record {
    Kind kind;
    std::string peer;
    uint64_t request_id = 0;
    Status status;                                 // kFail
    protocol::RequestLeaseReply grant;             // kGrantLease
    protocol::WaitPlacementGroupReply group_wait;  // kPlacementGroupWaitDone
    protocol::StartWorkerRequest start;            // kStartWorker
    protocol::KillWorkersRequest kill;             // kKillWorkers
    JobId job_id;                                  // kJobFinished
    protocol::LeasesLostNotice lost;               // kLeasesLost
    protocol::GroupMemberDiedNotice member_died;   // kGroupMemberDied
    protocol::WorkerOutputNotice output;           // kWorkerOutput
    protocol::ActorInfo actor;                     // kActorFound
  };

  void GrantLease(const Requester& to, const protocol::RequestLeaseReply& grant) override {
    Add({Kind::kGrantLease, to.peer, to.request_id}).grant = grant;
  }
  void Fail(const Requester& to, const Status& status) override {
    Add({Kind::kFail, to.peer, to.request_id}).status = status;
  }
  void PlacementGroupWaitDone(const Requester& to,
                              const protocol::WaitPlacementGroupReply& reply) override {
    Add({Kind::kPlacementGroupWaitDone, to.peer, to.request_id}).group_wait = reply;
  }
  void KvWaitDone(const Requester& to, const protocol::KvWaitReply&) override {
    Add({Kind::kKvWaitDone, to.peer, to.request_id});
  }
  void ActorFound(const Requester& to, const protocol::GetActorReply& reply) override {
    Add({Kind::kActorFound, to.peer, to.request_id}).actor = reply.actor;
  }
  void ProcessExited(const std::string& owner_peer, const protocol::ProcessExitedNotice&) override {
    Add({Kind::kProcessExited, owner_peer, 0});
  }
  void LeasesLost(const std::string& owner_peer, const protocol::LeasesLostNotice& notice) override {
    Add({Kind::kLeasesLost, owner_peer, 0}).lost = notice;
  }
  void GroupMemberDied(const std::string& member_peer,
                       const protocol::GroupMemberDiedNotice& notice) override {
    Add({Kind::kGroupMemberDied, member_peer, 0}).member_died = notice;
  }
  void WorkerOutput(const std::string& driver_peer,
                    const protocol::WorkerOutputNotice& notice) override {
    Add({Kind::kWorkerOutput, driver_peer, 0}).output = notice;
  }
  void FlushOutput(const std::string& agent_peer, uint64_t request_id,
                   const protocol::FlushOutputRequest& request) override {
    Add({Kind::kFlushOutput, agent_peer, request_id}).job_id = request.job_id;
  }
  void OutputFlushed(const Requester& to, const protocol::FlushOutputReply&) override {
    Add({Kind::kOutputFlushed, to.peer, to.request_id});
  }
  void WatchDriver(const std::string& agent_peer, uint64_t request_id,
                   const protocol::WatchDriverRequest& request) override {
    Add({Kind::kWatchDriver, agent_peer, request_id}).job_id = request.job_id;
  }
  void StartWorker(const std::string& agent_peer, uint64_t request_id,
                   const protocol::StartWorkerRequest& request) override {
    Add({Kind::kStartWorker, agent_peer, request_id}).start = request;
  }
  void KillWorkers(const std::string& agent_peer, uint64_t request_id,
                   const protocol::KillWorkersRequest& request) override {
    Add({Kind::kKillWorkers, agent_peer, request_id}).kill = request;
  }
  void JobFinished(const std::string& agent_peer, uint64_t request_id,
                   const protocol::JobFinishedNotice& notice) override {
    Add({Kind::kJobFinished, agent_peer, request_id}).job_id = notice.job_id;
  }

  // Takes the records so far.
  std::vector<Record> Take() {
    std::vector<Record> out;
    out.swap(records_);
    return out;
  }
  // The records of one kind so far (left in place).
  std::vector<Record> OfKind(Kind kind) const {
    std::vector<Record> out;
    for (const auto& r : records_) {
      if (r.kind == kind) out.push_back(r);
    }
    return out;
  }

 private:
  Record& Add(Record record) {
    records_.push_back(std::move(record));
    return records_.back();
  }
  std::vector<Record> records_;
};

}  // namespace rayx::scheduler
