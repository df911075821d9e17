// A stand-in for the NVIDIA driver's libnvidia-ml.so.1 (test only): the NVML
// entry points the node agent calls, reporting $RAYX_FAKE_NVML_GPUS GPUs
// (default 0), so the agent's real detection path (dlopen, the calls, the
// CUDA_VISIBLE_DEVICES check) runs end to end on a machine without a GPU.
// Built as tests/fake_nvml/libnvidia-ml.so.1 and found through
// LD_LIBRARY_PATH by the agents of the test that asks for it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" {

int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }

int nvmlDeviceGetCount_v2(unsigned* count) {
  const char* n = std::getenv("RAYX_FAKE_NVML_GPUS");
  *count = n != nullptr ? static_cast<unsigned>(std::strtoul(n, nullptr, 10)) : 0;
  return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  *device = reinterpret_cast<void*>(static_cast<uintptr_t>(index) + 1);
  return 0;
}

int nvmlDeviceGetName(void* device, char* name, unsigned length) {
  std::snprintf(name, length, "Fake GPU %u",
                static_cast<unsigned>(reinterpret_cast<uintptr_t>(device) - 1));
  return 0;
}

// Device i: 10 * (i + 1) % busy, (i + 1) GiB of 80 GiB used, 40 + i degrees,
// 100 + i watts: fixed values a test can check end to end.
struct FakeUtilization {
  unsigned gpu;
  unsigned memory;
};
struct FakeMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

static unsigned IndexOf(void* device) {
  return static_cast<unsigned>(reinterpret_cast<uintptr_t>(device) - 1);
}

int nvmlDeviceGetUtilizationRates(void* device, FakeUtilization* rates) {
  rates->gpu = 10 * (IndexOf(device) + 1);
  rates->memory = 5;
  return 0;
}

int nvmlDeviceGetMemoryInfo(void* device, FakeMemory* memory) {
  memory->total = 80ull << 30;
  memory->used = static_cast<unsigned long long>(IndexOf(device) + 1) << 30;
  memory->free = memory->total - memory->used;
  return 0;
}

int nvmlDeviceGetTemperature(void* device, int /*sensor*/, unsigned* celsius) {
  *celsius = 40 + IndexOf(device);
  return 0;
}

int nvmlDeviceGetPowerUsage(void* device, unsigned* milliwatts) {
  *milliwatts = (100 + IndexOf(device)) * 1000;
  return 0;
}

}  // extern "C"
