// Fetching and unpacking job working directories on a node.
#include "agent/package_cache.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/content_hash.h"
#include "common/logging.h"

namespace rayx::worker {

namespace fs = std::filesystem;

PackageCache::PackageCache(std::string dir, SendFn send)
    : dir_(std::move(dir)), send_(std::move(send)) {}

void PackageCache::Ensure(const std::string& hash, Done done) {
  if (!IsContentHash(hash)) {
    done(Status::InvalidArgument("malformed package hash"));
    return;
  }
  std::error_code ec;
  if (fs::exists(DirOf(hash) + "/.rayx-complete", ec)) {
    done(DirOf(hash));
    return;
  }
  auto [it, fresh] = fetches_.try_emplace(hash);
  it->second.waiting.push_back(std::move(done));
  if (!fresh) return;
  fs::create_directories(dir_, ec);
  std::ofstream(dir_ + "/" + hash + ".tar.part", std::ios::trunc);
  Request(hash, it->second);
}

void PackageCache::Request(const std::string& hash, Fetch& fetch) {
  protocol::GetPackageRequest req;
  req.hash = hash;
  req.offset = fetch.received;
  req.length = kChunk;
  fetch.request_id = send_(req);
}

bool PackageCache::OnReply(uint64_t request_id, const protocol::GetPackageReply& reply,
                           std::string_view bytes) {
  auto it = fetches_.find(reply.hash);
  if (it == fetches_.end() || it->second.request_id != request_id) return false;
  Fetch& fetch = it->second;
  std::string part = dir_ + "/" + reply.hash + ".tar.part";
  if (reply.offset != fetch.received || (bytes.empty() && fetch.received < reply.total_size)) {
    Finish(reply.hash, Status::Internal("package transfer went out of order"));
    return true;
  }
  {
    std::ofstream out(part, std::ios::binary | std::ios::app);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      Finish(reply.hash, Status::Internal("cannot write " + part + " (disk full?)"));
      return true;
    }
  }
  fetch.received += bytes.size();
  if (fetch.received < reply.total_size) {
    Request(reply.hash, fetch);
    return true;
  }
  auto hash = FileContentHashHex(part);
  if (!hash.ok() || *hash != reply.hash) {
    Finish(reply.hash, Status::Internal("the fetched package does not match its hash"));
    return true;
  }
  // Unpack next to the final place, then rename: a half-unpacked directory is
  // never taken for a complete one.
  std::string staging = DirOf(reply.hash) + ".unpacking";
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  pid_t pid = fork();
  if (pid == 0) {
    execlp("tar", "tar", "-xf", part.c_str(), "-C", staging.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    Finish(reply.hash, Status::Internal("cannot unpack the working directory with tar"));
    return true;
  }
  std::ofstream(staging + "/.rayx-complete");
  fs::remove_all(DirOf(reply.hash), ec);
  fs::rename(staging, DirOf(reply.hash), ec);
  fs::remove(part, ec);
  if (ec) {
    Finish(reply.hash, Status::Internal("cannot place the working directory: " + ec.message()));
    return true;
  }
  RAYX_LOG(Info) << "fetched working directory " << reply.hash.substr(0, 12) << " ("
                 << reply.total_size << " bytes) into " << DirOf(reply.hash);
  Finish(reply.hash, DirOf(reply.hash));
  return true;
}

bool PackageCache::OnError(uint64_t request_id, const Status& error) {
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
  std::error_code ec;
  if (!result.ok()) fs::remove(dir_ + "/" + hash + ".tar.part", ec);
  for (auto& done : waiting) done(result);
}

}  // namespace rayx::worker
