// GlooGroup: connection, deadlines, aborts and the header exchange (the
// algorithms are in gloo_group_ops.cc).
#include "collective/gloo_group.h"

#include <sched.h>

#include <algorithm>
#include <csignal>
#include <cstring>

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include "collective/gloo_op_scope.h"
#include "collective/gloo_store_adapter.h"

namespace rayx::collective {

namespace {

constexpr uint32_t kMagic = 0x52415958;  // "RAYX"
// Slots: the top bits tell collectives from point-to-point messages.
constexpr uint64_t kCollectiveSlot = 1ull << 60;

// Makes the calling thread SCHED_BATCH while it lives, so that the threads it
// starts inherit that policy. Gloo's TCP device runs one event-loop thread
// whose handler try-locks a pair and, when a user thread holds that lock, gives
// up and polls again at once. A write on loopback wakes the peer's loop thread
// inside the writer's system call; if the woken thread preempts the writer
// while it still holds its pair's lock, the writer's own loop thread spins on
// that lock until the scheduler's next tick. With more ranks than cores that
// made a 4-byte allreduce take 4 ms (4 ranks on 2 cores: median 3.9 ms, against
// 0.2 ms with this). A SCHED_BATCH thread never preempts when it wakes and
// otherwise gets the same share of the CPU. A caller with a policy of its own
// (real-time, idle) is left as it is.
class ScopedBatchScheduling {
 public:
  ScopedBatchScheduling() {
    if (sched_getscheduler(0) != SCHED_OTHER) return;
    sched_param param{};
    changed_ = sched_setscheduler(0, SCHED_BATCH, &param) == 0;
  }
  ~ScopedBatchScheduling() {
    if (!changed_) return;
    sched_param param{};
    (void)sched_setscheduler(0, SCHED_OTHER, &param);
  }
  ScopedBatchScheduling(const ScopedBatchScheduling&) = delete;
  ScopedBatchScheduling& operator=(const ScopedBatchScheduling&) = delete;

 private:
  bool changed_ = false;
};

// Gloo allows a pair 5x its timeout to connect (tcp::Pair::waitUntil): a fifth
// of the time left until `deadline` keeps that wait within it. At least 1 ms
// (0 would mean no timeout at all).
std::chrono::milliseconds PairTimeoutFor(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return std::max(std::chrono::milliseconds(1), left / 5);
}

// Gloo's connectFullMesh keys end in the rank they belong to.
int RankOfKey(const std::string& key) {
  size_t i = key.size();
  while (i > 0 && key[i - 1] >= '0' && key[i - 1] <= '9') --i;
  if (i == key.size()) return -1;
  return std::stoi(key.substr(i));
}

}  // namespace

const char* OpKindName(uint32_t kind) {
  switch (kind) {
    case kOpAllReduce: return "AllReduce";
    case kOpAllGather: return "AllGather";
    case kOpReduceScatter: return "ReduceScatter";
    case kOpBroadcast: return "Broadcast";
    case kOpReduce: return "Reduce";
    case kOpBarrier: return "Barrier";
    case kOpSend: return "Send";
  }
  return "an unknown operation";
}

std::shared_ptr<GlooGroup> GlooGroup::Connect(const GroupSpec& spec,
                                              std::shared_ptr<RendezvousStore> store) {
  std::shared_ptr<GlooGroup> group(new GlooGroup(spec, std::move(store)));
  group->ConnectMesh();
  group->watchdog_ = std::thread([g = group.get()] { g->WatchdogLoop(); });
  return group;
}

GlooGroup::GlooGroup(GroupSpec spec, std::shared_ptr<RendezvousStore> store)
    : spec_(std::move(spec)),
      store_(std::move(store)),
      send_seq_(spec_.world_size, 0),
      recv_seq_(spec_.world_size, 0) {}

GlooGroup::~GlooGroup() {
  bool busy;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    busy = op_active_;
  }
  cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  // Tell the others; close softly when idle so bytes in flight still arrive.
  AbortInternal(DescribeRank(spec_, spec_.rank) + " destroyed the group", -1, busy);
}

