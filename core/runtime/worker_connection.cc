// One leased worker's calls: batched sends, replies, refusal and loss.
#include "runtime/worker_connection.h"

#include <algorithm>

#include "protocol/codec.h"
#include "runtime/worker_send_queue.h"
#include "transport/message.h"

namespace rayx::detail {

using protocol::MessageType;
using transport::FrameView;
using transport::Frames;

namespace {
// One message to a worker carries at most this many calls (a batch of many
// small calls), and stops growing past this many body bytes.
constexpr uint32_t kMaxCallsPerMessage = 64;
constexpr size_t kMaxMessageBodyBytes = 256 * 1024;

// Whether `result` is an exception the function raised (what Ray's
// retry_exceptions retries): an error of kind kException, or an inline value
// that its language marks as one. rayx's own kinds (an argument of the wrong
// type, a function not registered, a result the store could not take) are not:
// running the call again would end the same way.
bool RaisedException(const Task& task, const protocol::TaskResultView& result) {
  if (result.value.kind == protocol::WireValue::kError) {
    return result.error_kind == protocol::TaskErrorKind::kException;
  }
  if (result.value.kind == protocol::WireValue::kStored) return false;  // bytes not at hand
  const std::string& prefix = task.retriable_value_prefix;
  return !prefix.empty() && result.value.bytes.substr(0, prefix.size()) == prefix;
}

// The stored argument whose copy the worker could not read, when `result`
// says the call did not run for that reason (WorkerLoop's ObjectLost error,
// which carries the copy's store path); else nullptr. Only tasks are sent
// again: an actor's calls keep their order, so theirs fail with the error.
const protocol::ObjectLocation* UnreadArgument(const Task& task,
                                               const protocol::TaskResultView& result) {
  if (task.actor_creation || !task.actor_id.IsNil()) return nullptr;
  if (result.value.kind != protocol::WireValue::kError ||
      result.error_kind != protocol::TaskErrorKind::kObjectLost) {
    return nullptr;
  }
  for (const auto& [index, location] : task.stored) {
    if (location.path == result.error_node && index < task.args.size() &&
        task.args[index].ref) {
      return &location;
    }
  }
  return nullptr;
}
}  // namespace

WorkerConnection::WorkerConnection(Info info, Owner* owner, ObjectTable& objects,
                                   WorkerSendQueue& send_queue, const Clock& clock)
    : info_(std::move(info)),
      owner_(owner),
      objects_(objects),
      send_queue_(send_queue),
      clock_(clock),
      idle_since_(clock.NowMs()) {}

void WorkerConnection::Open(WorkerConnector& connector) {
  link_ = connector.Connect(
      info_.address, info_.job, info_.actor_key, [this](Frames& frames) { OnMessage(frames); }, [this] { Lose(); });
}

void WorkerConnection::Queue(Task task) {
  uint64_t id = next_id_++;
  in_flight_.emplace(id, std::move(task));
  unsent_.push_back(id);
  send_queue_.Add(*this);
}

void WorkerConnection::SendQueued(protocol::PushTasksWriter& writer, std::string& body,
                                  const std::string& job_id) {
  // Nothing runs on the worker before these: the first of them runs at once;
  // any other may be handed back unstarted (Requeued) and sent again.
  const bool idle = in_flight_.size() == unsent_.size();
  const uint64_t runs_first = idle && !unsent_.empty() ? unsent_.front() : 0;
  size_t next = 0;
  while (next < unsent_.size()) {
    size_t first = next;
    writer.BeginRequest(&body, job_id);
    Frames frames(2);
    for (; next < unsent_.size() && writer.count() < kMaxCallsPerMessage &&
           body.size() < kMaxMessageBodyBytes;
         ++next) {
      const Task& task = in_flight_.at(unsent_[next]);
      writer.Call(unsent_[next], task.actor_creation, task.function, task.actor_id.Hex(),
                  task.object_id.Hex(), static_cast<uint32_t>(task.resolved.size()));
      for (uint32_t i = 0; i < task.resolved.size(); ++i) {
        auto stored = task.stored.find(i);
        if (stored != task.stored.end() && info_.grant_read) {
          // Another job's worker: the argument carries our grant to read it.
          protocol::ObjectLocation granted = stored->second;
          std::string_view path = granted.path;
          granted.grant = info_.grant_read(path.substr(path.rfind('/') + 1));
          writer.StoredArg(granted);
        } else if (stored != task.stored.end()) {
          writer.StoredArg(stored->second);
        } else if (task.resolved[i].size() >= protocol::kMaxInlineWireValue) {
          writer.FrameArg(static_cast<uint32_t>(frames.size() - 2));
          frames.push_back(transport::MakeFrame(task.resolved[i]));
        } else {
          writer.InlineArg(task.resolved[i]);
        }
      }
    }
    writer.Finish();
    protocol::Envelope env;
    env.t = static_cast<uint16_t>(MessageType::kPushTasksRequest);
    env.id = unsent_[first];
    frames[0] = transport::MakeFrame(protocol::Encode(env));
    frames[1] = transport::MakeFrame(body);
    if (!link_ || !link_->Send(frames)) {
      // The worker is gone (its socket has no peer left): the owner gives the
      // unsent calls to other workers or fails them.
      unsent_.erase(unsent_.begin(), unsent_.begin() + static_cast<ptrdiff_t>(first));
      Lose();
      return;
    }
    for (size_t i = first; i < next; ++i) {
      Task& task = in_flight_.at(unsent_[i]);
      // Sent: the copies in the frames went with them. A task that may run
      // again (retries left), or be sent again should a worker fail to read
      // a stored argument, keeps its arguments until its result arrives; so
      // does a task queued behind another (the worker may hand it back).
      if (task.retries_left > 0 || !task.stored.empty()) continue;
      if (task.actor_id.IsNil() && unsent_[i] != runs_first) continue;
      task.args_dropped = true;
      task.args.clear();
      task.resolved.clear();
      task.stored.clear();
    }
  }
  unsent_.clear();
}

void WorkerConnection::OnMessage(Frames& frames) {
  if (frames.size() < 2) return;
  auto env = protocol::Decode<protocol::Envelope>(FrameView(frames[0]));
  if (!env.ok()) return;
  if (env->t == static_cast<uint16_t>(MessageType::kErrorReply)) {
    auto error = protocol::Decode<protocol::ErrorReply>(FrameView(frames[1]));
    Refuse(error.ok() ? error->ToStatus().message() : error.status().message());
    return;
  }
  if (env->t != static_cast<uint16_t>(MessageType::kPushTasksReply)) return;
  payload_views_.clear();
  for (size_t i = 2; i < frames.size(); ++i) payload_views_.push_back(FrameView(frames[i]));
  Status parsed = protocol::ParsePushTasksReply(FrameView(frames[1]), payload_views_, &results_);
  if (!parsed.ok()) {
    Refuse(parsed.message());
    return;
  }
  for (const protocol::TaskResultView& result : results_) {
    auto it = in_flight_.find(result.call_id);
    if (it == in_flight_.end()) continue;
    if (result.item) {
      // A generator call's item: the call runs on.
      AddItem(it->second, result);
      continue;
    }
    Task task = std::move(it->second);
    in_flight_.erase(it);
    if (result.value.kind == protocol::WireValue::kError &&
        result.error_kind == protocol::TaskErrorKind::kRequeued &&
        task.actor_id.IsNil() && !task.args_dropped) {
      // Handed back unstarted: the call ahead of it waits in a get or wait.
      // It goes to another worker; this one gets no more until that call ends.
      blocked_ = true;
      retries_.push_back(std::move(task));
      continue;
    }
    blocked_ = false;  // a call of this worker ended: it runs calls again
    if (const protocol::ObjectLocation* lost = UnreadArgument(task, result)) {
      protocol::ObjectLocation copy = *lost;
      lost_arguments_.push_back(
          {std::move(task), std::move(copy), std::string(result.error_message)});
      continue;
    }
    if (task.retry_exceptions && task.retries_left > 0 && RaisedException(task, result)) {
      --task.retries_left;
      ++task.retries_done;
      objects_.CountRetry();
      retries_.push_back(std::move(task));
      continue;
    }
    ObjectTable::Completion done;
    done.id = std::move(task.object_id);
    switch (result.value.kind) {
      case protocol::WireValue::kError:
        done.error = std::make_shared<ErrorInfo>(
            ErrorInfo{result.error_kind, std::string(result.error_type),
                      std::string(result.error_message), task.DisplayName(),
                      std::string(result.error_node)});
        if (task.actor_creation) owner_->OnCreationFailed(*this, std::string(result.error_message));
        break;
      case protocol::WireValue::kStored:
        done.location = std::make_shared<const protocol::ObjectLocation>(result.value.stored);
        if (task.retries_left > 0 && !task.actor_creation) {
          // The closure keeps the arguments' bytes and locations, not their
          // objects: a chain of results would otherwise pin every object it
          // was made from (a rerun whose own stored argument is gone fails
          // with ObjectLost).
          for (Arg& arg : task.args) arg.ref = nullptr;
          task.object_id = done.id;
          done.recompute = owner_->Recompute(std::move(task));
        }
        break;
      default:
        done.value = std::make_shared<const std::string>(result.value.bytes);
        break;
    }
    completions_.push_back(std::move(done));
  }
  if (in_flight_.empty()) idle_since_ = clock_.NowMs();
  objects_.CompleteAll(completions_);
  for (Task& task : retries_) owner_->OnRetry(*this, std::move(task));
  retries_.clear();
  for (LostArgument& lost : lost_arguments_) {
    std::optional<std::string> why_not = owner_->OnArgumentLost(*this, lost.task, lost.lost);
    if (why_not) {
      FailTask(objects_, lost.task, protocol::TaskErrorKind::kObjectLost, lost.message + "; " + *why_not,
               lost.lost.node_address);
    }
  }
  lost_arguments_.clear();
  owner_->OnReplies(*this);
}

void WorkerConnection::AddItem(const Task& task, const protocol::TaskResultView& result) {
  std::string id = protocol::GeneratorItemId(task.object_id.Hex(), result.item_index);
  if (id.empty()) return;  // not a generator's result id: nobody could claim it
  ObjectTable::Completion item;
  item.id = ObjectId::FromWire(std::move(id));
  item.stream = task.object_id;
  if (result.value.kind == protocol::WireValue::kStored) {
    item.location = std::make_shared<const protocol::ObjectLocation>(result.value.stored);
  } else {
    item.value = std::make_shared<const std::string>(result.value.bytes);
  }
  completions_.push_back(std::move(item));
}

void WorkerConnection::Refuse(const std::string& why) {
  // Nothing more will work on this connection (e.g. the worker runs another
  // rayx version): its calls fail with the reason, and it is dropped.
  FailInFlight(protocol::TaskErrorKind::kProtocolError, "the worker at " + info_.address + " refused the call: " + why);
  Lose();
}

void WorkerConnection::Lose(std::string why, protocol::TaskErrorKind cause) {
  if (lost_) return;
  lost_ = true;
  loss_reason_ = why.empty() ? std::move(reported_why_) : std::move(why);
  loss_cause_ = cause == protocol::TaskErrorKind::kWorkerCrashed ? reported_cause_ : cause;
  owner_->OnLost(*this);
}

void WorkerConnection::LoseReported(std::string why, protocol::TaskErrorKind cause) {
  if (lost_ || reported_) return;
  if (link_) link_->ReceiveWaiting();
  if (lost_) return;
  reported_ = true;
  reported_why_ = std::move(why);
  reported_cause_ = cause;
  if (link_ && link_->AwaitDisconnect(kReportedLossWaitMs, [this] { Lose(); })) return;
  Lose();
}

std::string WorkerConnection::DescribeLoss() const {
  // A handle that found the worker by name knows only its address.
  std::string who = info_.pid > 0 ? "the worker process (pid " + std::to_string(info_.pid) +
                                        ") on node " + info_.node
                                  : "the worker at " + info_.address;
  return loss_reason_.empty() ? who + " died" : who + " was lost: " + loss_reason_;
}

std::vector<Task> WorkerConnection::TakeUnsent() {
  std::vector<Task> tasks;
  tasks.reserve(unsent_.size());
  for (uint64_t id : unsent_) {
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) continue;
    tasks.push_back(std::move(it->second));
    in_flight_.erase(it);
  }
  unsent_.clear();
  return tasks;
}

std::vector<Task> WorkerConnection::TakeInFlight() {
  std::vector<uint64_t> ids;
  ids.reserve(in_flight_.size());
  for (const auto& entry : in_flight_) ids.push_back(entry.first);
  std::sort(ids.begin(), ids.end());  // call ids grow with each Queue
  std::vector<Task> tasks;
  tasks.reserve(ids.size());
  for (uint64_t id : ids) tasks.push_back(std::move(in_flight_[id]));
  in_flight_.clear();
  unsent_.clear();
  return tasks;
}

void WorkerConnection::FailInFlight(protocol::TaskErrorKind kind, const std::string& message) {
  for (auto& [id, task] : in_flight_) FailTask(objects_, task, kind, message, info_.node);
  in_flight_.clear();
  unsent_.clear();
}

}  // namespace rayx::detail
