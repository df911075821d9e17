// What this machine offers: CPUs, memory and GPUs, detected or overridden.
#pragma once

#include <functional>
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
  // The agent's own CUDA_VISIBLE_DEVICES (nullopt: unset), as a batch
  // scheduler or a user sharing a machine restricts it.
  std::optional<std::string> cuda_visible_devices;
};

// What the node offers.
struct NodeResources {
  // CPU, GPU (0 when there is none), memory and the custom resources.
  ResourceMap resources;
  // The device each GPU the head hands out (0, 1, ...) is on this machine:
  // what a worker holding GPU i gets in CUDA_VISIBLE_DEVICES and RAYX_GPU_IDS.
  // Empty: GPU i is device i.
  std::vector<int> gpu_devices;
  std::string gpu_note;  // how the GPUs were found, for the log
};

// Detects or takes the overrides. GPUs: `num_gpus` when given, else NVML's
// count. When CUDA_VISIBLE_DEVICES is set, the node offers only the devices it
// lists, each passed on as it is written there (as Ray does): an agent started
// with CUDA_VISIBLE_DEVICES=4,5 hands out devices 4 and 5 and never 0. Returns
// InvalidArgument when CUDA_VISIBLE_DEVICES is not a list of distinct device
// indices, or lists a device NVML does not know. With `num_gpus`, the first
// `num_gpus` listed devices are used (InvalidArgument when fewer are listed);
// with CUDA_VISIBLE_DEVICES unset or empty, devices 0..n-1 (fake GPUs). REQUIRES: `custom` holds none of CPU, GPU, memory
// (ParseResourcesJson ensures it).
// `detect` lists the machine's GPUs (DetectGpus; tests pass their own).
Result<NodeResources> ResolveNodeResources(
    const ResourceOverrides& overrides,
    const std::function<std::vector<GpuInfo>(std::string* why)>& detect = DetectGpus);

}  // namespace rayx::worker
