// Fencing on a real loopback cluster with fake GPUs: an agent the head declared
// dead kills what it started before it joins again, so no device is held by two
// live workers. This binary is also its workers' program (RAYX_WORKER_MODE).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "rayx/collective.h"
#include "rayx/kv.h"
#include "rayx/rayx.h"
#include "util/local_cluster.h"
#include "util/test_helpers.h"

namespace {

using rayx::testing::Env;

// Reports where it runs and which devices it sees.
class Device {
 public:
  static Device* Create() { return new Device(); }
  std::string Where() { return Env("RAYX_NODE_IP") + "|" + Env("CUDA_VISIBLE_DEVICES"); }
  int Pid() { return getpid(); }
};

// A value large enough for the node's object store (1 MiB).
rayx::Bytes Blob(int size) { return rayx::Bytes{std::string(static_cast<size_t>(size), 'z')}; }
// How many of a blob's bytes are 'z' (its argument is stored, not inline).
int64_t CountZ(rayx::Bytes blob) {
  return static_cast<int64_t>(std::count(blob.data.begin(), blob.data.end(), 'z'));
}

// One rank of a collective group.
class Rank {
 public:
  static Rank* Create() { return new Rank(); }
  int Pid() { return getpid(); }
  // Marks in the KV that it entered, then allreduces; returns the error
  // ("" when it succeeded) and how long the call took in ms.
  std::pair<std::string, int64_t> AllReduce(std::string group) {
    std::vector<float> v(256, 1.0f);
    rayx::kv::Put(group + "-entered", "yes");
    auto start = std::chrono::steady_clock::now();
    std::string error;
    try {
      rayx::collective::AllReduce(v, rayx::collective::ReduceOp::kSum, group);
    } catch (const rayx::collective::CollectiveError& e) {
      error = e.what();
    }
    return {error, std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count()};
  }
};

RAYX_REMOTE(Device::Create, &Device::Where, &Device::Pid, Blob, CountZ, Rank::Create, &Rank::Pid,
            &Rank::AllReduce);

using rayx::testing::Contains;
using rayx::testing::LiveChildrenOf;
using rayx::testing::LocalCluster;
using rayx::testing::NodeHandle;
using rayx::testing::PidAlive;
using rayx::testing::WaitUntil;

// CUDA_VISIBLE_DEVICES from /proc/<pid>/environ, or nullopt when unreadable.
std::optional<std::string> VisibleDevices(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  if (!in) return std::nullopt;
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream vars(all);
  std::string var;
  while (std::getline(vars, var, '\0')) {
    if (var.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0) return var.substr(21);
  }
  return std::string();
}

bool NodeAlive(const rayx::ClusterStatus& status, const std::string& node_id) {
  for (const auto& node : status.nodes) {
    if (node.node_id.Hex() == node_id) return node.alive;
  }
  return false;
}

class Fencing : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalCluster::Options options;
    options.head_node.num_cpus = 4;
    options.head_node.num_gpus = 0;
    options.heartbeat_period_ms = 100;
    options.node_timeout_ms = 800;
    auto cluster = LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    rayx::Options init;
    init.address = cluster_->address();
    init.token = cluster_->token();
    rayx::Init(init);
  }
  void TearDown() override {
    if (stopped_pid_ > 0) ::kill(stopped_pid_, SIGCONT);
    actor_.reset();
    if (rayx::IsInitialized()) rayx::Shutdown();
  }
  rayx::Result<NodeHandle> AddGpuNode(const std::string& ip) {
    return cluster_->AddNode(
        {.num_cpus = 4, .num_gpus = 1, .extra_args = {"--node-ip-address", ip}});
  }
  // Two one-GPU nodes and a restartable one-GPU actor (one restart, one task
  // retry) on one of them: victim_ is its node, other_ip_ the other's address.
  void StartRestartableActor() {
    auto first = AddGpuNode("127.0.0.2");
    ASSERT_TRUE(first.ok()) << first.status();
    auto second = AddGpuNode("127.0.0.3");
    ASSERT_TRUE(second.ok()) << second.status();
    actor_ = rayx::Actor(Device::Create)
                 .SetResources({{"GPU", 1}})
                 .SetMaxRestarts(1)
                 .SetMaxTaskRetries(1)
                 .Remote();
    std::string where = *actor_->Task(&Device::Where).Remote().Get(30000);
    actor_pid_ = *actor_->Task(&Device::Pid).Remote().Get(30000);
    bool on_second = Contains(where, "127.0.0.3|");
    victim_ = on_second ? *second : *first;
    other_ip_ = on_second ? "127.0.0.2" : "127.0.0.3";
  }
  // Two 1 MiB results stored on a new node, which is then killed: `first`'s
  // task may run again (it has retries), `second`'s may not.
  std::pair<rayx::ObjectRef<rayx::Bytes>, rayx::ObjectRef<rayx::Bytes>> BlobsOfAKilledNode() {
    auto node = AddGpuNode("127.0.0.2");
    if (!node.ok()) throw std::runtime_error("no node: " + node.status().message());
    auto there = rayx::NodeAffinitySchedulingStrategy{node->node_id, /*soft=*/true};
    auto kept = rayx::Task(Blob).SetSchedulingStrategy(there).Remote(1 << 20);
    auto lost = rayx::Task(Blob).SetSchedulingStrategy(there).SetMaxRetries(0).Remote(1 << 20);
    rayx::Wait(std::vector<rayx::ObjectRef<rayx::Bytes>>{kept, lost}, 2, 30000);
    rayx::Status killed = cluster_->KillNode(*node);
    if (!killed.ok()) throw std::runtime_error("cannot kill the node: " + killed.message());
    return {kept, lost};
  }
  std::unique_ptr<LocalCluster> cluster_;
  pid_t stopped_pid_ = 0;
  std::optional<rayx::ActorHandle<Device>> actor_;
  pid_t actor_pid_ = 0;
  NodeHandle victim_;
  std::string other_ip_;
};

