// Fetching and unpacking job working directories on a node.
#include "agent/package_cache.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/content_hash.h"
#include "common/directory_archive.h"
#include "common/logging.h"

namespace rayx::worker {

namespace fs = std::filesystem;

namespace {

// Appends `bytes` to `part` (truncating it first when `first`). Blocking.
Status WriteChunk(const std::string& part, bool first, const std::string& bytes) {
  std::error_code ec;
  fs::create_directories(fs::path(part).parent_path(), ec);
  std::ofstream out(part, std::ios::binary | (first ? std::ios::trunc : std::ios::app));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) return Status::Internal("cannot write " + part + " (disk full?)");
  return Status::OK();
}

// Checks `part` against `hash` and unpacks it into `dest` (ExtractArchive's
// checks first). Blocking: reading, hashing and tar. tar is waited for by its
// pid only; the agent reaps only the pids it started (LocalLeaseProcesses),
// so neither steals the other's.
Result<std::string> VerifyAndUnpack(const std::string& part, const std::string& hash,
                                    const std::string& dest, const TarLimits& limits) {
  std::string archive;
  {
    std::ifstream in(part, std::ios::binary);
    archive.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!in && !in.eof()) return Status::Internal("cannot read the fetched package " + part);
  }
  if (ContentHashHex(archive) != hash) {
    return Status::Internal("the fetched package does not match its hash");
  }
  // Unpack next to the final place, then rename: a half-unpacked directory is
  // never taken for a complete one.
  std::string staging = dest + ".unpacking";
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  Status extracted = ExtractArchive(archive, staging, limits);
  if (!extracted.ok()) {
    fs::remove_all(staging, ec);
    fs::remove(part, ec);
    return Status(extracted.code(), "cannot unpack the working directory " + hash.substr(0, 12) +
                                        ": " + extracted.message());
  }
  std::ofstream(staging + "/.rayx-complete");
  fs::remove_all(dest, ec);
  fs::rename(staging, dest, ec);
  if (ec) return Status::Internal("cannot place the working directory: " + ec.message());
  fs::remove(part, ec);
  return dest;
}

}  // namespace

PackageCache::PackageCache(boost::asio::io_context& io, std::string dir, SendFn send,
                           const Clock& clock, TarLimits limits)
    : io_(io), dir_(std::move(dir)), send_(std::move(send)), clock_(clock), limits_(limits) {}

uint64_t PackageCache::MaxDownloadBytes(const TarLimits& limits) {
  // Per entry: a header, a long-name or pax header with its block, and the
  // padding of its data: 4 blocks at most.
  constexpr uint64_t kPerEntry = 4 * 512;
  uint64_t entries = std::min<uint64_t>(limits.max_entries, uint64_t{1} << 40);
  uint64_t data = std::min<uint64_t>(limits.max_unpacked_bytes, uint64_t{1} << 50);
  return data + entries * kPerEntry + 10240;
}

PackageCache::~PackageCache() {
  alive_.reset();
  pool_.join();
}

template <typename T>
void PackageCache::OffLoop(std::function<T()> work, std::function<void(T)> then) {
  std::weak_ptr<int> alive = alive_;
  boost::asio::post(pool_, [this, alive, work = std::move(work), then = std::move(then)]() mutable {
    T result = work();
    if (alive.expired()) return;
    boost::asio::post(io_, [alive, then = std::move(then), result = std::move(result)]() mutable {
      if (!alive.expired()) then(std::move(result));
    });
  });
}

void PackageCache::Ensure(const std::string& hash, Done done) {
  if (!IsContentHash(hash)) {
    done(Status::InvalidArgument("malformed package hash"));
    return;
  }
  std::error_code ec;
  if (fs::exists(DirOf(hash) + "/.rayx-complete", ec)) {  // one stat
    done(DirOf(hash));
    return;
  }
  auto [it, fresh] = fetches_.try_emplace(hash);
  it->second.waiting.push_back(std::move(done));
  if (!fresh) return;
  Request(hash, it->second);
}

void PackageCache::Request(const std::string& hash, Fetch& fetch) {
  protocol::GetPackageRequest req;
  req.hash = hash;
  req.offset = fetch.received;
  req.length = kChunk;
  fetch.request_id = send_(req);
  fetch.sent_ms = clock_.NowMs();
  ++fetch.attempts;
}

