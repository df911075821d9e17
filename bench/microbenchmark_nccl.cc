// NCCL rounds for `rayx microbenchmark` (see microbenchmark_nccl.h).
#include "microbenchmark_nccl.h"

#ifdef RAYX_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#include <rayx/actor_group.h>
#include <rayx/collective.h>
#include <rayx/rayx.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
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

// A rank of the benchmark's actor group.
class NcclBenchRank {
 public:
  static NcclBenchRank* Create() { return new NcclBenchRank(); }

  std::vector<double> Figures(std::string group, int64_t small, int64_t big) {
    // The rank's own device: its position among the group's devices on the
    // node (the same one its NCCL group uses).
    const char* own = std::getenv("RAYX_LOCAL_RANK");
    CudaCheck(cudaSetDevice(own != nullptr && *own != '\0' ? std::atoi(own) : 0), "cudaSetDevice");
    DeviceBuffer one(sizeof(float)), large(kBigBytes);
    TimeRayx(group, one.get(), 1, 100);  // warm up
    const double latency_us = UpperMedian(TimeRayx(group, one.get(), 1, small)) * 1e6;
    TimeRayx(group, large.get(), kBigCount, 1);  // warm up
    const double gbps = static_cast<double>(kBigBytes) /
                        UpperMedian(TimeRayx(group, large.get(), kBigCount, big)) / 1e9;
    // Every rank's ones were added: a skipped or partial allreduce shows here.
    std::vector<float> values(kCheckCount, 1.0f);
    CudaCheck(
        cudaMemcpy(large.get(), values.data(), kCheckCount * sizeof(float), cudaMemcpyHostToDevice),
        "cudaMemcpy");
    rayx::collective::AllReduce(large.get(), kCheckCount, rayx::collective::DataType::kFloat,
                                rayx::collective::ReduceOp::kSum, group);
    CudaCheck(
        cudaMemcpy(values.data(), large.get(), kCheckCount * sizeof(float), cudaMemcpyDeviceToHost),
        "cudaMemcpy");
    const float world = static_cast<float>(rayx::collective::GetWorldSize(group));
    if (values.front() != world || values.back() != world) {
      throw std::runtime_error("NCCL allreduce gave " + std::to_string(values.front()) +
                               ", expected " + std::to_string(world));
    }
    return {latency_us, gbps};
  }
};
RAYX_REMOTE(NcclBenchRank::Create, &NcclBenchRank::Figures);

namespace rayx::bench {
namespace {

// Raw NCCL over devices 0..gpus-1 of this process: one communicator per
// device from ncclCommInitAll, each allreduce launched as one NCCL group and
// waited for with cudaStreamSynchronize.
AllReduceFigures RawNccl(int gpus, int small, int big) {
  std::vector<int> devices(static_cast<size_t>(gpus));
  for (int i = 0; i < gpus; ++i) devices[static_cast<size_t>(i)] = i;
  std::vector<ncclComm_t> comms(static_cast<size_t>(gpus), nullptr);
  NcclCheck(ncclCommInitAll(comms.data(), gpus, devices.data()), "ncclCommInitAll");
  std::vector<cudaStream_t> streams(static_cast<size_t>(gpus), nullptr);
  std::vector<std::unique_ptr<DeviceBuffer>> ones, larges;
  AllReduceFigures figures;
  try {
    for (int i = 0; i < gpus; ++i) {
      CudaCheck(cudaSetDevice(i), "cudaSetDevice");
      CudaCheck(cudaStreamCreateWithFlags(&streams[static_cast<size_t>(i)], cudaStreamNonBlocking),
                "cudaStreamCreate");
      ones.push_back(std::make_unique<DeviceBuffer>(sizeof(float)));
      larges.push_back(std::make_unique<DeviceBuffer>(kBigBytes));
    }
    auto time = [&](bool large, int iterations) {
      std::vector<double> seconds;
      for (int it = 0; it < iterations; ++it) {
        auto start = std::chrono::steady_clock::now();
        NcclCheck(ncclGroupStart(), "ncclGroupStart");
        for (size_t i = 0; i < comms.size(); ++i) {
          void* p = large ? larges[i]->get() : ones[i]->get();
          NcclCheck(ncclAllReduce(p, p, large ? kBigCount : 1, ncclFloat32, ncclSum, comms[i],
                                  streams[i]),
                    "ncclAllReduce");
        }
        NcclCheck(ncclGroupEnd(), "ncclGroupEnd");
        for (auto s : streams) CudaCheck(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      return seconds;
    };
    time(false, 100);  // warm up
    figures.latency_us = UpperMedian(time(false, small)) * 1e6;
    time(true, 1);  // warm up
    figures.gbps = static_cast<double>(kBigBytes) / UpperMedian(time(true, big)) / 1e9;
  } catch (...) {
    ones.clear();
    larges.clear();
    for (auto s : streams) {
      if (s != nullptr) cudaStreamDestroy(s);
    }
    for (auto c : comms) ncclCommDestroy(c);
    throw;
  }
  ones.clear();
  larges.clear();
  for (auto s : streams) cudaStreamDestroy(s);
  for (auto c : comms) ncclCommDestroy(c);
  return figures;
}

}  // namespace

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
  auto group = rayx::ActorGroup<NcclBenchRank>::Create(
      NcclBenchRank::Create, {.name = "bench-nccl-" + rayx::detail::RandomHex(6),
                              .num_actors = gpus,
                              .resources = {{"GPU", 1}},
                              .collective = true});
  std::vector<AllReduceRound> out;
  try {
    if (group.CollectiveGroup().empty()) throw std::runtime_error("no collective group");
    for (int round = -1; round < rounds; ++round) {  // round -1 warms up
      auto figures = group.Task(&NcclBenchRank::Figures)
                         .Remote(group.CollectiveGroup(), int64_t{small}, int64_t{big});
      std::vector<double> rank0 = *figures[0].Get(kCallTimeoutMs);
      for (size_t r = 1; r < figures.size(); ++r) figures[r].Get(kCallTimeoutMs);
      if (round < 0) continue;
      AllReduceRound result;
      result.rayx = {rank0.at(0), rank0.at(1)};
      try {
        result.baseline = RawNccl(gpus, small, big);
      } catch (const std::exception& e) {
        result.baseline_error = e.what();
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
