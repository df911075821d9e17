// NcclGroup: NCCL communicators created non-blocking and polled against the
// group's deadline, so that no wait can block forever inside NCCL.
#include "collective/nccl_group.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "collective/poll_pacer.h"
#include "worker/worker_env.h"

#ifdef RAYX_HAVE_NCCL
#include <sys/prctl.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace rayx::collective {

#ifndef RAYX_HAVE_NCCL

std::shared_ptr<CollectiveGroup> ConnectNcclGroup(const GroupSpec& spec,
                                                  std::shared_ptr<RendezvousStore>) {
  throw CollectiveError(DescribeOp(spec, "InitCollectiveGroup") +
                        ": rayx was built without NCCL; use Backend::kGloo");
}

#else

namespace {

ncclDataType_t ToNccl(DataType type) {
  switch (type) {
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kFloat: return ncclFloat32;
    case DataType::kDouble: return ncclFloat64;
    case DataType::kHalf: return ncclFloat16;
    case DataType::kBFloat16: return ncclBfloat16;
  }
  return ncclFloat32;
}

ncclRedOp_t ToNccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kProduct: return ncclProd;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
  }
  return ncclSum;
}

// Where `ptr` points: host memory (-1), managed memory (-2, usable from any
// device), or device memory on the returned device.
constexpr int kHostMemory = -1;
constexpr int kManagedMemory = -2;
int MemoryOf(const void* ptr) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return kHostMemory;
  }
  if (attr.type == cudaMemoryTypeManaged) return kManagedMemory;
  if (attr.type == cudaMemoryTypeDevice) return attr.device;
  return kHostMemory;
}

// One rank of an NCCL group. Operations are serialised; Abort is thread-safe:
// it flags the group, and the operation in progress (or Abort itself when
// none is) aborts the communicator. An operation never blocks in CUDA while
// NCCL works: it polls the communicator and the stream (checking the flag and
// the deadline) until the work is done, and only then copies a host buffer
// back. Like GlooGroup, Abort and destruction leave a notice
// "<failed rank>\n<reason>" under "<prefix>abort/<rank>" (written by the
// calling thread, never an operation's); an operation that fails names the
// first notice another rank left.
class NcclGroup : public CollectiveGroup {
 public:
  NcclGroup(GroupSpec spec, std::shared_ptr<RendezvousStore> store)
      : spec_(std::move(spec)), store_(std::move(store)) {}

  ~NcclGroup() override {
    const bool ended_before = aborted_;
    EndOnDestroy();
    if (!ended_before) PublishNotice(DescribeRank(spec_, spec_.rank) + " destroyed the group", -1);
  }