void GlooGroup::ConnectMesh() {
  // Gloo writes with writev, which raises SIGPIPE when a peer has gone; the
  // error must reach the operation instead of killing the process. A handler
  // the program installed itself is kept.
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    std::signal(SIGPIPE, SIG_IGN);
  }
  const int64_t timeout_ms = spec_.ConnectTimeoutMs();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  const std::string where = "collective group '" + spec_.options.name + "' rank " +
                            std::to_string(spec_.rank) + " of " +
                            std::to_string(spec_.world_size);
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = spec_.node_ip;
    ScopedBatchScheduling batch;  // for the device's loop thread, see above
    device_ = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw CollectiveError(where + ": cannot open a Gloo TCP device on " + spec_.node_ip + ": " +
                          e.what() + " (is it this node's address?)");
  }
  // Gloo gives the pairs the context's timeout when it creates them (after the
  // exchange of host names) and then connects them one after another, each
  // allowed 5x that timeout; keeping it at a fifth of the time left after each
  // store read bounds a pair whose peer published its address but never
  // connects by the deadline.
  auto context = std::make_shared<gloo::rendezvous::Context>(spec_.rank, spec_.world_size);
  auto bound = [&context, deadline] { context->setTimeout(PairTimeoutFor(deadline)); };
  bound();
  GlooStoreAdapter adapter(*store_, spec_.KeyPrefix() + "gloo/", deadline, bound);
  try {
    context->connectFullMesh(adapter, device_);
  } catch (const std::exception& e) {
    std::string missing;
    int first_missing = -1;
    for (const auto& key : adapter.missing_keys()) {
      int r = RankOfKey(key);
      if (r < 0 || r >= spec_.world_size) continue;
      if (first_missing < 0) first_missing = r;
      missing += (missing.empty() ? "" : ", ") + DescribeRank(spec_, r);
    }
    if (!missing.empty()) {
      throw CollectiveError(
          where + ": " + missing + " did not join within " + std::to_string(timeout_ms) + " ms",
          first_missing);
    }
    // Gloo connects each pair right after reading that peer's address.
    const int peer = RankOfKey(adapter.last_read());
    if (peer >= 0 && peer < spec_.world_size && peer != spec_.rank) {
      if (std::strstr(e.what(), "Connect timeout") != nullptr) {
        const std::string hint =
            "it published its address; is it stuck, or unable to reach " + spec_.node_ip + "?";
        throw CollectiveError(where + ": " + DescribeRank(spec_, peer) +
                                  " did not connect within " + std::to_string(timeout_ms) +
                                  " ms (" + hint + ")",
                              peer);
      }
      throw CollectiveError(
          where + ": connecting to " + DescribeRank(spec_, peer) + " failed: " + e.what(), peer);
    }
    throw CollectiveError(where + ": connecting to the other ranks failed: " + e.what());
  }
  context_ = context;
}

void GlooGroup::WatchdogLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (notice_pending_) {
      notice_pending_ = false;
      lock.unlock();
      PublishNotice();
      lock.lock();
      continue;
    }
    if (!op_active_ || aborted_) {
      watchdog_idle_ = true;
      cv_.wait(lock);
      watchdog_idle_ = false;
      continue;
    }
    // Ops that start while this waits do not wake it (an op per call would
    // cost a thread switch each): it wakes at the deadline it saw, and waits
    // again for the deadline of the op running then.
    const auto deadline = op_deadline_;
    watchdog_deadline_ = deadline;
    cv_.wait_until(lock, deadline);
    if (stopping_ || !op_active_ || aborted_ || op_deadline_ != deadline ||
        std::chrono::steady_clock::now() < deadline) {
      continue;
    }
    const int peer = waiting_on_;
    std::string why = "timed out after " + std::to_string(spec_.options.timeout_ms) + " ms";
    if (peer >= 0) why += " waiting for " + DescribeRank(spec_, peer) + " (did every rank call it?)";
    lock.unlock();
    AbortInternal(why, peer, /*hard_close=*/true);
    lock.lock();
  }
  if (notice_pending_) {  // the destructor waits for it
    notice_pending_ = false;
    lock.unlock();
    PublishNotice();
  }
}

