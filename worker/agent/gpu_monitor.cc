// NVML through dlopen: the build needs no NVML headers and a machine without
// the driver simply has no samples.
#include "agent/gpu_monitor.h"

#include <dlfcn.h>

namespace rayx::worker {

// nvml.h's types, as far as they are used here (a named namespace: the unity
// build puts node_resources.cc's NVML names beside these).
namespace gpu_nvml {
using Return = int;
using Device = void*;
constexpr Return kSuccess = 0;
constexpr int kTemperatureGpu = 0;
struct Utilization {
  unsigned gpu;     // percent of the last sample period a kernel ran
  unsigned memory;  // percent of it memory was read or written
};
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
}  // namespace gpu_nvml
using gpu_nvml::Device;
using gpu_nvml::Return;

struct GpuMonitor::Nvml {
  void* lib = nullptr;
  Return (*shutdown)() = nullptr;
  Return (*handle)(unsigned, Device*) = nullptr;
  Return (*name)(Device, char*, unsigned) = nullptr;
  Return (*utilization)(Device, gpu_nvml::Utilization*) = nullptr;
  Return (*memory)(Device, gpu_nvml::Memory*) = nullptr;
  Return (*temperature)(Device, int, unsigned*) = nullptr;
  Return (*power)(Device, unsigned*) = nullptr;  // milliwatts

  template <typename F>
  void Find(F* out, const char* symbol) {
    *out = reinterpret_cast<F>(dlsym(lib, symbol));
  }
  ~Nvml() {
    if (shutdown) shutdown();
    if (lib) dlclose(lib);
  }
};

std::unique_ptr<GpuMonitor> GpuMonitor::Open(std::vector<int> devices, std::string* why) {
  auto nvml = std::make_unique<Nvml>();
  nvml->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml->lib == nullptr) {
    *why = "NVML (libnvidia-ml.so.1) not found: no GPU metrics";
    return nullptr;
  }
  Return (*init)() = nullptr;
  nvml->Find(&init, "nvmlInit_v2");
  nvml->Find(&nvml->handle, "nvmlDeviceGetHandleByIndex_v2");
  if (init == nullptr || nvml->handle == nullptr || init() != gpu_nvml::kSuccess) {
    *why = "NVML does not start: no GPU metrics";
    return nullptr;
  }
  nvml->Find(&nvml->shutdown, "nvmlShutdown");
  nvml->Find(&nvml->name, "nvmlDeviceGetName");
  nvml->Find(&nvml->utilization, "nvmlDeviceGetUtilizationRates");
  nvml->Find(&nvml->memory, "nvmlDeviceGetMemoryInfo");
  nvml->Find(&nvml->temperature, "nvmlDeviceGetTemperature");
  nvml->Find(&nvml->power, "nvmlDeviceGetPowerUsage");
  *why = "GPU metrics from NVML for " + std::to_string(devices.size()) + " device(s)";
  return std::unique_ptr<GpuMonitor>(new GpuMonitor(std::move(nvml), std::move(devices)));
}

GpuMonitor::GpuMonitor(std::unique_ptr<Nvml> nvml, std::vector<int> devices)
    : nvml_(std::move(nvml)), devices_(std::move(devices)) {}

GpuMonitor::~GpuMonitor() = default;

std::vector<GpuUsage> GpuMonitor::Sample() {
  std::vector<GpuUsage> out;
  for (int index : devices_) {
    Device device = nullptr;
    if (index < 0 || nvml_->handle(static_cast<unsigned>(index), &device) != gpu_nvml::kSuccess) continue;
    GpuUsage usage;
    usage.device = index;
    char name[96] = {0};
    if (nvml_->name && nvml_->name(device, name, sizeof name) == gpu_nvml::kSuccess) usage.name = name;
    gpu_nvml::Utilization rates{};
    if (nvml_->utilization && nvml_->utilization(device, &rates) == gpu_nvml::kSuccess) {
      usage.utilization = rates.gpu / 100.0;
    }
    gpu_nvml::Memory memory{};
    if (nvml_->memory && nvml_->memory(device, &memory) == gpu_nvml::kSuccess) {
      usage.memory_used_bytes = memory.used;
      usage.memory_total_bytes = memory.total;
    }
    unsigned celsius = 0;
    if (nvml_->temperature &&
        nvml_->temperature(device, gpu_nvml::kTemperatureGpu, &celsius) == gpu_nvml::kSuccess) {
      usage.temperature_celsius = celsius;
    }
    unsigned milliwatts = 0;
    if (nvml_->power && nvml_->power(device, &milliwatts) == gpu_nvml::kSuccess) {
      usage.power_watts = milliwatts / 1000.0;
    }
    out.push_back(std::move(usage));
  }
  return out;
}

}  // namespace rayx::worker
