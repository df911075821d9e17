// The worker loop's results: each call's return values collected into one
// reply per batch, sent when the batch is done. Part of WorkerLoop
// (worker_loop.h).
#include <string>
#include <string_view>

#include "common/logging.h"
#include "protocol/codec.h"
#include "protocol/holding_value.h"
#include "rayx/detail/runtime_api.h"
#include "transport/message.h"
#include "worker/worker_loop.h"

namespace rayx::detail {

void WorkerLoop::AddResult(uint64_t call_id, std::string_view return_id,
                           std::string_view call_job, CallOutcome outcome, const uint32_t* item) {
  if (!outcome.ok) {
    const std::string& node = outcome.error_node.empty() ? node_ip_ : outcome.error_node;
    if (outcome.error_kind == protocol::TaskErrorKind::kException) {
      writer_.ExceptionResult(call_id, outcome.error_type, outcome.error_message, node);
    } else {
      writer_.ErrorResult(call_id, outcome.error_kind, outcome.error_message, node);
    }
    return;
  }
  // A large result goes to this node's store, under this worker's own job
  // (removed when it ends); the reply says where. Another job's call (to a
  // shared actor) gets its results inline.
  std::string item_id;
  if (item != nullptr) item_id = protocol::GeneratorItemId(return_id, *item);
  std::string_view object_id = item != nullptr ? std::string_view(item_id) : return_id;
  // A value holding ObjectRefs is stored whatever its size, and the stored
  // object holds what they point at (protocol/holding_value.h).
  std::vector<std::string> held;
  std::string_view inner;
  if (protocol::ParseHoldingValue(outcome.value, &held, &inner)) {
    outcome.value.erase(0, outcome.value.size() - inner.size());
  }
  if ((outcome.value.size() >= kInlineObjectLimit || !held.empty()) && !store_.dir().empty() &&
      !object_id.empty() && call_job == job_) {
    if (Status room = ReserveResult(outcome.value.size());
        room.code() == StatusCode::kResourceExhausted) {
      writer_.ErrorResult(call_id, protocol::TaskErrorKind::kObjectStoreFull,
                          "the result (" + std::to_string(outcome.value.size()) +
                              " bytes) cannot be stored: " + room.message(),
                          node_ip_);
      return;
    }
    auto path = store_.Write(SharedMemoryStore::ObjectName(job_, object_id), outcome.value);
    if (path.ok()) {
      if (!held.empty() && hold_contents_) hold_contents_(*path, std::move(held));
      protocol::ObjectLocation stored;
      stored.node_address = node_ip_;
      stored.object_address = object_address_;
      stored.path = *path;
      stored.size = outcome.value.size();
      writer_.StoredResult(call_id, stored, item);
      return;
    }
    RAYX_LOG(Warning) << "result sent inline: " << path.status();
  }
  if (outcome.value.size() >= protocol::kMaxInlineWireValue) {
    writer_.FrameResult(call_id, static_cast<uint32_t>(result_frames_.size()), item);
    result_frames_.push_back(transport::Frame::Adopt(std::move(outcome.value)));
    return;
  }
  writer_.InlineResult(call_id, outcome.value, item);
}

void WorkerLoop::Flush() {
  if (writer_.count() == 0) return;
  writer_.Finish();
  protocol::Envelope env;
  env.t = static_cast<uint16_t>(protocol::MessageType::kPushTasksReply);
  uint64_t first_id = 0;
  std::memcpy(&first_id, body_.data() + 4,
              sizeof first_id);  // the first result's call id
  env.id = first_id;
  transport::Frames out;
  out.reserve(3 + result_frames_.size());
  out.push_back(routing_.Copy());
  out.push_back(transport::MakeFrame(protocol::Encode(env)));
  out.push_back(transport::MakeFrame(body_));
  for (auto& f : result_frames_) out.push_back(std::move(f));
  result_frames_.clear();
  send_(out);
  writer_.BeginReply(&body_);
}

}  // namespace rayx::detail
