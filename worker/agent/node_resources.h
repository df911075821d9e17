// What this machine offers: CPUs, memory and GPUs, detected or overridden.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "rayx/resources.h"
#include "rayx/status.h"

namespace rayx::worker {

struct GpuInfo {
  int index = 0;
  std::string name;  // e.g. "NVIDIA H100 80GB HBM3"
};

// Lists NVIDIA GPUs through NVML, loaded with dlopen at run time so rayx has no
// link dependency on the driver. Returns an empty list when NVML is absent or
// fails (a machine without a driver has no usable GPU), and says why in `why`.
std::vector<GpuInfo> DetectGpus(std::string* why);

// Logical CPUs this process may run on (its affinity mask).
int DetectCpuCount();

// Physical memory in bytes.
double DetectMemoryBytes();

std::string LocalHostname();

// The user's overrides; unset fields are detected.
struct ResourceOverrides {
  std::optional<double> num_cpus;
  std::optional<double> num_gpus;
  std::optional<double> memory_bytes;
  ResourceMap custom;
};

// CPU, GPU (0 when there is none), memory and the custom resources. REQUIRES: `custom`
// holds none of CPU, GPU, memory (ParseResourcesJson ensures it).
ResourceMap ResolveNodeResources(const ResourceOverrides& overrides, std::string* gpu_note);

}  // namespace rayx::worker
