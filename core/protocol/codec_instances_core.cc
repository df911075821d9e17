// The Encode/Decode of the protocol's types listed in RAYX_PROTOCOL_CORE_TYPES
// (message_list.h), compiled here once for every file that uses them.
#include "protocol/codec.h"

namespace rayx::protocol {

#define RAYX_CODEC_INSTANCE(T)                      \
  template std::string Encode<T>(const T& value); \
  template Result<T> Decode<T>(std::string_view bytes, const DecodeLimits& limits);
RAYX_PROTOCOL_CORE_TYPES(RAYX_CODEC_INSTANCE)
#undef RAYX_CODEC_INSTANCE
template std::string Encode<Envelope>(const Envelope& value);

}  // namespace rayx::protocol
