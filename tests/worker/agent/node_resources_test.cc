// What a node offers: GPUs detected, overridden, or limited by the agent's own
// CUDA_VISIBLE_DEVICES (as SLURM or a user sharing a machine sets it).
#include "agent/node_resources.h"

#include <gtest/gtest.h>

#include <cmath>

#include "rayx/cluster_status.h"

namespace rayx::worker {
namespace {

// A machine whose NVML lists `count` GPUs.
std::function<std::vector<GpuInfo>(std::string*)> Machine(int count) {
  return [count](std::string* why) {
    *why = "NVML reports " + std::to_string(count) + " GPU(s)";
    std::vector<GpuInfo> gpus(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) gpus[static_cast<size_t>(i)].index = i;
    return gpus;
  };
}

ResourceOverrides Visible(const std::string& devices) {
  ResourceOverrides o;
  o.num_cpus = 4;
  o.memory_bytes = 1 << 30;
  o.cuda_visible_devices = devices;
  return o;
}

TEST(NodeResources, EveryDetectedGpuWhenCudaVisibleDevicesIsUnset) {
  ResourceOverrides o;
  o.num_cpus = 4;
  auto r = ResolveNodeResources(o, Machine(8));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->resources.at("GPU"), 8);
  EXPECT_TRUE(r->gpu_devices.empty()) << "GPU i is device i";
  EXPECT_EQ(r->resources.at("CPU"), 4);
}

TEST(NodeResources, ImpossibleGpuCountsAreRefused) {
  for (double gpus : {1e13, -1.0, std::nan("")}) {
    ResourceOverrides o;
    o.num_gpus = gpus;
    auto r = ResolveNodeResources(o, Machine(0));
    ASSERT_FALSE(r.ok()) << gpus;
    EXPECT_NE(r.status().message().find("give 0 to 65536 GPUs"), std::string::npos) << r.status();
  }
}

TEST(NodeResources, CudaVisibleDevicesLimitsTheNodeToThoseDevices) {
  auto r = ResolveNodeResources(Visible("4,5,7"), Machine(8));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->resources.at("GPU"), 3);
  EXPECT_EQ(r->gpu_devices, (std::vector<int>{4, 5, 7}));
  EXPECT_EQ(GpuDevicesOf({0, 2}, r->gpu_devices), (std::vector<int>{4, 7}));
  EXPECT_NE(r->gpu_note.find("device(s) 4,5,7"), std::string::npos) << r->gpu_note;
}

TEST(NodeResources, AnEmptyCudaVisibleDevicesMeansNoGpus) {
  auto r = ResolveNodeResources(Visible(""), Machine(8));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->resources.at("GPU"), 0);
}

TEST(NodeResources, ADeviceTheMachineLacksIsRefusedBeforeAnyWorkerFailsOnIt) {
  auto r = ResolveNodeResources(Visible("2,9"), Machine(8));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("lists device 9, but NVML reports 8 GPU(s) (devices 0-7)"),
            std::string::npos)
      << r.status();
}

TEST(NodeResources, UuidsDuplicatesAndNegativesAreRefusedNamingTheFix) {
  auto uuid = ResolveNodeResources(Visible("GPU-8f3c2a"), Machine(8));
  EXPECT_NE(uuid.status().message().find("rayx needs device indices"), std::string::npos)
      << uuid.status();
  auto twice = ResolveNodeResources(Visible("1,3,1"), Machine(8));
  EXPECT_NE(twice.status().message().find("lists device 1 twice"), std::string::npos)
      << twice.status();
  auto negative = ResolveNodeResources(Visible("-1"), Machine(8));
  EXPECT_EQ(negative.status().code(), StatusCode::kInvalidArgument);
}

TEST(NodeResources, WithoutADriverThereAreNoGpusWhateverCudaVisibleDevicesSays) {
  auto r = ResolveNodeResources(Visible("0,1"), Machine(0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->resources.at("GPU"), 0);
  EXPECT_TRUE(r->gpu_devices.empty());
}

TEST(NodeResources, NumGpusTakesTheFirstVisibleDevicesOrFakesThem) {
  ResourceOverrides o = Visible("6,7,3");
  o.num_gpus = 2;
  auto r = ResolveNodeResources(o, Machine(0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->resources.at("GPU"), 2);
  EXPECT_EQ(r->gpu_devices, (std::vector<int>{6, 7}));

  o.num_gpus = 4;  // more than listed: never devices this process was not given
  r = ResolveNodeResources(o, Machine(0));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("--num-gpus 4 but CUDA_VISIBLE_DEVICES=6,7,3 lists 3"),
            std::string::npos)
      << r.status();

  o.cuda_visible_devices.reset();  // unset: fake devices 0..3
  r = ResolveNodeResources(o, Machine(0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->resources.at("GPU"), 4);
  EXPECT_TRUE(r->gpu_devices.empty());
}

}  // namespace
}  // namespace rayx::worker
