// The head's key-value store on the wire (driver/worker <-> head).
//
// Design: keys live in namespaces ("" is the default one); values are bytes.
// Every request comes from a peer that registered with the cluster token
// (RegisterDriverRequest), like the other driver and worker messages. Limits:
// namespace <= 256 bytes, key 1..1024 bytes, value <= 1 MiB; a request over one
// gets an ErrorReply (InvalidArgument) naming the limit and the size. Errors
// travel as ErrorReply: AlreadyExists (put without overwrite of a present key),
// TimedOut (a wait whose key did not appear in time), Unavailable (too many
// parked waits).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <msgpack.hpp>

#include "protocol/messages.h"

namespace rayx::protocol {

// Stores `value` under (ns, key). With overwrite false, a present key is left
// as it is and the reply is AlreadyExists. A non-empty job_id scopes the key to
// that job: the head removes it when the job ends (rendezvous keys); keys
// without one stay until deleted. Answers every wait parked on the key.
struct KvPutRequest {
  static constexpr MessageType kType = MessageType::kKvPutRequest;
  std::string ns;
  std::string key;
  std::string value;
  bool overwrite = true;
  JobId job_id;
  MSGPACK_DEFINE_MAP(ns, key, value, overwrite, job_id)
};

struct KvPutReply {
  static constexpr MessageType kType = MessageType::kKvPutReply;
  bool added = false;  // true: the key was new; false: an old value was replaced
  MSGPACK_DEFINE_MAP(added)
};

struct KvGetRequest {
  static constexpr MessageType kType = MessageType::kKvGetRequest;
  std::string ns;
  std::string key;
  MSGPACK_DEFINE_MAP(ns, key)
};

struct KvGetReply {
  static constexpr MessageType kType = MessageType::kKvGetReply;
  bool found = false;
  std::string value;  // empty when not found
  MSGPACK_DEFINE_MAP(found, value)
};

// Answered with the value as soon as the key exists (at once when it does),
// or with an ErrorReply (TimedOut) when timeout_ms passes first. The head
// checks deadlines on its timer tick (the heartbeat period, 250 ms by
// default), so a timeout is answered up to one tick late. timeout_ms <= 0
// means "only if present now".
struct KvWaitRequest {
  static constexpr MessageType kType = MessageType::kKvWaitRequest;
  std::string ns;
  std::string key;
  int64_t timeout_ms = 0;
  MSGPACK_DEFINE_MAP(ns, key, timeout_ms)
};

struct KvWaitReply {
  static constexpr MessageType kType = MessageType::kKvWaitReply;
  std::string value;
  MSGPACK_DEFINE_MAP(value)
};

// Deletes `key`; with `prefix`, every key of `ns` starting with `key` instead,
// at most 1000 per request (the reply says when more are left: send it again),
// so that one request never holds the head for long. A prefix must not be empty.
struct KvDeleteRequest {
  static constexpr MessageType kType = MessageType::kKvDeleteRequest;
  std::string ns;
  std::string key;
  bool prefix = false;
  MSGPACK_DEFINE_MAP(ns, key, prefix)
};

struct KvDeleteReply {
  static constexpr MessageType kType = MessageType::kKvDeleteReply;
  bool deleted = false;  // false: there was no such key (no key with the prefix)
  uint32_t count = 0;    // keys deleted
  bool more = false;     // a prefix delete left keys with the prefix
  MSGPACK_DEFINE_MAP(deleted, count, more)
};

// The keys of `ns` starting with `prefix`, in byte order, at most `limit`
// (0 or over 1000: 1000); with `start_after`, only those after it (to page on
// from the last key of a truncated reply).
struct KvListRequest {
  static constexpr MessageType kType = MessageType::kKvListRequest;
  std::string ns;
  std::string prefix;
  uint32_t limit = 0;
  std::string start_after;
  MSGPACK_DEFINE_MAP(ns, prefix, limit, start_after)
};

struct KvListReply {
  static constexpr MessageType kType = MessageType::kKvListReply;
  std::vector<std::string> keys;
  bool truncated = false;  // more keys match than were returned
  MSGPACK_DEFINE_MAP(keys, truncated)
};

// The KV keys (namespace "rayx") of Train's node-kept checkpoint records:
// kCheckpointRecordPrefix + "<job>/<checkpoint id>/<run>" (the run last: it
// may hold '/'). Written by the committing rank, read by the head, the CLI
// and the object servers (a record kept on a node names its checkpoint).
inline constexpr char kCheckpointRecordPrefix[] = "train/ckpt/";

// The run record key `key` names; "" when it is not a record's key.
inline std::string CheckpointRecordRun(std::string_view key) {
  constexpr std::string_view prefix = kCheckpointRecordPrefix;
  if (key.size() <= prefix.size() || key.substr(0, prefix.size()) != prefix) return "";
  const size_t job_end = key.find('/', prefix.size());
  if (job_end == std::string_view::npos || job_end == prefix.size()) return "";
  const size_t id_end = key.find('/', job_end + 1);
  if (id_end == std::string_view::npos || id_end == job_end + 1 || id_end + 1 == key.size()) {
    return "";
  }
  return std::string(key.substr(id_end + 1));
}

// A record dropped while a copy of its checkpoint may be on a node that is
// not alive (`rayx train delete`; num_to_keep when a holder is down) leaves
// kDroppedCheckpointPrefix + the record key's "<job>/<id>/<run>" in the same
// namespace: an agent that adopts that copy later is told to remove it, even
// when the run is unknown by then (its copies would otherwise come back).
inline constexpr char kDroppedCheckpointPrefix[] = "train/dropped/";

// The dropped-record key of record key `key` ("" when it is not a record's).
inline std::string DroppedCheckpointKey(std::string_view key) {
  if (CheckpointRecordRun(key).empty()) return "";
  return kDroppedCheckpointPrefix +
         std::string(key.substr(std::string_view(kCheckpointRecordPrefix).size()));
}

// The CLI (cluster token) -> head: the records of the Train checkpoints the
// nodes keep (KV namespace "rayx", keys "train/ckpt/<job>/<id>/<run>"), of
// run `run` and job `job` (hex) when given; at most kMaxRecords, oldest keys
// first. With `drop` the head deletes the records it returns (the CLI then
// removes their shards from the nodes: `rayx train delete`).
struct CheckpointRecordsRequest {
  static constexpr MessageType kType = MessageType::kCheckpointRecordsRequest;
  std::string run;
  std::string job;
  bool drop = false;
  MSGPACK_DEFINE_MAP(run, job, drop)
};

struct CheckpointRecordsReply {
  static constexpr MessageType kType = MessageType::kCheckpointRecordsReply;
  static constexpr size_t kMaxRecords = 1000;
  std::vector<std::string> keys;
  std::vector<std::string> records;  // msgpack CheckpointRecord, one per key
  bool truncated = false;            // more records match
  MSGPACK_DEFINE_MAP(keys, records, truncated)
};

// A node agent (cluster token) -> head: the checkpoint records kept in the
// checkpoint directory it adopted (one an agent that is gone left: after a
// whole cluster's stop, or a node's crash), at most kMaxRecords a message.
// The head stores each under its key (KV namespace "rayx", keys
// "train/ckpt/<job>/<id>/<run>", no job: they outlive jobs) when its run is
// not known, and leaves the KV as it is when it is: a record the KV lacks
// while it holds others of the run was dropped (num_to_keep, `rayx train
// delete`) while the node was away.
struct AdoptCheckpointsRequest {
  static constexpr MessageType kType = MessageType::kAdoptCheckpointsRequest;
  static constexpr size_t kMaxRecords = 256;
  std::vector<std::string> keys;
  std::vector<std::string> records;  // one per key
  MSGPACK_DEFINE_MAP(keys, records)
};

// What the agent does with each key: `adopted` ones are the cluster's again;
// `dropped` ones' checkpoints it removes from its disk; the others were known.
struct AdoptCheckpointsReply {
  static constexpr MessageType kType = MessageType::kAdoptCheckpointsReply;
  std::vector<std::string> adopted;
  std::vector<std::string> dropped;
  MSGPACK_DEFINE_MAP(adopted, dropped)
};

}  // namespace rayx::protocol
