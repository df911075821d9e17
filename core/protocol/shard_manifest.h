// What a Train checkpoint shard holds: a record that travels in messages and
// in the KV (object_store/checkpoint_files.h makes and reads them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <msgpack.hpp>

namespace rayx {

// One file of a shard: its path relative to the shard's directory, and size.
struct ShardFile {
  std::string path;
  uint64_t size = 0;
  MSGPACK_DEFINE_MAP(path, size)
};

// What a shard holds: its files, their bytes in all, and a hash over them
// (XXH3-128 over each file's path, size and XXH3-128 hash, in path order).
struct ShardManifest {
  std::vector<ShardFile> files;
  uint64_t bytes = 0;
  std::string hash;
  MSGPACK_DEFINE_MAP(files, bytes, hash)
};

}  // namespace rayx
