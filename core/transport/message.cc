// Building error messages.
#include "transport/message.h"

namespace rayx::transport {

Frames MakeErrorMessage(const Status& status, std::string_view where, uint64_t id) {
  protocol::ErrorReply reply;
  reply.code = static_cast<uint8_t>(status.code());
  reply.message = status.message();
  reply.where = std::string(where);
  protocol::Envelope env;
  env.t = static_cast<uint16_t>(protocol::MessageType::kErrorReply);
  env.id = id;
  Frames frames;
  frames.push_back(MakeFrame(protocol::Encode(env)));
  frames.push_back(MakeFrame(protocol::Encode(reply)));
  return frames;
}

}  // namespace rayx::transport
