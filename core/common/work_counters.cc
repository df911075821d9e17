// WorkCounters: counter cells in own or shared memory; WorkCounts arithmetic.
#include "common/work_counters.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string>

namespace rayx {

namespace {

constexpr size_t kCounterPageBytes = 4096;
constexpr uint64_t kCounterPageMagic = 0x7261797877726b31;  // "rayxwrk1"

uint64_t Grown(uint64_t now, uint64_t before) { return now >= before ? now - before : now; }

}  // namespace

// The page's layout: plain atomics, the same in every process of one build
// (a worker runs the agent's librayx). `magic` says the page was made by
// CreateShared.
struct WorkCounters::Cells {
  std::atomic<uint64_t> magic{kCounterPageMagic};
  std::atomic<uint64_t> submitted{0}, finished{0}, failed{0}, retried{0};
  struct Op {
    std::atomic<uint64_t> count{0}, failed{0}, micros{0};
    std::array<std::atomic<uint64_t>, WorkCounts::kBuckets> buckets{};
  };
  std::array<Op, WorkCounts::kOps> ops{};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "cells shared across processes");

std::vector<protocol::CollectiveCounters> WorkCounts::Collectives() const {
  std::vector<protocol::CollectiveCounters> out;
  for (size_t i = 0; i < kOps; ++i) {
    const Op& op = ops[i];
    if (op.count == 0 && op.failed == 0) continue;
    protocol::CollectiveCounters c;
    c.op = protocol::kCollectiveOpNames[i];
    c.count = op.count;
    c.failed = op.failed;
    c.micros = op.micros;
    c.buckets.assign(op.buckets.begin(), op.buckets.end());
    out.push_back(std::move(c));
  }
  return out;
}

WorkCounts WorkCounts::FromWire(const protocol::TaskCounters& tasks,
                                const std::vector<protocol::CollectiveCounters>& collectives) {
  WorkCounts counts;
  counts.tasks = tasks;
  std::array<bool, kOps> seen{};
  for (const auto& c : collectives) {
    if (c.buckets.size() != kBuckets) continue;
    for (size_t i = 0; i < kOps; ++i) {
      if (seen[i] || c.op != protocol::kCollectiveOpNames[i]) continue;
      seen[i] = true;
      Op& op = counts.ops[i];
      op.count = c.count;
      op.failed = c.failed;
      op.micros = c.micros;
      std::copy(c.buckets.begin(), c.buckets.end(), op.buckets.begin());
    }
  }
  return counts;
}

void WorkCounts::AddGrowth(const WorkCounts& now, const WorkCounts& before) {
  tasks.submitted += Grown(now.tasks.submitted, before.tasks.submitted);
  tasks.finished += Grown(now.tasks.finished, before.tasks.finished);
  tasks.failed += Grown(now.tasks.failed, before.tasks.failed);
  tasks.retried += Grown(now.tasks.retried, before.tasks.retried);
  for (size_t i = 0; i < kOps; ++i) {
    Op& total = ops[i];
    const Op& a = now.ops[i];
    const Op& b = before.ops[i];
    total.count += Grown(a.count, b.count);
    total.failed += Grown(a.failed, b.failed);
    total.micros += Grown(a.micros, b.micros);
    for (size_t k = 0; k < kBuckets; ++k) total.buckets[k] += Grown(a.buckets[k], b.buckets[k]);
  }
}

WorkCounters::WorkCounters() : cells_(new Cells()), fd_(-1) {}

WorkCounters::~WorkCounters() {
  if (fd_ >= 0) {
    ::munmap(cells_, kCounterPageBytes);
    ::close(fd_);
  } else {
    delete cells_;
  }
}

Result<std::unique_ptr<WorkCounters>> WorkCounters::CreateShared() {
  static_assert(sizeof(Cells) <= kCounterPageBytes);
  int fd = ::memfd_create("rayx-work-counters", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Status::Internal(std::string("memfd_create: ") + std::strerror(errno));
  // Sealed against shrinking: a worker that truncated its page would make the
  // agent's reads fault (SIGBUS).
  if (::ftruncate(fd, kCounterPageBytes) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    int err = errno;
    ::close(fd);
    return Status::Internal(std::string("cannot size and seal a counter page: ") +
                            std::strerror(err));
  }
  void* mem = ::mmap(nullptr, kCounterPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mem == MAP_FAILED) {
    int err = errno;
    ::close(fd);
    return Status::Internal(std::string("mmap of a counter page: ") + std::strerror(err));
  }
  Cells* cells = new (mem) Cells();
  return std::unique_ptr<WorkCounters>(new WorkCounters(cells, fd));
}

Result<std::unique_ptr<WorkCounters>> WorkCounters::MapShared(int fd) {
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<size_t>(st.st_size) != kCounterPageBytes) {
    return Status::InvalidArgument("descriptor " + std::to_string(fd) +
                                   " is not a rayx counter page");
  }
  void* mem = ::mmap(nullptr, kCounterPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mem == MAP_FAILED) {
    return Status::InvalidArgument("descriptor " + std::to_string(fd) +
                                   " cannot be mapped: " + std::strerror(errno));
  }
  auto* cells = static_cast<Cells*>(mem);
  if (cells->magic.load(std::memory_order_relaxed) != kCounterPageMagic) {
    ::munmap(mem, kCounterPageBytes);
    return Status::InvalidArgument("descriptor " + std::to_string(fd) +
                                   " is not a rayx counter page (no marker)");
  }
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // not for the programs a task starts
  return std::unique_ptr<WorkCounters>(new WorkCounters(cells, fd));
}

void WorkCounters::TaskSubmitted() { cells_->submitted.fetch_add(1, std::memory_order_relaxed); }

void WorkCounters::TaskEnded(bool failed) {
  (failed ? cells_->failed : cells_->finished).fetch_add(1, std::memory_order_relaxed);
}

void WorkCounters::TaskRetried() { cells_->retried.fetch_add(1, std::memory_order_relaxed); }

void WorkCounters::CollectiveOpDone(Op op, std::chrono::steady_clock::duration took,
                                    bool failed) {
  const auto index = static_cast<size_t>(op);
  if (index >= WorkCounts::kOps) return;
  Cells::Op& cell = cells_->ops[index];
  const double seconds = std::chrono::duration<double>(took).count();
  size_t bucket = 0;
  while (bucket + 1 < WorkCounts::kBuckets &&
         seconds > protocol::kCollectiveLatencyBounds[bucket]) {
    ++bucket;
  }
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
  cell.micros.fetch_add(micros > 0 ? static_cast<uint64_t>(micros) : 0,
                        std::memory_order_relaxed);
  cell.buckets[bucket].fetch_add(1, std::memory_order_relaxed);
  if (failed) cell.failed.fetch_add(1, std::memory_order_relaxed);
  cell.count.fetch_add(1, std::memory_order_relaxed);
}

WorkCounts WorkCounters::Read() const {
  WorkCounts out;
  out.tasks.submitted = cells_->submitted.load(std::memory_order_relaxed);
  out.tasks.finished = cells_->finished.load(std::memory_order_relaxed);
  out.tasks.failed = cells_->failed.load(std::memory_order_relaxed);
  out.tasks.retried = cells_->retried.load(std::memory_order_relaxed);
  for (size_t i = 0; i < WorkCounts::kOps; ++i) {
    const Cells::Op& cell = cells_->ops[i];
    WorkCounts::Op& op = out.ops[i];
    op.count = cell.count.load(std::memory_order_relaxed);
    op.failed = cell.failed.load(std::memory_order_relaxed);
    op.micros = cell.micros.load(std::memory_order_relaxed);
    for (size_t k = 0; k < WorkCounts::kBuckets; ++k) {
      op.buckets[k] = cell.buckets[k].load(std::memory_order_relaxed);
    }
  }
  return out;
}

namespace {

std::atomic<WorkCounters*>& ProcessSlot() {
  // Never destroyed: counted into by threads that may outlive static
  // destructors.
  static std::atomic<WorkCounters*> slot{new WorkCounters()};
  return slot;
}

}  // namespace

WorkCounters& WorkCounters::Process() { return *ProcessSlot().load(std::memory_order_acquire); }

Status WorkCounters::UseSharedPage(int fd) {
  auto page = MapShared(fd);
  if (!page.ok()) return page.status();
  // The in-memory counters before it stay allocated: a reference to them may
  // still be held (nothing counts before a worker starts its work).
  ProcessSlot().store(page->release(), std::memory_order_release);
  return Status::OK();
}

}  // namespace rayx
