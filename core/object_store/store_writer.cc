// Writing large Puts into the store, reusing freed files.
#include "object_store/store_writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rayx {

StoreWriter::Buffer::~Buffer() {
  if (data_ != nullptr) ::munmap(data_, capacity_);
}

StoreWriter::StoreWriter(std::string dir, Options options)
    : dir_(std::move(dir)), options_(options) {}

StoreWriter::~StoreWriter() { Clear(); }

Result<std::shared_ptr<StoreWriter::Buffer>> StoreWriter::Create(const std::string& name,
                                                                 size_t size) {
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.' || size == 0) {
    return Status::InvalidArgument("bad object name '" + name + "' or size 0");
  }
  const std::string path = dir_ + "/" + name + ".partial";
  std::shared_ptr<Buffer> reuse;
  {
    std::lock_guard<std::mutex> lock(mu_);
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i) {
      size_t capacity = free_[i].buffer->capacity_;
      if (capacity >= size && (best == free_.size() || capacity < free_[best].buffer->capacity_)) {
        best = i;
      }
    }
    if (best < free_.size()) {
      reuse = std::move(free_[best].buffer);
      free_bytes_ -= reuse->capacity_;
      free_.erase(free_.begin() + static_cast<ptrdiff_t>(best));
    }
  }
  if (reuse) {
    // Gone when it was removed meanwhile: then a new file.
    if (::rename(reuse->path_.c_str(), path.c_str()) == 0) {
      bool ok = true;
      if (size != reuse->size_) {
        // Shrinking frees the pages past the end; growing (within the
        // mapping) allocates them now, so a full store fails here, not later
        // with SIGBUS on a write.
        int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
        ok = fd >= 0 && ::ftruncate(fd, static_cast<off_t>(size)) == 0 &&
             (size < reuse->size_ || ::posix_fallocate(fd, 0, static_cast<off_t>(size)) == 0);
        if (fd >= 0) ::close(fd);
      }
      if (ok) {
        reuse->path_ = path;
        reuse->size_ = size;
        return reuse;
      }
      ::unlink(path.c_str());
    }
    reuse.reset();
  }
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Unavailable("cannot create " + path + ": " + std::strerror(errno));
  // Sized first (the agent's count sees its size at once, not after the
  // allocation), then allocated: writes through the mapping can then never
  // hit a full store.
  int err = ::ftruncate(fd, static_cast<off_t>(size)) == 0 ? 0 : errno;
  if (err == 0) err = ::posix_fallocate(fd, 0, static_cast<off_t>(size));
  void* data = MAP_FAILED;
  if (err == 0) {
    data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) err = errno;
  }
  ::close(fd);
  if (err != 0) {
    ::unlink(path.c_str());
    return Status::Unavailable("cannot store " + std::to_string(size) + " bytes in " + path +
                               ": " + std::strerror(err) + " (is /dev/shm full?)");
  }
  return std::shared_ptr<Buffer>(new Buffer(path, static_cast<char*>(data), size));
}

Status StoreWriter::Publish(Buffer& buffer) {
  const std::string& from = buffer.path_;
  const size_t suffix = sizeof ".partial" - 1;
  if (from.size() <= suffix || from.compare(from.size() - suffix, suffix, ".partial") != 0) {
    return Status::OK();  // published already
  }
  std::string to = from.substr(0, from.size() - suffix);
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return Status::Unavailable("cannot publish " + to + ": " + std::strerror(errno));
  }
  buffer.path_ = std::move(to);
  return Status::OK();
}

void StoreWriter::Unlink(const std::string& path) const {
  if (::unlink(path.c_str()) == 0 || errno != ENOENT || options_.spill_dir.empty()) return;
  size_t slash = path.rfind('/');
  ::unlink((options_.spill_dir + path.substr(slash)).c_str());
}

void StoreWriter::Free(std::shared_ptr<Buffer> buffer, bool reusable, int64_t now_ms) {
  if (!buffer) return;
  // Only we hold it: no view of it is left in this process.
  if (!reusable || buffer.use_count() != 1 || buffer->capacity_ > options_.max_free_bytes ||
      options_.max_free_files == 0) {
    Unlink(buffer->path_);
    return;
  }
  // Out of the spiller's sight, under a name no other process uses (object
  // names are unique). Not there: the agent spilled it (the copy goes).
  const size_t slash = buffer->path_.rfind('/');
  std::string free_path = dir_ + "/.free-" + buffer->path_.substr(slash + 1);
  if (::rename(buffer->path_.c_str(), free_path.c_str()) != 0) {
    Unlink(buffer->path_);
    return;
  }
  buffer->path_ = std::move(free_path);
  std::vector<FreeFile> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_bytes_ += buffer->capacity_;
    free_.push_back(FreeFile{std::move(buffer), now_ms});
    while (free_.size() > options_.max_free_files || free_bytes_ > options_.max_free_bytes) {
      free_bytes_ -= free_.front().buffer->capacity_;
      evicted.push_back(std::move(free_.front()));
      free_.erase(free_.begin());
    }
  }
  Delete(evicted);
}

void StoreWriter::Trim(int64_t now_ms) {
  std::vector<FreeFile> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!free_.empty() && now_ms - free_.front().freed_at_ms > options_.max_free_age_ms) {
      free_bytes_ -= free_.front().buffer->capacity_;
      old.push_back(std::move(free_.front()));
      free_.erase(free_.begin());
    }
  }
  Delete(old);
}

void StoreWriter::Clear() {
  std::vector<FreeFile> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.swap(free_);
    free_bytes_ = 0;
  }
  Delete(all);
}

size_t StoreWriter::free_files() const {
  std::lock_guard<std::mutex> lock(mu_);
  return free_.size();
}

void StoreWriter::Delete(std::vector<FreeFile>& files) {
  for (auto& f : files) Unlink(f.buffer->path_);
  files.clear();  // unmaps
}

}  // namespace rayx
