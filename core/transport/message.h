// Building and reading the frames of a wire message.
#pragma once

#include <cstdint>
#include <string_view>

#include "protocol/codec.h"
#include "rayx/status.h"
#include "transport/frame.h"

namespace rayx::transport {

// [Envelope][body] for `body`, tagged with request id `id`.
template <typename T>
Frames MakeMessage(const T& body, uint64_t id) {
  protocol::Envelope env;
  env.t = static_cast<uint16_t>(T::kType);
  env.id = id;
  Frames frames;
  frames.push_back(MakeFrame(protocol::Encode(env)));
  frames.push_back(MakeFrame(protocol::Encode(body)));
  return frames;
}

// [Envelope][ErrorReply] carrying `status`, answering request `id`.
Frames MakeErrorMessage(const Status& status, std::string_view where, uint64_t id);

}  // namespace rayx::transport