// The reproduction of issue 13: an agent stopped past the node timeout and
// resumed used to rejoin while its old one-GPU actor kept running, and a new
// one-GPU actor on it got device 0 as well.
TEST_F(Fencing, AgentDeclaredDeadKillsItsWorkersBeforeItRejoins) {
  auto first = AddGpuNode("127.0.0.2");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = AddGpuNode("127.0.0.3");
  ASSERT_TRUE(second.ok()) << second.status();

  auto a = rayx::Actor(Device::Create).SetResources({{"GPU", 1}}).Remote();
  auto b = rayx::Actor(Device::Create).SetResources({{"GPU", 1}}).Remote();
  std::string where_a = *a.Task(&Device::Where).Remote().Get(30000);
  std::string where_b = *b.Task(&Device::Where).Remote().Get(30000);
  // The actor on 127.0.0.3 is the one whose agent is stopped.
  auto& victim = Contains(where_a, "127.0.0.3|") ? a : b;
  ASSERT_TRUE(Contains(where_a + where_b, "127.0.0.3|0")) << where_a << " " << where_b;
  pid_t old_pid = *victim.Task(&Device::Pid).Remote().Get(30000);
  ASSERT_TRUE(PidAlive(old_pid));

  // Stopped until the head declares it dead, then resumed.
  stopped_pid_ = second->agent.pid;
  ASSERT_EQ(::kill(stopped_pid_, SIGSTOP), 0);
  rayx::Status dead = cluster_->WaitFor(
      [&](const rayx::ClusterStatus& s) { return !NodeAlive(s, second->node_id); }, 20000);
  ASSERT_TRUE(dead.ok()) << "the stopped agent's node should be declared dead: " << dead;
  ASSERT_EQ(::kill(stopped_pid_, SIGCONT), 0);
  stopped_pid_ = 0;
  ASSERT_TRUE(cluster_->WaitForNodes(3, 20000).ok()) << "the resumed agent should join again";

  // The old incarnation's worker is gone.
  EXPECT_TRUE(WaitUntil([&] { return !PidAlive(old_pid); }, 10000))
      << "worker pid " << old_pid << " of the dead node still runs after its agent rejoined";

  // A new one-GPU actor can only go to the rejoined agent (127.0.0.2 is full).
  auto c = rayx::Actor(Device::Create).SetResources({{"GPU", 1}}).Remote();
  std::string where_c = *c.Task(&Device::Where).Remote().Get(30000);
  EXPECT_EQ(where_c, "127.0.0.3|0");
  pid_t new_pid = *c.Task(&Device::Pid).Remote().Get(30000);

  // Calls to the old actor fail, naming its node.
  try {
    std::string answer = *victim.Task(&Device::Where).Remote().Get(30000);
    ADD_FAILURE() << "the dead node's actor still answers: " << answer;
  } catch (const rayx::TaskError& e) {
    EXPECT_TRUE(Contains(e.what(), "127.0.0.3")) << e.what();
  }

  // No two live workers of the agent see the same device.
  std::map<std::string, pid_t> holders;
  std::vector<pid_t> children = LiveChildrenOf(second->agent.pid);
  EXPECT_NE(std::find(children.begin(), children.end(), new_pid), children.end())
      << "the new actor's worker " << new_pid << " should be a child of agent "
      << second->agent.pid;
  for (pid_t child : children) {
    auto devices = VisibleDevices(child);
    if (!devices || devices->empty()) continue;
    auto [it, inserted] = holders.emplace(*devices, child);
    EXPECT_TRUE(inserted) << "workers " << it->second << " and " << child
                          << " both have CUDA_VISIBLE_DEVICES=" << *devices;
  }
  EXPECT_EQ(holders.size(), 1u);
}

