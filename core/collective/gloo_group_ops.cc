// GlooGroup's algorithms over Gloo's unbound buffers (see gloo_group.h).
#include <algorithm>
#include <cstring>

#include <gloo/transport/unbound_buffer.h>

#include "collective/gloo_group.h"
#include "collective/gloo_op_scope.h"
#include "collective/host_reduce.h"

namespace rayx::collective {

namespace {

// At or below this many bytes an allreduce sends every rank's whole buffer to
// every other rank (one round); above it, a ring (bandwidth-optimal).
constexpr size_t kDirectAllReduceBytes = 64 * 1024;
// A ring step's slice travels in chunks of this many bytes.
constexpr size_t kRingChunkBytes = 1024 * 1024;
constexpr uint64_t kPointToPointSlot = 2ull << 60;

uint64_t PointToPointSlot(int from, int to, uint64_t seq, uint32_t phase) {
  const uint64_t direction = from < to ? 1ull << 59 : 0;
  return kPointToPointSlot | direction | (seq << 20) | phase;
}

}  // namespace

void GlooGroup::AllReduceData(OpScope& op, char* data, size_t count, DataType type,
                              ReduceOp reduce) {
  const int n = spec_.world_size;
  const int me = spec_.rank;
  const size_t esize = DataTypeSize(type);
  const size_t bytes = count * esize;
  if (n == 1 || count == 0) return;
  if (bytes <= kDirectAllReduceBytes || count < static_cast<size_t>(n)) {
    std::vector<char> all(bytes * n);
    auto* out = NewBuffer(op, data, bytes);
    std::vector<gloo::transport::UnboundBuffer*> in(n, nullptr);
    for (int r = 0; r < n; ++r) {
      if (r == me) continue;
      in[r] = NewBuffer(op, all.data() + r * bytes, bytes);
      PostRecv(op, in[r], r, CollectiveSlot(op, 1), 0, bytes);
    }
    for (int r = 0; r < n; ++r) {
      if (r != me) PostSend(op, out, r, CollectiveSlot(op, 1), 0, bytes);
    }
    for (int r = 0; r < n; ++r) {
      if (r != me) WaitRecv(op, in[r], r);
    }
    for (int r = 0; r < n; ++r) {
      if (r != me) WaitSend(op, out, r);
    }
    std::memcpy(all.data() + me * bytes, data, bytes);
    // In rank order on every rank, so that every rank gets the same bits.
    std::memcpy(data, all.data(), bytes);
    for (int r = 1; r < n; ++r) HostReduce(data, all.data() + r * bytes, count, type, reduce);
    return;
  }
  // Ring: n - 1 reduce-scatter steps, then n - 1 allgather steps.
  const int right = (me + 1) % n;
  const int left = (me + n - 1) % n;
  std::vector<char>& tmp = ring_scratch_;
  if (tmp.size() < SliceOf(count, n, 0).second * esize) {
    tmp.resize(SliceOf(count, n, 0).second * esize);
  }
  auto* send = NewBuffer(op, data, bytes);
  auto* recv_data = NewBuffer(op, data, bytes);
  auto* recv_tmp = NewBuffer(op, tmp.data(), SliceOf(count, n, 0).second * esize);
  uint32_t phase = 1;
  for (int s = 0; s < n - 1; ++s, ++phase) {
    auto [send_off, send_len] = SliceOf(count, n, (me - s + n) % n);
    auto [recv_off, recv_len] = SliceOf(count, n, (me - s - 1 + 2 * n) % n);
    // In chunks, so that reducing one chunk overlaps the transfer of the next
    // (one peer's messages on one slot complete in the order posted).
    const size_t chunk = std::max<size_t>(1, kRingChunkBytes / esize);
    const size_t recv_chunks = (recv_len + chunk - 1) / chunk;
    const size_t send_chunks = (send_len + chunk - 1) / chunk;
    for (size_t c = 0; c < recv_chunks; ++c) {
      PostRecv(op, recv_tmp, left, CollectiveSlot(op, phase), c * chunk * esize,
               std::min(chunk, recv_len - c * chunk) * esize);
    }
    for (size_t c = 0; c < send_chunks; ++c) {
      PostSend(op, send, right, CollectiveSlot(op, phase), (send_off + c * chunk) * esize,
               std::min(chunk, send_len - c * chunk) * esize);
    }
    for (size_t c = 0; c < recv_chunks; ++c) {
      WaitRecv(op, recv_tmp, left);
      HostReduce(data + (recv_off + c * chunk) * esize, tmp.data() + c * chunk * esize,
                 std::min(chunk, recv_len - c * chunk), type, reduce);
    }
    for (size_t c = 0; c < send_chunks; ++c) WaitSend(op, send, right);
  }
  for (int s = 0; s < n - 1; ++s, ++phase) {
    auto [send_off, send_len] = SliceOf(count, n, (me + 1 - s + n) % n);
    auto [recv_off, recv_len] = SliceOf(count, n, (me - s + n) % n);
    PostRecv(op, recv_data, left, CollectiveSlot(op, phase), recv_off * esize, recv_len * esize);
    PostSend(op, send, right, CollectiveSlot(op, phase), send_off * esize, send_len * esize);
    WaitRecv(op, recv_data, left);
    WaitSend(op, send, right);
  }
}

void GlooGroup::AllReduce(void* data, size_t count, DataType type, ReduceOp reduce,
                          void* /*stream*/) {
  OpScope op(*this, "AllReduce");
  Begin(op, type, true);
  Header mine{0, kOpAllReduce, 0, static_cast<int32_t>(type), static_cast<int32_t>(reduce), -1,
              0, count};
  const size_t bytes = count * DataTypeSize(type);
  if (bytes > kInlineBytes) {
    CheckHeaders(op, ExchangeHeaders(op, mine), true);
    AllReduceData(op, static_cast<char*>(data), count, type, reduce);
    return;
  }
  // Small: the data rides with the headers (one round), reduced here in rank
  // order so that every rank gets the same bits.
  CheckHeaders(op, ExchangeHeaders(op, mine, data, bytes), true);
  const int n = spec_.world_size;
  if (n == 1 || bytes == 0) return;
  auto part = [&](int r) { return r == spec_.rank ? static_cast<const char*>(data)
                                                  : InlinePayload(r); };
  std::vector<char> acc(part(0), part(0) + bytes);
  for (int r = 1; r < n; ++r) HostReduce(acc.data(), part(r), count, type, reduce);
  std::memcpy(data, acc.data(), bytes);
}

void GlooGroup::AllGather(const void* in, size_t count, DataType type,
                          const std::function<void*(const std::vector<size_t>&)>& output,
                          void* /*stream*/) {
  OpScope op(*this, "AllGather");
  Begin(op, type, true);
  Header mine{0, kOpAllGather, 0, static_cast<int32_t>(type), -1, -1, 0, count};
  std::vector<Header> all = ExchangeHeaders(op, mine);
  CheckHeaders(op, all, false);
  const int n = spec_.world_size;
  const int me = spec_.rank;
  const size_t esize = DataTypeSize(type);
  std::vector<size_t> counts(n), offsets(n);
  size_t total = 0;
  for (int r = 0; r < n; ++r) {
    counts[r] = all[r].count;
    offsets[r] = total;
    total += counts[r];
  }
  char* out = static_cast<char*>(output(counts));
  if (count > 0) std::memcpy(out + offsets[me] * esize, in, count * esize);
  // A rank holding every element has nothing to receive but must still send.
  if (total == 0 || n == 1) return;
  auto* out_buffer = NewBuffer(op, out, total * esize);
  auto* in_buffer = count > 0 ? NewBuffer(op, in, count * esize) : nullptr;
  for (int r = 0; r < n; ++r) {
    if (r == me || counts[r] == 0) continue;
    PostRecv(op, out_buffer, r, CollectiveSlot(op, 1), offsets[r] * esize, counts[r] * esize);
  }
  for (int r = 0; r < n; ++r) {
    if (r != me && count > 0) PostSend(op, in_buffer, r, CollectiveSlot(op, 1), 0, count * esize);
  }
  for (int r = 0; r < n; ++r) {
    if (r != me && counts[r] > 0) WaitRecv(op, out_buffer, r);
  }
  for (int r = 0; r < n; ++r) {
    if (r != me && count > 0) WaitSend(op, in_buffer, r);
  }
}

void GlooGroup::ReduceScatter(const void* in, size_t count, void* out, DataType type,
                              ReduceOp reduce, void* /*stream*/) {
  OpScope op(*this, "ReduceScatter");
  Begin(op, type, true);
  Header mine{0, kOpReduceScatter, 0, static_cast<int32_t>(type), static_cast<int32_t>(reduce),
              -1, 0, count};
  CheckHeaders(op, ExchangeHeaders(op, mine), true);
  const size_t esize = DataTypeSize(type);
  std::vector<char> tmp(count * esize);
  if (count > 0) std::memcpy(tmp.data(), in, tmp.size());
  AllReduceData(op, tmp.data(), count, type, reduce);
  auto [offset, length] = SliceOf(count, spec_.world_size, spec_.rank);
  if (length > 0) std::memcpy(out, tmp.data() + offset * esize, length * esize);
}

void GlooGroup::Broadcast(void* data, size_t count, DataType type, int root, void* /*stream*/) {
  CheckPeer(spec_, "Broadcast", root, "root");
  OpScope op(*this, "Broadcast");
  Begin(op, type, true);
  Header mine{0, kOpBroadcast, 0, static_cast<int32_t>(type), -1, root, 0, count};
  CheckHeaders(op, ExchangeHeaders(op, mine), true);
  const int n = spec_.world_size;
  const size_t bytes = count * DataTypeSize(type);
  if (n == 1 || bytes == 0) return;
  auto* buffer = NewBuffer(op, data, bytes);
  if (spec_.rank == root) {
    for (int r = 0; r < n; ++r) {
      if (r != root) PostSend(op, buffer, r, CollectiveSlot(op, 1), 0, bytes);
    }
    for (int r = 0; r < n; ++r) {
      if (r != root) WaitSend(op, buffer, r);
    }
  } else {
    PostRecv(op, buffer, root, CollectiveSlot(op, 1), 0, bytes);
    WaitRecv(op, buffer, root);
  }
}

void GlooGroup::Reduce(void* data, size_t count, DataType type, ReduceOp reduce, int root,
                       void* /*stream*/) {
  CheckPeer(spec_, "Reduce", root, "root");
  OpScope op(*this, "Reduce");
  Begin(op, type, true);
  Header mine{0, kOpReduce, 0, static_cast<int32_t>(type), static_cast<int32_t>(reduce), root,
              0, count};
  CheckHeaders(op, ExchangeHeaders(op, mine), true);
  const size_t bytes = count * DataTypeSize(type);
  std::vector<char> tmp(bytes);
  if (bytes > 0) std::memcpy(tmp.data(), data, bytes);
  AllReduceData(op, tmp.data(), count, type, reduce);
  if (spec_.rank == root && bytes > 0) std::memcpy(data, tmp.data(), bytes);
}

void GlooGroup::Barrier() {
  OpScope op(*this, "Barrier");
  Begin(op, DataType::kInt32, true);
  Header mine{0, kOpBarrier, 0, 0, -1, -1, 0, 0};
  CheckHeaders(op, ExchangeHeaders(op, mine), true);
}

void GlooGroup::Send(const void* data, size_t count, DataType type, int dst, void* /*stream*/) {
  CheckPeer(spec_, "Send", dst, "destination");
  OpScope op(*this, "Send");
  Begin(op, type, false);
  const int me = spec_.rank;
  const uint64_t seq = send_seq_[dst]++;
  Header mine{0x52415958, kOpSend, seq, static_cast<int32_t>(type), -1, me, 0, count};
  Header ack{};
  auto* mine_buffer = NewBuffer(op, &mine, sizeof(mine));
  auto* ack_buffer = NewBuffer(op, &ack, sizeof(ack));
  PostRecv(op, ack_buffer, dst, PointToPointSlot(me, dst, seq, 1), 0, sizeof(ack));
  PostSend(op, mine_buffer, dst, PointToPointSlot(me, dst, seq, 0), 0, sizeof(mine));
  WaitRecv(op, ack_buffer, dst);
  WaitSend(op, mine_buffer, dst);
  if (ack.count != count || ack.type != mine.type) {
    throw CollectiveError(DescribeOp(spec_, "Send") + ": sends " + std::to_string(count) + " " +
                          DataTypeName(type) + " to " + DescribeRank(spec_, dst) +
                          ", whose Recv expects " + std::to_string(ack.count) + " " +
                          DataTypeName(static_cast<DataType>(ack.type)));
  }
  const size_t bytes = count * DataTypeSize(type);
  if (bytes == 0) return;
  auto* data_buffer = NewBuffer(op, data, bytes);
  PostSend(op, data_buffer, dst, PointToPointSlot(me, dst, seq, 2), 0, bytes);
  WaitSend(op, data_buffer, dst);
}

void GlooGroup::Recv(void* data, size_t count, DataType type, int src, void* /*stream*/) {
  CheckPeer(spec_, "Recv", src, "source");
  OpScope op(*this, "Recv");
  Begin(op, type, false);
  const int me = spec_.rank;
  const uint64_t seq = recv_seq_[src]++;
  Header theirs{};
  Header mine{0x52415958, kOpSend, seq, static_cast<int32_t>(type), -1, me, 0, count};
  auto* theirs_buffer = NewBuffer(op, &theirs, sizeof(theirs));
  PostRecv(op, theirs_buffer, src, PointToPointSlot(src, me, seq, 0), 0, sizeof(theirs));
  WaitRecv(op, theirs_buffer, src);
  auto* mine_buffer = NewBuffer(op, &mine, sizeof(mine));
  PostSend(op, mine_buffer, src, PointToPointSlot(src, me, seq, 1), 0, sizeof(mine));
  const bool match = theirs.count == count && theirs.type == mine.type;
  const size_t bytes = count * DataTypeSize(type);
  if (match && bytes > 0) {
    auto* data_buffer = NewBuffer(op, data, bytes);
    PostRecv(op, data_buffer, src, PointToPointSlot(src, me, seq, 2), 0, bytes);
    WaitRecv(op, data_buffer, src);
  }
  WaitSend(op, mine_buffer, src);
  if (!match) {
    throw CollectiveError(DescribeOp(spec_, "Recv") + ": expects " + std::to_string(count) + " " +
                          DataTypeName(type) + " from " + DescribeRank(spec_, src) +
                          ", which sends " + std::to_string(theirs.count) + " " +
                          DataTypeName(static_cast<DataType>(theirs.type)));
  }
}

}  // namespace rayx::collective
