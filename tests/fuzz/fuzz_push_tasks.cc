// Fuzzes the flat task-batch format (protocol/push_tasks.h), both directions.
// Input: a byte choosing request (even) or reply (odd), a byte with the number
// of payload frames (at most 7), each frame as a u16-length part, then the
// body. A parse must stay inside its input; what parses must write back, with
// PushTasksWriter, to a body that parses to the same calls or results.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "protocol/push_tasks.h"

namespace rayx::fuzz {
namespace {

using protocol::ObjectLocation;
using protocol::WireValue;
using protocol::WireValueView;

// The payload frame `bytes` is, by address: parsing hands out views of them.
uint32_t FrameIndex(std::string_view bytes, const std::vector<std::string_view>& payload) {
  for (uint32_t i = 0; i < payload.size(); ++i) {
    if (payload[i].data() == bytes.data() && payload[i].size() == bytes.size()) return i;
  }
  Check(false, "a frame value is not a view of a payload frame");
  return 0;
}

void TouchLocation(const ObjectLocation& l) {
  Touch(l.node_address);
  Touch(l.object_address);
  Touch(l.path);
}

bool SameLocation(const ObjectLocation& a, const ObjectLocation& b) {
  return a.node_address == b.node_address && a.object_address == b.object_address &&
         a.path == b.path && a.size == b.size;
}

bool SameValue(const WireValueView& a, const WireValueView& b) {
  if (a.kind != b.kind) return false;
  if (a.kind == WireValue::kStored) return SameLocation(a.stored, b.stored);
  return a.bytes == b.bytes;
}

void FuzzRequest(std::string_view body, const std::vector<std::string_view>& payload) {
  protocol::PushTasksView view;
  Status s = protocol::ParsePushTasksRequest(body, payload, &view);
  if (!s.ok()) {
    Check(s.code() == StatusCode::kInvalidArgument, s.ToString());
    return;
  }
  std::string out;
  protocol::PushTasksWriter w;
  w.BeginRequest(&out, view.job_id);
  Touch(view.job_id);
  for (const auto& call : view.calls) {
    Touch(call.function);
    Touch(call.actor_id);
    Touch(call.return_id);
    Check(static_cast<uint64_t>(call.first_arg) + call.arg_count <= view.args.size(),
          "a call's arguments lie outside the batch's");
    w.Call(call.call_id, call.actor_creation, call.function, call.actor_id, call.return_id,
           call.arg_count);
    for (uint32_t a = 0; a < call.arg_count; ++a) {
      const WireValueView& arg = view.args[call.first_arg + a];
      Touch(arg.bytes);
      switch (arg.kind) {
        case WireValue::kInline: w.InlineArg(arg.bytes); break;
        case WireValue::kFrame: w.FrameArg(FrameIndex(arg.bytes, payload)); break;
        case WireValue::kStored:
          TouchLocation(arg.stored);
          w.StoredArg(arg.stored);
          break;
        default: Check(false, "an argument of kind error was accepted");
      }
    }
  }
  w.Finish();
  protocol::PushTasksView again;
  Status s2 = protocol::ParsePushTasksRequest(out, payload, &again);
  Check(s2.ok(), "a rewritten request does not parse: " + s2.ToString());
  Check(again.job_id == view.job_id && again.calls.size() == view.calls.size() &&
            again.args.size() == view.args.size(),
        "a rewritten request parses to another batch");
  for (size_t i = 0; i < view.calls.size(); ++i) {
    const auto& a = view.calls[i];
    const auto& b = again.calls[i];
    Check(a.call_id == b.call_id && a.actor_creation == b.actor_creation &&
              a.function == b.function && a.actor_id == b.actor_id &&
              a.return_id == b.return_id && a.first_arg == b.first_arg &&
              a.arg_count == b.arg_count,
          "a rewritten call differs");
  }
  for (size_t i = 0; i < view.args.size(); ++i) {
    Check(SameValue(view.args[i], again.args[i]), "a rewritten argument differs");
  }
}

void FuzzReply(std::string_view body, const std::vector<std::string_view>& payload) {
  std::vector<protocol::TaskResultView> results;
  Status s = protocol::ParsePushTasksReply(body, payload, &results);
  if (!s.ok()) {
    Check(s.code() == StatusCode::kInvalidArgument, s.ToString());
    return;
  }
  std::string out;
  protocol::PushTasksWriter w;
  w.BeginReply(&out);
  for (const auto& r : results) {
    Touch(r.value.bytes);
    switch (r.value.kind) {
      case WireValue::kInline: w.InlineResult(r.call_id, r.value.bytes); break;
      case WireValue::kFrame: w.FrameResult(r.call_id, FrameIndex(r.value.bytes, payload)); break;
      case WireValue::kStored:
        TouchLocation(r.value.stored);
        w.StoredResult(r.call_id, r.value.stored);
        break;
      case WireValue::kError:
        Touch(r.error_type);
        Touch(r.error_message);
        Touch(r.error_node);
        w.ErrorResult(r.call_id, r.error_kind, r.error_type, r.error_message, r.error_node);
        break;
    }
  }
  w.Finish();
  std::vector<protocol::TaskResultView> again;
  Status s2 = protocol::ParsePushTasksReply(out, payload, &again);
  Check(s2.ok(), "a rewritten reply does not parse: " + s2.ToString());
  Check(again.size() == results.size(), "a rewritten reply has another number of results");
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& a = results[i];
    const auto& b = again[i];
    Check(a.call_id == b.call_id && SameValue(a.value, b.value) &&
              a.error_kind == b.error_kind && a.error_type == b.error_type &&
              a.error_message == b.error_message &&
              a.error_node == b.error_node,
          "a rewritten result differs");
  }
}

}  // namespace
}  // namespace rayx::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rayx::fuzz;  // NOLINT
  FuzzInput in(data, size);
  const bool reply = in.Byte() & 1;
  const size_t frames = in.Byte() % 8;
  // Each frame and the body in a heap block of exactly its size (a short
  // std::string would keep it inline), so that AddressSanitizer sees a read
  // past any one of them.
  std::vector<std::vector<char>> owned;
  for (size_t i = 0; i < frames; ++i) {
    std::string_view part = in.Part();
    owned.emplace_back(part.begin(), part.end());
  }
  std::string_view rest = in.Rest();
  std::vector<char> body(rest.begin(), rest.end());
  std::vector<std::string_view> payload;
  for (const auto& f : owned) payload.emplace_back(f.data(), f.size());
  std::string_view body_view(body.data(), body.size());
  if (reply) {
    FuzzReply(body_view, payload);
  } else {
    FuzzRequest(body_view, payload);
  }
  return 0;
}
