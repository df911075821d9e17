// Fetching a stored object from the node that holds it, in chunks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "protocol/messages.h"
#include "rayx/status.h"
#include "transport/security.h"
#include "transport/zmq_fwd.h"

namespace rayx {

// Pulls the object at `location` from its node's object server in chunks of
// `chunk` bytes, keeping up to `window` requests in flight, into one buffer.
// Blocking; uses its own socket on `context`, proving `security`'s credential.
// Returns NotFound when the object is gone, Unavailable when the server sends
// nothing for `timeout_ms` (an idle timeout: a long transfer takes as long as
// its chunks keep coming), Unauthenticated when the server refuses the credential.
Result<std::string> PullObject(zmq::context_t& context, const transport::ClientSecurity& security,
                               const protocol::ObjectLocation& location,
                               int64_t timeout_ms = 60000, uint64_t chunk = 4 << 20,
                               int window = 4);

// Asks object servers to remove stored objects: one DEALER socket per server,
// fire and forget (no replies; the job's end removes whatever a lost request
// leaves). Not thread-safe: one thread uses it. `context` must outlive it.
class ObjectDeleter {
 public:
  explicit ObjectDeleter(zmq::context_t& context);
  // The credential later sockets prove (set before the first Delete).
  void SetSecurity(transport::ClientSecurity security) { security_ = std::move(security); }
  ~ObjectDeleter();
  ObjectDeleter(const ObjectDeleter&) = delete;
  ObjectDeleter& operator=(const ObjectDeleter&) = delete;

  // Asks the object server at `object_address` to remove `path`; never blocks.
  void Delete(const std::string& object_address, const std::string& path);
  // Closes the sockets (a request still queued may be lost).
  void Clear();

 private:
  zmq::context_t& context_;
  transport::ClientSecurity security_;
  std::unordered_map<std::string, std::unique_ptr<zmq::socket_t>> sockets_;
};

}  // namespace rayx