void PackageCache::Expire() {
  int64_t now = clock_.NowMs();
  std::vector<std::string> failed;
  for (auto& [hash, fetch] : fetches_) {
    if (fetch.request_id == 0 || now - fetch.sent_ms < kRequestTimeoutMs) continue;
    if (fetch.attempts < kAttempts) {
      RAYX_LOG(Warning) << "no answer from the head for working directory " << hash.substr(0, 12)
                        << " (bytes from " << fetch.received << ") in "
                        << kRequestTimeoutMs / 1000 << " s: asking again";
      Request(hash, fetch);  // a late answer to the old request is ignored
    } else {
      failed.push_back(hash);
    }
  }
  for (const auto& hash : failed) {
    Finish(hash, Status::TimedOut("cannot fetch the job's working directory " +
                                  hash.substr(0, 12) + ": the head did not answer " +
                                  std::to_string(kAttempts) + " requests of " +
                                  std::to_string(kRequestTimeoutMs / 1000) +
                                  " s each (is it overloaded or restarting?)"));
  }
}

bool PackageCache::OnReply(uint64_t request_id, const protocol::GetPackageReply& reply,
                           std::string_view bytes) {
  auto it = fetches_.find(reply.hash);
  if (it == fetches_.end()) return false;
  Fetch& fetch = it->second;
  // The answer to the request in flight, or a late answer to an earlier send
  // of the same request (asked again after kRequestTimeoutMs): the same bytes.
  // Any other answer (the other send's, once this one was taken) is dropped.
  bool in_flight = fetch.request_id != 0 && request_id != 0;
  if (!in_flight || (request_id != fetch.request_id && reply.offset != fetch.received)) {
    return false;
  }
  // No request is in flight until this chunk is written.
  fetch.request_id = 0;
  fetch.attempts = 0;
  if (reply.offset != fetch.received || (bytes.empty() && fetch.received < reply.total_size)) {
    Finish(reply.hash, Status::Internal("package transfer went out of order"));
    return true;
  }
  if (reply.total_size > MaxDownloadBytes(limits_) ||
      reply.offset + bytes.size() > reply.total_size) {
    Finish(reply.hash,
           Status::InvalidArgument(
               "the working directory " + reply.hash.substr(0, 12) + " is " +
               std::to_string(reply.total_size) + " bytes, over the " +
               std::to_string(MaxDownloadBytes(limits_)) +
               " bytes a package within this node's unpack limits can be (agent flags "
               "--max-package-unpacked-bytes, --max-package-entries)"));
    return true;
  }
  std::string hash = reply.hash;
  std::string part = dir_ + "/" + hash + ".tar.part";
  bool first = fetch.received == 0;
  uint64_t total = reply.total_size;
  uint64_t size = bytes.size();
  OffLoop<Status>(
      [part, first, chunk = std::string(bytes)] { return WriteChunk(part, first, chunk); },
      [this, hash, part, size, total](Status written) {
        auto fetch_it = fetches_.find(hash);
        if (fetch_it == fetches_.end()) return;
        if (!written.ok()) {
          Finish(hash, written);
          return;
        }
        fetch_it->second.received += size;
        if (fetch_it->second.received < total) {
          Request(hash, fetch_it->second);
          return;
        }
        std::string dest = DirOf(hash);
        OffLoop<Result<std::string>>(
            [part, hash, dest, limits = limits_] {
              return VerifyAndUnpack(part, hash, dest, limits);
            },
            [this, hash, total](Result<std::string> dir) {
              if (dir.ok()) {
                RAYX_LOG(Info) << "fetched working directory " << hash.substr(0, 12) << " ("
                               << total << " bytes) into " << *dir;
              }
              Finish(hash, std::move(dir));
            });
      });
  return true;
}

bool PackageCache::OnError(uint64_t request_id, const Status& error) {
  if (request_id == 0) return false;
  for (auto& [hash, fetch] : fetches_) {
    if (fetch.request_id != request_id) continue;
    std::string h = hash;
    Finish(h, Status(error.code(), "cannot fetch the job's working directory: " + error.message()));
    return true;
  }
  return false;
}

void PackageCache::Finish(const std::string& hash, Result<std::string> result) {
  auto it = fetches_.find(hash);
  if (it == fetches_.end()) return;
  std::vector<Done> waiting = std::move(it->second.waiting);
  fetches_.erase(it);
  if (!result.ok()) {
    // Removing a partial download is file I/O too.
    std::string part = dir_ + "/" + hash + ".tar.part";
    boost::asio::post(pool_, [part] {
      std::error_code ec;
      fs::remove(part, ec);
    });
  }
  for (auto& done : waiting) done(result);
}

}  // namespace rayx::worker
