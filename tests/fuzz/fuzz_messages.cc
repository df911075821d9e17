// Fuzzes the decoding of every message body and record: the first byte picks
// the type (its MessageType value, see message_types.h), the second the
// limits, the rest is the body. Decoding must never crash, hang or allocate
// beyond the bounds; what decodes must encode again to a fixed point.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "message_types.h"

namespace rayx::fuzz {
namespace {

struct DecodeOne {
  std::string_view body;
  const DecodeLimits& limits;

  template <typename T>
  void operator()() const {
    Result<T> decoded = Decode<T>(body, limits);
    if (!decoded.ok()) {
      Check(decoded.status().code() == StatusCode::kInvalidArgument,
            "a refused body must be InvalidArgument: " + decoded.status().ToString());
      return;
    }
    // What was read writes out again, and reading that back changes nothing.
    std::string once = Encode(*decoded);
    Result<T> again = Decode<T>(once, limits);
    Check(again.ok(), "a decoded message does not decode after encoding: " +
                          again.status().ToString());
    Check(Encode(*again) == once, "encoding a decoded message is not a fixed point");
  }
};

}  // namespace
}  // namespace rayx::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace rayx::fuzz;  // NOLINT
  // Every message type with a msgpack body must be in the list: the flat
  // PushTasks messages have their own target.
  for (unsigned t = 1; t < 256; ++t) {
    if (MessageTypeName(static_cast<uint16_t>(t)).rfind("unknown", 0) == 0) continue;
    if (t == static_cast<unsigned>(MessageType::kPushTasksRequest) ||
        t == static_cast<unsigned>(MessageType::kPushTasksReply)) {
      continue;
    }
    bool listed = VisitType(static_cast<uint8_t>(t), []<typename T>() {});
    Check(listed, "message type " + MessageTypeName(static_cast<uint16_t>(t)) +
                      " is missing from tests/fuzz/message_types.h");
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rayx::fuzz;  // NOLINT
  FuzzInput in(data, size);
  uint8_t selector = in.Byte();
  // The limits the head uses for most messages, or the wider strings it
  // allows for KV values and stored records.
  DecodeLimits limits;
  if (in.Byte() & 1) limits.max_str = kMaxControlFrameBytes;
  std::string_view body = in.Rest();
  VisitType(selector, DecodeOne{body, limits});
  return 0;
}
