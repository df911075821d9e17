// A node's copies of job working directories, fetched from the head once each.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "protocol/job_messages.h"
#include "rayx/status.h"

namespace rayx::worker {

// Packages are tar archives named by their content hash. Ensure(hash) fetches
// one from the head in chunks (one request in flight), checks the hash,
// extracts it into <dir>/<hash>/ and marks it complete; later calls find it
// there at once. Concurrent Ensure calls for one hash share one fetch.
// Single-threaded: the agent's event loop.
class PackageCache {
 public:
  using Done = std::function<void(Result<std::string>)>;  // the extracted directory
  // Sends a request to the head and returns its request id.
  using SendFn = std::function<uint64_t(const protocol::GetPackageRequest&)>;

  PackageCache(std::string dir, SendFn send);

  void Ensure(const std::string& hash, Done done);
  // A reply to one of our requests (true when it was ours).
  bool OnReply(uint64_t request_id, const protocol::GetPackageReply& reply, std::string_view bytes);
  bool OnError(uint64_t request_id, const Status& error);

  static constexpr uint64_t kChunk = 4 << 20;

 private:
  struct Fetch {
    std::vector<Done> waiting;
    uint64_t request_id = 0;
    uint64_t received = 0;
  };
  void Request(const std::string& hash, Fetch& fetch);
  void Finish(const std::string& hash, Result<std::string> result);
  std::string DirOf(const std::string& hash) const { return dir_ + "/" + hash; }

  std::string dir_;
  SendFn send_;
  std::map<std::string, Fetch> fetches_;  // by hash
};

}  // namespace rayx::worker
