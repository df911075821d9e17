// NcclGroup: a collective group on GPU memory over NCCL (when rayx is built
// with NCCL).
#pragma once

#include <memory>

#include "collective/collective_group.h"
#include "collective/rendezvous_store.h"

namespace rayx::collective {

// Connects an NCCL group on the rank's own CUDA device (NcclDeviceFor): rank 0
// publishes the ncclUniqueId under "<prefix>nccl_id"; the communicator is made
// non-blocking and every wait polls it (and the stream, before any copy back to
// host memory) against the group's deadline, aborting it (ncclCommAbort) on
// timeout or Abort(). Abort() and destruction leave GlooGroup's abort notice,
// which a failing operation on another rank names. Throws CollectiveError,
// saying "no GPU" when there is none and "built without NCCL" when so built.
std::shared_ptr<CollectiveGroup> ConnectNcclGroup(const GroupSpec& spec,
                                                  std::shared_ptr<RendezvousStore> store);

// The CUDA device (an index among those CUDA_VISIBLE_DEVICES lists) an NCCL rank
// uses: the one it holds. A worker that sees every device its group holds on the
// node (`see_group_devices`, actor groups with GPUs) is told its own device's
// position in `local_rank` (RAYX_LOCAL_RANK) and uses that, so two ranks on one
// node never both take device 0 (NCCL's "Duplicate GPU detected"). Any other
// process uses `current_device` (the calling thread's: a worker holding one GPU
// sees only that one, as device 0; a program may have chosen another with
// cudaSetDevice). Throws CollectiveError when `local_rank` is not a position
// among `device_count` devices.
int NcclDeviceFor(const GroupSpec& spec, const char* local_rank, int device_count,
                  int current_device);

// The number of CUDA devices this process sees; 0 (with `why` set) when CUDA
// or its driver is missing.
int CudaDeviceCount(std::string* why);

}  // namespace rayx::collective
