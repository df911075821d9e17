// The shared-memory object store.
#include "object_store/shared_memory_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "rayx/ids.h"

namespace fs = std::filesystem;

namespace rayx {

MappedObject::~MappedObject() {
  if (data_ != nullptr && size_ > 0) ::munmap(data_, size_);
}

Result<std::shared_ptr<MappedObject>> MappedObject::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound("object file " + path + ": " + std::strerror(errno));
  auto mapped = Map(fd, path);
  ::close(fd);  // the mapping stays valid
  return mapped;
}

Result<std::shared_ptr<MappedObject>> MappedObject::Map(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::Internal("fstat " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(path + " is not a regular file: not an object");
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* data = nullptr;
  if (size > 0) {
    data = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) return Status::Internal("mmap " + path + ": " + std::strerror(errno));
  }
  return std::shared_ptr<MappedObject>(new MappedObject(data, size, path));
}

namespace {

std::atomic<int> claims_held{0};

}  // namespace

int ReadClaim::max_held() {
  static const int limit = [] {
    struct rlimit files {};
    if (::getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY) return 512;
    return static_cast<int>(std::min<rlim_t>(512, files.rlim_cur / 4));
  }();
  return limit;
}

int ReadClaim::held_now() { return claims_held.load(std::memory_order_relaxed); }

ReadClaim::ReadClaim(const std::string& path) {
  if (claims_held.fetch_add(1, std::memory_order_relaxed) >= max_held()) {
    claims_held.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  // O_NONBLOCK: nothing planted under the name blocks the open; a lock the
  // spiller holds right now is not waited for.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd_ >= 0 && ::flock(fd_, LOCK_SH | LOCK_NB) != 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (fd_ < 0) claims_held.fetch_sub(1, std::memory_order_relaxed);
}

ReadClaim::~ReadClaim() {
  if (fd_ < 0) return;
  ::close(fd_);  // and with it the lock
  claims_held.fetch_sub(1, std::memory_order_relaxed);
}

std::shared_ptr<const void> ClaimForReading(std::shared_ptr<const void> mapping,
                                            const std::string& path) {
  struct Reading {
    std::shared_ptr<const void> mapping;
    ReadClaim claim;
    Reading(std::shared_ptr<const void> m, const std::string& p) : mapping(std::move(m)), claim(p) {}
  };
  return std::make_shared<const Reading>(std::move(mapping), path);
}

Result<SharedMemoryStore> SharedMemoryStore::Create(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Unavailable("cannot create the object store " + dir + ": " + ec.message());
  ::chmod(dir.c_str(), 0700);
  return SharedMemoryStore(dir);
}

std::string SharedMemoryStore::ObjectName(std::string_view job_id, std::string_view object_id) {
  std::string name;
  name.reserve(job_id.size() + 1 + object_id.size());
  name.append(job_id).append("-").append(object_id);
  return name;
}

bool SharedMemoryStore::IsObjectName(std::string_view name) {
  constexpr size_t kJob = JobId::kHexDigits;
  constexpr size_t kObject = ObjectId::kHexDigits;
  return name.size() == kJob + 1 + kObject && name[kJob] == '-' &&
         detail::IsLowerHex(name.substr(0, kJob)) && detail::IsLowerHex(name.substr(kJob + 1));
}

Result<std::string> SharedMemoryStore::Write(const std::string& name,
                                             std::string_view bytes) const {
  if (!IsObjectName(name)) {
    return Status::InvalidArgument("bad object name '" + name.substr(0, 100) +
                                   "': expected <job id>-<object id> in hex");
  }
  std::string path = dir_ + "/" + name;
  std::string tmp = path + ".partial";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Unavailable("cannot create " + tmp + ": " + std::strerror(errno));
  // Sized at once: the agent's count of the store sees the whole object while
  // it is written (a capacity's estimate never misses it).
  (void)::ftruncate(fd, static_cast<off_t>(bytes.size()));
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::Unavailable("writing " + path + " failed: " + std::strerror(err) +
                                 " (is /dev/shm full?)");
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Status::Unavailable("publishing " + path + " failed: " + std::strerror(errno));
  }
  return path;
}

bool SharedMemoryStore::Contains(const std::string& path) const {
  if (dir_.empty() || path.size() <= dir_.size() + 1 || path.compare(0, dir_.size(), dir_) != 0 ||
      path[dir_.size()] != '/') {
    return false;
  }
  return IsObjectName(std::string_view(path).substr(dir_.size() + 1));
}

namespace {

// Opens an object file for reading, never through a link; O_NONBLOCK: a FIFO
// planted under an object's name cannot block the open (Map then refuses it
// as not a regular file).
int OpenObjectFile(const std::string& path) {
  return ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
}

}  // namespace

std::string SharedMemoryStore::SpilledPath(const std::string& path) const {
  return spill_dir_ + path.substr(dir_.size());
}

Result<std::shared_ptr<MappedObject>> SharedMemoryStore::Open(const std::string& path) const {
  if (!Contains(path)) {
    return Status::InvalidArgument("'" + path.substr(0, 200) + "' is not an object of the store " +
                                   dir_ + " (an object is " + dir_ +
                                   "/<job id>-<object id>)");
  }
  // The name has no '/', so only its last component could be a link.
  std::string opened = path;
  int fd = OpenObjectFile(path);
  int err = fd < 0 ? errno : 0;
  if (fd < 0 && err == ENOENT && !spill_dir_.empty()) {
    opened = SpilledPath(path);
    fd = OpenObjectFile(opened);
    err = fd < 0 ? errno : 0;
  }
  if (fd < 0) {
    if (err == ELOOP) {
      return Status::InvalidArgument(opened + " is a symbolic link, not an object");
    }
    return Status::NotFound("object file " + path + ": " + std::strerror(err));
  }
  // Used now: the spiller takes the least recently used objects first.
  const struct timespec times[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
  (void)::futimens(fd, times);
  auto mapped = MappedObject::Map(fd, opened);
  ::close(fd);  // the mapping stays valid
  return mapped;
}

bool SharedMemoryStore::Exists(const std::string& path) const {
  if (!Contains(path)) return false;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) return S_ISREG(st.st_mode);
  return !spill_dir_.empty() && ::lstat(SpilledPath(path).c_str(), &st) == 0 &&
         S_ISREG(st.st_mode);
}

bool SharedMemoryStore::Remove(const std::string& path) const {
  if (!Contains(path)) return false;
  if (::unlink(path.c_str()) == 0) return true;
  // Spilled. (A spill racing this delete sees the store's file gone when it
  // comes to remove it, and removes its copy: StoreSpiller.)
  if (errno == ENOENT && !spill_dir_.empty()) ::unlink(SpilledPath(path).c_str());
  return false;
}

size_t SharedMemoryStore::RemovePrefix(const std::string& prefix) const {
  size_t removed = 0;
  for (const std::string* dir : {&dir_, &spill_dir_}) {
    if (dir->empty()) continue;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(*dir, ec)) {
      if (entry.path().filename().string().rfind(prefix, 0) == 0) {
        fs::remove(entry.path(), ec);
        ++removed;
      }
    }
  }
  return removed;
}

void SharedMemoryStore::Destroy() const {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

uint64_t SharedMemoryStore::UsageBytes() const {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    auto size = entry.file_size(ec);
    if (!ec) total += size;
  }
  return total;
}

}  // namespace rayx
