// The scheduler on a real loopback cluster with fake GPUs: device assignment,
// placement groups, strategies, pending demand and elastic scale-out. This
// binary is also its workers' program (RAYX_WORKER_MODE).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "rayx/rayx.h"
#include "util/local_cluster.h"
#include "util/test_helpers.h"

namespace {

using rayx::testing::Env;

// Where an actor runs and which devices it sees.
class Device {
 public:
  static Device* Create() { return new Device(); }
  std::string Where() { return Env("RAYX_NODE_IP") + "|" + Env("CUDA_VISIBLE_DEVICES"); }
  std::string Node() { return Env("RAYX_NODE_IP"); }
  std::string Ranked() {
    return Env("CUDA_VISIBLE_DEVICES") + "|" + Env("RAYX_LOCAL_RANK") + "|" + Env("RAYX_GPU_IDS");
  }
  std::string Order() { return Env("CUDA_DEVICE_ORDER"); }
  int Pid() { return getpid(); }
};

std::string NodeOfTask() { return Env("RAYX_NODE_IP"); }

RAYX_REMOTE(Device::Create, &Device::Where, &Device::Node, &Device::Ranked, &Device::Order,
            &Device::Pid, NodeOfTask);

using rayx::testing::Contains;
using rayx::testing::LocalCluster;
using rayx::testing::NodeHandle;
using rayx::testing::NodeOptions;

class Scheduler : public ::testing::Test {
 protected:
  // A head node with `head_gpus` fake GPUs and 8 CPUs.
  void StartCluster(double head_gpus) {
    LocalCluster::Options options;
    options.head_node.num_cpus = 8;
    options.head_node.num_gpus = head_gpus;
    auto cluster = LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    rayx::Options init;
    init.address = cluster_->address();
    init.token = cluster_->token();
    rayx::Init(init);
  }
  rayx::Result<NodeHandle> AddGpuNode(const std::string& ip, double gpus, const std::string& labels = "") {
    return cluster_->AddNode(
        {.num_cpus = 8, .num_gpus = gpus, .labels = labels, .extra_args = {"--node-ip-address", ip}});
  }
  void TearDown() override {
    if (rayx::IsInitialized()) rayx::Shutdown();
    if (!cluster_) return;
    rayx::Status free = cluster_->WaitFor(
        [](const rayx::ClusterStatus& s) {
          return s.AvailableResources()["GPU"] == s.TotalResources()["GPU"] &&
                 s.pending_demands.empty();
        },
        10000);
    EXPECT_TRUE(free.ok()) << "resources or demands left after the job: " << free;
  }
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(Scheduler, WholeGpuActorsNeverShareADeviceAndSharesPack) {
  StartCluster(0);
  auto first = AddGpuNode("127.0.0.2", 4);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(AddGpuNode("127.0.0.3", 4).ok());
  std::vector<rayx::ActorHandle<Device>> actors;
  for (int i = 0; i < 8; ++i) {
    actors.push_back(rayx::Actor(Device::Create).SetResources({{"GPU", 1}}).Remote());
  }
  std::set<std::string> seen;
  for (auto& a : actors) {
    std::string where = *a.Task(&Device::Where).Remote().Get();
    std::string devices = where.substr(where.find('|') + 1);
    EXPECT_EQ(devices.find(','), std::string::npos) << "one device each: " << where;
    EXPECT_FALSE(devices.empty()) << where;
    EXPECT_TRUE(seen.insert(where).second) << "two actors share " << where;
  }
  EXPECT_EQ(seen.size(), 8u);
  for (auto& a : actors) a.Kill();
  // Quarter shares pack onto one device before the next is used.
  std::vector<rayx::ActorHandle<Device>> quarters;
  for (int i = 0; i < 4; ++i) {
    quarters.push_back(rayx::Actor(Device::Create)
                           .SetResources({{"GPU", 0.25}})
                           .SetSchedulingStrategy(
                               rayx::NodeAffinitySchedulingStrategy{first->node_id, false})
                           .Remote());
  }
  std::set<std::string> places;
  for (auto& q : quarters) places.insert(*q.Task(&Device::Where).Remote().Get());
  EXPECT_EQ(places.size(), 1u) << "four quarters fit on one device";
  EXPECT_TRUE(Contains(*places.begin(), "127.0.0.2|")) << *places.begin();
}

TEST_F(Scheduler, StrictSpreadUsesDistinctNodesAndStrictPackOne) {
  StartCluster(0);
  ASSERT_TRUE(AddGpuNode("127.0.0.2", 4).ok());
  ASSERT_TRUE(AddGpuNode("127.0.0.3", 4).ok());
  auto spread = rayx::CreatePlacementGroup(
      {.name = "spread", .bundles = {{{"GPU", 1}}, {{"GPU", 1}}},
       .strategy = rayx::PlacementStrategy::STRICT_SPREAD});
  ASSERT_TRUE(spread.Wait(30));
  auto pack = rayx::CreatePlacementGroup(
      {.name = "pack", .bundles = {{{"GPU", 1}}, {{"GPU", 1}}},
       .strategy = rayx::PlacementStrategy::STRICT_PACK});
  ASSERT_TRUE(pack.Wait(30));
  std::set<std::string> spread_nodes, pack_nodes;
  std::set<std::string> devices;
  std::vector<rayx::ActorHandle<Device>> members;
  for (int b = 0; b < 2; ++b) {
    members.push_back(rayx::Actor(Device::Create)
                          .SetResources({{"GPU", 1}})
                          .SetPlacementGroup(spread, b)
                          .Remote());
    members.push_back(rayx::Actor(Device::Create)
                          .SetResources({{"GPU", 1}})
                          .SetPlacementGroup(pack, b)
                          .Remote());
  }
  for (size_t i = 0; i < members.size(); ++i) {
    std::string where = *members[i].Task(&Device::Where).Remote().Get();
    std::string node = where.substr(0, where.find('|'));
    (i % 2 == 0 ? spread_nodes : pack_nodes).insert(node);
    EXPECT_TRUE(devices.insert(where).second) << "a device was given twice: " << where;
  }
  EXPECT_EQ(spread_nodes.size(), 2u);
  EXPECT_EQ(pack_nodes.size(), 1u);
  auto listed = cluster_->RunCli({"list", "placement-groups"});
  EXPECT_TRUE(Contains(listed.out, "STRICT_SPREAD  CREATED")) << listed.out;
  EXPECT_TRUE(Contains(listed.out, "STRICT_PACK    CREATED")) << listed.out;
  rayx::RemovePlacementGroup(spread.GetID());
  rayx::RemovePlacementGroup(pack.GetID());
  // Removal stopped the members and freed the devices.
  rayx::Status freed = cluster_->WaitFor(
      [](const rayx::ClusterStatus& s) {
        return s.AvailableResources()["GPU"] == s.TotalResources()["GPU"];
      },
      10000);
  EXPECT_TRUE(freed.ok()) << freed;
}

// ray-project/ray#61073: masking each rank to one device breaks CUDA
// peer-to-peer; a group's actors on one node can see all of its devices.
TEST_F(Scheduler, GroupActorsCanSeeAllTheGroupsDevicesWithTheirLocalRank) {
  StartCluster(0);
  ASSERT_TRUE(AddGpuNode("127.0.0.2", 4).ok());
  auto group = rayx::CreatePlacementGroup(
      {.bundles = {{{"GPU", 1}}, {{"GPU", 1}}}, .strategy = rayx::PlacementStrategy::STRICT_PACK});
  ASSERT_TRUE(group.Wait(30));
  std::set<std::string> ranks;
  std::vector<rayx::ActorHandle<Device>> actors;
  for (int b = 0; b < 2; ++b) {
    actors.push_back(rayx::Actor(Device::Create)
                         .SetResources({{"GPU", 1}})
                         .SetPlacementGroup(group, b, /*see_group_devices=*/true)
                         .Remote());
  }
  std::string visible;
  for (auto& a : actors) {
    std::string r = *a.Task(&Device::Ranked).Remote().Get();
    // "0,1|<rank>|<own device>": both see both devices; device <rank> is its own.
    std::string devices = r.substr(0, r.find('|'));
    std::string rank = r.substr(r.find('|') + 1, r.rfind('|') - r.find('|') - 1);
    std::string own = r.substr(r.rfind('|') + 1);
    if (visible.empty()) visible = devices;
    EXPECT_EQ(devices, visible) << r;
    EXPECT_EQ(std::count(devices.begin(), devices.end(), ','), 1) << r;
    size_t index = static_cast<size_t>(std::stoi(rank));
    std::vector<std::string> list = {devices.substr(0, devices.find(',')),
                                     devices.substr(devices.find(',') + 1)};
    EXPECT_EQ(list.at(index), own) << r;
    ranks.insert(rank);
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1"}));
  // The ids are NVML's (PCI bus order); CUDA must number them the same way.
  EXPECT_EQ(*actors[0].Task(&Device::Order).Remote().Get(), "PCI_BUS_ID");
  // Without the option each sees only its own device.
  auto plain = rayx::Actor(Device::Create).SetResources({{"GPU", 1}}).Remote();
  std::string r = *plain.Task(&Device::Ranked).Remote().Get();
  EXPECT_EQ(r.substr(0, r.find('|')), r.substr(r.rfind('|') + 1)) << r;
  rayx::RemovePlacementGroup(group.GetID());
}

// An agent started with CUDA_VISIBLE_DEVICES (a SLURM allocation of part of a
// node, a machine shared with another team) hands out exactly those devices,
// named as they are there, alone and as a group's visible devices; never 0.
TEST_F(Scheduler, AnAgentsCudaVisibleDevicesAreTheOnlyDevicesItHandsOut) {
  StartCluster(0);
  ASSERT_TRUE(cluster_
                  ->AddNode({.num_cpus = 8,
                             .num_gpus = 2,
                             .extra_args = {"--node-ip-address", "127.0.0.2"},
                             .env = {{"CUDA_VISIBLE_DEVICES", "5,7"}}})
                  .ok());
  std::vector<rayx::ActorHandle<Device>> actors;
  for (int i = 0; i < 2; ++i) {
    actors.push_back(rayx::Actor(Device::Create).SetResources({{"GPU", 1}}).Remote());
  }
  std::set<std::string> seen;
  for (auto& a : actors) {
    std::string r = *a.Task(&Device::Ranked).Remote().Get();  // devices|local rank|gpu ids
    std::string devices = r.substr(0, r.find('|'));
    EXPECT_EQ(devices, r.substr(r.rfind('|') + 1)) << "RAYX_GPU_IDS names the same device: " << r;
    seen.insert(devices);
  }
  EXPECT_EQ(seen, (std::set<std::string>{"5", "7"}));
  for (auto& a : actors) a.Kill();

  auto group = rayx::CreatePlacementGroup(
      {.bundles = {{{"GPU", 1}}, {{"GPU", 1}}}, .strategy = rayx::PlacementStrategy::STRICT_PACK});
  ASSERT_TRUE(group.Wait(30));
  std::set<std::string> own;
  for (int b = 0; b < 2; ++b) {
    auto member = rayx::Actor(Device::Create)
                      .SetResources({{"GPU", 1}})
                      .SetPlacementGroup(group, b, /*see_group_devices=*/true)
                      .Remote();
    std::string r = *member.Task(&Device::Ranked).Remote().Get();
    EXPECT_EQ(r.substr(0, r.find('|')), "5,7") << r;
    own.insert(r.substr(r.rfind('|') + 1));
  }
  EXPECT_EQ(own, (std::set<std::string>{"5", "7"}));
  rayx::RemovePlacementGroup(group.GetID());
}

// The agent's own GPU detection (no --num-gpus), through a fake
// libnvidia-ml.so.1 (tests/worker/agent/fake_nvml: the real dlopen and NVML
// calls, four GPUs): the node offers what NVML reports; CUDA_VISIBLE_DEVICES
// narrows it to the devices listed, handed out under their own numbers; a
// device NVML does not report stops the agent before it joins, naming both.
TEST_F(Scheduler, AgentsOfferTheGpusNvmlReportsWithinCudaVisibleDevices) {
  StartCluster(0);
  std::map<std::string, std::string> env = {{"LD_LIBRARY_PATH", RAYX_FAKE_NVML_DIR},
                                            {"RAYX_FAKE_NVML_GPUS", "4"}};
  auto all = cluster_->AddNode(
      {.num_cpus = 4, .extra_args = {"--node-ip-address", "127.0.0.2"}, .env = env});
  ASSERT_TRUE(all.ok()) << all.status();
  env["CUDA_VISIBLE_DEVICES"] = "1,3";
  auto some = cluster_->AddNode(
      {.num_cpus = 4, .extra_args = {"--node-ip-address", "127.0.0.3"}, .env = env});
  ASSERT_TRUE(some.ok()) << some.status();
  env["CUDA_VISIBLE_DEVICES"] = "2,4";
  auto bad = cluster_->AddNode(
      {.num_cpus = 4, .extra_args = {"--node-ip-address", "127.0.0.4"}, .env = env});
  ASSERT_FALSE(bad.ok()) << "an agent offered device 4 of a 4-GPU machine";
  EXPECT_TRUE(Contains(bad.status().message(),
                       "CUDA_VISIBLE_DEVICES=2,4 lists device 4, but NVML reports 4 GPU(s) "
                       "(devices 0-3)"))
      << bad.status();

  auto status = cluster_->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  std::map<std::string, std::pair<double, std::vector<int>>> gpus;  // address -> (GPU, devices)
  for (const auto& n : status->nodes) {
    if (n.alive) gpus[n.address] = {n.total.count("GPU") ? n.total.at("GPU") : 0, n.gpu_devices};
  }
  EXPECT_EQ(gpus["127.0.0.2"], std::make_pair(4.0, std::vector<int>{}));
  EXPECT_EQ(gpus["127.0.0.3"], std::make_pair(2.0, std::vector<int>{1, 3}));
  EXPECT_EQ(gpus.count("127.0.0.4"), 0u);

  std::vector<rayx::ActorHandle<Device>> actors;
  for (int i = 0; i < 2; ++i) {
    actors.push_back(rayx::Actor(Device::Create)
                         .SetResources({{"GPU", 1}})
                         .SetSchedulingStrategy(rayx::NodeAffinitySchedulingStrategy{some->node_id})
                         .Remote());
  }
  std::set<std::string> devices;
  for (auto& a : actors) devices.insert(*a.Task(&Device::Where).Remote().Get());
  EXPECT_EQ(devices, (std::set<std::string>{"127.0.0.3|1", "127.0.0.3|3"}));
  for (auto& a : actors) a.Kill();

  // GPU metrics: each agent samples its own devices through NVML about once a
  // second, and the head keeps the last sample (the dashboard and /metrics).
  std::map<std::string, std::vector<rayx::GpuUsage>> usage;  // address -> samples
  rayx::Status sampled = cluster_->WaitFor(
      [&](const rayx::ClusterStatus& s) {
        usage.clear();
        for (const auto& n : s.nodes) {
          if (n.alive && !n.gpu_usage.empty()) usage[n.address] = n.gpu_usage;
        }
        return usage.size() == 2;
      },
      10000);
  ASSERT_TRUE(sampled.ok()) << sampled;
  ASSERT_EQ(usage["127.0.0.2"].size(), 4u);
  ASSERT_EQ(usage["127.0.0.3"].size(), 2u);
  const rayx::GpuUsage& three = usage["127.0.0.3"][1];  // the fake's values for device 3
  EXPECT_EQ(three.device, 3);
  EXPECT_EQ(three.name, "Fake GPU 3");
  EXPECT_DOUBLE_EQ(three.utilization, 0.4);
  EXPECT_EQ(three.memory_used_bytes, 4ull << 30);
  EXPECT_EQ(three.memory_total_bytes, 80ull << 30);
  EXPECT_DOUBLE_EQ(three.temperature_celsius, 43);
  EXPECT_DOUBLE_EQ(three.power_watts, 103);
}

TEST_F(Scheduler, InfeasibleGroupFailsItsWaitWithTheReason) {
  StartCluster(2);
  auto group = rayx::CreatePlacementGroup(
      {.bundles = {{{"GPU", 8}}}, .strategy = rayx::PlacementStrategy::PACK});
  try {
    group.Wait(5);
    FAIL() << "Wait should fail for a group no node can hold";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(Contains(e.what(), "needs {GPU: 8} on one node")) << e.what();
  }
  auto status = cluster_->RunCli({"status"});
  EXPECT_TRUE(Contains(status.out, "infeasible")) << status.out;
  rayx::RemovePlacementGroup(group.GetID());
}

TEST_F(Scheduler, SpreadAffinityAndLabelsChooseTheNode) {
  StartCluster(0);
  auto h100 = AddGpuNode("127.0.0.2", 1, "accelerator=H100");
  ASSERT_TRUE(h100.ok());
  ASSERT_TRUE(AddGpuNode("127.0.0.3", 1, "accelerator=A10").ok());
  // SPREAD (on an idle cluster): actors land on different nodes.
  std::set<std::string> nodes;
  std::vector<rayx::ActorHandle<Device>> actors;
  for (int i = 0; i < 3; ++i) {
    actors.push_back(rayx::Actor(Device::Create)
                         .SetResources({{"CPU", 1}})
                         .SetSchedulingStrategy(rayx::SpreadSchedulingStrategy{})
                         .Remote());
  }
  for (auto& a : actors) nodes.insert(*a.Task(&Device::Node).Remote().Get());
  EXPECT_EQ(nodes.size(), 3u);
  auto labeled = rayx::Task(NodeOfTask).SetLabelSelector({{"accelerator", "H100"}}).Remote();
  EXPECT_EQ(*labeled.Get(), "127.0.0.2");
  auto pinned = rayx::Task(NodeOfTask)
                    .SetSchedulingStrategy(rayx::NodeAffinitySchedulingStrategy{h100->node_id, false})
                    .Remote();
  EXPECT_EQ(*pinned.Get(), "127.0.0.2");
  // Unknown labels are infeasible at once, with the reason.
  EXPECT_THROW(rayx::Task(NodeOfTask).SetLabelSelector({{"accelerator", "TPUv9"}}).Remote().Get(),
               rayx::TaskError);
}

// Elastic scale-out: 12 one-GPU actors on a 4-GPU head, 8 wait and are shown
// in `rayx status`; two 4-GPU nodes join and all 12 run. A group needing 3
// nodes waits on 2 and is placed when the third joins.
TEST_F(Scheduler, ScaleOutPlacesWaitingWorkWhenNodesJoin) {
  StartCluster(4);
  std::vector<rayx::ActorHandle<Device>> actors;
  for (int i = 0; i < 12; ++i) {
    actors.push_back(rayx::Actor(Device::Create).SetResources({{"GPU", 1}}).Remote());
  }
  rayx::Status shown = cluster_->WaitFor(
      [](const rayx::ClusterStatus& s) {
        for (const auto& [shape, count] : s.pending_demands) {
          if (Contains(shape, "GPU: 1") && count == 8) return true;
        }
        return false;
      },
      20000);
  ASSERT_TRUE(shown.ok()) << "8 actors should wait: " << shown;
  auto status = cluster_->RunCli({"status"});
  EXPECT_TRUE(Contains(status.out, "8 pending")) << status.out;
  // Four run now.
  for (int i = 0; i < 4; ++i) EXPECT_GT(*actors[static_cast<size_t>(i)].Task(&Device::Pid).Remote().Get(), 0);

  ASSERT_TRUE(AddGpuNode("127.0.0.2", 4).ok());
  ASSERT_TRUE(AddGpuNode("127.0.0.3", 4).ok());
  std::set<std::string> seen;
  for (auto& a : actors) {
    auto where = a.Task(&Device::Where).Remote().Get(60000);
    EXPECT_TRUE(seen.insert(*where).second) << "shared device " << *where;
  }
  EXPECT_EQ(seen.size(), 12u);
  for (auto& a : actors) a.Kill();

  // Four STRICT_SPREAD bundles on three nodes wait for a fourth.
  auto group = rayx::CreatePlacementGroup(
      {.bundles = {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}},
       .strategy = rayx::PlacementStrategy::STRICT_SPREAD});
  EXPECT_FALSE(group.Wait(1)) << "4 distinct nodes are needed, 3 exist";
  EXPECT_TRUE(Contains(group.Reason(), "needs 4 distinct nodes")) << group.Reason();
  ASSERT_TRUE(AddGpuNode("127.0.0.4", 0).ok());
  EXPECT_TRUE(group.Wait(30));
  rayx::RemovePlacementGroup(group.GetID());
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("RAYX_WORKER_MODE")) rayx::Init(argc, argv);  // serves tasks, never returns
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
