// The hot caller <-> worker messages: batches of calls (PushTasksRequest) and
// of their results (PushTasksReply), in a flat binary layout instead of
// msgpack maps.
//
// Design: these two messages carry every task and actor call, so their cost is
// paid per call; everything else on the wire stays msgpack (MSGPACK_DEFINE_MAP)
// because it is rare. A message is [Envelope][body][payload frames...] like any
// other (the Envelope stays msgpack and FROZEN; its id is the first call's id).
// The body is little-endian: u8, u32, u64, and str = u32 length + bytes.
//
//   PushTasksRequest (t = 52) body:
//     str job_id, u32 call_count, then per call:
//       u64 call_id (the caller's, echoed in the result), u8 flags (1: actor creation),
//       str function, str actor_id (empty: a task), str return_id (the result's object id),
//       u32 arg_count, then per argument: u8 kind and
//         kInline: str bytes | kFrame: u32 payload frame index | kStored: location
//   PushTasksReply (t = 53) body:
//     u32 result_count, then per result: u64 call_id, u8 kind and
//       kInline: str bytes | kFrame: u32 payload frame index | kStored: location |
//       kError: u8 TaskErrorKind (protocol 11), str type (the exception's, or
//       the kind's name), str message, str node (for a call that did not run
//       because a stored argument could not be read, kind ObjectLost and, in
//       place of the node, that copy's store path) |
//       kItem: u32 index, u8 kind (kInline, kFrame or kStored) and that value:
//         one value a generator call yielded, before its result (the call
//         stays in flight; its result, sent after its last item, ends it)
//   location = str node_address, str object_address, str path, u64 size,
//              str grant (empty but for an argument to another job's actor)
//
// Payload frames carry values too large to copy into the body. Parsing never
// throws and never reads outside its input: a malformed body is InvalidArgument.
// Fields are positional, so any change to the layout is a new protocol version.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/enum_names.h"
#include "protocol/messages.h"
#include "rayx/status.h"

namespace rayx::protocol {

// How one argument or result travels.
enum class WireValue : uint8_t { kInline = 0, kFrame = 1, kStored = 2, kError = 3, kItem = 4 };

// Items one generator call may yield (GeneratorItemId keeps them apart).
inline constexpr uint32_t kMaxGeneratorItems = (1u << 24) - 1;

// The object id of item `index` of the generator call whose result is
// `return_id` (an object id ending in 16 hex digits, as every call's is):
// those digits XOR (index + 1) << 40, so items never meet the ids a process
// makes (a counter in those digits) before 2^40 of them. Empty when
// `return_id` is not of that form or `index` is beyond kMaxGeneratorItems.
std::string GeneratorItemId(std::string_view return_id, uint32_t index);

// Values at least this large travel in their own payload frame rather than in
// the body (copying them into the body would cost a copy and a large buffer).
inline constexpr size_t kMaxInlineWireValue = 64 * 1024;

// Appends to a body. Not thread-safe.
class PushTasksWriter {
 public:
  // Starts a request body in `out` (cleared).
  void BeginRequest(std::string* out, std::string_view job_id);
  // Starts a reply body in `out` (cleared).
  void BeginReply(std::string* out);

  // Request: one call, followed by exactly `arg_count` Arg* calls.
  void Call(uint64_t call_id, bool actor_creation, std::string_view function,
            std::string_view actor_id, std::string_view return_id, uint32_t arg_count);
  void InlineArg(std::string_view bytes);
  void FrameArg(uint32_t frame_index);
  void StoredArg(const ObjectLocation& location);

  // Reply: one result each. With `item`: item *item of a generator call
  // (kItem), which does not end the call.
  void InlineResult(uint64_t call_id, std::string_view bytes, const uint32_t* item = nullptr);
  void FrameResult(uint64_t call_id, uint32_t frame_index, const uint32_t* item = nullptr);
  void StoredResult(uint64_t call_id, const ObjectLocation& location,
                    const uint32_t* item = nullptr);
  // A call whose code threw an exception of type `type`.
  void ExceptionResult(uint64_t call_id, std::string_view type, std::string_view message,
                       std::string_view node);
  // A call rayx failed for reason `kind` (not kException; its name is the type).
  void ErrorResult(uint64_t call_id, TaskErrorKind kind, std::string_view message,
                   std::string_view node);
  // Any error result, as parsed (TaskResultView's fields).
  void ErrorResult(uint64_t call_id, TaskErrorKind kind, std::string_view type,
                   std::string_view message, std::string_view node);

  // Calls or results written since Begin*.
  uint32_t count() const { return count_; }
  // Writes the count into the body; call once, after the last call or result.
  void Finish();

 private:
  void U8(uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void U32(uint32_t v);
  void U64(uint64_t v);
  void Str(std::string_view s);
  void Location(const ObjectLocation& location);
  void ResultHead(uint64_t call_id, WireValue kind, const uint32_t* item);

  std::string* out_ = nullptr;
  size_t count_offset_ = 0;
  uint32_t count_ = 0;
};

// A value as read from a message: bytes (inline or a payload frame, views into
// the message) or a location in a store.
struct WireValueView {
  WireValue kind = WireValue::kInline;
  std::string_view bytes;
  ObjectLocation stored;  // kStored
};

struct TaskCallView {
  uint64_t call_id = 0;
  bool actor_creation = false;
  std::string_view function, actor_id, return_id;
  // The call's arguments are args[first_arg, first_arg + arg_count) of the batch.
  uint32_t first_arg = 0;
  uint32_t arg_count = 0;
};

struct PushTasksView {
  std::string_view job_id;
  std::vector<TaskCallView> calls;
  std::vector<WireValueView> args;
};

struct TaskResultView {
  uint64_t call_id = 0;
  WireValueView value;  // kInline, kFrame (bytes filled in), kStored or kError
  bool item = false;    // an item a generator call yielded (value is not kError)
  uint32_t item_index = 0;
  TaskErrorKind error_kind = TaskErrorKind::kException;  // kError
  std::string_view error_type, error_message, error_node;
};

// Parses a request body; `payload` are the frames after the body. `out` is
// reused (its vectors keep their capacity). InvalidArgument when malformed.
Status ParsePushTasksRequest(std::string_view body, const std::vector<std::string_view>& payload,
                             PushTasksView* out);
// Parses a reply body, like ParsePushTasksRequest.
Status ParsePushTasksReply(std::string_view body, const std::vector<std::string_view>& payload,
                           std::vector<TaskResultView>* out);

}  // namespace rayx::protocol
