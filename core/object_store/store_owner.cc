#include "object_store/store_owner.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace rayx {

namespace fs = std::filesystem;

namespace {

constexpr char kStoreLockSuffix[] = ".lock";

}  // namespace

Status ClaimStore(const std::string& dir) {
  const std::string path = dir + kStoreLockSuffix;
  const std::string making = path + ".making";
  int fd = ::open(making.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return Status::Unavailable("cannot make the store's lock file " + making + ": " +
                               std::strerror(errno));
  }
  const bool taken = ::access(path.c_str(), F_OK) == 0;
  if (taken || ::flock(fd, LOCK_EX | LOCK_NB) != 0 || ::rename(making.c_str(), path.c_str()) != 0) {
    int err = taken ? EEXIST : errno;
    ::unlink(making.c_str());
    ::close(fd);
    return Status::AlreadyExists("cannot claim the store " + dir + " (" + std::strerror(err) +
                                 "): another agent's?");
  }
  // Held until this process exits: the descriptor is never closed.
  return Status::OK();
}

std::optional<std::string> AdoptDeadStore(const std::string& root, const std::string& prefix) {
  std::vector<fs::path> locks;
  std::error_code ec;
  const size_t suffix = sizeof kStoreLockSuffix - 1;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.size() > prefix.size() + suffix &&
        name.compare(name.size() - suffix, suffix, kStoreLockSuffix) == 0) {
      locks.push_back(it->path());
    }
  }
  std::sort(locks.begin(), locks.end());  // the same machine adopts in the same order
  for (const fs::path& lock : locks) {
    const std::string dir = lock.string().substr(0, lock.string().size() - suffix);
    int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    struct stat held {};
    struct stat named {};
    struct stat made {};
    // Locked by us, still the file under that name (not one a remover just
    // unlinked), and its directory is there: ours for this process's life.
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::fstat(fd, &held) == 0 && S_ISREG(held.st_mode) &&
        ::lstat(lock.c_str(), &named) == 0 && named.st_ino == held.st_ino &&
        named.st_dev == held.st_dev && ::lstat(dir.c_str(), &made) == 0 && S_ISDIR(made.st_mode)) {
      return dir;  // fd stays open: the lock is held until this process ends
    }
    ::close(fd);
  }
  return std::nullopt;
}

uint64_t DefaultObjectStoreMemory(const std::string& store_root) {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  uint64_t memory = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * page : 0;
  uint64_t out = memory / 10 * 3;
  struct statvfs vfs {};
  if (::statvfs(store_root.c_str(), &vfs) == 0) {
    const uint64_t size = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
    if (size > 0 && (out == 0 || size < out)) out = size;
  }
  return out;
}

std::vector<std::string> RemoveDeadStores(const std::string& root, const std::string& prefix,
                                          const std::function<bool(const std::string&)>& removable) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t suffix = sizeof kStoreLockSuffix - 1;
    if (name.rfind(prefix, 0) != 0 || name.size() <= suffix ||
        name.compare(name.size() - suffix, suffix, kStoreLockSuffix) != 0) {
      continue;
    }
    const std::string lock = it->path().string();
    const std::string dir = lock.substr(0, lock.size() - suffix);
    int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    struct stat st {};
    bool dead = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (dead && (!removable || removable(dir))) {
      // Under the lock we now hold: no agent can claim this store meanwhile.
      std::error_code remove_error;
      fs::remove_all(dir, remove_error);
      if (!remove_error) {
        fs::remove(lock, remove_error);
        removed.push_back(dir);
      }
    }
    ::close(fd);
  }
  return removed;
}

}  // namespace rayx
