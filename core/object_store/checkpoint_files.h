// A node's checkpoint directory: where Train keeps the shards its ranks
// report, on the node's own disk, and the replicas other nodes send it.
//
// Layout: <dir>/<job id>/<run key>/<checkpoint id>/rank-<r>/<the rank's files>
// with <dir> = <checkpoint root>/rayx-ckpt-<hex>, the agent's (claimed and
// reaped like its store). A shard is named by its path relative to <dir>
// ("shard dir"), the same on every node that holds a copy.
//
// Containment: a relative path from the network names a file only when each
// of its components is a plain name (not empty, ".", ".." or with a NUL), and
// every component is opened with O_NOFOLLOW beneath the directory: no link
// planted in the tree leads out of it. Only regular files are served.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/shard_manifest.h"
#include "rayx/status.h"

namespace rayx {

// A file's bytes, hashed as they pass (XXH3-128: checkpoints are checked for
// corruption between nodes of one cluster, not against an adversary).
class FileHasher {
 public:
  FileHasher();
  ~FileHasher();
  FileHasher(const FileHasher&) = delete;
  FileHasher& operator=(const FileHasher&) = delete;
  void Update(const char* data, size_t size);
  std::string Hex() const;  // 32 lowercase hex digits

 private:
  void* state_;  // XXH3_state_t
};

class CheckpointFiles {
 public:
  static constexpr char kDirPrefix[] = "rayx-ckpt-";
  // Files per shard, at most (a bound on what a manifest from the network
  // makes a node do).
  static constexpr size_t kMaxFiles = 100000;

  explicit CheckpointFiles(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  // "<job>/<run key>/<checkpoint id>/rank-<rank>": the run key is the run's
  // name made one plain component.
  static std::string ShardDir(const std::string& job_hex, const std::string& run_name,
                              const std::string& checkpoint_id, int rank);
  // A relative path of plain components (see the containment note).
  static bool IsSafeRelative(std::string_view path);
  // The manifest of `files` whose bytes hash to `hashes` (FileHasher, one
  // each): the files in path order, their bytes, the shard's hash.
  static std::string Combine(const std::vector<ShardFile>& files,
                             const std::vector<std::string>& hashes, ShardManifest* out);

  // Copies the regular files under `from` (a user's directory; links and
  // other kinds are refused, naming them) into `shard_dir`, hashing them as
  // they go: memory is one 4 MiB buffer. Replaces an earlier copy.
  Result<ShardManifest> CopyIn(const std::string& from, const std::string& shard_dir) const;
  // The manifest of the shard already in `shard_dir` (hashing its files),
  // NotFound when it is not here.
  Result<ShardManifest> Read(const std::string& shard_dir) const;
  // Opens `relative` (IsSafeRelative) beneath the directory for reading,
  // never through a link; a regular file only. Returns the fd.
  Result<int> OpenFile(const std::string& relative) const;
  // The absolute path of `relative`, creating its parent directories.
  Result<std::string> PrepareFile(const std::string& relative) const;
  // Removes `relative` (a shard, a checkpoint, a run) and everything in it.
  Status Remove(const std::string& relative) const;
  // Bytes held under the directory.
  uint64_t UsageBytes() const;

  // A committed checkpoint's record (opaque bytes, at most kMaxRecordBytes),
  // kept as kRecordFile in the checkpoint's directory `checkpoint_dir`
  // ("<job>/<run key>/<checkpoint id>"), so that it outlives the head. Only
  // where that directory is (this node holds a shard of the checkpoint):
  // NotFound otherwise. Replaces an earlier one.
  static constexpr char kRecordFile[] = "checkpoint.record";
  static constexpr size_t kMaxRecordBytes = 16u << 20;
  Status KeepRecord(const std::string& checkpoint_dir, const std::string& bytes) const;
  // The records kept under the directory, at most `max` of them and
  // `max_bytes` in all, with the checkpoint directory each is in (an
  // unreadable or oversized one is skipped).
  struct KeptRecord {
    std::string checkpoint_dir;
    std::string bytes;
  };
  std::vector<KeptRecord> Records(size_t max, uint64_t max_bytes = uint64_t{1} << 30) const;
  // Removes the checkpoints that hold no record (a copy made for a report
  // that was never committed, or one whose record never came): for a
  // directory just adopted, into which nothing is being written. Returns
  // the checkpoint directories removed.
  std::vector<std::string> RemoveUnrecorded() const;
  // Whether the directory holds no checkpoint files (only its own `.limit`
  // and empty directories).
  bool Empty() const;

  // The node's disk limit for checkpoints (`rayx start --checkpoint-disk-limit`),
  // kept in the directory's file `.limit` so that every process of the node
  // (ranks copying their shards in) reads it; 0: none.
  Status SetLimit(uint64_t bytes) const;
  uint64_t limit() const;
  // ResourceExhausted, with the figures and what to do, when `bytes` more
  // would pass the limit.
  Status CheckRoom(uint64_t bytes) const;

 private:
  std::string dir_;
};

}  // namespace rayx
