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

  // Maps the file at `path`. NotFound when it does not exist.
  static Result<std::shared_ptr<MappedObject>> Open(const std::string& path);

 private:
  MappedObject(void* data, size_t size) : data_(data), size_(size) {}
  void* data_;
  size_t size_;
};

// Creating, deleting and measuring objects in one store directory. Stateless
// apart from the path: any process of the node can use it.
class SharedMemoryStore {
 public:
  explicit SharedMemoryStore(std::string dir) : dir_(std::move(dir)) {}

  // Creates the directory (0700). Unavailable when it cannot.
  static Result<SharedMemoryStore> Create(const std::string& dir);

  // Writes `bytes` as the object `name` (created exclusively, then published
  // with a rename so readers never see a partial file). Returns its path.
  Result<std::string> Write(const std::string& name, std::string_view bytes) const;

  // True when `path` names a file directly inside this store (no escape).
  bool Contains(const std::string& path) const;

  // Deletes the object at `path` (inside this store); a no-op when absent.
  void Remove(const std::string& path) const;
  // Deletes every object whose name starts with `prefix` (a job's objects).
  size_t RemovePrefix(const std::string& prefix) const;
  // Deletes the directory and everything in it.
  void Destroy() const;

  // Bytes held by the store's objects.
  uint64_t UsageBytes() const;

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace rayx
