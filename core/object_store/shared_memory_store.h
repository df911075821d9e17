// A node's shared-memory object store: one file per large object in a tmpfs
// directory (/dev/shm), written once and read through read-only mappings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "rayx/status.h"

namespace rayx {

// A read-only mapping of one stored object. Readers on the node see the bytes
// in place: no copy. Unmapped when the last reference goes.
class MappedObject {
 public:
  ~MappedObject();
  MappedObject(const MappedObject&) = delete;
  MappedObject& operator=(const MappedObject&) = delete;

  std::string_view view() const { return {static_cast<const char*>(data_), size_}; }
  // The file it maps (the store's, or the spilled copy).
  const std::string& path() const { return path_; }

  // Maps the file at `path` (a trusted path: this process's own). NotFound
  // when it does not exist. A path from the network goes through
  // SharedMemoryStore::Open instead.
  static Result<std::shared_ptr<MappedObject>> Open(const std::string& path);
  // Maps the open regular file `fd` (which stays the caller's to close);
  // `path` names it in errors.
  static Result<std::shared_ptr<MappedObject>> Map(int fd, const std::string& path);

 private:
  MappedObject(void* data, size_t size, std::string path)
      : data_(data), size_(size), path_(std::move(path)) {}
  void* data_;
  size_t size_;
  std::string path_;
};

// A process reading an object (bytes it handed to the program, a call's
// argument): a shared flock on the object's file for as long as this lives.
// The node's spiller (StoreSpiller) locks a file exclusively, without
// waiting, before it moves it, and passes over a file so held: spilling an
// object a process maps would free none of its memory.
//
// Best effort, one open file each: no claim is made when the file is gone
// (spilled already: its memory is on disk), is being spilled at that moment,
// or the process holds max_held() claims already; the reader reads all the
// same, its mapping keeping the pages as after any unlink.
class ReadClaim {
 public:
  explicit ReadClaim(const std::string& path);
  ~ReadClaim();
  ReadClaim(const ReadClaim&) = delete;
  ReadClaim& operator=(const ReadClaim&) = delete;

  bool held() const { return fd_ >= 0; }
  // Claims a process holds at most: 512, or a quarter of its open-file limit
  // when that is lower.
  static int max_held();
  // Claims this process holds now.
  static int held_now();

 private:
  int fd_ = -1;
};

// One keepalive for `mapping` (the object's bytes, whatever holds them) and a
// ReadClaim on `path`, the file they come from.
std::shared_ptr<const void> ClaimForReading(std::shared_ptr<const void> mapping,
                                            const std::string& path);

// Creating, deleting and measuring objects in one store directory. Stateless
// apart from the path: any process of the node can use it.
//
// Containment: every path that arrives over the network (a call's stored
// argument, a pull or delete request) names an object only when it is
// dir() + "/" + NAME with NAME of the object form (IsObjectName); Open then
// opens it with O_NOFOLLOW and maps it only when it is a regular file. So a
// peer can name no file outside the store, no directory, no symlink planted
// in it, and nothing but objects inside it.
//
// Spilling: when the node's agent spilled an object (StoreSpiller), its file
// moved to `spill_dir` under the same name, and the object's path (its
// location, which every holder keeps) stays the store's. A store made with
// its spill directory finds it there: Open maps the spilled file, Remove and
// RemovePrefix delete spilled files too.
class SharedMemoryStore {
 public:
  explicit SharedMemoryStore(std::string dir, std::string spill_dir = "")
      : dir_(std::move(dir)), spill_dir_(std::move(spill_dir)) {}

  // Creates the directory (0700). Unavailable when it cannot.
  static Result<SharedMemoryStore> Create(const std::string& dir);

  // The file name of object `object_id` of job `job_id`, as every writer
  // names it: "<job id>-<object id>" (16 and 32 lowercase hex digits).
  static std::string ObjectName(std::string_view job_id, std::string_view object_id);
  // True when `name` has that form.
  static bool IsObjectName(std::string_view name);

  // Writes `bytes` as the object `name` (created exclusively, then published
  // with a rename so readers never see a partial file). Returns its path.
  // InvalidArgument unless `name` has the object form (IsObjectName).
  Result<std::string> Write(const std::string& name, std::string_view bytes) const;

  // True when `path` names an object of this store: directly inside it, with
  // a name of the object form (no "..", no other directory, no other file).
  bool Contains(const std::string& path) const;

  // Maps the object at `path` (from the spill directory when it was
  // spilled), and marks it used now (its access time: spilling takes the least
  // recently used first). InvalidArgument, naming the path, when it is not an
  // object of this store (Contains) or not a regular file (a symlink is not
  // followed); NotFound when it does not exist.
  Result<std::shared_ptr<MappedObject>> Open(const std::string& path) const;
  // True when the object at `path` (Contains) is in the store or spilled.
  bool Exists(const std::string& path) const;

  // Deletes the object at `path` when it is one of this store's (Contains),
  // or its spilled file; a no-op otherwise or when absent. True when the
  // file was in the store itself.
  bool Remove(const std::string& path) const;
  // Deletes every object whose name starts with `prefix` (a job's objects),
  // spilled ones too.
  size_t RemovePrefix(const std::string& prefix) const;
  // Deletes the directory and everything in it.
  void Destroy() const;

  // Bytes held by the store's objects.
  uint64_t UsageBytes() const;

  const std::string& dir() const { return dir_; }
  const std::string& spill_dir() const { return spill_dir_; }
  // The spilled file of the store's object `path` (Contains): spill_dir/NAME.
  std::string SpilledPath(const std::string& path) const;

 private:
  std::string dir_;
  std::string spill_dir_;  // empty: nothing is spilled
};

}  // namespace rayx
