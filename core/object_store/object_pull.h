// Fetching a stored object from the node that holds it, in chunks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "object_store/checkpoint_files.h"
#include "object_store/object_server_directory.h"
#include "protocol/messages.h"
#include "rayx/status.h"
#include "transport/security.h"
#include "transport/zmq_fwd.h"

namespace rayx {

// How a pull waits and what it takes.
struct PullOptions {
  // The longest silence while chunks come: a long transfer takes as long as
  // its chunks keep coming. Default: 60 s.
  int64_t idle_timeout_ms = 60000;
  // The first answer must come within this: an address that accepts the
  // connection and says nothing holds the puller no longer. Default: 5 s.
  int64_t connect_timeout_ms = 5000;
  uint64_t chunk = 4 << 20;  // Default: 4 MiB per request
  int window = 4;            // Default: 4 requests in flight
  // The largest object a pull takes into memory; 0: DefaultMaxPullBytes().
  uint64_t max_object_bytes = 0;
};

// Half of this machine's physical memory (at least 1 GiB): a single object
// larger than that would not fit beside anything else.
uint64_t DefaultMaxPullBytes();

// Pulls the object at `location` from its node's object server in chunks,
// keeping several requests in flight, into one buffer. Blocking; uses its own
// socket on `context`, proving `security`'s credential.
//
// Nothing the location declares is trusted before it is checked: its object
// server must be one `servers` knows (InvalidArgument otherwise, before any
// connection), its declared size at most the options' bound (InvalidArgument,
// naming both, before anything is allocated), and the server's own size for
// the object must equal the declared one (InvalidArgument otherwise); the
// buffer is allocated only once the server confirmed the size. Returns
// NotFound when the object is gone, Unavailable when the server refuses the
// connection, does not answer within connect_timeout_ms, or goes silent for
// idle_timeout_ms, Unauthenticated when it refuses the credential.
Result<std::string> PullObject(zmq::context_t& context, const transport::ClientSecurity& security,
                               const protocol::ObjectLocation& location,
                               ObjectServerDirectory& servers, const PullOptions& options = {});

// Where a pull's bytes go: `confirmed` once the server confirmed the
// declared size (before any chunk), then `chunk` for each chunk at its offset,
// in any order. An error from either ends the pull with it.
struct PullSink {
  std::function<Status()> confirmed;
  std::function<Status(uint64_t offset, std::string_view data)> chunk;
};

// PullObject's transfer, into `sink` (no size limit: the sink decides).
Status PullInto(zmq::context_t& context, const transport::ClientSecurity& security,
                const protocol::ObjectLocation& location, ObjectServerDirectory& servers,
                const PullOptions& options, const PullSink& sink);

// How checkpoint shards are pulled: the largest chunks a server answers (8
// MiB), 4 in flight (32 MiB of memory per transfer).
inline const PullOptions kShardPullOptions{.idle_timeout_ms = 60000,
                                           .connect_timeout_ms = 5000,
                                           .chunk = 8 << 20,
                                           .window = 4};

// Pulls the file at `location` (an object, or a checkpoint file an object
// server serves) into `file`: written as file + ".partial" chunk by chunk
// (memory: the chunks in flight) and renamed when complete; removed on error.
// With `hash`, the bytes' FileHasher hash as they came ("" when chunks came
// out of order: then read the file to hash it).
Status PullToFile(zmq::context_t& context, const transport::ClientSecurity& security,
                  const protocol::ObjectLocation& location, ObjectServerDirectory& servers,
                  const std::string& file, const PullOptions& options = {},
                  std::string* hash = nullptr);

// Pulls the checkpoint shard `shard_dir` (`files`, whose manifest hash is
// `hash`) from the object server at `source`, whose checkpoint directory is
// `source_dir`, into `into`: file by file (PullToFile, kShardPullOptions),
// hashed as the bytes come. Internal, and nothing kept, when the copy's hash
// is not `hash`; the pull's error otherwise (the partial shard removed).
Status PullShard(zmq::context_t& context, const transport::ClientSecurity& security,
                 ObjectServerDirectory& servers, const std::string& source,
                 const std::string& source_dir, const std::string& shard_dir,
                 const std::vector<ShardFile>& files, const std::string& hash,
                 const CheckpointFiles& into);

// Takes one hold on each of `paths` (objects of the store behind
// `object_address`, which `servers` must know) for ObjectRefs inside values
// (HoldObjectsRequest; `fresh` as there). Blocking, on its own socket; waits
// up to `timeout_ms` for the answer. NotFound when an object is gone (then
// none of `paths` is held), Unavailable when the server does not answer.
Status HoldObjects(zmq::context_t& context, const transport::ClientSecurity& security,
                   ObjectServerDirectory& servers, const std::string& object_address,
                   const std::vector<std::string>& paths, bool fresh, int64_t timeout_ms);

// Asks the object server at `object_address` (which `servers` must know) to
// make room for `bytes` in its store (MakeRoomRequest): it spills objects to
// disk and reserves the bytes. Blocking, on its own socket, up to
// `timeout_ms`. ResourceExhausted, with the figures, when the store and its
// spill disk are full; Unavailable when the server does not answer.
Result<protocol::MakeRoomReply> MakeRoom(zmq::context_t& context,
                                         const transport::ClientSecurity& security,
                                         ObjectServerDirectory& servers,
                                         const std::string& object_address, uint64_t bytes,
                                         int64_t timeout_ms);

// Asks the object server at `object_address` to keep a copy of a checkpoint
// shard (ReplicateShardRequest): it pulls the files and answers once they are
// on its disk with the shard's hash. Blocking, up to `timeout_ms`.
Result<protocol::ReplicateShardReply> ReplicateShard(zmq::context_t& context,
                                                     const transport::ClientSecurity& security,
                                                     ObjectServerDirectory& servers,
                                                     const std::string& object_address,
                                                     const protocol::ReplicateShardRequest& req,
                                                     int64_t timeout_ms);

// Asks object servers to remove stored objects: one DEALER socket per server,
// fire and forget (no replies; the job's end removes whatever a lost request
// leaves). Not thread-safe: one thread uses it. `context` must outlive it.
class ObjectDeleter {
 public:
  explicit ObjectDeleter(zmq::context_t& context);
  // The credential later sockets prove (set before the first Delete).
  void SetSecurity(transport::ClientSecurity security) { security_ = std::move(security); }
  ~ObjectDeleter();
  ObjectDeleter(const ObjectDeleter&) = delete;
  ObjectDeleter& operator=(const ObjectDeleter&) = delete;

  // Asks the object server at `object_address` to remove `path`; never blocks.
  void Delete(const std::string& object_address, const std::string& path);
  // Tells the object server at `object_address` that the object at
  // `container` holds `contents` (holds this process took and hands over);
  // never blocks. Ordered with this deleter's later Deletes to that server.
  void Contain(const std::string& object_address, const std::string& container,
               std::vector<std::string> contents);
  // Asks the object server at `object_address` to remove checkpoint `paths`
  // (DeleteShardsRequest); never blocks.
  void DeleteShards(const std::string& object_address, std::vector<std::string> paths);
  // Asks the object server at `object_address` to keep a checkpoint's record
  // beside its shards (KeepCheckpointRecordRequest); never blocks.
  void KeepCheckpointRecord(const std::string& object_address,
                            const protocol::KeepCheckpointRecordRequest& req);
  // Closes the sockets (a request still queued may be lost).
  void Clear();

 private:
  zmq::context_t& context_;
  zmq::socket_t& Socket(const std::string& object_address);

  transport::ClientSecurity security_;
  std::unordered_map<std::string, std::unique_ptr<zmq::socket_t>> sockets_;
};

}  // namespace rayx