  // The destructor's work on the communicator and stream.
  void EndOnDestroy() {
    std::lock_guard<std::mutex> lock(op_mu_);
    // The last reference may drop on any thread: work on the group's device,
    // and leave the thread's own current device as it was.
    int current = -1;
    const bool had_device = cudaGetDevice(&current) == cudaSuccess;
    cudaSetDevice(device_);
    struct Restore {
      bool had;
      int device;
      ~Restore() {
        if (had) cudaSetDevice(device);
      }
    } restore{had_device, current};
    if (comm_ != nullptr && !aborted_) {
      // Finalize flushes the communicator's work; polled, so a dead peer
      // cannot hold the destructor past the group's timeout.
      const auto deadline = Deadline();
      ncclResult_t state = ncclCommFinalize(comm_);
      while (state == ncclSuccess || state == ncclInProgress) {
        ncclCommGetAsyncError(comm_, &state);
        if (state != ncclInProgress || std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      if (state == ncclSuccess) {
        ncclCommDestroy(comm_);
        comm_ = nullptr;
      }
    }
    AbortComm();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  void Connect() {
    std::string why;
    const int devices = CudaDeviceCount(&why);
    if (devices == 0) {
      throw CollectiveError(DescribeOp(spec_, "InitCollectiveGroup") + ": no GPU: " + why);
    }
    int current = 0;
    Check(cudaGetDevice(&current), "InitCollectiveGroup");
    device_ = NcclDeviceFor(spec_, std::getenv(rayx::WorkerEnv::kLocalRank), devices,
                            current);
    // The communicator and the stream belong to the device current here.
    Check(cudaSetDevice(device_), "InitCollectiveGroup");
    // Not cudaStreamNonBlocking: an operation without a stream of its own
    // must see what the caller wrote on the legacy default stream (torch's
    // default stream) before NCCL reads it.
    Check(cudaStreamCreate(&stream_), "InitCollectiveGroup");
    int pools = 0;
    async_alloc_ =
        cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device_) == cudaSuccess &&
        pools != 0;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(spec_.ConnectTimeoutMs());
    const std::string key = spec_.KeyPrefix() + "nccl_id";
    ncclUniqueId id;
    if (spec_.rank == 0) {
      CheckNccl(ncclGetUniqueId(&id), "InitCollectiveGroup");
      Status s = store_->Set(key, std::string(id.internal, sizeof(id.internal)));
      if (!s.ok()) Fail("InitCollectiveGroup", "cannot publish the NCCL id: " + s.ToString(), -1);
    } else {
      Status s = store_->Wait({key}, deadline);
      std::optional<std::string> value = s.ok() ? store_->Get(key) : std::nullopt;
      if (!value || value->size() != sizeof(id.internal)) {
        Fail("InitCollectiveGroup",
             "rank 0 did not publish the NCCL id within " +
                 std::to_string(spec_.ConnectTimeoutMs()) + " ms",
             0);
      }
      std::memcpy(id.internal, value->data(), sizeof(id.internal));
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r =
        ncclCommInitRankConfig(&comm_, spec_.world_size, id, spec_.rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) CheckNccl(r, "InitCollectiveGroup");
    std::lock_guard<std::mutex> lock(op_mu_);
    WaitComm("InitCollectiveGroup", deadline, spec_.ConnectTimeoutMs());
  }

  const GroupSpec& spec() const override { return spec_; }

  void AllReduce(void* data, size_t count, DataType type, ReduceOp op, void* stream) override {
    Run("AllReduce", data, count, type, stream, kInOut, [&](void* p, cudaStream_t s) {
      return ncclAllReduce(p, p, count, ToNccl(type), ToNccl(op), comm_, s);
    });
  }

  void AllGather(const void* in, size_t count, DataType type,
                 const std::function<void*(const std::vector<size_t>&)>& output,
                 void* stream) override {
    // NCCL needs equal counts; `output` rejects others on the raw path.
    void* out = output(std::vector<size_t>(spec_.world_size, count));
    const size_t bytes = count * DataTypeSize(type);
    Staged staged_out(this, out, bytes * spec_.world_size, "AllGather", kOut);
    Staged staged_in(this, const_cast<void*>(in), bytes, "AllGather", kIn);
    RunStaged("AllGather", stream, [&](cudaStream_t s) {
      return ncclAllGather(staged_in.ptr(s), staged_out.ptr(s), count, ToNccl(type), comm_, s);
    }, {&staged_out});
  }

  void ReduceScatter(const void* in, size_t count, void* out, DataType type, ReduceOp op,
                     void* stream) override {
    if (count % spec_.world_size != 0) {
      throw CollectiveError(DescribeOp(spec_, "ReduceScatter") + ": NCCL needs a length that " +
                            "divides by the world size, got " + std::to_string(count));
    }
    const size_t per_rank = count / spec_.world_size;
    const size_t esize = DataTypeSize(type);
    Staged staged_in(this, const_cast<void*>(in), count * esize, "ReduceScatter", kIn);
    Staged staged_out(this, out, per_rank * esize, "ReduceScatter", kOut);
    RunStaged("ReduceScatter", stream, [&](cudaStream_t s) {
      return ncclReduceScatter(staged_in.ptr(s), staged_out.ptr(s), per_rank, ToNccl(type),
                               ToNccl(op), comm_, s);
    }, {&staged_out});
  }

  void Broadcast(void* data, size_t count, DataType type, int root, void* stream) override {
    CheckPeer(spec_, "Broadcast", root, "root");
    Run("Broadcast", data, count, type, stream, kInOut, [&](void* p, cudaStream_t s) {
      return ncclBroadcast(p, p, count, ToNccl(type), root, comm_, s);
    });
  }

  void Reduce(void* data, size_t count, DataType type, ReduceOp op, int root,
              void* stream) override {
    CheckPeer(spec_, "Reduce", root, "root");
    Run("Reduce", data, count, type, stream, kInOut, [&](void* p, cudaStream_t s) {
      return ncclReduce(p, p, count, ToNccl(type), ToNccl(op), root, comm_, s);
    });
  }

  void Send(const void* data, size_t count, DataType type, int dst, void* stream) override {
    CheckPeer(spec_, "Send", dst, "destination");
    // Only read: never copied back into the caller's (const, maybe read-only) buffer.
    Run("Send", const_cast<void*>(data), count, type, stream, kIn,
        [&](void* p, cudaStream_t s) { return ncclSend(p, count, ToNccl(type), dst, comm_, s); });
  }

  void Recv(void* data, size_t count, DataType type, int src, void* stream) override {
    CheckPeer(spec_, "Recv", src, "source");
    Run("Recv", data, count, type, stream, kOut,
        [&](void* p, cudaStream_t s) { return ncclRecv(p, count, ToNccl(type), src, comm_, s); });
  }

  void Barrier() override {
    int32_t one = 1;
    AllReduce(&one, 1, DataType::kInt32, ReduceOp::kSum, nullptr);
  }

  void Abort(const std::string& reason, int failed_rank) override {
    const std::string why = "aborted on " + DescribeRank(spec_, spec_.rank) + ": " + reason;
    if (!MarkAborted(why, failed_rank)) return;
    // No operation in progress: abort the communicator here; otherwise the
    // operation's poll loop does within a millisecond, or its OpLock as it
    // ends.
    {
      std::unique_lock<std::mutex> lock(op_mu_, std::try_to_lock);
      if (lock.owns_lock()) AbortComm();
    }
    PublishNotice(why, failed_rank);
  }

 private:
  // How an operation uses a buffer: read (copied to the device first),
  // written (copied back to the host after), or both.
  enum Direction { kIn = 1, kOut = 2, kInOut = 3 };

  // A buffer on the device: `ptr` itself, or a device copy of host memory,
  // allocated on the operation's stream and freed there (cudaMallocAsync /
  // cudaFreeAsync where the device has memory pools: a cudaFree would wait
  // for the whole device, other streams' NCCL kernels included, and never
  // return while one of them hangs).
  class Staged {
   public:
    Staged(NcclGroup* group, void* ptr, size_t bytes, const char* op, Direction direction)
        : group_(group), host_(ptr), bytes_(bytes), op_(op), direction_(direction) {
      group_->Check(cudaSetDevice(group_->device_), op);  // the device is per thread
      if (bytes == 0) return;
      const int memory = MemoryOf(ptr);
      if (memory == kManagedMemory || memory == group_->device_) return;
      if (memory != kHostMemory) {
        // A kernel on this rank's device cannot read another device's memory
        // (no peer access between ranks' processes): say so instead of
        // faulting the CUDA context.
        group_->Fail(op,
                     "the buffer is on CUDA device " + std::to_string(memory) +
                         " but this rank's group runs on device " +
                         std::to_string(group_->device_) +
                         " (allocate it there: the calling thread's current device after "
                         "InitCollectiveGroup)",
                     -1);
      }
      staged_ = true;
    }
    ~Staged() {
      if (device_ == nullptr) return;
      if (group_->async_alloc_) {
        cudaFreeAsync(device_, stream_);
      } else {
        cudaFree(device_);
      }
    }
    void* ptr(cudaStream_t s) {
      if (!staged_) return host_;
      if (device_ == nullptr) {
        stream_ = s;
        group_->Check(group_->async_alloc_ ? cudaMallocAsync(&device_, bytes_, s)
                                           : cudaMalloc(&device_, bytes_),
                      op_);
        if (direction_ & kIn) {
          group_->Check(cudaMemcpyAsync(device_, host_, bytes_, cudaMemcpyHostToDevice, s), op_);
        }
      }
      return device_;
    }
    // Copies a staged buffer back to the host: returns whether it did. A copy
    // into pageable memory returns only once the stream reaches it, so the
    // NCCL work before it must be done (polled) first.
    bool Finish(cudaStream_t s) {
      if (device_ == nullptr || !(direction_ & kOut)) return false;
      group_->Check(cudaMemcpyAsync(host_, device_, bytes_, cudaMemcpyDeviceToHost, s), op_);
      return true;
    }

   private:
    NcclGroup* group_;
    void* host_;
    size_t bytes_;
    const char* op_;
    Direction direction_;
    bool staged_ = false;  // host memory: goes through device_
    void* device_ = nullptr;
    cudaStream_t stream_ = nullptr;  // the one device_ was allocated on
  };

  template <typename F>
  void Run(const char* op, void* data, size_t count, DataType type, void* stream,
           Direction direction, F&& call) {
    Staged staged(this, data, count * DataTypeSize(type), op, direction);
    RunStaged(op, stream, [&](cudaStream_t s) { return call(staged.ptr(s), s); }, {&staged});
  }

  template <typename F>
  void RunStaged(const char* op, void* stream, F&& call, std::initializer_list<Staged*> outputs) {
    OpLock lock(*this);
    if (aborted_) {
      AbortComm();
      ThrowIfAborted(op);
    }
    const auto deadline = Deadline();
    Check(cudaSetDevice(device_), op);  // the device is per thread
    cudaStream_t s = stream != nullptr ? static_cast<cudaStream_t>(stream) : stream_;
    ncclResult_t r = call(s);
    if (r != ncclSuccess && r != ncclInProgress) {
      // NCCL marks the communicator failed too: every later call would fail,
      // and the peers would wait out their deadline. End the group now.
      EndComm(op,
              std::string("NCCL error: ") + ncclGetErrorString(r) + " " + ncclGetLastError(comm_));
    }
    WaitComm(op, deadline, spec_.options.timeout_ms);
    // The NCCL work drains by polling, so an abort or the deadline can end it;
    // then the host copies (which block until the stream reaches them).
    WaitStream(op, s, deadline);
    bool copied = false;
    for (Staged* out : outputs) copied = out->Finish(s) || copied;
    if (copied) WaitStream(op, s, deadline);
  }

  // Holds op_mu_ for one operation. Abort sets the flag and then tries the
  // lock; an operation that ends without having seen the flag reads it after
  // unlocking and aborts the communicator then, so one of the two always does
  // (a later operation or the destructor, should the lock be taken again).
  class OpLock {
   public:
    explicit OpLock(NcclGroup& group) : group_(group), lock_(group.op_mu_) {}
    ~OpLock() {
      lock_.unlock();
      if (!group_.aborted_) return;
      std::unique_lock<std::mutex> again(group_.op_mu_, std::try_to_lock);
      if (again.owns_lock()) group_.AbortComm();
    }
    OpLock(const OpLock&) = delete;
    OpLock& operator=(const OpLock&) = delete;

   private:
    NcclGroup& group_;
    std::unique_lock<std::mutex> lock_;
  };

  // Polls `s` until its work is done.
  void WaitStream(const char* op, cudaStream_t s, std::chrono::steady_clock::time_point deadline) {
    Poller poller;
    for (;;) {
      cudaError_t err = cudaStreamQuery(s);
      if (err == cudaSuccess) return;
      if (err != cudaErrorNotReady) Check(err, op);
      PollOnce(op, deadline, spec_.options.timeout_ms, poller);
    }
  }

  // One wait's pacing. While it sleeps, the thread's timer slack is 1 ns, so a
  // sleep ends when asked rather than up to 50 us later (Linux's default);
  // set on the first sleep only (a short operation costs no system call) and
  // given back when the wait ends.
  struct Poller {
    PollPacer pacer{std::chrono::steady_clock::now()};
    int slack_before = -1;
    ~Poller() {
      if (slack_before > 1) prctl(PR_SET_TIMERSLACK, slack_before, 0, 0, 0);
    }
    void Sleep(std::chrono::microseconds pause) {
      if (slack_before < 0) {
        slack_before = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
        if (slack_before > 1) prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
      }
      std::this_thread::sleep_for(pause);
    }
  };

  // Polls the communicator until its pending work is enqueued (or it fails).
  // `limit_ms`: what the deadline was set to, for the timeout's message.
  void WaitComm(const char* op, std::chrono::steady_clock::time_point deadline, int64_t limit_ms) {
    Poller poller;
    for (;;) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) {
        EndComm(op, std::string("NCCL error: ") + ncclGetErrorString(state) + " " +
                        ncclGetLastError(nullptr));
      }
      PollOnce(op, deadline, limit_ms, poller);
    }
  }

  // Checks for an error, an abort and the deadline, then pauses as the
  // poller's pacer says (a yield at first, so short operations end without a
  // sleep's delay).
  void PollOnce(const char* op, std::chrono::steady_clock::time_point deadline, int64_t limit_ms,
                Poller& poller) {
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(comm_, &state);
    if (state != ncclSuccess && state != ncclInProgress) {
      EndComm(op, std::string("NCCL error: ") + ncclGetErrorString(state));
    }
    if (aborted_) {
      AbortComm();
      ThrowIfAborted(op);
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      EndComm(op, "timed out after " + std::to_string(limit_ms) + " ms");
    }
    const auto pause = poller.pacer.Pause(now);
    if (pause.count() == 0) {
      std::this_thread::yield();
    } else {
      poller.Sleep(pause);
    }
  }

  // Ends the group after its communicator failed here (`what`): names the
  // abort notice another rank left, if any (its abort is then the likely
  // cause), aborts the communicator and throws. Does not publish a notice
  // itself: this runs on the operation's thread, which must not wait on the
  // store (and this rank cannot tell which peer it waited for).
  // REQUIRES: op_mu_ held.
  [[noreturn]] void EndComm(const char* op, const std::string& what) {
    int failed_rank = -1;
    std::string why = what;
    if (std::optional<std::string> notice = ReadNotice(&failed_rank)) why += " (" + *notice + ")";
    MarkAborted(why, failed_rank);
    AbortComm();
    ThrowIfAborted(op);
    Fail(op, why, failed_rank);  // not reached: the group is marked aborted
  }

  // Writes this rank's abort notice, as GlooGroup does. Blocks on the store:
  // never called on an operation's thread.
  void PublishNotice(const std::string& why, int failed_rank) {
    (void)store_->Set(spec_.KeyPrefix() + "abort/" + std::to_string(spec_.rank),
                      std::to_string(failed_rank) + "\n" + why);
  }

  // "rank r ... ended the group: <reason>" for the first other rank that left
  // an abort notice, setting `failed_rank` to the rank it names (or r);
  // nullopt when none did. Reads one rank at a time and starts no read after
  // 300 ms (the store may be slow: the operation has failed already).
  std::optional<std::string> ReadNotice(int* failed_rank) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    for (int r = 0; r < spec_.world_size && std::chrono::steady_clock::now() < until; ++r) {
      if (r == spec_.rank) continue;
      std::optional<std::string> notice =
          store_->Get(spec_.KeyPrefix() + "abort/" + std::to_string(r));
      if (!notice) continue;
      const size_t nl = notice->find('\n');
      const int named = std::atoi(notice->substr(0, nl).c_str());
      *failed_rank = named >= 0 ? named : r;
      const std::string reason = nl == std::string::npos ? *notice : notice->substr(nl + 1);
      return DescribeRank(spec_, r) + " ended the group: " + reason;
    }
    return std::nullopt;
  }