void GlooGroup::Abort(const std::string& reason, int failed_rank) {
  std::string why = "aborted on " + DescribeRank(spec_, spec_.rank) + ": " + reason;
  if (failed_rank >= 0) why += " (" + DescribeRank(spec_, failed_rank) + ")";
  AbortInternal(why, failed_rank, /*hard_close=*/true);
}

void GlooGroup::TEST_DropConnections() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    abort_why_ = "connections dropped by a test";
  }
  context_->closeConnections();
}

void GlooGroup::AbortInternal(const std::string& why, int failed_rank, bool hard_close) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) return;
    aborted_ = true;
    abort_why_ = why;
    abort_failed_rank_ = failed_rank;
  }
  // The connections close first, so that the operations in flight here and on
  // the other ranks end at once; the notice follows (a store write can take
  // long when the head is slow).
  if (context_ && hard_close) context_->closeConnections();
  bool publish_here;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto* buffer : in_flight_) {
      buffer->abortWaitRecv();
      buffer->abortWaitSend();
    }
    // The watchdog writes the notice, so that no operation waits on the
    // store; once it has stopped (the destructor), this thread does.
    publish_here = stopping_;
    if (!publish_here) notice_pending_ = true;
    cv_.notify_all();
  }
  if (publish_here) PublishNotice();
}

void GlooGroup::PublishNotice() {
  std::string notice;
  {
    std::lock_guard<std::mutex> lock(mu_);
    notice = std::to_string(abort_failed_rank_) + "\n" + abort_why_;
  }
  (void)store_->Set(spec_.KeyPrefix() + "abort/" + std::to_string(spec_.rank), notice);
}

GlooGroup::OpScope::OpScope(GlooGroup& group, const char* name)
    : group_(group), name_(name), lock_(group.op_mu_) {
  deadline_ =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(group.spec_.options.timeout_ms);
  std::lock_guard<std::mutex> lock(group.mu_);
  aborted_before_ = group.aborted_;
  group.op_active_ = true;
  group.op_deadline_ = deadline_;
  group.waiting_on_ = -1;
  // Wake the watchdog only when it would not see this deadline in time: it
  // waits for no op, or for a later deadline (the timeout is fixed, so only
  // the first op after an idle spell wakes it).
  if (group.watchdog_idle_ || deadline_ < group.watchdog_deadline_) group.cv_.notify_all();
}

GlooGroup::OpScope::~OpScope() {
  {
    std::lock_guard<std::mutex> lock(group_.mu_);
    for (auto& buffer : buffers_) group_.in_flight_.erase(buffer.get());
    group_.op_active_ = false;
    group_.waiting_on_ = -1;
  }
  buffers_.clear();
}

gloo::transport::UnboundBuffer* GlooGroup::NewBuffer(OpScope& op, const void* ptr,
                                                     size_t bytes) {
  auto buffer = context_->createUnboundBuffer(const_cast<void*>(ptr), bytes);
  auto* raw = buffer.get();
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_.insert(raw);
  op.buffers_.push_back(std::move(buffer));
  return raw;
}

void GlooGroup::Begin(OpScope& op, DataType type, bool collective) {
  if (op.aborted_before_) ThrowAborted(op);
  if (type == DataType::kHalf || type == DataType::kBFloat16) {
    throw CollectiveError(DescribeOp(spec_, op.name_) + ": Gloo groups take int32, int64, " +
                          "float or double, not " + DataTypeName(type));
  }
  if (collective) op.seq_ = collective_seq_++;
}

