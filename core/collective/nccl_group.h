// NcclGroup: a collective group on GPU memory over NCCL (when rayx is built
// with NCCL).
#pragma once

#include <memory>

#include "collective/collective_group.h"
#include "collective/rendezvous_store.h"

namespace rayx::collective {

// Connects an NCCL group on this process's current CUDA device: rank 0
// publishes the ncclUniqueId under "<prefix>nccl_id"; the communicator is made
// non-blocking and every wait polls it against the group's deadline, aborting
// it (ncclCommAbort) on timeout or Abort(). Throws CollectiveError, saying
// "no GPU" when there is none and "built without NCCL" when so built.
std::shared_ptr<CollectiveGroup> ConnectNcclGroup(const GroupSpec& spec,
                                                  std::shared_ptr<RendezvousStore> store);

// The number of CUDA devices this process sees; 0 (with `why` set) when CUDA
// or its driver is missing.
int CudaDeviceCount(std::string* why);

}  // namespace rayx::collective
