// Spilling a node's store to disk.
#include "object_store/store_spiller.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "rayx/resources.h"

namespace rayx {

struct StoreSpiller::Candidate {
  std::string name;
  uint64_t size;
  int64_t used_ns;  // access time: the last Open
};

namespace {

std::pair<uint64_t, uint64_t> SpillDiskSpace(const std::string& dir) {
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) != 0) return {0, 0};
  return {static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize,
          static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize};
}

// The regular files of `dir`: calls `each(name, stat, object)`, `object`
// true for names of the object form (in-progress writes and free files take
// memory too, but are not objects: never spilled). The ledger is left out.
template <typename Each>
void ForEachStoreFile(const std::string& dir, Each each) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  const int fd = ::dirfd(d);
  while (struct dirent* e = ::readdir(d)) {
    std::string_view name(e->d_name);
    if (name == "." || name == ".." || name == StoreLedger::kFileName) continue;
    struct stat st {};
    if (::fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    each(name, st, SharedMemoryStore::IsObjectName(name));
  }
  ::closedir(d);
}

std::string HumanBytes(uint64_t bytes) { return FormatBytes(static_cast<double>(bytes)); }

}  // namespace

StoreSpiller::StoreSpiller(SharedMemoryStore store, std::shared_ptr<StoreLedger> ledger,
                           Options options)
    : store_(std::move(store)), ledger_(std::move(ledger)), options_(std::move(options)) {
  if (!options_.disk_space) options_.disk_space = SpillDiskSpace;
}

StoreSpiller::Usage StoreSpiller::Count() {
  // Reservations since the previous count are kept, not only those since
  // this one: a writer this spiller just made room for may not have created
  // its file yet (a count queued behind its MakeRoom runs at once).
  const uint64_t now = ledger_ ? ledger_->reserved_total() : 0;
  Usage usage = CountSince(reserved_before_);
  reserved_before_ = now;
  return usage;
}

StoreSpiller::Usage StoreSpiller::CountSince(uint64_t reserved_before) {
  Usage usage;
  ForEachStoreFile(store_.dir(), [&](std::string_view name, const struct stat& st, bool object) {
    usage.stored_bytes += static_cast<uint64_t>(st.st_size);
    if (!object) return;
    ++usage.stored_objects;
    usage.by_job[std::string(name.substr(0, name.find('-')))] += static_cast<uint64_t>(st.st_size);
  });
  if (!store_.spill_dir().empty()) {
    ForEachStoreFile(store_.spill_dir(), [&](std::string_view, const struct stat& st, bool object) {
      usage.spilled_bytes += static_cast<uint64_t>(st.st_size);
      if (object) ++usage.spilled_objects;
    });
  }
  if (ledger_) {
    ledger_->SetCounted(usage.stored_bytes, reserved_before);
    ledger_->SetSpilledBytes(usage.spilled_bytes);
  }
  last_ = usage;
  return usage;
}