  // Records why the group ended; false when it had already.
  bool MarkAborted(const std::string& why, int failed_rank) {
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (aborted_) return false;
    abort_why_ = why;
    abort_failed_rank_ = failed_rank;
    aborted_ = true;
    return true;
  }

  // REQUIRES: op_mu_ held (or the group no longer shared).
  void AbortComm() {
    if (comm_ == nullptr || comm_aborted_) return;
    comm_aborted_ = true;
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  void ThrowIfAborted(const char* op) {
    if (!aborted_) return;
    std::lock_guard<std::mutex> lock(abort_mu_);
    throw CollectiveError(DescribeOp(spec_, op) + " failed: " + abort_why_, abort_failed_rank_);
  }

  [[noreturn]] void Fail(const char* op, const std::string& why, int failed_rank) {
    throw CollectiveError(DescribeOp(spec_, op) + " failed: " + why, failed_rank);
  }

  void Check(cudaError_t err, const char* op) {
    if (err != cudaSuccess) Fail(op, std::string("CUDA error: ") + cudaGetErrorString(err), -1);
  }

  void CheckNccl(ncclResult_t r, const char* op) {
    if (r != ncclSuccess) Fail(op, std::string("NCCL error: ") + ncclGetErrorString(r), -1);
  }

  std::chrono::steady_clock::time_point Deadline() const {
    return std::chrono::steady_clock::now() + std::chrono::milliseconds(spec_.options.timeout_ms);
  }

  const GroupSpec spec_;
  const std::shared_ptr<RendezvousStore> store_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  bool async_alloc_ = false;  // the device has memory pools (cudaMallocAsync)
  std::mutex op_mu_;  // serialises operations; guards comm_
  ncclComm_t comm_ = nullptr;
  bool comm_aborted_ = false;
  std::mutex abort_mu_;  // guards abort_why_, abort_failed_rank_
  std::atomic<bool> aborted_{false};
  std::string abort_why_;
  int abort_failed_rank_ = -1;
};

}  // namespace

std::shared_ptr<CollectiveGroup> ConnectNcclGroup(const GroupSpec& spec,
                                                  std::shared_ptr<RendezvousStore> store) {
  auto group = std::make_shared<NcclGroup>(spec, std::move(store));
  group->Connect();
  return group;
}

#endif  // RAYX_HAVE_NCCL

}  // namespace rayx::collective
