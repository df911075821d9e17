// The flat binary codec of PushTasksRequest and PushTasksReply.
#include "protocol/push_tasks.h"

#include <bit>
#include <cstring>

namespace rayx::protocol {

static_assert(std::endian::native == std::endian::little,
              "the task wire format is written with little-endian memcpy");

namespace {

// Reads a body front to back; every read checks the bytes left.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool U8(uint8_t* v) { return Fixed(v, 1); }
  bool U32(uint32_t* v) { return Fixed(v, 4); }
  bool U64(uint64_t* v) { return Fixed(v, 8); }
  bool Str(std::string_view* s) {
    uint32_t n = 0;
    if (!U32(&n) || n > in_.size() - pos_) return false;
    *s = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool Location(ObjectLocation* loc) {
    std::string_view node, object, path, grant;
    if (!Str(&node) || !Str(&object) || !Str(&path) || !U64(&loc->size) || !Str(&grant)) {
      return false;
    }
    loc->node_address.assign(node);
    loc->object_address.assign(object);
    loc->path.assign(path);
    loc->grant.assign(grant);
    return true;
  }
  size_t left() const { return in_.size() - pos_; }
  bool done() const { return pos_ == in_.size(); }
  size_t pos() const { return pos_; }
  size_t size() const { return in_.size(); }

 private:
  bool Fixed(void* v, size_t n) {
    if (in_.size() - pos_ < n) return false;
    std::memcpy(v, in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  std::string_view in_;
  size_t pos_ = 0;
};

// "malformed PushTasksRequest: call 2 (of 5) is cut short at byte 40 of 120".
Status Malformed(const char* message, const Reader& r, const std::string& what) {
  return Status::InvalidArgument(std::string("malformed ") + message + ": " + what + " at byte " +
                                 std::to_string(r.pos()) + " of " + std::to_string(r.size()));
}

std::string Nth(const char* what, uint32_t i, uint32_t count) {
  return std::string(what) + " " + std::to_string(i) + " (of " + std::to_string(count) + ")";
}

// Reads a value of kind `kind` (already read) into `out`.
bool ReadValue(Reader& r, uint8_t kind, const std::vector<std::string_view>& payload,
               WireValueView* out) {
  switch (static_cast<WireValue>(kind)) {
    case WireValue::kInline:
      out->kind = WireValue::kInline;
      return r.Str(&out->bytes);
    case WireValue::kFrame: {
      uint32_t index = 0;
      if (!r.U32(&index) || index >= payload.size()) return false;
      out->kind = WireValue::kFrame;
      out->bytes = payload[index];
      return true;
    }
    case WireValue::kStored:
      out->kind = WireValue::kStored;
      out->bytes = {};
      return r.Location(&out->stored);
    default:
      return false;
  }
}

}  // namespace

std::string GeneratorItemId(std::string_view return_id, uint32_t index) {
  constexpr size_t kTail = 16;
  if (return_id.size() < kTail || index > kMaxGeneratorItems) return "";
  std::string id(return_id);
  uint64_t tail = 0;
  for (size_t i = id.size() - kTail; i < id.size(); ++i) {
    char c = id[i];
    uint64_t digit = c >= '0' && c <= '9' ? static_cast<uint64_t>(c - '0')
                     : c >= 'a' && c <= 'f' ? static_cast<uint64_t>(c - 'a' + 10)
                                            : 16;
    if (digit == 16) return "";
    tail = tail << 4 | digit;
  }
  tail ^= (static_cast<uint64_t>(index) + 1) << 40;
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = id.size(); i-- > id.size() - kTail; tail >>= 4) id[i] = kHex[tail & 15];
  return id;
}

void PushTasksWriter::U32(uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);
  out_->append(b, 4);
}

void PushTasksWriter::U64(uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  out_->append(b, 8);
}

void PushTasksWriter::Str(std::string_view s) {
  U32(static_cast<uint32_t>(s.size()));
  out_->append(s.data(), s.size());
}

void PushTasksWriter::Location(const ObjectLocation& location) {
  Str(location.node_address);
  Str(location.object_address);
  Str(location.path);
  U64(location.size);
  Str(location.grant);
}

void PushTasksWriter::BeginRequest(std::string* out, std::string_view job_id) {
  out_ = out;
  out_->clear();
  Str(job_id);
  count_offset_ = out_->size();
  count_ = 0;
  U32(0);
}

void PushTasksWriter::BeginReply(std::string* out) {
  out_ = out;
  out_->clear();
  count_offset_ = 0;
  count_ = 0;
  U32(0);
}

void PushTasksWriter::Call(uint64_t call_id, bool actor_creation, std::string_view function,
                           std::string_view actor_id, std::string_view return_id,
                           uint32_t arg_count) {
  ++count_;
  U64(call_id);
  U8(actor_creation ? 1 : 0);
  Str(function);
  Str(actor_id);
  Str(return_id);
  U32(arg_count);
}

void PushTasksWriter::InlineArg(std::string_view bytes) {
  U8(static_cast<uint8_t>(WireValue::kInline));
  Str(bytes);
}

void PushTasksWriter::FrameArg(uint32_t frame_index) {
  U8(static_cast<uint8_t>(WireValue::kFrame));
  U32(frame_index);
}

void PushTasksWriter::StoredArg(const ObjectLocation& location) {
  U8(static_cast<uint8_t>(WireValue::kStored));
  Location(location);
}

void PushTasksWriter::ResultHead(uint64_t call_id, WireValue kind, const uint32_t* item) {
  ++count_;
  U64(call_id);
  if (item != nullptr) {
    U8(static_cast<uint8_t>(WireValue::kItem));
    U32(*item);
  }
  U8(static_cast<uint8_t>(kind));
}

void PushTasksWriter::InlineResult(uint64_t call_id, std::string_view bytes,
                                   const uint32_t* item) {
  ResultHead(call_id, WireValue::kInline, item);
  Str(bytes);
}

void PushTasksWriter::FrameResult(uint64_t call_id, uint32_t frame_index, const uint32_t* item) {
  ResultHead(call_id, WireValue::kFrame, item);
  U32(frame_index);
}

void PushTasksWriter::StoredResult(uint64_t call_id, const ObjectLocation& location,
                                   const uint32_t* item) {
  ResultHead(call_id, WireValue::kStored, item);
  Location(location);
}

void PushTasksWriter::ExceptionResult(uint64_t call_id, std::string_view type,
                                      std::string_view message, std::string_view node) {
  ErrorResult(call_id, TaskErrorKind::kException, type, message, node);
}

void PushTasksWriter::ErrorResult(uint64_t call_id, TaskErrorKind kind, std::string_view message,
                                  std::string_view node) {
  ErrorResult(call_id, kind, Name(kind), message, node);
}

void PushTasksWriter::ErrorResult(uint64_t call_id, TaskErrorKind kind, std::string_view type,
                                  std::string_view message, std::string_view node) {
  ++count_;
  U64(call_id);
  U8(static_cast<uint8_t>(WireValue::kError));
  U8(static_cast<uint8_t>(kind));
  Str(type);
  Str(message);
  Str(node);
}

void PushTasksWriter::Finish() { std::memcpy(out_->data() + count_offset_, &count_, 4); }

Status ParsePushTasksRequest(std::string_view body, const std::vector<std::string_view>& payload,
                             PushTasksView* out) {
  constexpr const char* kWhat = "PushTasksRequest";
  out->calls.clear();
  out->args.clear();
  Reader r(body);
  uint32_t count = 0;
  if (!r.Str(&out->job_id) || !r.U32(&count)) return Malformed(kWhat, r, "the header is cut short");
  // A call takes at least 25 bytes: never reserve more than the body can hold.
  if (count > r.left() / 25) {
    return Malformed(kWhat, r, "the call count " + std::to_string(count) + " exceeds the body");
  }
  out->calls.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    TaskCallView call;
    uint8_t flags = 0;
    if (!r.U64(&call.call_id) || !r.U8(&flags) || !r.Str(&call.function) ||
        !r.Str(&call.actor_id) || !r.Str(&call.return_id) || !r.U32(&call.arg_count)) {
      return Malformed(kWhat, r, Nth("call", i, count) + " is cut short");
    }
    call.actor_creation = (flags & 1) != 0;
    // An argument takes at least 5 bytes.
    if (call.arg_count > r.left() / 5) {
      return Malformed(kWhat, r,
                       "the argument count " + std::to_string(call.arg_count) + " of " +
                           Nth("call", i, count) + " exceeds the body");
    }
    call.first_arg = static_cast<uint32_t>(out->args.size());
    for (uint32_t a = 0; a < call.arg_count; ++a) {
      uint8_t kind = 0;
      WireValueView arg;
      if (!r.U8(&kind) || kind == static_cast<uint8_t>(WireValue::kError) ||
          !ReadValue(r, kind, payload, &arg)) {
        return Malformed(kWhat, r,
                         Nth("argument", a, call.arg_count) + " of " + Nth("call", i, count) +
                             " is cut short, of unknown kind " + std::to_string(kind) +
                             ", or names a missing frame");
      }
      out->args.push_back(std::move(arg));
    }
    out->calls.push_back(call);
  }
  if (!r.done()) return Malformed(kWhat, r, "bytes after the last call");
  return Status::OK();
}