StoreSpiller::Spill StoreSpiller::SpillOne(const std::string& name, uint64_t size,
                                           std::string* why) {
  const std::string from = store_.dir() + "/" + name;
  const std::string to = store_.spill_dir() + "/" + name;
  const std::string partial = to + ".partial";
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (in < 0) return Spill::kGone;
  // Held until the store's file is unlinked (closing `in` lets it go): a
  // reader that comes meanwhile reads without a claim, from either file.
  if (::flock(in, LOCK_EX | LOCK_NB) != 0) {
    ::close(in);
    return Spill::kBeingRead;
  }
  int out = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (out < 0) {
    *why = "cannot create " + partial + ": " + std::strerror(errno);
    ::close(in);
    return Spill::kFailed;
  }
  uint64_t copied = 0;
  int err = 0;
  while (copied < size) {
    ssize_t n = ::sendfile(out, in, nullptr, std::min<uint64_t>(size - copied, 1 << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    copied += static_cast<uint64_t>(n);
  }
  if (::close(out) != 0 && err == 0) err = errno;
  if (err != 0 || ::rename(partial.c_str(), to.c_str()) != 0) {
    if (err == 0) err = errno;
    ::unlink(partial.c_str());
    ::close(in);
    *why = "cannot write " + to + ": " + std::strerror(err);
    return Spill::kFailed;
  }
  // The copy is in place before the store's file goes: a reader that misses
  // the one finds the other. Gone already: freed while being copied.
  const bool unlinked = ::unlink(from.c_str()) == 0;
  ::close(in);
  if (!unlinked) {
    ::unlink(to.c_str());
    return Spill::kGone;
  }
  return Spill::kMoved;
}

Status StoreSpiller::MakeRoom(uint64_t bytes) {
  const uint64_t capacity = ledger_ ? ledger_->capacity() : 0;
  if (capacity != 0 && bytes > capacity) {
    return Status::ResourceExhausted(
        "an object of " + HumanBytes(bytes) + " is larger than the whole object store (" +
        HumanBytes(capacity) +
        "): start the node with a larger --object-store-memory, or pass the value in pieces");
  }
  // What is there, least recently used first.
  const uint64_t reserved_before = ledger_ ? ledger_->reserved_total() : 0;
  std::vector<Candidate> candidates;
  uint64_t stored = 0;
  ForEachStoreFile(store_.dir(), [&](std::string_view name, const struct stat& st, bool object) {
    stored += static_cast<uint64_t>(st.st_size);
    if (!object) return;
    candidates.push_back({std::string(name), static_cast<uint64_t>(st.st_size),
                          static_cast<int64_t>(st.st_atim.tv_sec) * 1000000000 +
                              st.st_atim.tv_nsec});
  });
  if (capacity == 0 || stored + bytes <= capacity) {
    if (ledger_) {
      ledger_->SetCounted(stored, reserved_before);
      ledger_->Reserve(bytes);  // the writer's, which asked
      reserved_before_ = reserved_before;
    }
    return Status::OK();
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.used_ns != b.used_ns ? a.used_ns < b.used_ns : a.name < b.name;
  });
  std::string why;
  if (store_.spill_dir().empty()) why = "this node spills nowhere";
  uint64_t spilled_now = 0, read_bytes = 0, read_objects = 0;
  uint64_t spill_used = CountSince(reserved_before).spilled_bytes;
  for (const Candidate& c : candidates) {
    if (stored + bytes <= capacity || !why.empty()) break;
    if (options_.spill_limit != 0 && spill_used + c.size > options_.spill_limit) {
      why = "the spill directory " + store_.spill_dir() + " holds " + HumanBytes(spill_used) +
            " of its limit " + HumanBytes(options_.spill_limit) + " (--object-spill-limit)";
      break;
    }
    auto [total, available] = options_.disk_space(store_.spill_dir());
    if (total == 0 ||
        static_cast<double>(total - std::min(total, available) + c.size) >
            options_.max_disk_fraction * static_cast<double>(total)) {
      why = "the spill directory's disk (" + store_.spill_dir() + ") would pass " +
            std::to_string(static_cast<int>(options_.max_disk_fraction * 100)) + "% full (" +
            HumanBytes(available) + " free of " + HumanBytes(total) + ")";
      break;
    }
    switch (SpillOne(c.name, c.size, &why)) {
      case Spill::kMoved:
        spill_used += c.size;
        spilled_now += c.size;
        stored -= c.size;
        break;
      case Spill::kGone:
        stored -= c.size;
        break;
      case Spill::kBeingRead:
        read_bytes += c.size;
        ++read_objects;
        break;
      case Spill::kFailed:
        break;  // `why` says what, and ends the loop
    }
  }
  if (spilled_now > 0) ledger_->BumpSpillEpoch();
  CountSince(reserved_before);  // the truth, after what moved (and what was freed meanwhile)
  reserved_before_ = reserved_before;
  if (last_.stored_bytes + bytes <= capacity) {
    ledger_->Reserve(bytes);  // the writer's, which asked
    return Status::OK();
  }
  if (why.empty()) {
    why = "nothing more can be spilled (the rest is being written, or kept by writers for reuse";
    if (read_objects > 0) {
      why += ", or is " + std::to_string(read_objects) + " object(s) of " +
             HumanBytes(read_bytes) +
             " that processes are reading, spilled once they let go of them";
    }
    why += ")";
  }
  return Status::ResourceExhausted(FullMessage(bytes, why));
}

std::string StoreSpiller::FullMessage(uint64_t bytes, const std::string& why) const {
  std::string out = "the object store is full: no room for " + HumanBytes(bytes) +
                    ". It holds " + HumanBytes(last_.stored_bytes) + " of its " +
                    HumanBytes(ledger_ ? ledger_->capacity() : 0) + " in " +
                    std::to_string(last_.stored_objects) + " object(s)";
  // The largest holders first, at most five.
  std::vector<std::pair<uint64_t, std::string>> jobs;
  for (const auto& [job, held] : last_.by_job) jobs.emplace_back(held, job);
  std::sort(jobs.rbegin(), jobs.rend());
  if (!jobs.empty()) {
    out += " (";
    for (size_t i = 0; i < jobs.size() && i < 5; ++i) {
      out += (i ? ", " : "") + std::string("job ") + jobs[i].second + ": " +
             HumanBytes(jobs[i].first);
    }
    if (jobs.size() > 5) out += ", and " + std::to_string(jobs.size() - 5) + " more jobs";
    out += ")";
  }
  if (options_.held_objects) {
    if (const uint64_t held = options_.held_objects(); held > 0) {
      out += ", " + std::to_string(held) + " of them held by ObjectRefs inside other values "
             "(they go when those values do)";
    }
  }
  out += ", and " + HumanBytes(last_.spilled_bytes) + " in " +
         std::to_string(last_.spilled_objects) + " object(s) are spilled; " + why +
         ". Nothing stored was lost. Free objects (let go of their ObjectRefs), or start the "
         "node with a larger --object-store-memory, a larger --object-spill-limit, or "
         "--object-spill-dir on a larger disk";
  return out;
}

}  // namespace rayx
