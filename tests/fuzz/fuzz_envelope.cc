// Fuzzes the envelope, every message's first frame: Decode<Envelope> has a
// hand-written fast path, which must accept exactly what the generic decoder
// accepts and read the same fields.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "protocol/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rayx;            // NOLINT
  using namespace rayx::protocol;  // NOLINT
  using rayx::fuzz::Check;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  Result<Envelope> fast = Decode<Envelope>(bytes, DecodeLimits{});

  // The generic decoder alone.
  Result<Envelope> generic = Status::Internal("unset");
  msgpack::object_handle handle;
  Status parsed = protocol::detail::ParseOne(bytes.data(), bytes.size(), DecodeLimits{}, &handle);
  if (!parsed.ok()) {
    generic = parsed;
  } else {
    try {
      Envelope env{};
      handle.get().convert(env);
      generic = env;
    } catch (const std::exception& e) {
      generic = Status::InvalidArgument(e.what());
    }
  }
  Check(fast.ok() == generic.ok(), "the fast and generic envelope decoders disagree on " +
                                       std::string(fast.ok() ? "accepting" : "refusing"));
  if (!fast.ok()) {
    Check(fast.status().code() == StatusCode::kInvalidArgument, fast.status().ToString());
    return 0;
  }
  Check(fast->v == generic->v && fast->t == generic->t && fast->id == generic->id,
        "the fast and generic envelope decoders read different fields");
  (void)CheckProtocolVersion(*fast, "the fuzzer");
  (void)MessageTypeName(fast->t);
  return 0;
}
