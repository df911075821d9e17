// The store's shared page of capacity and usage.
#include "object_store/store_ledger.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rayx {

struct StoreLedger::Page {
  static constexpr uint64_t kMagic = 0x3252474C44455852ull;  // "RXEDLGR2"
  uint64_t magic;
  uint64_t capacity;
  std::atomic<uint64_t> used;
  std::atomic<uint64_t> spill_epoch;
  std::atomic<uint64_t> spilled_bytes;
  std::atomic<uint64_t> reserved_total;
  uint32_t spill_dir_length;
  char spill_dir[kMaxSpillDir];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared between processes");
static_assert(sizeof(StoreLedger::kFileName) > 1);

namespace {

constexpr size_t kPageBytes = 4096;

Result<void*> MapPage(int fd, const std::string& path) {
  void* data = ::mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    return Status::Internal("cannot map the store's ledger " + path + ": " + std::strerror(errno));
  }
  return data;
}

}  // namespace

StoreLedger::StoreLedger(Page* page)
    : page_(page), spill_dir_(page->spill_dir, std::min<size_t>(page->spill_dir_length, kMaxSpillDir)) {}

StoreLedger::~StoreLedger() { ::munmap(page_, kPageBytes); }

Result<std::shared_ptr<StoreLedger>> StoreLedger::Create(const std::string& store_dir,
                                                         uint64_t capacity,
                                                         const std::string& spill_dir) {
  static_assert(sizeof(Page) <= kPageBytes);
  if (spill_dir.size() > kMaxSpillDir) {
    return Status::InvalidArgument("the spill directory's path is longer than " +
                                   std::to_string(kMaxSpillDir) + " characters");
  }
  const std::string path = store_dir + "/" + kFileName;
  const std::string making = path + ".making";
  ::unlink(making.c_str());
  int fd = ::open(making.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return Status::Unavailable("cannot make the store's ledger " + making + ": " +
                               std::strerror(errno));
  }
  int err = ::posix_fallocate(fd, 0, kPageBytes);
  Result<void*> data = err == 0 ? MapPage(fd, path)
                                : Result<void*>(Status::Unavailable(
                                      "cannot size the store's ledger " + making + ": " +
                                      std::strerror(err)));
  ::close(fd);
  if (!data.ok()) {
    ::unlink(making.c_str());
    return data.status();
  }
  // Filled in before it is published under its name: readers never see a
  // page without its magic.
  Page* page = new (*data) Page{};
  page->magic = Page::kMagic;
  page->capacity = capacity;
  page->spill_dir_length = static_cast<uint32_t>(spill_dir.size());
  std::memcpy(page->spill_dir, spill_dir.data(), spill_dir.size());
  if (::rename(making.c_str(), path.c_str()) != 0) {
    err = errno;
    ::munmap(*data, kPageBytes);
    ::unlink(making.c_str());
    return Status::Unavailable("cannot publish the store's ledger " + path + ": " +
                               std::strerror(err));
  }
  return std::shared_ptr<StoreLedger>(new StoreLedger(page));
}

Result<std::shared_ptr<StoreLedger>> StoreLedger::Open(const std::string& store_dir) {
  const std::string path = store_dir + "/" + kFileName;
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return Status::NotFound("the store " + store_dir + " has no ledger (" + std::strerror(errno) +
                            ")");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) < kPageBytes) {
    ::close(fd);
    return Status::InvalidArgument(path + " is not a store's ledger");
  }
  Result<void*> data = MapPage(fd, path);
  ::close(fd);
  if (!data.ok()) return data.status();
  auto* page = static_cast<Page*>(*data);
  if (page->magic != Page::kMagic || page->spill_dir_length > kMaxSpillDir) {
    ::munmap(*data, kPageBytes);
    return Status::InvalidArgument(path + " is not a store's ledger (another rayx version's?)");
  }
  return std::shared_ptr<StoreLedger>(new StoreLedger(page));
}

bool StoreLedger::TryReserve(uint64_t bytes) {
  const uint64_t capacity = page_->capacity;
  if (capacity == 0) {
    Reserve(bytes);
    return true;
  }
  uint64_t used = page_->used.load(std::memory_order_relaxed);
  do {
    if (bytes > capacity || used > capacity - bytes) return false;
  } while (!page_->used.compare_exchange_weak(used, used + bytes, std::memory_order_acq_rel));
  page_->reserved_total.fetch_add(bytes, std::memory_order_acq_rel);
  return true;
}

void StoreLedger::Reserve(uint64_t bytes) {
  page_->used.fetch_add(bytes, std::memory_order_acq_rel);
  page_->reserved_total.fetch_add(bytes, std::memory_order_acq_rel);
}

uint64_t StoreLedger::reserved_total() const {
  return page_->reserved_total.load(std::memory_order_acquire);
}

void StoreLedger::SetCounted(uint64_t counted, uint64_t reserved_before) {
  const uint64_t since = reserved_total() - reserved_before;
  page_->used.store(counted + since, std::memory_order_release);
}
void StoreLedger::BumpSpillEpoch() { page_->spill_epoch.fetch_add(1, std::memory_order_release); }
void StoreLedger::SetSpilledBytes(uint64_t bytes) {
  page_->spilled_bytes.store(bytes, std::memory_order_relaxed);
}
uint64_t StoreLedger::capacity() const { return page_->capacity; }
uint64_t StoreLedger::used() const { return page_->used.load(std::memory_order_relaxed); }
uint64_t StoreLedger::spill_epoch() const {
  return page_->spill_epoch.load(std::memory_order_acquire);
}
uint64_t StoreLedger::spilled_bytes() const {
  return page_->spilled_bytes.load(std::memory_order_relaxed);
}

}  // namespace rayx