Status ParsePushTasksReply(std::string_view body, const std::vector<std::string_view>& payload,
                           std::vector<TaskResultView>* out) {
  constexpr const char* kWhat = "PushTasksReply";
  out->clear();
  Reader r(body);
  uint32_t count = 0;
  if (!r.U32(&count)) return Malformed(kWhat, r, "the header is cut short");
  // A result takes at least 13 bytes.
  if (count > r.left() / 13) {
    return Malformed(kWhat, r, "the result count " + std::to_string(count) + " exceeds the body");
  }
  out->reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    TaskResultView result;
    uint8_t kind = 0;
    if (!r.U64(&result.call_id) || !r.U8(&kind)) {
      return Malformed(kWhat, r, Nth("result", i, count) + " is cut short");
    }
    if (kind == static_cast<uint8_t>(WireValue::kItem)) {
      result.item = true;
      if (!r.U32(&result.item_index) || result.item_index > kMaxGeneratorItems ||
          !r.U8(&kind) || kind == static_cast<uint8_t>(WireValue::kError) ||
          kind == static_cast<uint8_t>(WireValue::kItem)) {
        return Malformed(kWhat, r,
                         "the item of " + Nth("result", i, count) +
                             " is cut short, beyond the item limit or of an item's wrong kind");
      }
    }
    if (kind == static_cast<uint8_t>(WireValue::kError)) {
      result.value.kind = WireValue::kError;
      uint8_t error_kind = 0;
      if (!r.U8(&error_kind) || !r.Str(&result.error_type) || !r.Str(&result.error_message) ||
          !r.Str(&result.error_node)) {
        return Malformed(kWhat, r, "the error of " + Nth("result", i, count) + " is cut short");
      }
      result.error_kind = static_cast<TaskErrorKind>(error_kind);
      if (!IsKnown(result.error_kind)) {
        return Malformed(kWhat, r,
                         "the error of " + Nth("result", i, count) + " is of unknown kind " +
                             std::to_string(error_kind));
      }
    } else if (!ReadValue(r, kind, payload, &result.value)) {
      return Malformed(kWhat, r,
                       "the value of " + Nth("result", i, count) + " is cut short, of unknown kind " +
                           std::to_string(kind) + ", or names a missing frame");
    }
    out->push_back(std::move(result));
  }
  if (!r.done()) return Malformed(kWhat, r, "bytes after the last result");
  return Status::OK();
}

}  // namespace rayx::protocol
