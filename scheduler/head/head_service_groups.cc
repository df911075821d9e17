// The head's request handlers for small shared state that workers use: the
// key-value store (rendezvous, user keys) and collective groups' member
// watches. Part of HeadService (head_service.h).
#include <algorithm>

#include "head/head_service.h"

#include "common/logging.h"

namespace rayx::scheduler {

// ---- The key-value store.

void HeadService::AnswerKvWaits(std::vector<KvWaitAnswer> answers) {
  for (auto& answer : answers) {
    Requester to{std::move(answer.waiter.peer), answer.waiter.request_id};
    if (answer.value.ok()) {
      protocol::KvWaitReply reply;
      reply.value = std::move(*answer.value);
      outbox_.KvWaitDone(to, reply);
    } else {
      outbox_.Fail(to, answer.value.status());
    }
  }
}

Result<protocol::KvPutReply> HeadService::OnKvPut(const protocol::KvPutRequest& req, Call& call) {
  // A job writes its own keys (they go with it) and unscoped ones (code of
  // detached actors, which outlives the job); never another job's.
  if (!req.job_id.IsNil()) RAYX_RETURN_IF_ERROR(CheckJob(req.job_id, call, "write KV keys"));
  // The value is copied once: the request is not ours to move from.
  auto put = kv_.Put(req.ns, req.key, req.value, req.overwrite, req.job_id);
  if (!put.ok()) return put.status();
  AnswerKvWaits(std::move(put->answered));
  protocol::KvPutReply reply;
  reply.added = put->added;
  return reply;
}

Result<protocol::KvGetReply> HeadService::OnKvGet(const protocol::KvGetRequest& req, Call&) {
  auto value = kv_.Get(req.ns, req.key);
  if (!value.ok()) return value.status();
  protocol::KvGetReply reply;
  reply.found = value->has_value();
  if (reply.found) reply.value = std::move(**value);
  return reply;
}

Result<NoReply> HeadService::OnKvWait(const protocol::KvWaitRequest& req, Call& call) {
  int64_t timeout = std::clamp<int64_t>(req.timeout_ms, 0, kLongestWaitMs);
  if (timeout == 0) {
    auto value = kv_.Get(req.ns, req.key);
    if (!value.ok()) return value.status();
    if (!value->has_value()) {
      return Status::TimedOut("KV key \"" + req.key + "\" is not in namespace \"" + req.ns +
                              "\" (waited 0 ms)");
    }
    AnswerKvWaits({{KvWaiter{call.peer_id, call.id}, std::move(**value)}});
    return NoReply{};
  }
  auto value = kv_.Wait(req.ns, req.key, KvWaiter{call.peer_id, call.id},
                        clock_.NowMs() + timeout);
  if (!value.ok()) return value.status();
  if (value->has_value()) {
    AnswerKvWaits({{KvWaiter{call.peer_id, call.id}, std::move(**value)}});
  }
  return NoReply{};  // answered by a Put of the key or at the deadline
}

Result<protocol::KvDeleteReply> HeadService::OnKvDelete(const protocol::KvDeleteRequest& req,
                                                        Call&) {
  protocol::KvDeleteReply reply;
  if (req.prefix) {
    auto deleted = kv_.DeletePrefix(req.ns, req.key);
    if (!deleted.ok()) return deleted.status();
    reply.count = static_cast<uint32_t>(deleted->count);
    reply.deleted = deleted->count > 0;
    reply.more = deleted->more;
    return reply;
  }
  auto deleted = kv_.Delete(req.ns, req.key);
  if (!deleted.ok()) return deleted.status();
  reply.deleted = *deleted;
  reply.count = *deleted ? 1 : 0;
  return reply;
}

Result<protocol::KvListReply> HeadService::OnKvList(const protocol::KvListRequest& req, Call&) {
  auto list = kv_.List(req.ns, req.prefix, req.limit, req.start_after);
  if (!list.ok()) return list.status();
  protocol::KvListReply reply;
  reply.keys = std::move(list->keys);
  reply.truncated = list->truncated;
  return reply;
}

Result<protocol::CheckpointRecordsReply> HeadService::OnCheckpointRecords(
    const protocol::CheckpointRecordsRequest& req, Call&) {
  constexpr const char* kNamespace = CheckpointAdoption::kNamespace;
  const std::string prefix =
      std::string(protocol::kCheckpointRecordPrefix) + (req.job.empty() ? "" : req.job + "/");
  protocol::CheckpointRecordsReply reply;
  std::string after;
  while (true) {
    auto page = kv_.List(kNamespace, prefix, 1000, after);
    if (!page.ok()) return page.status();
    for (const std::string& key : page->keys) {
      const std::string run = protocol::CheckpointRecordRun(key);
      if (run.empty() || (!req.run.empty() && run != req.run)) continue;
      if (reply.keys.size() == protocol::CheckpointRecordsReply::kMaxRecords) {
        reply.truncated = true;
        break;
      }
      auto value = kv_.Get(kNamespace, key);
      if (!value.ok() || !value->has_value()) continue;
      reply.keys.push_back(key);
      reply.records.push_back(std::move(**value));
    }
    if (reply.truncated || !page->truncated || page->keys.empty()) break;
    after = page->keys.back();
  }
  if (req.drop) checkpoint_adoption_.Drop(reply.keys);
  return reply;
}

Result<protocol::AdoptCheckpointsReply> HeadService::OnAdoptCheckpoints(
    const protocol::AdoptCheckpointsRequest& req, Call&) {
  if (req.keys.size() != req.records.size() ||
      req.keys.size() > protocol::AdoptCheckpointsRequest::kMaxRecords) {
    return Status::InvalidArgument("an AdoptCheckpointsRequest holds " +
                                   std::to_string(req.keys.size()) + " keys and " +
                                   std::to_string(req.records.size()) + " records (at most " +
                                   std::to_string(protocol::AdoptCheckpointsRequest::kMaxRecords) +
                                   ", one record per key)");
  }
  auto outcome = checkpoint_adoption_.Adopt(req);
  AnswerKvWaits(std::move(outcome.answered));
  if (!outcome.reply.adopted.empty() || !outcome.reply.dropped.empty()) {
    RAYX_LOG(Info) << "a node handed back " << outcome.reply.adopted.size()
                   << " checkpoint record(s) the cluster had lost; "
                   << outcome.reply.dropped.size() << " it held were dropped while it was away";
  }
  return std::move(outcome.reply);
}

// ---- Collective groups' members.

Result<protocol::WatchGroupReply> HeadService::OnWatchGroup(const protocol::WatchGroupRequest& req,
                                                            Call& call) {
  if (auto job = leases_.JobOfLease(req.lease_id)) {
    RAYX_RETURN_IF_ERROR(CheckJob(*job, call, "watch collective groups"));
  }
  // A lease that already ended would never be reported: refuse it.
  if (!leases_.IsLeaseLive(req.lease_id)) {
    return Status::NotFound("collective group '" + req.group + "' rank " +
                            std::to_string(req.rank) + ": lease " + req.lease_id.Hex() +
                            " is not live (its worker or node is gone)");
  }
  auto added = group_watch_.Add(call.peer_id, req);
  if (!added.ok()) return added.status();
  // The group lost a member before this rank watched it: tell it now.
  if (added->has_value()) outbox_.GroupMemberDied(call.peer_id, **added);
  return protocol::WatchGroupReply{};
}

Result<protocol::UnwatchGroupReply> HeadService::OnUnwatchGroup(
    const protocol::UnwatchGroupRequest& req, Call&) {
  protocol::UnwatchGroupReply reply;
  reply.removed = group_watch_.Remove(req);
  return reply;
}

}  // namespace rayx::scheduler
