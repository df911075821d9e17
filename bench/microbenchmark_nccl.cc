// NCCL rounds for `rayx microbenchmark` (see microbenchmark_nccl.h).
#include "microbenchmark_nccl.h"

#ifdef RAYX_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#include <rayx/actor_group.h>
#include <rayx/collective.h>
#include <rayx/kv.h>
#include <rayx/rayx.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "rayx/ids.h"

namespace {

constexpr size_t kBigBytes = 64ull << 20;
constexpr size_t kBigCount = kBigBytes / sizeof(float);
constexpr size_t kCheckCount = 1024;
constexpr int64_t kCallTimeoutMs = 300000;

void CudaCheck(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
  }
}

void NcclCheck(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(r));
}

double UpperMedian(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Device memory on the current device, zeroed; freed on destruction.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) {
    CudaCheck(cudaMalloc(&ptr_, bytes), "cudaMalloc");
    CudaCheck(cudaMemset(ptr_, 0, bytes), "cudaMemset");
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

// Seconds per allreduce of `count` floats at `data`, `iterations` times, after
// a barrier. Zeros stay zeros, so repeated sums never overflow.
std::vector<double> TimeRayx(const std::string& group, void* data, size_t count,
                             int64_t iterations) {
  std::vector<double> seconds;
  seconds.reserve(static_cast<size_t>(iterations));
  rayx::collective::Barrier(group);
  for (int64_t i = 0; i < iterations; ++i) {
    auto start = std::chrono::steady_clock::now();
    rayx::collective::AllReduce(data, count, rayx::collective::DataType::kFloat,
                                rayx::collective::ReduceOp::kSum, group);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return seconds;
}

}  // namespace

// What one rank measured in one round: rayx's figures, then raw NCCL's in the
// same process on the same device, or why raw NCCL failed.
struct RankFigures {
  double rayx_latency_us = 0;
  double rayx_gbps = 0;
  double raw_latency_us = 0;
  double raw_gbps = 0;
  std::string raw_error;
  MSGPACK_DEFINE_MAP(rayx_latency_us, rayx_gbps, raw_latency_us, raw_gbps, raw_error)
};

// A rank of the benchmark's actor group.
class NcclBenchRank {
 public:
  static NcclBenchRank* Create() { return new NcclBenchRank(); }

  // rayx's group, then a raw NCCL communicator of the same ranks (its
  // ncclUniqueId passed through the KV under `raw_key`), each timed on this
  // rank's own device.
  RankFigures Figures(std::string group, int64_t small, int64_t big, std::string raw_key) {
    // The rank's own device (the one its NCCL group uses).
    CudaCheck(cudaSetDevice(std::max(0, rayx::GetRankInfo().device)), "cudaSetDevice");
    DeviceBuffer one(sizeof(float)), large(kBigBytes);
    // The zeroing (legacy default stream) is done before any stream reads them.
    CudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    RankFigures f;
    TimeRayx(group, one.get(), 1, 100);  // warm up
    f.rayx_latency_us = UpperMedian(TimeRayx(group, one.get(), 1, small)) * 1e6;
    TimeRayx(group, large.get(), kBigCount, 1);  // warm up
    f.rayx_gbps = static_cast<double>(kBigBytes) /
                  UpperMedian(TimeRayx(group, large.get(), kBigCount, big)) / 1e9;
    CheckSum(group, large.get());
    try {
      RawNccl(group, raw_key, one.get(), large.get(), small, big, &f);
    } catch (const std::exception& e) {
      f.raw_error = e.what();
    }
    return f;
  }

 private:
  // Every rank's ones were added: a skipped or partial allreduce shows here.
  static void CheckSum(const std::string& group, void* device) {
    std::vector<float> values(kCheckCount, 1.0f);
    CudaCheck(
        cudaMemcpy(device, values.data(), kCheckCount * sizeof(float), cudaMemcpyHostToDevice),
        "cudaMemcpy");
    rayx::collective::AllReduce(device, kCheckCount, rayx::collective::DataType::kFloat,
                                rayx::collective::ReduceOp::kSum, group);
    CudaCheck(
        cudaMemcpy(values.data(), device, kCheckCount * sizeof(float), cudaMemcpyDeviceToHost),
        "cudaMemcpy");
    const float world = static_cast<float>(rayx::collective::GetWorldSize(group));
    if (values.front() != world || values.back() != world) {
      throw std::runtime_error("NCCL allreduce gave " + std::to_string(values.front()) +
                               ", expected " + std::to_string(world));
    }
  }

  // Raw NCCL as a program without rayx would call it: a blocking communicator
  // (ncclCommInitRank), ncclAllReduce on its own stream and
  // cudaStreamSynchronize. An error aborts the communicator (a destroy would
  // wait for the other ranks).
  static void RawNccl(const std::string& group, const std::string& key, void* one, void* large,
                      int64_t small, int64_t big, RankFigures* f) {
    const int rank = rayx::collective::GetRank(group);
    const int world = rayx::collective::GetWorldSize(group);
    ncclUniqueId id;
    if (rank == 0) {
      NcclCheck(ncclGetUniqueId(&id), "ncclGetUniqueId");
      rayx::kv::Put(key, std::string(id.internal, sizeof(id.internal)));
    } else {
      const std::string bytes = rayx::kv::Wait(key, 60000);
      if (bytes.size() != sizeof(id.internal)) throw std::runtime_error("bad NCCL id in the KV");
      std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
    }
    ncclComm_t comm = nullptr;
    NcclCheck(ncclCommInitRank(&comm, world, id, rank), "ncclCommInitRank");
    cudaStream_t stream = nullptr;
    try {
      CudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
      auto time = [&](void* data, size_t count, int64_t iterations) {
        std::vector<double> seconds;
        for (int64_t i = 0; i < iterations; ++i) {
          auto start = std::chrono::steady_clock::now();
          NcclCheck(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, stream),
                    "ncclAllReduce");
          CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
          seconds.push_back(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
        return seconds;
      };
      time(one, 1, 100);  // warm up
      f->raw_latency_us = UpperMedian(time(one, 1, small)) * 1e6;
      time(large, kBigCount, 1);  // warm up
      f->raw_gbps = static_cast<double>(kBigBytes) / UpperMedian(time(large, kBigCount, big)) / 1e9;
    } catch (...) {
      ncclCommAbort(comm);
      if (stream != nullptr) cudaStreamDestroy(stream);
      throw;
    }
    cudaStreamDestroy(stream);
    ncclCommDestroy(comm);
  }
};
RAYX_REMOTE(NcclBenchRank::Create, &NcclBenchRank::Figures);

namespace rayx::bench {

int NcclBenchGpus(std::string* why) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    *why = std::string("no GPU: ") + cudaGetErrorString(err);
    return 0;
  }
  if (n == 0) *why = "no GPU: CUDA sees no device";
  return n;
}

std::vector<AllReduceRound> MeasureNcclAllReduce(int gpus, int rounds, int small, int big) {
  const std::string name = "bench-nccl-" + rayx::detail::RandomHex(6);
  auto group = rayx::ActorGroup<NcclBenchRank>::Create(
      NcclBenchRank::Create,
      {.name = name, .num_actors = gpus, .resources = {{"GPU", 1}}, .collective = true});
  std::vector<AllReduceRound> out;
  try {
    if (group.CollectiveGroup().empty()) throw std::runtime_error("no collective group");
    for (int round = -1; round < rounds; ++round) {  // round -1 warms up
      const std::string key = "bench/" + name + "/raw-nccl-id/" + std::to_string(round + 1);
      auto figures = group.Task(&NcclBenchRank::Figures)
                         .Remote(group.CollectiveGroup(), int64_t{small}, int64_t{big}, key);
      RankFigures rank0 = *figures[0].Get(kCallTimeoutMs);
      for (size_t r = 1; r < figures.size(); ++r) figures[r].Get(kCallTimeoutMs);
      rayx::kv::Delete(key);
      if (round < 0) continue;
      AllReduceRound result;
      result.rayx = {rank0.rayx_latency_us, rank0.rayx_gbps};
      if (rank0.raw_error.empty()) {
        result.baseline = AllReduceFigures{rank0.raw_latency_us, rank0.raw_gbps};
      } else {
        result.baseline_error = rank0.raw_error;
      }
      out.push_back(std::move(result));
    }
  } catch (...) {
    group.Kill();
    throw;
  }
  group.Kill();
  return out;
}

}  // namespace rayx::bench

#else  // !RAYX_HAVE_NCCL

#include <stdexcept>

namespace rayx::bench {

int NcclBenchGpus(std::string* why) {
  *why = "rayx was built without NCCL";
  return 0;
}

std::vector<AllReduceRound> MeasureNcclAllReduce(int, int, int, int) {
  throw std::runtime_error("rayx was built without NCCL");
}

}  // namespace rayx::bench

#endif  // RAYX_HAVE_NCCL
