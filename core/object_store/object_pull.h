// Fetching a stored object from the node that holds it, in chunks.
#pragma once

#include <cstdint>
#include <string>

#include "protocol/messages.h"
#include "rayx/status.h"
#include "transport/zmq_fwd.h"

namespace rayx {

// Pulls the object at `location` from its node's object server in chunks of
// `chunk` bytes, keeping up to `window` requests in flight, into one buffer.
// Blocking; uses its own socket on `context`. Returns NotFound when the object
// is gone, Unavailable when the server sends nothing for `timeout_ms` (an idle
// timeout: a long transfer takes as long as its chunks keep coming).
Result<std::string> PullObject(zmq::context_t& context, const protocol::ObjectLocation& location,
                               int64_t timeout_ms = 60000, uint64_t chunk = 4 << 20,
                               int window = 4);

}  // namespace rayx
