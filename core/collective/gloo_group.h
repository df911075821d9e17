// GlooGroup: a collective group on host memory over Gloo's TCP transport.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "collective/collective_group.h"
#include "collective/rendezvous_store.h"

namespace gloo {
class Context;
namespace transport {
class Device;
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo

namespace rayx::collective {

// Design: Gloo gives the transport (a full mesh of TCP pairs, connected through
// the rendezvous store) and rayx runs its own algorithms over Gloo's unbound
// buffers, because they are the only waits that can be interrupted
// (abortWaitRecv/abortWaitSend): Gloo's own algorithms can only time out.
//  - Every collective starts with an exchange of fixed-size headers (operation,
//    sequence number, type, reduce op, root, count) between all ranks, so a
//    rank calling another operation or another length is caught on every rank
//    before any data moves (Gloo would abort the process on an oversized
//    message). Such a mismatch leaves the group usable. An allreduce of at most
//    kInlineBytes carries its data inside that exchange (one round).
//  - Send/Recv do a header and an acknowledgement before the data.
//  - A watchdog thread aborts the group when an operation passes its
//    deadline. Aborting closes the connections, so the operations here and on
//    the other ranks fail at once, and then the watchdog writes a notice
//    "<failed rank>\n<reason>" under "<prefix>abort/<rank>" (off the
//    operation's thread: a slow store delays no failure). A rank whose
//    connection drops waits briefly for the peer's notice to name the rank
//    that caused it; a peer that leaves no notice died.
// Connecting sets SIGPIPE to ignored when it is at its default, so that a
// write to a dead peer fails the operation instead of killing the process.
// Thread-safety: operations are serialised by a mutex; Abort is thread-safe.
class GlooGroup : public CollectiveGroup {
 public:
  // Connects to every other rank through `store` within spec.ConnectTimeoutMs().
  // Throws CollectiveError naming a rank that did not join (publish its
  // address) or did not connect, by the deadline.
  static std::shared_ptr<GlooGroup> Connect(const GroupSpec& spec,
                                            std::shared_ptr<RendezvousStore> store);
  ~GlooGroup() override;
  GlooGroup(const GlooGroup&) = delete;
  GlooGroup& operator=(const GlooGroup&) = delete;

  const GroupSpec& spec() const override { return spec_; }
  void AllReduce(void* data, size_t count, DataType type, ReduceOp op, void* stream) override;
  void AllGather(const void* in, size_t count, DataType type,
                 const std::function<void*(const std::vector<size_t>&)>& output,
                 void* stream) override;
  void ReduceScatter(const void* in, size_t count, void* out, DataType type, ReduceOp op,
                     void* stream) override;
  void Broadcast(void* data, size_t count, DataType type, int root, void* stream) override;
  void Reduce(void* data, size_t count, DataType type, ReduceOp op, int root,
              void* stream) override;
  void Send(const void* data, size_t count, DataType type, int dst, void* stream) override;
  void Recv(void* data, size_t count, DataType type, int src, void* stream) override;
  void Barrier() override;
  void Abort(const std::string& reason, int failed_rank = -1) override;

  // Test hook: drops every connection like a killed process would (no
  // notice), leaving this object unusable.
  void TEST_DropConnections();

 private:
  struct Header {
    uint32_t magic;
    uint32_t kind;
    uint64_t seq;
    int32_t type;
    int32_t op;
    int32_t root;
    int32_t reserved;
    uint64_t count;
  };
  class OpScope;

  GlooGroup(GroupSpec spec, std::shared_ptr<RendezvousStore> store);
  void ConnectMesh();
  void WatchdogLoop();
  // Marks the group aborted with `why` (this rank's view), closes the
  // connections, wakes the waiting operation and has the notice written (by
  // the watchdog while it runs, else here).
  void AbortInternal(const std::string& why, int failed_rank, bool hard_close);
  // Writes this rank's abort notice to the store (may block on the store).
  void PublishNotice();

  // Up to this many bytes of data travel inside the header exchange.
  static constexpr size_t kInlineBytes = 64 * 1024;
  // Every rank's header for this collective, in rank order. `payload` (when
  // payload_bytes <= kInlineBytes) travels with the header: rank r's is at
  // InlinePayload(r) until the next exchange.
  std::vector<Header> ExchangeHeaders(OpScope& op, const Header& mine,
                                      const void* payload = nullptr, size_t payload_bytes = 0);
  const char* InlinePayload(int rank) const;
  void CheckHeaders(OpScope& op, const std::vector<Header>& all, bool same_count);
  void AllReduceData(OpScope& op, char* data, size_t count, DataType type, ReduceOp reduce);
  // Starts a collective (`collective`) or point-to-point operation: throws
  // when the group was aborted or `type` is not a host type.
  void Begin(OpScope& op, DataType type, bool collective);
  gloo::transport::UnboundBuffer* NewBuffer(OpScope& op, const void* ptr, size_t bytes);
  void PostRecv(OpScope& op, gloo::transport::UnboundBuffer* buffer, int peer, uint64_t slot,
                size_t offset, size_t bytes);
  void PostSend(OpScope& op, gloo::transport::UnboundBuffer* buffer, int peer, uint64_t slot,
                size_t offset, size_t bytes);
  void WaitRecv(OpScope& op, gloo::transport::UnboundBuffer* buffer, int peer);
  void WaitSend(OpScope& op, gloo::transport::UnboundBuffer* buffer, int peer);
  void Wait(OpScope& op, gloo::transport::UnboundBuffer* buffer, int peer, bool recv);
  [[noreturn]] void FailTransport(OpScope& op, int peer, const std::string& what);
  [[noreturn]] void ThrowAborted(OpScope& op);
  uint64_t CollectiveSlot(const OpScope& op, uint32_t phase) const;

  const GroupSpec spec_;
  const std::shared_ptr<RendezvousStore> store_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;

  std::mutex op_mu_;  // serialises operations; guards the sequence numbers
  uint64_t collective_seq_ = 0;
  std::vector<uint64_t> send_seq_, recv_seq_;
  // The ring allreduce's receive slice, kept between ops (touched by one op at
  // a time) so that a big allreduce does not page in fresh memory each call.
  std::vector<char> ring_scratch_;
  std::vector<char> inline_in_, inline_out_;  // the header exchange's buffers

  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  bool stopping_ = false;
  bool aborted_ = false;
  bool notice_pending_ = false;  // for the watchdog to write
  std::string abort_why_;
  int abort_failed_rank_ = -1;
  bool op_active_ = false;
  std::chrono::steady_clock::time_point op_deadline_;
  // The watchdog's state: waiting for an op to start, or for this deadline.
  bool watchdog_idle_ = false;
  std::chrono::steady_clock::time_point watchdog_deadline_ = std::chrono::steady_clock::time_point::max();
  int waiting_on_ = -1;
  std::set<gloo::transport::UnboundBuffer*> in_flight_;
  std::thread watchdog_;
};

}  // namespace rayx::collective