// A node dies under a STRICT_SPREAD group: the actor in the surviving bundle
// keeps running (same process, same device) and the lost bundle is placed
// again on a node that joins.
TEST_F(Fencing, ANodeDeathKeepsTheSurvivingBundleAndItsActor) {
  auto first = AddGpuNode("127.0.0.2");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = AddGpuNode("127.0.0.3");
  ASSERT_TRUE(second.ok()) << second.status();
  auto group = rayx::CreatePlacementGroup({.bundles = {{{"GPU", 1}}, {{"GPU", 1}}},
                                           .strategy = rayx::PlacementStrategy::STRICT_SPREAD});
  ASSERT_TRUE(group.Wait(30)) << group.Reason();
  std::vector<rayx::ActorHandle<Device>> members;
  for (int b = 0; b < 2; ++b) {
    members.push_back(rayx::Actor(Device::Create)
                          .SetResources({{"GPU", 1}})
                          .SetPlacementGroup(group, b)
                          .Remote());
  }
  std::string where0 = *members[0].Task(&Device::Where).Remote().Get(30000);
  std::string where1 = *members[1].Task(&Device::Where).Remote().Get(30000);
  // The member on 127.0.0.2 survives; 127.0.0.3's agent is killed.
  auto& survivor = Contains(where0, "127.0.0.2|") ? members[0] : members[1];
  std::string where = Contains(where0, "127.0.0.2|") ? where0 : where1;
  pid_t pid = *survivor.Task(&Device::Pid).Remote().Get(30000);
  ASSERT_TRUE(cluster_->KillNode(*second).ok());
  ASSERT_TRUE(cluster_->WaitFor(
                  [&](const rayx::ClusterStatus& s) { return !NodeAlive(s, second->node_id); },
                  20000)
                  .ok());
  // A third node joins: the lost bundle goes there, the kept one stays.
  auto third = AddGpuNode("127.0.0.4");
  ASSERT_TRUE(third.ok()) << third.status();
  std::string listed;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto r = cluster_->RunCli({"list", "placement-groups"});
        listed = r.out;
        return Contains(r.out, "CREATED");
      },
      20000))
      << listed;
  EXPECT_EQ(*survivor.Task(&Device::Where).Remote().Get(30000), where);
  EXPECT_EQ(*survivor.Task(&Device::Pid).Remote().Get(30000), pid)
      << "the surviving bundle's actor was restarted";
  EXPECT_TRUE(PidAlive(pid));
  // The lost bundle is on the new node.
  int lost = Contains(where0, "127.0.0.2|") ? 1 : 0;
  auto replacement = rayx::Actor(Device::Create)
                         .SetResources({{"GPU", 1}})
                         .SetPlacementGroup(group, lost)
                         .Remote();
  EXPECT_EQ(*replacement.Task(&Device::Where).Remote().Get(30000), "127.0.0.4|0");
  // The survivor's bundle is still held by it: one more actor there waits.
  int kept = 1 - lost;
  auto extra = rayx::Actor(Device::Create)
                   .SetResources({{"GPU", 1}})
                   .SetPlacementGroup(group, kept)
                   .Remote();
  rayx::Status waits = cluster_->WaitFor(
      [](const rayx::ClusterStatus& s) {
        for (const auto& [shape, count] : s.pending_demands) {
          if (Contains(shape, "GPU: 1") && count == 1) return true;
        }
        return false;
      },
      20000);
  EXPECT_TRUE(waits.ok()) << "a second actor in the surviving bundle should wait: " << waits;
  rayx::RemovePlacementGroup(group.GetID());
}

