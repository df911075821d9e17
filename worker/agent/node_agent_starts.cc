// Node agent: starting the workers and processes of the leases the head
// grants (packages fetched first, devices a killed worker still holds waited
// for) and answering the head. Part of NodeAgent (node_agent.h).
#include <string>
#include <utility>
#include <vector>

#include "agent/node_agent.h"
#include "common/logging.h"
#include "transport/message.h"
#include "worker/worker_env.h"

namespace rayx::worker {

void NodeAgent::StartDeferred() {
  std::vector<Deferred> waiting;
  waiting.swap(deferred_);
  const int64_t now = clock_.NowMs();
  for (auto& d : waiting) {
    if (d.req.epoch != epoch_ || fencing() || registering() || leaving_) continue;
    if (processes_->DevicesReleased(d.req.gpu_ids)) {
      StartWithPackages(std::move(d.req), d.id);
      continue;
    }
    const std::string devices = WorkerEnv::JoinIdList(d.req.gpu_ids);
    const int64_t waited = now - d.since_ms;
    if (waited >= kDeviceWaitLimitMs) {
      Status stuck = Status::Unavailable(
          "lease " + d.req.lease_id.Short() + " was not started: GPU(s) " + devices + " of node " +
          options_.node_ip + " are still held by a killed worker's processes after waiting " +
          std::to_string(waited / 1000) +
          " s (uninterruptible, e.g. a hung CUDA context or driver call); "
          "check `nvidia-smi` on that node");
      RAYX_LOG(Error) << stuck.message();
      auto frames = transport::MakeErrorMessage(stuck, "node " + options_.node_ip, d.id);
      (void)head_->Send(frames);
      continue;
    }
    if (now - d.warned_ms >= kDeviceWaitWarnMs) {
      d.warned_ms = now;
      RAYX_LOG(Warning) << "lease " << d.req.lease_id.Short() << " waits for GPU(s) " << devices
                        << ", still held by a killed worker's processes after " << waited
                        << " ms (uninterruptible?)";
    }
    deferred_.push_back(std::move(d));
  }
  if (!deferred_.empty()) poll_due_ms_ = now + kPollMs;
}

void NodeAgent::OnStartWorker(const protocol::StartWorkerRequest& req, uint64_t id) {
  if (registering() && !fencing() && before_joined_.size() < 100000) {
    before_joined_.push_back(Deferred{req, id});  // its epoch is checked once joined
    return;
  }
  if (fencing() || registering() || req.epoch != epoch_) {
    RAYX_LOG(Warning) << "refused to start lease " << req.lease_id.Short() << " for epoch "
                      << req.epoch << ": this agent is "
                      << (fencing() || registering() ? "joining again"
                                                   : "epoch " + std::to_string(epoch_));
    return;
  }
  // This node's object server admits the job's workers it starts.
  verifier_->AllowJob(req.job_id);
  std::string hash = req.package_hash;
  for (const auto& spec : req.processes) {
    if (!spec.package_hash.empty()) hash = spec.package_hash;
  }
  if (hash.empty()) {
    StartWithPackages(req, id);
    return;
  }
  fetching_[req.lease_id] = id;
  packages_.Ensure(
      hash, [this, req = protocol::StartWorkerRequest(req), id](Result<std::string> dir) mutable {
        // Killed while its package came (KillWorkers answered for it).
        auto fetching = fetching_.find(req.lease_id);
        if (fetching == fetching_.end() || fetching->second != id) return;
        fetching_.erase(fetching);
        // The incarnation that was asked ended while the package came.
        if (req.epoch != epoch_ || fencing() || registering()) return;
        if (!dir.ok()) {
          if (!leaving_) {
            auto frames = transport::MakeErrorMessage(dir.status(), "node " + options_.node_ip, id);
            (void)head_->Send(frames);
          }
          return;
        }
        // The lease runs in this node's copy of the package.
        auto remap = [&](std::string& path) {
          if (req.package_dir.empty() || path.rfind(req.package_dir, 0) != 0) return;
          path = *dir + path.substr(req.package_dir.size());
        };
        remap(req.executable);
        remap(req.working_dir);
        if (!req.package_hash.empty()) req.package_dir = *dir;  // told to the worker
        for (auto& spec : req.processes) {
          if (spec.package_hash.empty()) continue;
          if (spec.cwd.empty()) spec.cwd = *dir;
          spec.env["RAYX_PACKAGE_HASH"] = spec.package_hash;
          spec.env["RAYX_PACKAGE_DIR"] = *dir;
        }
        StartWithPackages(std::move(req), id);
      });
}

void NodeAgent::StartWithPackages(protocol::StartWorkerRequest req, uint64_t id) {
  if (!processes_->DevicesReleased(req.gpu_ids)) {
    // A killed worker may still hold these devices: start once it is gone.
    const int64_t now = clock_.NowMs();
    deferred_.push_back(Deferred{std::move(req), id, now, now});
    poll_due_ms_ = now + kPollMs;
    ArmWakeup();
    return;
  }
  uint64_t epoch = req.epoch;
  protocol::LiveLease live{req.lease_id, req.job_id, req.resources, req.gpu_ids, 0,
                           !req.processes.empty()};
  processes_->Start(req, [this, id, epoch, live = std::move(live)](
                             Result<protocol::StartWorkerReply> result) mutable {
    // Nothing is reported for an incarnation that was fenced off meanwhile.
    if (epoch != epoch_ || fencing()) return;
    if (registering()) {
      // Asked for by the head's previous life, and started after the rejoin
      // listed what runs: the restarted head will never know it.
      if (result.ok()) processes_->Kill(live.lease_id);
      return;
    }
    if (result.ok()) {
      live.worker_pid = result->worker_pid ? result->worker_pid
                        : result->process_pids.empty() ? 0
                                                       : result->process_pids[0];
      live_leases_[live.lease_id] = std::move(live);
    }
    Reply(result, id);
  });
}

void NodeAgent::ReplyCancelled(const LeaseId& lease_id, uint64_t id) {
  Reply(Status::Cancelled("lease " + lease_id.Short() + " was stopped before its worker started"),
        id);
}

void NodeAgent::Reply(const Result<protocol::StartWorkerReply>& result, uint64_t id) {
  transport::Frames frames;
  if (result.ok()) {
    protocol::StartWorkerReply reply = *result;
    reply.epoch = epoch_;
    frames = transport::MakeMessage(reply, id);
  } else {
    frames = transport::MakeErrorMessage(result.status(), "node " + options_.node_ip, id);
  }
  if (!leaving_) (void)head_->Send(frames);
}

}  // namespace rayx::worker
