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

}  // extern "C"
