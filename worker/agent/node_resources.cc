// Resource detection for a node.
#include "agent/node_resources.h"

#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

namespace rayx::worker {
namespace {

// The few NVML entry points used, with the types of nvml.h, declared here so
// the build needs no NVML headers.
using NvmlReturn = int;
using NvmlDevice = void*;
constexpr NvmlReturn kNvmlSuccess = 0;

}  // namespace

std::vector<GpuInfo> DetectGpus(std::string* why) {
  std::vector<GpuInfo> gpus;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    *why = "NVML (libnvidia-ml.so.1) not found: no NVIDIA driver on this machine";
    return gpus;
  }
  auto init = reinterpret_cast<NvmlReturn (*)()>(dlsym(lib, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<NvmlReturn (*)()>(dlsym(lib, "nvmlShutdown"));
  auto count_fn = reinterpret_cast<NvmlReturn (*)(unsigned*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto handle_fn = reinterpret_cast<NvmlReturn (*)(unsigned, NvmlDevice*)>(
      dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto name_fn =
      reinterpret_cast<NvmlReturn (*)(NvmlDevice, char*, unsigned)>(dlsym(lib, "nvmlDeviceGetName"));
  if (!init || !shutdown || !count_fn || !handle_fn || !name_fn) {
    *why = "NVML lacks the expected functions";
    dlclose(lib);
    return gpus;
  }
  if (init() != kNvmlSuccess) {
    *why = "nvmlInit failed: the NVIDIA driver is not loaded";
    dlclose(lib);
    return gpus;
  }
  unsigned count = 0;
  if (count_fn(&count) == kNvmlSuccess) {
    for (unsigned i = 0; i < count; ++i) {
      GpuInfo gpu;
      gpu.index = static_cast<int>(i);
      NvmlDevice device = nullptr;
      char name[96] = {0};
      if (handle_fn(i, &device) == kNvmlSuccess && name_fn(device, name, sizeof name) == kNvmlSuccess) {
        gpu.name = name;
      }
      gpus.push_back(gpu);
    }
  }
  shutdown();
  dlclose(lib);
  *why = "NVML reports " + std::to_string(gpus.size()) + " GPU(s)";
  return gpus;
}

int DetectCpuCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

double DetectMemoryBytes() {
  return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

std::string LocalHostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

ResourceMap ResolveNodeResources(const ResourceOverrides& overrides, std::string* gpu_note) {
  ResourceMap out = overrides.custom;
  out[kCpu] = overrides.num_cpus.value_or(DetectCpuCount());
  out[kMemory] = overrides.memory_bytes.value_or(DetectMemoryBytes());
  double gpus = 0;
  if (overrides.num_gpus) {
    gpus = *overrides.num_gpus;
    *gpu_note = "GPUs set by --num-gpus";
  } else {
    gpus = static_cast<double>(DetectGpus(gpu_note).size());
  }
  out[kGpu] = gpus;
  return out;
}

}  // namespace rayx::worker