// Ray's max_restarts across a node death: the agent under a restartable
// one-GPU actor is SIGKILLed; the actor is created again on the other node,
// its constructor run again, and calls reach it there. Nothing of the dead
// node keeps running.
TEST_F(Fencing, ARestartableActorOnAKilledNodeComesBackOnAnother) {
  ASSERT_NO_FATAL_FAILURE(StartRestartableActor());
  auto& actor = *actor_;
  pid_t old_pid = actor_pid_;
  NodeHandle& victim = victim_;
  const std::string& other_ip = other_ip_;

  auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(cluster_->KillNode(victim).ok());
  // A call with a task retry answers from the new instance on the other node.
  std::string again = *actor.Task(&Device::Where).Remote().Get(30000);
  auto answered_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now() - killed_at)
                         .count();
  EXPECT_EQ(again, other_ip + "|0");
  RecordProperty("node_death_to_answer_ms", static_cast<int>(answered_ms));
  std::cout << "actor answered again on " << again << " " << answered_ms
            << " ms after its node's agent was killed\n";
  pid_t new_pid = *actor.Task(&Device::Pid).Remote().Get(30000);
  EXPECT_NE(new_pid, old_pid);
  EXPECT_TRUE(WaitUntil([&] { return !PidAlive(old_pid); }, 10000))
      << "worker " << old_pid << " of the killed agent still runs";
  actor.Kill();
}

// Prompt notices: the agent under a restartable actor is stopped (its worker
// keeps running and its connection stands). Once the head declares the node
// dead it tells the actor's owner, which restarts the actor on the other
// node at once: calls answer from there while the old node is still stopped.
TEST_F(Fencing, OwnersHearOfANodeDeathWhileItsWorkersStillAnswer) {
  ASSERT_NO_FATAL_FAILURE(StartRestartableActor());
  auto& actor = *actor_;
  pid_t old_pid = actor_pid_;
  NodeHandle& victim = victim_;
  const std::string& other_ip = other_ip_;

  stopped_pid_ = victim.agent.pid;
  ASSERT_EQ(::kill(stopped_pid_, SIGSTOP), 0);
  ASSERT_TRUE(cluster_->WaitFor(
                  [&](const rayx::ClusterStatus& s) { return !NodeAlive(s, victim.node_id); },
                  20000)
                  .ok());
  // The old worker still runs (its agent is stopped), yet calls go to the new one.
  EXPECT_TRUE(PidAlive(old_pid));
  std::string again;
  ASSERT_TRUE(WaitUntil(
      [&] {
        again = *actor.Task(&Device::Where).Remote().Get(30000);
        return again == other_ip + "|0";
      },
      10000))
      << "the actor still answers from " << again << " after its node was declared dead";
  EXPECT_NE(*actor.Task(&Device::Pid).Remote().Get(30000), old_pid);
  ASSERT_EQ(::kill(stopped_pid_, SIGCONT), 0);
  stopped_pid_ = 0;
  // Resumed, the agent fences: the old worker goes.
  EXPECT_TRUE(WaitUntil([&] { return !PidAlive(old_pid); }, 10000))
      << "worker " << old_pid << " of the fenced node still runs";
  actor.Kill();
}