void GlooGroup::PostRecv(OpScope& op, gloo::transport::UnboundBuffer* buffer, int peer,
                         uint64_t slot, size_t offset, size_t bytes) {
  try {
    buffer->recv(peer, slot, offset, bytes);
  } catch (const std::exception& e) {
    FailTransport(op, peer, e.what());
  }
}

void GlooGroup::PostSend(OpScope& op, gloo::transport::UnboundBuffer* buffer, int peer,
                         uint64_t slot, size_t offset, size_t bytes) {
  try {
    buffer->send(peer, slot, offset, bytes);
  } catch (const std::exception& e) {
    FailTransport(op, peer, e.what());
  }
}

void GlooGroup::WaitRecv(OpScope& op, gloo::transport::UnboundBuffer* buffer, int peer) {
  Wait(op, buffer, peer, true);
}

void GlooGroup::WaitSend(OpScope& op, gloo::transport::UnboundBuffer* buffer, int peer) {
  Wait(op, buffer, peer, false);
}

void GlooGroup::Wait(OpScope& op, gloo::transport::UnboundBuffer* buffer, int peer, bool recv) {
  bool aborted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted = aborted_;
    waiting_on_ = peer;
  }
  if (aborted) ThrowAborted(op);
  // The watchdog aborts at the deadline; Gloo's own timeout (which would
  // close the pairs before the notice is written) is only a backstop.
  const auto backstop = std::chrono::duration_cast<std::chrono::milliseconds>(
      op.deadline_ - std::chrono::steady_clock::now() + std::chrono::seconds(5));
  bool done = false;
  try {
    done = recv ? buffer->waitRecv(nullptr, backstop) : buffer->waitSend(nullptr, backstop);
  } catch (const std::exception& e) {
    FailTransport(op, peer, e.what());
  }
  if (!done) ThrowAborted(op);
}

void GlooGroup::ThrowAborted(OpScope& op) {
  std::string why;
  int failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    why = abort_why_;
    failed = abort_failed_rank_;
  }
  throw CollectiveError(DescribeOp(spec_, op.name_) + " failed: " +
                            (op.aborted_before_ ? "the group was aborted earlier: " : "") + why,
                        failed);
}

void GlooGroup::FailTransport(OpScope& op, int peer, const std::string& what) {
  bool already;
  {
    std::lock_guard<std::mutex> lock(mu_);
    already = aborted_;
  }
  if (already) ThrowAborted(op);
  // A rank that aborts writes its notice right after closing; one that died
  // writes none. Give a notice in flight a moment to land (one store write:
  // when the store takes longer, the peer is named as lost).
  const std::string key = spec_.KeyPrefix() + "abort/" + std::to_string(peer);
  std::optional<std::string> notice;
  if (store_->Wait({key}, std::chrono::steady_clock::now() + std::chrono::milliseconds(300))
          .ok()) {
    notice = store_->Get(key);
  }
  std::string why;
  int failed = peer;
  if (notice) {
    size_t nl = notice->find('\n');
    int noticed = std::atoi(notice->substr(0, nl).c_str());
    if (noticed >= 0) failed = noticed;
    why = DescribeRank(spec_, peer) + " ended the group: " +
          (nl == std::string::npos ? *notice : notice->substr(nl + 1));
  } else {
    why = "lost the connection to " + DescribeRank(spec_, peer) +
          " (its process died or it left the group): " + what;
  }
  AbortInternal(why, failed, /*hard_close=*/true);
  throw CollectiveError(DescribeOp(spec_, op.name_) + " failed: " + why, failed);
}

uint64_t GlooGroup::CollectiveSlot(const OpScope& op, uint32_t phase) const {
  return kCollectiveSlot | (op.seq_ << 20) | phase;
}

