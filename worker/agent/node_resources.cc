// Resource detection for a node.
#include "agent/node_resources.h"

#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <cmath>
#include <set>

#include "common/text.h"
#include "worker/worker_env.h"

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

Result<NodeResources> ResolveNodeResources(
    const ResourceOverrides& overrides,
    const std::function<std::vector<GpuInfo>(std::string* why)>& detect) {
  NodeResources out;
  out.resources = overrides.custom;
  out.resources[kCpu] = overrides.num_cpus.value_or(DetectCpuCount());
  out.resources[kMemory] = overrides.memory_bytes.value_or(DetectMemoryBytes());
  std::optional<std::vector<int>> visible;
  if (overrides.cuda_visible_devices) {
    const std::string& text = *overrides.cuda_visible_devices;
    auto parsed = WorkerEnv::ParseIdList(text);
    if (!parsed.ok()) {
      return Status::InvalidArgument(
          "CUDA_VISIBLE_DEVICES=" + Utf8Prefix(text, 200) +
          ": rayx needs device indices (\"0,1,3\"), not UUIDs or MIG names; list indices or "
          "unset it");
    }
    std::set<int> seen;
    for (int device : *parsed) {
      if (device < 0) {
        return Status::InvalidArgument("CUDA_VISIBLE_DEVICES=" + Utf8Prefix(text, 200) +
                                       ": device " + std::to_string(device) + " is negative");
      }
      if (!seen.insert(device).second) {
        return Status::InvalidArgument("CUDA_VISIBLE_DEVICES=" + Utf8Prefix(text, 200) +
                                       " lists device " + std::to_string(device) +
                                       " twice: list each device once");
      }
    }
    visible = std::move(*parsed);
  }
  auto list = &WorkerEnv::JoinIdList;
  double gpus = 0;
  if (overrides.num_gpus) {
    gpus = *overrides.num_gpus;
    if (!(gpus >= 0) || gpus > kMaxNodeGpus) {
      return Status::InvalidArgument("--num-gpus " + FormatAmount(gpus) + ": give 0 to " +
                                     std::to_string(kMaxNodeGpus) + " GPUs");
    }
    size_t wanted = static_cast<size_t>(std::ceil(gpus));
    if (visible && !visible->empty() && visible->size() < wanted) {
      // Fake devices 0..n-1 would include devices this process was not given.
      return Status::InvalidArgument(
          "--num-gpus " + FormatAmount(gpus) + " but CUDA_VISIBLE_DEVICES=" + list(*visible) +
          " lists " + std::to_string(visible->size()) +
          " device(s): offer at most that many, or unset CUDA_VISIBLE_DEVICES to fake GPUs");
    }
    if (visible && wanted > 0 && !visible->empty()) {
      out.gpu_devices.assign(visible->begin(), visible->begin() + static_cast<long>(wanted));
      out.gpu_note =
          "GPUs set by --num-gpus: devices " + list(out.gpu_devices) + " of CUDA_VISIBLE_DEVICES";
    } else {
      out.gpu_note = "GPUs set by --num-gpus";
    }
  } else {
    std::string why;
    size_t count = detect(&why).size();
    out.gpu_note = why;
    if (visible && count > 0) {
      for (int device : *visible) {
        if (static_cast<size_t>(device) >= count) {
          return Status::InvalidArgument("CUDA_VISIBLE_DEVICES=" + list(*visible) +
                                         " lists device " + std::to_string(device) + ", but " +
                                         why + " (devices 0-" + std::to_string(count - 1) +
                                         "): list devices of this machine");
        }
      }
      out.gpu_devices = *visible;
      gpus = static_cast<double>(visible->size());
      out.gpu_note += visible->empty() ? "; CUDA_VISIBLE_DEVICES is empty: no GPU"
                                       : "; CUDA_VISIBLE_DEVICES limits this node to device(s) " +
                                             list(*visible);
    } else {
      gpus = static_cast<double>(count);
      if (visible && !visible->empty()) out.gpu_note += " (CUDA_VISIBLE_DEVICES is ignored)";
    }
  }
  out.resources[kGpu] = gpus;
  return out;
}

}  // namespace rayx::worker