// Lineage: a task's result whose only copy was in the store of a node that
// died is computed again by running the task again (it had retries left);
// with no retries left, Get fails with ObjectLost naming the node.
TEST_F(Fencing, AResultLostWithItsNodeIsComputedAgain) {
  auto [kept, lost] = BlobsOfAKilledNode();
  // Soft affinity: the rerun goes elsewhere once the node is dead.
  auto value = kept.Get(60000);
  EXPECT_EQ(value->data.size(), 1u << 20);
  EXPECT_EQ(value->data.find_first_not_of('z'), std::string::npos);
  try {
    lost.Get(60000);
    ADD_FAILURE() << "a lost object with no retries left was read";
  } catch (const rayx::TaskError& e) {
    EXPECT_EQ(e.type(), "ObjectLost") << e.what();
    EXPECT_TRUE(Contains(e.what(), "127.0.0.2")) << e.what();
  }
}

// Lineage for arguments: a task's argument whose only copy was in the store of
// a node that died is computed again (its task had retries left) and the task
// that needs it runs with the new copy; with no retries left the task fails
// with ObjectLost naming the node.
TEST_F(Fencing, AnArgumentLostWithItsNodeIsComputedAgainForTheTaskThatNeedsIt) {
  auto [kept, lost] = BlobsOfAKilledNode();
  // Both consumers run on the head's node (no GPU asked), whose workers pull
  // the arguments from the dead node's store and cannot.
  auto counted = rayx::Task(CountZ).Remote(kept);
  auto failed = rayx::Task(CountZ).Remote(lost);
  EXPECT_EQ(*counted.Get(60000), int64_t{1} << 20);
  try {
    failed.Get(60000);
    ADD_FAILURE() << "a task whose argument was lost for good returned";
  } catch (const rayx::TaskError& e) {
    EXPECT_EQ(e.type(), "ObjectLost") << e.what();
    EXPECT_TRUE(Contains(e.what(), "127.0.0.2")) << e.what();
  }
}

// A collective group hears of a member's node death from the head: rank 1's
// agent is stopped (its worker keeps running, its sockets stay open), and
// rank 0's AllReduce fails as soon as the head declares the node dead, naming
// rank 1 and the node, instead of waiting out its 60 s deadline.
TEST_F(Fencing, ACollectiveGroupIsAbortedWhenAMembersNodeIsDeclaredDead) {
  auto node = AddGpuNode("127.0.0.2");
  ASSERT_TRUE(node.ok()) << node.status();
  auto head_node = rayx::NodeAffinitySchedulingStrategy{cluster_->head_node().node_id, false};
  auto rank0 = rayx::Actor(Rank::Create).SetSchedulingStrategy(head_node).Remote();
  auto rank1 = rayx::Actor(Rank::Create).SetResources({{"GPU", 1}}).Remote();
  pid_t pid1 = *rank1.Task(&Rank::Pid).Remote().Get(30000);
  const int64_t timeout_ms = 60000;
  rayx::collective::CreateCollectiveGroup({rank0, rank1},
                                          {.name = "watched", .timeout_ms = timeout_ms});
  auto call = rank0.Task(&Rank::AllReduce).Remote(std::string("watched"));
  rayx::kv::Wait("watched-entered", 30000);

  stopped_pid_ = node->agent.pid;
  ASSERT_EQ(::kill(stopped_pid_, SIGSTOP), 0);
  auto [error, took_ms] = *call.Get(timeout_ms + 10000);
  EXPECT_TRUE(Contains(error, "rank 1")) << "the error must name the dead rank: " << error;
  EXPECT_TRUE(Contains(error, "declared dead")) << error;
  EXPECT_TRUE(Contains(error, "127.0.0.2")) << error;
  EXPECT_LT(took_ms, 10000) << "the group waited for its deadline, not the head: " << error;
  std::cout << "rank 0 saw after " << took_ms << " ms: " << error << "\n";
  EXPECT_TRUE(PidAlive(pid1)) << "rank 1's worker runs on while its agent is stopped";

  ASSERT_EQ(::kill(stopped_pid_, SIGCONT), 0);
  stopped_pid_ = 0;
  EXPECT_TRUE(WaitUntil([&] { return !PidAlive(pid1); }, 10000))
      << "rank 1's worker " << pid1 << " still runs after its fenced agent rejoined";
  // The survivor's group is aborted for good; it can be made again.
  rank0.Kill();
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("RAYX_WORKER_MODE")) rayx::Init(argc, argv);  // serves tasks, never returns
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
