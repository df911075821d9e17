// A node's copies of job working directories, fetched from the head once each.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/tar_check.h"
#include "protocol/job_messages.h"
#include "rayx/status.h"

namespace rayx::worker {

// Packages are tar archives named by their content hash. Ensure(hash) fetches
// one from the head in chunks (one request in flight; a package declaring more
// than MaxDownloadBytes is refused before any is written), checks the hash,
// checks the archive (ExtractArchive: plain tar, every entry inside, within
// `limits`), extracts it into <dir>/<hash>/ and marks it complete; later calls find it
// there at once. Concurrent Ensure calls for one hash share one fetch. A
// request the head does not answer within kRequestTimeoutMs (on `clock`,
// checked by Expire) is sent again, up to kAttempts times in all; then the
// fetch fails with TimedOut, so no start waits for ever on a lost message.
//
// Threads: called on the agent's event loop only, and the loop never blocks
// here. Writing chunks, hashing and unpacking (tar) run on one thread of the
// cache's own; their results are posted back to `io`, where the next request
// is sent and the waiting callbacks run. Destroying the cache waits for the
// step in progress; results that arrive after it are dropped.
class PackageCache {
 public:
  using Done = std::function<void(Result<std::string>)>;  // the extracted directory
  // Sends a request to the head and returns its request id.
  using SendFn = std::function<uint64_t(const protocol::GetPackageRequest&)>;

  // `limits` bound what a package may unpack to (and so how large a download
  // is taken: MaxDownloadBytes).
  PackageCache(boost::asio::io_context& io, std::string dir, SendFn send, const Clock& clock,
               TarLimits limits = TarLimits());
  ~PackageCache();

  // Calls `done` with the package's directory: at once when it is on this
  // node, else on `io` once fetched (or with why it could not be).
  void Ensure(const std::string& hash, Done done);
  // A reply to one of our requests (true when it was ours).
  bool OnReply(uint64_t request_id, const protocol::GetPackageReply& reply, std::string_view bytes);
  bool OnError(uint64_t request_id, const Status& error);
  // Sends again, or fails, the requests unanswered for kRequestTimeoutMs.
  // Call periodically (the agent does every heartbeat).
  void Expire();

  // The largest archive that can hold what `limits` allow: every entry's
  // header and padding beside the data, and the end blocks.
  static uint64_t MaxDownloadBytes(const TarLimits& limits);

  static constexpr uint64_t kChunk = 4 << 20;
  static constexpr int64_t kRequestTimeoutMs = 30000;
  static constexpr int kAttempts = 3;

 private:
  struct Fetch {
    std::vector<Done> waiting;
    uint64_t request_id = 0;  // 0 while no request is in flight
    int64_t sent_ms = 0;
    int attempts = 0;  // sends of the request in flight
    uint64_t received = 0;
  };
  void Request(const std::string& hash, Fetch& fetch);
  void Finish(const std::string& hash, Result<std::string> result);
  // Runs `work` on the cache's thread, then `then` with its result on `io`.
  template <typename T>
  void OffLoop(std::function<T()> work, std::function<void(T)> then);
  std::string DirOf(const std::string& hash) const { return dir_ + "/" + hash; }

  boost::asio::io_context& io_;
  std::string dir_;
  SendFn send_;
  const Clock& clock_;
  const TarLimits limits_;
  std::map<std::string, Fetch> fetches_;  // by hash
  // Expires with the cache: posted results check it before touching `this`.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  boost::asio::thread_pool pool_{1};  // last: joined before the rest goes
};

}  // namespace rayx::worker
