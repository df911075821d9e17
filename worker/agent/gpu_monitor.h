// Samples a node's GPUs through NVML for the head's metrics and dashboard.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rayx/cluster_status.h"

namespace rayx::worker {

// Holds libnvidia-ml.so.1 open (dlopen, nvmlInit once) and reads each device's
// utilisation, memory, temperature and power on Sample. A reading NVML does
// not give (an older driver, a device that does not report power) stays 0.
// Not thread-safe: the agent's event loop calls it about once a second.
class GpuMonitor {
 public:
  // `devices`: the NVML indices of the node's GPUs. nullptr, with `*why`, when
  // NVML is not there or does not start.
  static std::unique_ptr<GpuMonitor> Open(std::vector<int> devices, std::string* why);
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  std::vector<GpuUsage> Sample();

 private:
  struct Nvml;
  GpuMonitor(std::unique_ptr<Nvml> nvml, std::vector<int> devices);
  std::unique_ptr<Nvml> nvml_;
  std::vector<int> devices_;
};

}  // namespace rayx::worker
