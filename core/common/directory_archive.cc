// Deterministic tar archives of directories and their transfer through the head.
#include "common/directory_archive.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/content_hash.h"
#include "rayx/resources.h"
#include "protocol/job_messages.h"

namespace fs = std::filesystem;

namespace rayx {
namespace {

// Runs tar with `args`, feeding `input` to its stdin (when non-null) and
// collecting up to `limit` bytes of its stdout into `out`. Returns tar's exit
// status, or -1 when it could not run; sets `*cut` when output passed `limit`.
int RunTar(std::vector<std::string> args, const std::string* input, std::string* out,
           uint64_t limit, bool* cut) {
  int to_child[2] = {-1, -1}, from_child[2];
  if (pipe(from_child) != 0) return -1;
  if (input != nullptr && pipe(to_child) != 0) {
    ::close(from_child[0]);
    ::close(from_child[1]);
    return -1;
  }
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (input != nullptr) {
      dup2(to_child[0], 0);
      ::close(to_child[0]);
      ::close(to_child[1]);
    }
    dup2(from_child[1], 1);
    int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 2);  // its complaints when cut off are noise
    ::close(from_child[0]);
    ::close(from_child[1]);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp("tar", argv.data());
    _exit(127);
  }
  ::close(from_child[1]);
  if (input != nullptr) {
    ::close(to_child[0]);
    // Archives given to unpack are written whole first: tar -x reads all its
    // input before it writes anything to stdout (nothing, with -C).
    size_t off = 0;
    while (off < input->size()) {
      ssize_t n = ::write(to_child[1], input->data() + off, input->size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::close(to_child[1]);
  }
  char buf[1 << 16];
  ssize_t n;
  while ((n = ::read(from_child[0], buf, sizeof buf)) > 0) {
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
  waitpid(pid, &status, 0);
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
  return out;
}

Status UnpackArchive(const std::string& archive, const std::string& dest) {
  std::error_code ec;
  fs::path target(dest);
  fs::create_directories(target.parent_path(), ec);
  fs::path staging = target;
  staging += ".unpacking-" + std::to_string(::getpid());
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec) return Status::Internal("cannot create " + staging.string() + ": " + ec.message());
  bool cut = false;
  int rc = RunTar({"tar", "-xf", "-", "-C", staging.string()}, &archive, nullptr, 0, &cut);
  if (rc != 0) {
    fs::remove_all(staging, ec);
    return Status::Internal("tar could not unpack an archive of " + std::to_string(archive.size()) +
                            " bytes into " + dest);
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
                                  const std::string& archive, int64_t timeout_ms) {
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