std::vector<GlooGroup::Header> GlooGroup::ExchangeHeaders(OpScope& op, const Header& mine,
                                                          const void* payload,
                                                          size_t payload_bytes) {
  const int n = spec_.world_size;
  const int me = spec_.rank;
  std::vector<Header> all(n);
  all[me] = mine;
  all[me].magic = kMagic;
  all[me].seq = op.seq_;
  if (n == 1) return all;
  // Every message fits the posted receive whatever the sender's count, so a
  // mismatch is found from the headers, never by Gloo overrunning a buffer.
  const size_t slot_bytes = sizeof(Header) + kInlineBytes;
  if (payload_bytes > kInlineBytes) payload_bytes = 0;
  if (inline_in_.size() != slot_bytes * n) {
    inline_in_.assign(slot_bytes * n, 0);
    inline_out_.assign(slot_bytes, 0);
  }
  std::memcpy(inline_out_.data(), &all[me], sizeof(Header));
  if (payload_bytes > 0) std::memcpy(inline_out_.data() + sizeof(Header), payload, payload_bytes);
  const uint64_t slot = CollectiveSlot(op, 0);
  auto* out = NewBuffer(op, inline_out_.data(), slot_bytes);
  std::vector<gloo::transport::UnboundBuffer*> in(n, nullptr);
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    in[r] = NewBuffer(op, inline_in_.data() + r * slot_bytes, slot_bytes);
    PostRecv(op, in[r], r, slot, 0, slot_bytes);
  }
  for (int r = 0; r < n; ++r) {
    if (r != me) PostSend(op, out, r, slot, 0, sizeof(Header) + payload_bytes);
  }
  for (int r = 0; r < n; ++r) {
    if (r != me) WaitRecv(op, in[r], r);
  }
  for (int r = 0; r < n; ++r) {
    if (r != me) WaitSend(op, out, r);
  }
  for (int r = 0; r < n; ++r) {
    if (r != me) std::memcpy(&all[r], inline_in_.data() + r * slot_bytes, sizeof(Header));
  }
  return all;
}

const char* GlooGroup::InlinePayload(int rank) const {
  return inline_in_.data() + rank * (sizeof(Header) + kInlineBytes) + sizeof(Header);
}

void GlooGroup::CheckHeaders(OpScope& op, const std::vector<Header>& all, bool same_count) {
  const Header& mine = all[spec_.rank];
  auto fail = [&](int r, const std::string& what) {
    throw CollectiveError(DescribeOp(spec_, op.name_) + ": " + DescribeRank(spec_, r) + " " +
                          what + "; every rank must call the same operations with the same "
                          "arguments in the same order");
  };
  for (int r = 0; r < spec_.world_size; ++r) {
    const Header& h = all[r];
    if (h.magic != kMagic || h.seq != mine.seq) fail(r, "sent a corrupt header");
    if (h.kind != mine.kind) fail(r, std::string("called ") + OpKindName(h.kind));
    if (h.type != mine.type) {
      fail(r, std::string("used type ") + DataTypeName(static_cast<DataType>(h.type)) +
                  ", this rank " + DataTypeName(static_cast<DataType>(mine.type)));
    }
    if (h.op != mine.op) {
      fail(r, std::string("used reduce op ") + ReduceOpName(static_cast<ReduceOp>(h.op)) +
                  ", this rank " + ReduceOpName(static_cast<ReduceOp>(mine.op)));
    }
    if (h.root != mine.root) {
      fail(r, "used root " + std::to_string(h.root) + ", this rank " + std::to_string(mine.root));
    }
    if (same_count && h.count != mine.count) {
      throw CollectiveError(DescribeOp(spec_, op.name_) + ": lengths differ across ranks: " +
                            DescribeRank(spec_, r) + " has " + std::to_string(h.count) +
                            " elements, this rank has " + std::to_string(mine.count));
    }
  }
}

}  // namespace rayx::collective
