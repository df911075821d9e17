// Deterministic tar archives of directories and their transfer through the head.
#include "common/directory_archive.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>

#include "common/content_hash.h"
#include "rayx/resources.h"
#include "protocol/job_messages.h"

extern char** environ;

namespace fs = std::filesystem;

namespace rayx {
namespace {

// Writes all of `input` to `fd`, with SIGPIPE blocked on this thread so that
// a tar that exits early cannot kill this process (one raised is taken back).
void WriteAll(int fd, std::string_view input) {
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  bool broken = false;
  size_t off = 0;
  while (off < input.size()) {
    ssize_t n = ::write(fd, input.data() + off, input.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      broken = n < 0 && errno == EPIPE;
      break;
    }
    off += static_cast<size_t>(n);
  }
  if (broken && !sigismember(&old, SIGPIPE)) {
    const timespec now{0, 0};
    while (sigtimedwait(&pipe_only, nullptr, &now) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// Runs tar with `args`, feeding `input` to its stdin (when non-null) and
// collecting up to `limit` bytes of its stdout into `out`. Returns tar's exit
// status, or -1 when it could not run; sets `*cut` when output passed `limit`.
// posix_spawn, not fork: the caller may have other threads (an agent's
// package thread), and a forked child of a threaded process may not allocate.
// The child is waited for by its pid only.
int RunTar(std::vector<std::string> args, const std::string_view* input, std::string* out,
           uint64_t limit, bool* cut) {
  int to_child[2] = {-1, -1}, from_child[2] = {-1, -1};
  if (pipe2(from_child, O_CLOEXEC) != 0) return -1;
  if (input != nullptr && pipe2(to_child, O_CLOEXEC) != 0) {
    ::close(from_child[0]);
    ::close(from_child[1]);
    return -1;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (input != nullptr) posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
  posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
  // Its complaints when cut off are noise.
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int spawned = posix_spawnp(&pid, "tar", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(from_child[1]);
  if (input != nullptr) ::close(to_child[0]);
  if (spawned != 0) {
    ::close(from_child[0]);
    if (input != nullptr) ::close(to_child[1]);
    return -1;
  }
  if (input != nullptr) {
    // Archives given to unpack are written whole first: tar -x writes
    // nothing to stdout (-C), so it never waits for us to read.
    WriteAll(to_child[1], *input);
    ::close(to_child[1]);
  }
  char buf[1 << 16];
  ssize_t n;
  while ((n = ::read(from_child[0], buf, sizeof buf)) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (out == nullptr) continue;
    if (out->size() + static_cast<size_t>(n) > limit) {
      *cut = true;
      break;
    }
    out->append(buf, static_cast<size_t>(n));
  }
  ::close(from_child[0]);
  if (*cut) ::kill(pid, SIGKILL);
  int status = 0;
  pid_t waited;
  do {
    waited = waitpid(pid, &status, 0);
  } while (waited < 0 && errno == EINTR);
  if (waited != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

Result<std::string> PackDirectory(const std::string& dir, const std::vector<std::string>& excludes,
                                  uint64_t limit) {
  if (!fs::is_directory(dir)) return Status::InvalidArgument(dir + " is not a directory");
  std::vector<std::string> args = {"tar", "--sort=name", "--mtime=@0", "--owner=0", "--group=0",
                                   "--numeric-owner"};
  for (const auto& e : excludes) args.push_back("--exclude=" + e);
  args.insert(args.end(), {"-cf", "-", "-C", dir, "."});
  std::string out;
  bool cut = false;
  int rc = RunTar(args, nullptr, &out, limit, &cut);
  if (cut) {
    uintmax_t total = 0;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_regular_file(ec)) total += it->file_size(ec);
    }
    return Status::InvalidArgument(
        dir + " holds " + FormatBytes(static_cast<double>(total)) + ", over the limit of " +
        FormatBytes(static_cast<double>(limit)) +
        ": leave large files out, or keep data outside it");
  }
  if (rc != 0) {
    return Status::Internal("tar could not pack " + dir + " (run `tar -cf /dev/null -C " + dir +
                            " .` to see why)");
  }
  // What nodes would refuse to unpack is refused here, where it can be fixed.
  TarLimits limits;
  limits.max_unpacked_bytes = std::max<uint64_t>(limit, limits.max_unpacked_bytes);
  auto checked = CheckTarArchive(out, limits);
  if (!checked.ok()) {
    return Status::InvalidArgument(dir + " cannot be unpacked on the cluster's nodes: " +
                                   checked.status().message() +
                                   " (leave that entry out with an exclude)");
  }
  return out;
}

Status ExtractArchive(std::string_view archive, const std::string& dir, const TarLimits& limits) {
  auto checked = CheckTarArchive(archive, limits);
  if (!checked.ok()) return checked.status();
  bool cut = false;
  // Owners and permission bits from the archive are not applied (the umask
  // is); the check above already refused devices, set-id bits and escapes.
  int rc = RunTar({"tar", "-x", "-f", "-", "--no-same-owner", "--no-same-permissions", "-C", dir},
                  &archive, nullptr, 0, &cut);
  if (rc != 0) {
    return Status::Internal(rc < 0 ? std::string("cannot run tar (is it installed?)")
                                   : "tar could not unpack an archive of " +
                                         std::to_string(archive.size()) + " bytes into " + dir);
  }
  return Status::OK();
}

Status UnpackArchive(const std::string& archive, const std::string& dest, const TarLimits& limits) {
  std::error_code ec;
  fs::path target(dest);
  fs::create_directories(target.parent_path(), ec);
  fs::path staging = target;
  staging += ".unpacking-" + std::to_string(::getpid());
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec) return Status::Internal("cannot create " + staging.string() + ": " + ec.message());
  Status extracted = ExtractArchive(archive, staging.string(), limits);
  if (!extracted.ok()) {
    fs::remove_all(staging, ec);
    return Status(extracted.code(), "unpacking into " + dest + ": " + extracted.message());
  }
  fs::rename(staging, target, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    // Another process unpacked the same archive first: names are content hashes.
    if (fs::is_directory(target, ignored) && !fs::is_empty(target, ignored)) return Status::OK();
    return Status::Internal("cannot move the unpacked archive to " + dest + ": " + ec.message());
  }
  return Status::OK();
}

Result<std::string> UploadPackage(transport::SyncClient& head, const std::string& token,
                                  const std::string& archive, int64_t timeout_ms,
                                  const std::function<void(uint64_t, uint64_t)>& on_sent) {
  protocol::HasPackageRequest has;
  has.token = token;
  has.hash = ContentHashHex(archive);
  auto present = head.Call<protocol::HasPackageReply>(has, timeout_ms);
  if (!present.ok()) return present.status();
  if (present->present) return has.hash;
  if (archive.size() > present->max_bytes) {
    return Status::InvalidArgument("a package of " + FormatBytes(static_cast<double>(archive.size())) +
                                   " is over the head's limit of " +
                                   FormatBytes(static_cast<double>(present->max_bytes)));
  }
  for (uint64_t off = 0; off < archive.size() || off == 0;) {
    uint64_t len = std::min<uint64_t>(4 << 20, archive.size() - off);
    protocol::PutPackageRequest put;
    put.token = token;
    put.hash = has.hash;
    put.offset = off;
    put.total_size = archive.size();
    auto sent = head.CallWithPayload<protocol::PutPackageReply>(
        put, std::string_view(archive).substr(off, len), timeout_ms);
    if (!sent.ok()) return sent.status();
    off += len;
    if (on_sent) on_sent(off, archive.size());
    if (sent->first.complete) break;
  }
  return has.hash;
}

Result<bool> KeepPackage(transport::SyncClient& head, const std::string& token,
                         const std::string& hash, const std::string& owner, bool keep,
                         int64_t timeout_ms) {
  protocol::KeepPackageRequest req;
  req.token = token;
  req.hash = hash;
  req.owner = owner;
  req.keep = keep;
  auto reply = head.Call<protocol::KeepPackageReply>(req, timeout_ms);
  if (!reply.ok()) return reply.status();
  return reply->deleted;
}

Result<std::string> DownloadPackage(transport::SyncClient& head, const std::string& token,
                                    const std::string& hash, int64_t timeout_ms) {
  std::string out;
  uint64_t total = 0;
  do {
    protocol::GetPackageRequest get;
    get.hash = hash;
    get.token = token;
    get.offset = out.size();
    get.length = 4 << 20;
    auto got = head.CallWithPayload<protocol::GetPackageReply>(get, "", timeout_ms);
    if (!got.ok()) return got.status();
    total = got->first.total_size;
    if (got->second.empty() && out.size() < total) {
      return Status::Internal("package " + hash.substr(0, 12) + " ended early at " +
                              std::to_string(out.size()) + " of " + std::to_string(total) + " bytes");
    }
    out += got->second;
  } while (out.size() < total);
  if (ContentHashHex(out) != hash) {
    return Status::Internal("package " + hash.substr(0, 12) + " arrived with another hash");
  }
  return out;
}

}  // namespace rayx
