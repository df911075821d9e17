// How a process writes its large Puts into the node's store: encoded straight
// into a writable mapping of the object's file, reusing the files of its freed
// Puts so that a Put does not fault in fresh tmpfs pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "rayx/status.h"

namespace rayx {

// Design: a fresh object file costs the kernel a page allocation and zeroing
// per 4 KiB (about 1.4 GB/s here, against 10+ GB/s for a copy into memory
// already mapped). So a freed object's file is kept for a while, still mapped
// here with its pages allocated, and the next Create of a size it can hold
// renames it to the new object's name and hands out the same mapping: the Put
// is then one memcpy.
//
// Reuse is safe only when no other process can still be reading the old
// object: the caller says so (`reusable` in Free: the object's location never
// left this process). Within the process, a Buffer still referenced elsewhere
// (a Get's view) is never reused either. Everything else is deleted at Free,
// as before: mappings that readers hold stay valid after an unlink.
//
// Free files count in the store's usage (they are files in the directory) for
// at most `max_free_age_ms`; Trim deletes older ones.
//
// Names: an object being written is NAME.partial, a free file .free-NAME (its
// last object's name); only a
// published object has its name (Publish), so the agent's spiller, which moves
// only files of the object form, never copies a half-written object or a free
// file. An object the spiller moved to `spill_dir` is deleted there.
//
// Thread-safe.
class StoreWriter {
 public:
  struct Options {
    // Freed files kept for reuse: at most this many, of at most this many
    // bytes in all, each for at most max_free_age_ms.
    size_t max_free_files = 4;
    uint64_t max_free_bytes = uint64_t{1} << 30;
    int64_t max_free_age_ms = 1000;
    // Where the node's agent spills objects (StoreLedger::spill_dir); empty:
    // nowhere.
    std::string spill_dir;
  };

  // One object's file, mapped read-write. Unmapped when the last reference
  // goes; the file itself stays until StoreWriter::Free deletes or reuses it.
  class Buffer {
   public:
    ~Buffer();
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    char* data() const { return data_; }
    size_t size() const { return size_; }
    std::string_view view() const { return {data_, size_}; }
    const std::string& path() const { return path_; }

   private:
    friend class StoreWriter;
    Buffer(std::string path, char* data, size_t size)
        : path_(std::move(path)), data_(data), size_(size), capacity_(size) {}
    std::string path_;
    char* data_;
    size_t size_;      // the object's (and the file's) size
    size_t capacity_;  // the mapping's length, >= size_
  };

  // `dir` is the node's store directory.
  StoreWriter(std::string dir, Options options);
  ~StoreWriter();  // deletes the free files
  StoreWriter(const StoreWriter&) = delete;
  StoreWriter& operator=(const StoreWriter&) = delete;

  // The writable file of a new object `name` of `size` bytes: a free file
  // renamed, or a new one, as NAME.partial until Publish. Its bytes are
  // undefined until the caller writes them; nobody else knows the name yet.
  // Unavailable when the store cannot hold it (the caller keeps the value in
  // memory instead).
  // REQUIRES: `name` is a file name (no '/', no leading '.'), size > 0.
  Result<std::shared_ptr<Buffer>> Create(const std::string& name, size_t size);
  // The caller wrote the object: it gets its name (buffer->path()).
  Status Publish(Buffer& buffer);

  // The object is freed. Keeps its file for reuse when `reusable` and nobody
  // else holds `buffer`, within the limits; else deletes it. `now_ms` is the
  // caller's clock, as for Trim.
  void Free(std::shared_ptr<Buffer> buffer, bool reusable, int64_t now_ms);

  // Deletes the free files freed more than max_free_age_ms before `now_ms`.
  void Trim(int64_t now_ms);
  // Deletes every free file.
  void Clear();

  // Files kept for reuse now (for tests).
  size_t free_files() const;

 private:
  struct FreeFile {
    std::shared_ptr<Buffer> buffer;
    int64_t freed_at_ms;
  };
  // Unlinks and unmaps `files` (outside mu_).
  void Delete(std::vector<FreeFile>& files);

  // Unlinks `path`; when it is not there (the agent spilled it), its spilled
  // copy.
  void Unlink(const std::string& path) const;

  const std::string dir_;
  const Options options_;
  mutable std::mutex mu_;
  std::vector<FreeFile> free_;  // oldest first
  uint64_t free_bytes_ = 0;
};

}  // namespace rayx
