// Wire messages for supervised processes (process leases): exits, logs, ports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "protocol/messages.h"

namespace rayx::protocol {

// agent -> head -> the lease's owner: one process of a process lease ended.
// `all_exited` is set on the last one; the head then frees the lease.
struct ProcessExitedNotice {
  static constexpr MessageType kType = MessageType::kProcessExitedNotice;
  LeaseId lease_id;
  uint32_t index = 0;        // which ProcessSpec of the lease
  int32_t pid = 0;
  int32_t exit_code = 0;     // valid when signal == 0
  int32_t signal = 0;        // the signal that killed it, or 0
  std::string log_tail;      // the last lines of its output
  bool all_exited = false;
  uint64_t epoch = 0;        // the node incarnation that ran it (RegisterNodeReply::epoch)
  // Why the agent ended it, when it did: an error kind for its callers
  // (OutOfMemory: the memory monitor; WorkerCrashed: it did not) and a sentence.
  TaskErrorKind cause = TaskErrorKind::kWorkerCrashed;
  std::string reason;
  MSGPACK_DEFINE_MAP(lease_id, index, pid, exit_code, signal, log_tail, all_exited, epoch, cause,
                     reason)
};

// Reads a process's output from `offset`; the bytes follow in frame 2 (at most
// max_bytes, capped by the server). With `file` set, reads that file of the
// node's log directory instead (`rayx logs`): a plain file name, never a path.
struct ReadLogRequest {
  static constexpr MessageType kType = MessageType::kReadLogRequest;
  LeaseId lease_id;
  uint32_t index = 0;
  uint64_t offset = 0;
  uint64_t max_bytes = 1 << 20;
  std::string file;
  MSGPACK_DEFINE_MAP(lease_id, index, offset, max_bytes, file)
};

struct ReadLogReply {
  static constexpr MessageType kType = MessageType::kReadLogReply;
  uint64_t size = 0;      // the log's size now
  bool exited = false;    // the process ended: no more output will come
  std::string path;       // the log file on that node
  MSGPACK_DEFINE_MAP(size, exited, path)
};

// `rayx logs`: the files of a node's log directory (daemons' and workers'
// logs), newest first, at most kMaxLogFiles.
struct ListLogsRequest {
  static constexpr MessageType kType = MessageType::kListLogsRequest;
  bool unused = false;
  MSGPACK_DEFINE_MAP(unused)
};

struct LogFileInfo {
  std::string name;
  uint64_t size = 0;
  int64_t modified_ms = 0;  // ms since the epoch
  MSGPACK_DEFINE_MAP(name, size, modified_ms)
};

struct ListLogsReply {
  static constexpr MessageType kType = MessageType::kListLogsReply;
  static constexpr size_t kMaxLogFiles = 1000;
  std::vector<LogFileInfo> files;
  bool truncated = false;  // more files than kMaxLogFiles: the oldest are left out
  std::string directory;   // the log directory on that node
  MSGPACK_DEFINE_MAP(files, truncated, directory)
};

// Picks a TCP port that is free on the node now (for MASTER_PORT).
struct ReservePortRequest {
  static constexpr MessageType kType = MessageType::kReservePortRequest;
  bool unused = false;
  MSGPACK_DEFINE_MAP(unused)
};

struct ReservePortReply {
  static constexpr MessageType kType = MessageType::kReservePortReply;
  uint32_t port = 0;
  MSGPACK_DEFINE_MAP(port)
};

}  // namespace rayx::protocol
