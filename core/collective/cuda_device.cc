// Which CUDA device a rank's NCCL communicator uses, and how many devices this
// process sees (nccl_group.h).
#include <cerrno>
#include <cstdlib>
#include <string>

#include "collective/nccl_group.h"
#include "worker/worker_env.h"

#ifdef RAYX_HAVE_NCCL
#include <cuda_runtime.h>
#endif

namespace rayx::collective {

int NcclDeviceFor(const GroupSpec& spec, const char* local_rank, int device_count,
                  int current_device) {
  if (local_rank == nullptr || *local_rank == '\0') return current_device;
  char* end = nullptr;
  errno = 0;
  const long position = std::strtol(local_rank, &end, 10);
  if (errno != 0 || end == local_rank || *end != '\0' || position < 0 || position >= device_count) {
    const char* visible = std::getenv(rayx::WorkerEnv::kCudaVisibleDevices);
    throw CollectiveError(
        DescribeOp(spec, "InitCollectiveGroup") + ": " + rayx::WorkerEnv::kLocalRank + "='" +
        local_rank + "' is not the position of one of the " + std::to_string(device_count) +
        " CUDA devices this process sees (" + rayx::WorkerEnv::kCudaVisibleDevices + "='" +
        (visible != nullptr ? visible : "") +
        "'); it is set by the node agent, do not set it by hand");
  }
  return static_cast<int>(position);
}

#ifdef RAYX_HAVE_NCCL

int CudaDeviceCount(std::string* why) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why) *why = cudaGetErrorString(err);
    return 0;
  }
  if (n == 0 && why) *why = "CUDA sees no device";
  return n;
}

#else

int CudaDeviceCount(std::string* why) {
  if (why) *why = "rayx was built without CUDA";
  return 0;
}

#endif  // RAYX_HAVE_NCCL

}  // namespace rayx::collective
