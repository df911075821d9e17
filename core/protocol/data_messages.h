// Wire messages of the direct data path: objects pulled, held and deleted
// between nodes (agents' object servers), the head's job notices to agents, and
// workers' output on its way to drivers. Included by protocol/messages.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "protocol/messages.h"
#include "protocol/shard_manifest.h"

namespace rayx::protocol {

// Where a large object lives: a file in one node's shared-memory store, served
// to other nodes by that node's agent.
struct ObjectLocation {
  std::string node_address;    // the node's IP
  std::string object_address;  // its agent's object server
  std::string path;            // the file in that node's store
  uint64_t size = 0;
  // Set only on an argument sent to another job's actor: the owner job's
  // permission to read this one object (transport::Credential::ReadGrant).
  std::string grant;
  MSGPACK_DEFINE_MAP(node_address, object_address, path, size, grant)
};

// Reads [offset, offset+length) of a stored object; the bytes follow in frame 2.
struct PullObjectRequest {
  static constexpr MessageType kType = MessageType::kPullObjectRequest;
  std::string path;
  uint64_t offset = 0;
  uint64_t length = 0;
  std::string grant;  // to read another job's object (ObjectLocation::grant)
  MSGPACK_DEFINE_MAP(path, offset, length, grant)
};

struct PullObjectReply {
  static constexpr MessageType kType = MessageType::kPullObjectReply;
  uint64_t size = 0;  // the whole object's size
  MSGPACK_DEFINE_MAP(size)
};

struct DeleteObjectsRequest {
  static constexpr MessageType kType = MessageType::kDeleteObjectsRequest;
  std::vector<std::string> paths;
  MSGPACK_DEFINE_MAP(paths)
};

// Holding stored objects that ObjectRefs inside values point at (the agent's
// ObjectPins). Without `container`: one more holder of each of `paths` (the
// reply says when every hold took; an object that is gone fails it). With
// `container`: that object, just written by the sender, holds `paths`, whose
// holds the sender took and hands over (no reply: sent like deletes). A
// holder lets go with a DeleteObjectsRequest of the path.
struct HoldObjectsRequest {
  static constexpr MessageType kType = MessageType::kHoldObjectsRequest;
  std::vector<std::string> paths;
  // The sender wrote `paths` itself and is their only holder: the first hold
  // of each counts only it (otherwise the file's writer holds it too).
  bool fresh = false;
  std::string container;
  MSGPACK_DEFINE_MAP(paths, fresh, container)
};

struct HoldObjectsReply {
  static constexpr MessageType kType = MessageType::kHoldObjectsReply;
  uint32_t held = 0;
  MSGPACK_DEFINE_MAP(held)
};

// A writer -> its node's object server: a Put or a result of `bytes` does not
// fit in the store (StoreLedger::TryReserve failed). The agent spills the
// least recently used objects to disk and reserves the bytes for the writer
// (MakeRoomReply), or answers ResourceExhausted with the figures.
struct MakeRoomRequest {
  static constexpr MessageType kType = MessageType::kMakeRoomRequest;
  uint64_t bytes = 0;
  MSGPACK_DEFINE_MAP(bytes)
};

struct MakeRoomReply {
  static constexpr MessageType kType = MessageType::kMakeRoomReply;
  uint64_t stored_bytes = 0;   // what the store holds now, the new object included
  uint64_t spilled_bytes = 0;  // what is spilled now
  MSGPACK_DEFINE_MAP(stored_bytes, spilled_bytes)
};

// A rank -> another node's object server: keep a copy of the checkpoint shard
// `shard_dir` (CheckpointFiles' relative path), pulled file by file from the
// object server at `source`, whose checkpoint directory is `source_dir`. The
// reply comes once every file is on this node's disk and the copy's hash is
// `hash` (ShardManifest). A job may replicate its own job's shards only.
struct ReplicateShardRequest {
  static constexpr MessageType kType = MessageType::kReplicateShardRequest;
  std::string shard_dir;
  std::string source;
  std::string source_dir;
  std::vector<ShardFile> files;
  std::string hash;
  MSGPACK_DEFINE_MAP(shard_dir, source, source_dir, files, hash)
};

struct ReplicateShardReply {
  static constexpr MessageType kType = MessageType::kReplicateShardReply;
  std::string dir;  // this node's checkpoint directory
  uint64_t bytes = 0;
  MSGPACK_DEFINE_MAP(dir, bytes)
};

// Anyone -> an object server: remove these checkpoint paths (relative, a
// shard's or a checkpoint's directory) from the node's disk: a job removes
// its own job's, and those of jobs no longer live (a later job resuming their
// run drops them as they fall out of num_to_keep). No reply.
struct DeleteShardsRequest {
  static constexpr MessageType kType = MessageType::kDeleteShardsRequest;
  std::vector<std::string> paths;
  MSGPACK_DEFINE_MAP(paths)
};

// A committing rank -> every node holding a shard of the checkpoint: keep its
// record (msgpack train::detail::CheckpointRecord, as in the KV under `key`)
// in the checkpoint's directory `checkpoint_dir` (relative: "<job>/<run
// key>/<id>"), so that the record outlives the head: an agent that adopts the
// directory later hands it to the head again (AdoptCheckpointsRequest). No
// reply; a node that does not hold the directory ignores it.
struct KeepCheckpointRecordRequest {
  static constexpr MessageType kType = MessageType::kKeepCheckpointRecordRequest;
  // Within one object-server frame, and one adoption batch at the head.
  static constexpr size_t kMaxRecordBytes = 8u << 20;
  std::string checkpoint_dir;
  std::string key;
  std::string record;
  MSGPACK_DEFINE_MAP(checkpoint_dir, key, record)
};

// head -> every agent: the job ended; its stored objects go.
struct JobFinishedNotice {
  static constexpr MessageType kType = MessageType::kJobFinishedNotice;
  JobId job_id;
  MSGPACK_DEFINE_MAP(job_id)
};

// head -> every agent: admit the job's credential at the object server (a job
// started), or no longer (it ended and none of its leases is left).
struct JobCredentialNotice {
  static constexpr MessageType kType = MessageType::kJobCredentialNotice;
  JobId job_id;
  bool admitted = false;
  MSGPACK_DEFINE_MAP(job_id, admitted)
};

// A line a worker writes to its output before the output of a call of
// another function or actor: the marker, then the name its next lines go
// under (the agent takes it out; Ray's ":task_name:" lines).
inline constexpr char kOutputNameMarker[] = "\x01rayx-name:";

// Lines one worker wrote to its stdout or stderr, in order.
struct OutputLines {
  std::string source;  // Ray's prefix without its parentheses: "Counter pid=4242, ip=10.0.0.2"
  std::vector<std::string> lines;  // without their newlines
  MSGPACK_DEFINE_MAP(source, lines)
};

// A node agent -> the head -> every driver of the job that asked for its
// workers' output (RegisterDriverRequest::log_to_driver). Sent every
// NodeAgent output period while there is output; no reply.
struct WorkerOutputNotice {
  static constexpr MessageType kType = MessageType::kWorkerOutputNotice;
  JobId job_id;
  std::vector<OutputLines> batches;
  // The lines of the job's own processes (a process lease's: a submitted
  // job's entrypoint, `rayx launch` commands), not its workers': the head
  // keeps them for the dashboard and never passes them to drivers (the
  // entrypoint is the driver; its lines would come back to it).
  bool processes = false;
  MSGPACK_DEFINE_MAP(job_id, batches, processes)
};

// A driver about to end its job -> the head -> every node agent: read the
// workers' output now. Each agent sends what it read (WorkerOutputNotice)
// and then answers the head; the head answers the driver once every agent
// did (or a second passed), so the driver has every line its workers wrote
// before the request when the reply comes (one connection, in order).
struct FlushOutputRequest {
  static constexpr MessageType kType = MessageType::kFlushOutputRequest;
  JobId job_id;
  MSGPACK_DEFINE_MAP(job_id)
};

struct FlushOutputReply {
  static constexpr MessageType kType = MessageType::kFlushOutputReply;
  uint32_t unanswered = 0;  // to the driver: agents that did not answer in time
  MSGPACK_DEFINE_MAP(unanswered)
};

}  // namespace rayx::protocol
