// Tasks, actors and objects on a real three-node loopback cluster. This test
// binary is also the workers' program: started with RAYX_WORKER_MODE, its main
// hands over to rayx::Init, which serves tasks.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "rayx/rayx.h"
#include "runtime/runtime.h"
#include "util/local_cluster.h"
#include "util/test_helpers.h"

// Outside the anonymous namespace, as user functions usually are, so its name
// is in the symbol table.
int NotRegistered(int x) { return x; }

namespace {

int Square(int x) { return x * x; }
int Add(int a, int b) { return a + b; }
int64_t SumBytes(std::vector<uint8_t> data) {
  return std::accumulate(data.begin(), data.end(), int64_t{0});
}
// Raw bytes in and out.
rayx::Bytes Reverse(rayx::Bytes in) {
  std::reverse(in.data.begin(), in.data.end());
  return in;
}
size_t CountBytes(std::vector<rayx::Bytes> parts) {
  size_t n = 0;
  for (auto& p : parts) n += p.data.size();
  return n;
}
int AgentPid() { return getppid(); }  // a worker is the child of its node's agent
int SlowSquare(int x, int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));  // the workload itself
  return x * x;
}
int Throws(int x) {
  if (x < 0) throw std::invalid_argument("x must not be negative, got " + std::to_string(x));
  return x;
}
int Crashes() {
  std::abort();
}
// Throws until it has run `fail_times` times (counted in the file `counter`).
int FlakyUntil(std::string counter, int fail_times) {
  int runs = 0;
  std::ifstream(counter) >> runs;
  std::ofstream(counter) << ++runs;
  if (runs <= fail_times) throw std::runtime_error("flaky run " + std::to_string(runs));
  return runs;
}

class Recorder {
 public:
  static Recorder* Create(int start) { return new Recorder(start); }
  // A constructor that takes a while (a model to load), or fails.
  static Recorder* CreateSlowly(int start, int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return new Recorder(start);
  }
  static Recorder* CreateOrThrow(int start) {
    if (start < 0) throw std::invalid_argument("start must not be negative");
    return new Recorder(start);
  }
  explicit Recorder(int start) : total_(start) {}
  int Record(int i) {
    seen_.push_back(i);
    total_ += i;
    return total_;
  }
  std::vector<int> Seen() const { return seen_; }
  int Total() const { return total_; }
  int Pid() const { return getpid(); }
  std::vector<int> Gpus() const { return rayx::GetGpuIds(); }
  std::string Visible() const {
    const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
    return v ? v : "(unset)";
  }
  int Sleep(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return ms;
  }
  // Starts a task of its own and returns its result.
  int SquareByTask(int x) { return *rayx::Task(Square).Remote(x).Get(30000); }

 private:
  int total_;
  std::vector<int> seen_;
};

// A task that calls an actor through a handle it was given.
int AddThroughHandle(rayx::ActorHandle<Recorder> actor, int x) {
  return *actor.Task(&Recorder::Record).Remote(x).Get();
}

// A task that looks an actor up by name in its own process and calls it.
int TotalOfNamed(std::string name) {
  return *rayx::GetActor<Recorder>(name).Task(&Recorder::Total).Remote().Get(30000);
}

// What a task sees of the variables that would make a program it starts a worker.
std::string WorkerVariables() {
  std::string out;
  for (const char* name : {"RAYX_WORKER_MODE", "RAYX_WORKER_READY_FD", "RAYX_NODE_IP"}) {
    const char* v = std::getenv(name);
    out += std::string(name) + "=" + (v ? "set" : "(unset)") + " ";
  }
  return out;
}

// An actor that keeps a handle to another one and calls it on request.
class Relay {
 public:
  static Relay* Create(rayx::ActorHandle<Recorder> target) { return new Relay(std::move(target)); }
  explicit Relay(rayx::ActorHandle<Recorder> target) : target_(std::move(target)) {}
  int TargetPid() { return *target_.Task(&Recorder::Pid).Remote().Get(20000); }

 private:
  rayx::ActorHandle<Recorder> target_;
};

// A binary tree of tasks of `depth` levels, each getting its children's
// results: its size. On a small node it finishes only because a task blocked
// in Get lends its CPU to its children (Ray's rule).
int TreeSize(int depth) {
  if (depth == 0) return 1;
  auto left = rayx::Task(TreeSize).Remote(depth - 1);
  auto right = rayx::Task(TreeSize).Remote(depth - 1);
  return 1 + *left.Get(120000) + *right.Get(120000);
}

rayx::Bytes MakeBlob(int size);
// Prints a line to stdout and one to stderr (log_to_driver).
int Shout(int x) {
  std::printf("shout %d\n", x);
  std::fprintf(stderr, "whisper %d\n", x);
  return getpid();
}
RAYX_REMOTE(TreeSize, Shout);
RAYX_REMOTE(Recorder::CreateSlowly, Recorder::CreateOrThrow, TotalOfNamed);
RAYX_REMOTE(Relay::Create, &Relay::TargetPid, FlakyUntil, WorkerVariables, MakeBlob, Reverse, CountBytes, Square, Add, SumBytes, AgentPid, SlowSquare, Throws, Crashes, Recorder::Create,
            &Recorder::Record, &Recorder::Seen, &Recorder::Total, &Recorder::Pid, &Recorder::Sleep,
            &Recorder::Gpus, &Recorder::Visible, &Recorder::SquareByTask,
            AddThroughHandle);

using rayx::testing::LocalCluster;

using rayx::testing::LiveChildrenOf;

class Runtime : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    LocalCluster::Options options;
    options.head_node.num_cpus = 2;
    auto cluster = LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
    auto second = cluster_->AddNode({.num_cpus = 2});
    ASSERT_TRUE(second.ok()) << second.status();
    // Another address (still loopback): its objects are pulled, not mapped.
    auto tpu = cluster_->AddNode({.num_cpus = 1,
                                  .resources = R"({"tpu": 1})",
                                  .extra_args = {"--node-ip-address", "127.0.0.2"}});
    ASSERT_TRUE(tpu.ok()) << tpu.status();
    tpu_node_ = new rayx::testing::NodeHandle(*tpu);
    // Four fake GPUs and no CPU: only GPU work goes there.
    auto gpus = cluster_->AddNode({.num_cpus = 0, .num_gpus = 4});
    ASSERT_TRUE(gpus.ok()) << gpus.status();
    agents_ = {cluster_->head_node().agent.pid, second->agent.pid, tpu->agent.pid,
               gpus->agent.pid};
  }
  static void TearDownTestSuite() {
    delete tpu_node_;
    delete cluster_;
  }
  void SetUp() override {
    ASSERT_TRUE(cluster_);
    rayx::Options options;
    options.address = cluster_->address();
    options.token = cluster_->token();
    rayx::Init(options);
  }
  void TearDown() override {
    rayx::Shutdown();
    // Invariant: a finished job leaves no worker behind on any node.
    size_t left = 0;
    rayx::testing::WaitUntil(
        [&] {
          left = 0;
          for (pid_t agent : agents_) left += LiveChildrenOf(agent).size();
          return left == 0;
        },
        10000);
    EXPECT_EQ(left, 0u) << "workers outlived their job";
    // And its resources are free again, its stored objects gone.
    auto status = cluster_->GetStatus();
    ASSERT_TRUE(status.ok());
    EXPECT_EQ(status->AvailableResources()["CPU"], 5);
    EXPECT_TRUE(WaitForStoreUsage(0).ok()) << "stored objects outlived their job";
  }

  // Waits until every node's object store holds `bytes` in total.
  static rayx::Status WaitForStoreUsage(uint64_t bytes) {
    return cluster_->WaitFor(
        [&](const rayx::ClusterStatus& s) {
          uint64_t total = 0;
          for (const auto& n : s.nodes) total += n.alive ? n.object_store_bytes : 0;
          return total == bytes;
        },
        10000);
  }
  static uint64_t StoreUsage() {
    auto s = cluster_->GetStatus();
    uint64_t total = 0;
    if (s.ok()) {
      for (const auto& n : s->nodes) total += n.alive ? n.object_store_bytes : 0;
    }
    return total;
  }

  static LocalCluster* cluster_;
  static rayx::testing::NodeHandle* tpu_node_;
  static std::vector<pid_t> agents_;
};
LocalCluster* Runtime::cluster_ = nullptr;
rayx::testing::NodeHandle* Runtime::tpu_node_ = nullptr;
std::vector<pid_t> Runtime::agents_;

// What a C++ task prints reaches the driver's stdout as Ray prints it, the
// last lines included: Shutdown asks every node for them first.
TEST_F(Runtime, WhatATaskPrintsReachesTheDriver) {
  std::string path = ::testing::TempDir() + "rayx-driver-stdout-" + std::to_string(getpid());
  int file = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
  ASSERT_GE(file, 0);
  std::fflush(stdout);
  int saved = ::dup(1);
  ::dup2(file, 1);
  std::vector<int> pids;
  for (int i = 0; i < 3; ++i) pids.push_back(*rayx::Task(Shout).Remote(i).Get(60000));
  rayx::Shutdown();
  ::dup2(saved, 1);
  ::close(saved);
  ::close(file);
  std::ifstream in(path);
  std::string printed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ::unlink(path.c_str());
  for (int i = 0; i < 3; ++i) {
    std::string prefix = "(Shout pid=" + std::to_string(pids[i]) + ", ip=127.0.0.";
    for (const std::string& line : {"shout " + std::to_string(i), "whisper " + std::to_string(i)}) {
      size_t at = printed.find(") " + line + "\n");
      ASSERT_NE(at, std::string::npos) << line << " missing from:\n" << printed;
      EXPECT_NE(printed.rfind(prefix, at), std::string::npos) << printed;
    }
  }
  rayx::Options options;  // TearDown ends the job again and checks what it left
  options.address = cluster_->address();
  options.token = cluster_->token();
  rayx::Init(options);
}

TEST_F(Runtime, TasksReturnTheirResults) {
  std::vector<rayx::ObjectRef<int>> refs;
  for (int i = 0; i < 50; ++i) refs.push_back(rayx::Task(Square).Remote(i));
  auto values = rayx::Get(refs);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(*values[i], i * i);
}

TEST_F(Runtime, TasksRunWithoutTheWorkerOnlyVariables) {
  // So a rayx program a task starts (system(), fork+exec) is a driver, not a worker.
  EXPECT_EQ(*rayx::Task(WorkerVariables).Remote().Get(),
            "RAYX_WORKER_MODE=(unset) RAYX_WORKER_READY_FD=(unset) RAYX_NODE_IP=set ");
}

TEST_F(Runtime, TasksSpreadOverNodesWhenOneIsFull) {
  // 5 CPUs in 3 nodes: 5 concurrent slow tasks need every node.
  std::vector<rayx::ObjectRef<int>> slow;
  for (int i = 0; i < 5; ++i) slow.push_back(rayx::Task(SlowSquare).Remote(i, 300));
  std::vector<rayx::ObjectRef<int>> where;
  for (int i = 0; i < 5; ++i) where.push_back(rayx::Task(AgentPid).Remote());
  std::set<int> agents;
  for (auto& w : rayx::Get(where)) agents.insert(*w);
  for (auto& s : rayx::Get(slow)) EXPECT_GE(*s, 0);
  EXPECT_GE(agents.size(), 2u);
}

TEST_F(Runtime, CustomResourceTaskRunsOnlyWhereTheResourceIs) {
  for (int i = 0; i < 5; ++i) {
    auto ref = rayx::Task(AgentPid).SetResources({{"CPU", 1}, {"tpu", 1}}).Remote();
    EXPECT_EQ(*ref.Get(), tpu_node_->agent.pid);
  }
}

TEST_F(Runtime, InfeasibleTaskFailsWithTheReason) {
  auto ref = rayx::Task(Square).SetResources({{"GPU", 8}}).Remote(2);
  try {
    ref.Get(10000);
    FAIL() << "an infeasible task returned";
  } catch (const rayx::TaskError& e) {
    EXPECT_EQ(e.type(), "Infeasible");
    EXPECT_EQ(e.kind(), rayx::TaskErrorKind::kInfeasible);
    EXPECT_NE(e.remote_message().find("GPU: 8"), std::string::npos) << e.what();
  }
}

TEST_F(Runtime, ObjectRefsAreResolvedBeforeTheTaskRuns) {
  auto five = rayx::Put(5);
  EXPECT_EQ(*rayx::Task(Add).Remote(five, 1).Get(), 6);
  // A pending result as an argument: the dependent task waits for it.
  auto slow = rayx::Task(SlowSquare).Remote(4, 200);
  auto chained = rayx::Task(Add).Remote(slow, slow);
  EXPECT_EQ(*chained.Get(), 32);
  // A failed dependency fails the dependent task with its error.
  auto bad = rayx::Task(Throws).Remote(-1);
  EXPECT_THROW(rayx::Task(Add).Remote(bad, 1).Get(), rayx::TaskError);
}

TEST_F(Runtime, LargeObjectsTravelToOtherNodes) {
  std::vector<uint8_t> data(8 << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  int64_t want = std::accumulate(data.begin(), data.end(), int64_t{0});
  auto ref = rayx::Put(data);
  // On the tpu node, which is not the driver's process.
  auto sum = rayx::Task(SumBytes).SetResources({{"tpu", 1}}).Remote(ref);
  EXPECT_EQ(*sum.Get(), want);
}

TEST_F(Runtime, RawBytesTravelAsTheirOwnFrames) {
  rayx::Bytes blob{std::string(3 << 20, '\0')};
  for (size_t i = 0; i < blob.data.size(); ++i) blob.data[i] = static_cast<char>(i % 251);
  auto reversed = rayx::Task(Reverse).Remote(blob).Get();
  std::string want = blob.data;
  std::reverse(want.begin(), want.end());
  EXPECT_EQ(reversed->data, want);
  // Put stores the raw content; Get hands it back unchanged.
  auto ref = rayx::Put(blob);
  EXPECT_EQ(*ref.Get(), blob);
  EXPECT_EQ(rayx::detail::Pack(blob), blob.data);  // no msgpack header at the top level
  // Nested inside another value, Bytes is a msgpack bin.
  std::vector<rayx::Bytes> parts = {rayx::Bytes{"abc"}, rayx::Bytes{std::string(1000, 'x')}};
  EXPECT_EQ(*rayx::Task(CountBytes).Remote(parts).Get(), 1003u);
}

rayx::Bytes MakeBlob(int size) { return rayx::Bytes{std::string(static_cast<size_t>(size), 'z')}; }

TEST_F(Runtime, LargeResultsLiveInTheStoreAndAreFreedWithTheirLastRef) {
  ASSERT_TRUE(WaitForStoreUsage(0).ok());
  {
    // Produced on a 127.0.0.1 node: read in place through a mapping.
    auto local = rayx::Task(MakeBlob).Remote(1 << 20);
    auto bytes = rayx::detail::GetBytes(local.handle(), -1);
    EXPECT_EQ(bytes.view.size(), 1u << 20);
    std::ifstream maps("/proc/self/maps");
    std::string text((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("rayx-store-"), std::string::npos) << "the result was not mapped";
    // Produced on 127.0.0.2: pulled in chunks.
    auto remote = rayx::Task(MakeBlob).SetResources({{"tpu", 1}}).Remote(9 << 20);
    EXPECT_EQ(remote.Get()->data, std::string(9 << 20, 'z'));
    // Small results stay inline.
    auto small = rayx::Task(MakeBlob).Remote(1000);
    EXPECT_EQ(small.Get()->data.size(), 1000u);
    ASSERT_TRUE(WaitForStoreUsage((1u << 20) + (9u << 20)).ok()) << StoreUsage();
  }
  // The last references are gone: every node's store is back to its baseline.
  EXPECT_TRUE(WaitForStoreUsage(0).ok()) << StoreUsage();
}

TEST_F(Runtime, LargePutsAreStoredAndReachWorkersOnOtherNodes) {
  rayx::Bytes blob{std::string(2 << 20, 'q')};
  {
    auto ref = rayx::Put(blob);
    ASSERT_TRUE(WaitForStoreUsage(2u << 20).ok()) << StoreUsage();
    EXPECT_EQ(*ref.Get(), blob);
    // The worker on 127.0.0.2 pulls it from this node's agent.
    EXPECT_EQ(*rayx::Task(CountBytes).SetResources({{"tpu", 1}}).Remote(
                  std::vector<rayx::Bytes>{blob}).Get(), 2u << 20);
    auto reversed = rayx::Task(Reverse).SetResources({{"tpu", 1}}).Remote(ref).Get();
    EXPECT_EQ(reversed->data.size(), 2u << 20);
  }
  EXPECT_TRUE(WaitForStoreUsage(0).ok()) << StoreUsage();
}

TEST_F(Runtime, RepeatedLargePutsReadBackTheirOwnBytesAndFreeTheStore) {
  ASSERT_TRUE(WaitForStoreUsage(0).ok()) << StoreUsage();
  rayx::ObjectRef<std::vector<uint8_t>> last;
  for (int round = 0; round < 6; ++round) {
    // Freed Puts' files are reused for the next ones of their size.
    std::vector<uint8_t> data(1 << 20, static_cast<uint8_t>(round));
    last = rayx::Put(data);
    EXPECT_EQ(*last.Get(), data) << round;
    if (round % 2 == 1) {
      // Read by a worker on this node (the file is mapped there): never reused.
      int64_t want = int64_t{round} * (1 << 20);
      EXPECT_EQ(*rayx::Task(SumBytes).Remote(last).Get(), want) << round;
    }
  }
  // Seen by the agent's heartbeat: the last one (and maybe freed files kept for reuse)...
  ASSERT_TRUE(cluster_
                  ->WaitFor(
                      [](const rayx::ClusterStatus& s) {
                        uint64_t total = 0;
                        for (const auto& n : s.nodes) total += n.alive ? n.object_store_bytes : 0;
                        return total >= (1u << 20);
                      },
                      10000)
                  .ok())
      << StoreUsage();
  // ...and all gone once it is released: freed files are not kept for long.
  last = rayx::ObjectRef<std::vector<uint8_t>>();
  EXPECT_TRUE(WaitForStoreUsage(0).ok()) << StoreUsage();
}

TEST_F(Runtime, WholeGpuActorsGetDistinctDevicesAndSeeOnlyThem) {
  std::vector<rayx::ActorHandle<Recorder>> actors;
  for (int i = 0; i < 4; ++i) {
    actors.push_back(rayx::Actor(Recorder::Create).SetResources({{"GPU", 1}}).Remote(0));
  }
  std::set<int> devices;
  for (auto& a : actors) {
    auto ids = *a.Task(&Recorder::Gpus).Remote().Get();
    ASSERT_EQ(ids.size(), 1u);
    devices.insert(ids[0]);
    EXPECT_EQ(*a.Task(&Recorder::Visible).Remote().Get(), std::to_string(ids[0]));
  }
  EXPECT_EQ(devices, (std::set<int>{0, 1, 2, 3}));
  // A fifth waits for a device (and is a pending demand), then gets the freed one.
  auto fifth = rayx::Actor(Recorder::Create).SetResources({{"GPU", 1}}).Remote(0);
  auto fifth_gpus = fifth.Task(&Recorder::Gpus).Remote();
  std::vector<rayx::ObjectRef<std::vector<int>>> waiting = {fifth_gpus};
  EXPECT_EQ(rayx::Wait(waiting, 1, 300).ready.size(), 0u);
  ASSERT_TRUE(cluster_->WaitFor([](const rayx::ClusterStatus& s) {
                 return s.pending_demands.count("{GPU: 1}") == 1;
               }, 5000).ok());
  int freed = (*actors[2].Task(&Recorder::Gpus).Remote().Get())[0];
  actors[2].Kill();
  EXPECT_EQ(*fifth_gpus.Get(10000), std::vector<int>{freed});
  // A task holding no GPU sees none.
  auto plain = rayx::Actor(Recorder::Create).SetResources({{"CPU", 1}}).Remote(0);
  EXPECT_EQ(*plain.Task(&Recorder::Visible).Remote().Get(), "");
}

TEST_F(Runtime, GpuSharesPackOntoOneDeviceAndNeverSpanTwo) {
  std::vector<rayx::ActorHandle<Recorder>> halves;
  for (int i = 0; i < 3; ++i) {
    halves.push_back(rayx::Actor(Recorder::Create).SetResources({{"GPU", 0.5}}).Remote(0));
  }
  std::vector<int> ids;
  for (auto& h : halves) ids.push_back((*h.Task(&Recorder::Gpus).Remote().Get())[0]);
  EXPECT_EQ(ids[0], ids[1]) << "two halves share one device before another is used";
  EXPECT_NE(ids[2], ids[0]);
  auto bad = rayx::Task(Square).SetResources({{"GPU", 1.5}}).Remote(1);
  try {
    bad.Get(10000);
    FAIL() << "a 1.5-GPU task ran";
  } catch (const rayx::TaskError& e) {
    EXPECT_EQ(e.type(), "InvalidArgument") << e.what();
    EXPECT_EQ(e.kind(), rayx::TaskErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("whole number of devices"), std::string::npos)
        << e.what();
  }
}

TEST_F(Runtime, ActorCallsFromOneCallerRunInOrder) {
  auto actor = rayx::Actor(Recorder::Create).Remote(0);
  std::vector<rayx::ObjectRef<int>> refs;
  for (int i = 0; i < 300; ++i) refs.push_back(actor.Task(&Recorder::Record).Remote(i));
  auto seen = *actor.Task(&Recorder::Seen).Remote().Get();
  ASSERT_EQ(seen.size(), 300u);
  for (int i = 0; i < 300; ++i) EXPECT_EQ(seen[i], i);
  EXPECT_EQ(*refs.back().Get(), 299 * 300 / 2);
}

TEST_F(Runtime, ABurstOfCallsQueuedBeforeTheActorStartsRunsInOrder) {
  // All queued while the actor's worker starts, then sent a window at a time.
  auto actor = rayx::Actor(Recorder::Create).Remote(0);
  constexpr int kCalls = 20000;
  std::vector<rayx::ObjectRef<int>> refs;
  refs.reserve(kCalls);
  for (int i = 0; i < kCalls; ++i) refs.push_back(actor.Task(&Recorder::Record).Remote(i % 7));
  auto seen = *actor.Task(&Recorder::Seen).Remote().Get();
  ASSERT_EQ(seen.size(), static_cast<size_t>(kCalls));
  int total = 0;
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_EQ(seen[i], i % 7) << i;
    total += i % 7;
    if (i % 1000 == 999) {
      ASSERT_EQ(*refs[i].Get(), total) << i;
    }
  }
}

TEST_F(Runtime, AQuickResultIsNotHeldBackByASlowCallBehindIt) {
  auto actor = rayx::Actor(Recorder::Create).Remote(0);
  ASSERT_EQ(*actor.Task(&Recorder::Total).Remote().Get(), 0);
  // Submitted back to back, the two calls travel to the worker together; the
  // worker sends the first result before it starts the long call.
  auto quick = actor.Task(&Recorder::Record).Remote(5);
  auto slow = actor.Task(&Recorder::Sleep).Remote(5000);
  auto start = std::chrono::steady_clock::now();
  // Held back, it would come after the 5 s call; 4 s leave a loaded machine room.
  EXPECT_EQ(*quick.Get(4000), 5);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(4000));
  EXPECT_EQ(*slow.Get(), 5000);
}

TEST_F(Runtime, ActorCallWaitsForAPendingArgumentWithoutReordering) {
  auto actor = rayx::Actor(Recorder::Create).Remote(0);
  auto slow = rayx::Task(SlowSquare).Remote(3, 200);  // 9, later
  actor.Task(&Recorder::Record).Remote(slow);
  actor.Task(&Recorder::Record).Remote(1);
  auto seen = *actor.Task(&Recorder::Seen).Remote().Get();
  EXPECT_EQ(seen, (std::vector<int>{9, 1}));
}

TEST_F(Runtime, WaitSplitsReadyFromNotReadyAndHonoursTheTimeout) {
  auto slow = rayx::Task(SlowSquare).Remote(1, 3000);
  auto fast1 = rayx::Task(Square).Remote(2);
  auto fast2 = rayx::Task(Square).Remote(3);
  std::vector<rayx::ObjectRef<int>> refs = {slow, fast1, fast2};
  auto two = rayx::Wait(refs, 2, 10000);
  EXPECT_EQ(two.ready.size(), 2u);
  ASSERT_EQ(two.unready.size(), 1u);
  EXPECT_EQ(two.unready[0].ID(), slow.ID());
  auto start = std::chrono::steady_clock::now();
  auto three = rayx::Wait(refs, 3, 200);  // the slow one cannot make it
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(three.ready.size(), 2u);
  EXPECT_LT(took, std::chrono::milliseconds(2500));
  EXPECT_THROW(slow.Get(50), rayx::GetTimeoutError);
  EXPECT_THROW(rayx::Wait(refs, 4, 0), std::invalid_argument);
}

TEST_F(Runtime, RemoteExceptionReachesGetWithTypeMessageFunctionAndNode) {
  auto ref = rayx::Task(Throws).Remote(-7);
  try {
    ref.Get();
    FAIL() << "no exception";
  } catch (const rayx::TaskError& e) {
    EXPECT_EQ(e.type(), "std::invalid_argument");
    EXPECT_EQ(e.kind(), rayx::TaskErrorKind::kException);
    EXPECT_EQ(e.remote_message(), "x must not be negative, got -7");
    EXPECT_EQ(e.function(), "Throws");
    EXPECT_EQ(e.node(), "127.0.0.1");
  }
  EXPECT_EQ(*rayx::Task(Throws).Remote(7).Get(), 7);  // the worker survived
}

TEST_F(Runtime, CrashingWorkerFailsItsResultInsteadOfHanging) {
  auto ref = rayx::Task(Crashes).Remote();
  try {
    ref.Get(20000);
    FAIL() << "no exception";
  } catch (const rayx::TaskError& e) {
    EXPECT_EQ(e.type(), "WorkerCrashed") << e.what();
    EXPECT_EQ(e.kind(), rayx::TaskErrorKind::kWorkerCrashed);
    EXPECT_NE(e.remote_message().find("died"), std::string::npos) << e.what();
  }
  EXPECT_EQ(*rayx::Task(Square).Remote(6).Get(), 36);  // later tasks get a new worker
}

TEST_F(Runtime, KilledActorProcessFailsPendingAndLaterCalls) {
  auto actor = rayx::Actor(Recorder::Create).Remote(0);
  int pid = *actor.Task(&Recorder::Pid).Remote().Get();
  auto pending = actor.Task(&Recorder::Sleep).Remote(5000);  // in flight or queued: either way it must fail
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  try {
    pending.Get(20000);
    FAIL() << "no exception";
  } catch (const rayx::TaskError& e) {
    EXPECT_EQ(e.type(), "ActorDied") << e.what();
    EXPECT_EQ(e.kind(), rayx::TaskErrorKind::kActorDied);
  }
  EXPECT_THROW(actor.Task(&Recorder::Total).Remote().Get(20000), rayx::TaskError);
}

TEST_F(Runtime, RetryExceptionsRunsAThrowingTaskAgainWithinMaxRetries) {
  char dir[] = "/tmp/rayx-flaky-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string base = dir;
  // Two throws, three tries allowed: the third run's result.
  EXPECT_EQ(*rayx::Task(FlakyUntil).SetRetryExceptions(true).Remote(base + "/a", 2).Get(20000), 3);
  // Without retry_exceptions the first exception is the result.
  try {
    rayx::Task(FlakyUntil).Remote(base + "/b", 2).Get(20000);
    FAIL() << "no exception";
  } catch (const rayx::TaskError& e) {
    EXPECT_NE(std::string(e.what()).find("flaky run 1"), std::string::npos) << e.what();
  }
  // Retries used up: the last exception.
  try {
    rayx::Task(FlakyUntil).SetRetryExceptions(true).SetMaxRetries(1).Remote(base + "/c", 5).Get(20000);
    FAIL() << "no exception";
  } catch (const rayx::TaskError& e) {
    EXPECT_NE(std::string(e.what()).find("flaky run 2"), std::string::npos) << e.what();
  }
  for (const char* f : {"/a", "/b", "/c"}) std::remove((base + f).c_str());
  rmdir(dir);
}

bool WaitGone(int pid) {
  return rayx::testing::WaitUntil([&] { return kill(pid, 0) != 0; }, 10000);
}

TEST_F(Runtime, ARestartableActorComesBackWithItsConstructorRunAgain) {
  auto actor = rayx::Actor(Recorder::Create).SetMaxRestarts(1).SetMaxTaskRetries(1).Remote(100);
  EXPECT_EQ(*actor.Task(&Recorder::Record).Remote(5).Get(), 105);
  int first = *actor.Task(&Recorder::Pid).Remote().Get();
  ASSERT_EQ(kill(first, SIGKILL), 0);
  ASSERT_TRUE(WaitGone(first));
  // Sent before or after the loss is seen: a call with a task retry reaches
  // the new instance, whose state is the constructor's again.
  EXPECT_EQ(*actor.Task(&Recorder::Total).Remote().Get(20000), 100);
  int second = *actor.Task(&Recorder::Pid).Remote().Get(20000);
  EXPECT_NE(second, first);
  EXPECT_EQ(*actor.Task(&Recorder::Record).Remote(1).Get(20000), 101);

  // The one restart is used up: the next death is final, and says so.
  ASSERT_EQ(kill(second, SIGKILL), 0);
  ASSERT_TRUE(WaitGone(second));
  try {
    actor.Task(&Recorder::Total).Remote().Get(20000);
    FAIL() << "a call to an actor with no restarts left succeeded";
  } catch (const rayx::TaskError& e) {
    EXPECT_EQ(e.type(), "ActorDied") << e.what();
    EXPECT_EQ(e.kind(), rayx::TaskErrorKind::kActorDied);
    EXPECT_NE(std::string(e.what()).find("restarted 1 times already (max_restarts 1)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(Runtime, AHandleInAnotherProcessFindsARestartedNamedActor) {
  auto target =
      rayx::Actor(Recorder::Create).SetName("phoenix").SetMaxRestarts(-1).Remote(0);
  int first = *target.Task(&Recorder::Pid).Remote().Get();
  auto relay = rayx::Actor(Relay::Create).Remote(target);
  EXPECT_EQ(*relay.Task(&Relay::TargetPid).Remote().Get(20000), first);
  ASSERT_EQ(kill(first, SIGKILL), 0);
  ASSERT_TRUE(WaitGone(first));
  // The relay's handle does not own the actor: it looks the new worker up by
  // name. A call in flight at the loss fails; later ones reach the new one.
  int seen = 0;
  std::string last_error;
  ASSERT_TRUE(rayx::testing::WaitUntil(
      [&] {
        try {
          seen = *relay.Task(&Relay::TargetPid).Remote().Get(20000);
          return seen != first;
        } catch (const rayx::TaskError& e) {
          last_error = e.what();
          return false;
        }
      },
      20000))
      << "the relay never reached the restarted actor; last error: " << last_error;
  EXPECT_EQ(seen, *target.Task(&Recorder::Pid).Remote().Get(20000));
  target.Kill();
}

// As in Ray, a name is taken when the actor is created: while its constructor
// runs, a second actor cannot have it, and others find it and queue calls.
TEST_F(Runtime, ANamedActorIsFoundAndItsNameHeldWhileItsConstructorRuns) {
  auto slow = rayx::Actor(Recorder::CreateSlowly).SetName("slowpoke").Remote(5, 3000);
  try {
    rayx::Actor(Recorder::Create).SetName("slowpoke").Remote(0);
    FAIL() << "a second actor took the name of one still being constructed";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("constructor is still running"), std::string::npos)
        << e.what();
  }
  // Another process looks it up by name at once (a task), and one is given
  // its handle before it runs (an actor's constructor argument).
  auto by_name = rayx::Task(TotalOfNamed).Remote(std::string("slowpoke"));
  auto relay = rayx::Actor(Relay::Create).Remote(slow);
  EXPECT_EQ(*by_name.Get(30000), 5);
  int pid = *slow.Task(&Recorder::Pid).Remote().Get(30000);
  EXPECT_EQ(*relay.Task(&Relay::TargetPid).Remote().Get(30000), pid);
  slow.Kill();
  relay.Kill();
}

TEST_F(Runtime, ANameIsFreeAgainWhenItsActorsConstructorFails) {
  auto bad = rayx::Actor(Recorder::CreateOrThrow).SetName("fragile").Remote(-1);
  EXPECT_THROW(bad.Task(&Recorder::Total).Remote().Get(30000), rayx::TaskError);
  // Its owner drops the name when it hears of the failure (a message to the
  // head of its own, so it may land just after the Get above).
  ASSERT_TRUE(rayx::testing::WaitUntil(
      [] {
        try {
          rayx::GetActor<Recorder>("fragile");
          return false;
        } catch (const std::runtime_error&) {
          return true;
        }
      },
      10000))
      << "the failed actor's name stayed taken";
  auto good = rayx::Actor(Recorder::CreateOrThrow).SetName("fragile").Remote(3);
  EXPECT_EQ(*rayx::Task(TotalOfNamed).Remote(std::string("fragile")).Get(30000), 3);
  good.Kill();
}

// The Python bindings end long waits on Ctrl-C through an InterruptScope.
TEST_F(Runtime, AnInterruptScopeEndsABlockingGetBetweenSlices) {
  auto slow = rayx::Task(SlowSquare).Remote(3, 3000);
  int checks = 0;
  auto start = std::chrono::steady_clock::now();
  {
    rayx::detail::InterruptScope scope([&] {
      if (++checks == 3) throw rayx::detail::Interrupted{};
    });
    EXPECT_THROW(rayx::detail::GetBytes(slow.handle(), 60000), rayx::detail::Interrupted);
  }
  EXPECT_EQ(checks, 3);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(2500))
      << "the wait was not cut into slices";
  // A timeout still names the whole wait, and without a scope Get waits as before.
  {
    rayx::detail::InterruptScope scope([] {});
    try {
      rayx::detail::GetBytes(slow.handle(), 300);
      FAIL() << "ready after 300 ms";
    } catch (const rayx::GetTimeoutError& e) {
      EXPECT_NE(std::string(e.what()).find("within 300 ms"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(*slow.Get(30000), 9);
}

TEST_F(Runtime, KillStopsTheActor) {
  auto actor = rayx::Actor(Recorder::Create).Remote(0);
  int pid = *actor.Task(&Recorder::Pid).Remote().Get();
  actor.Kill();
  EXPECT_TRUE(rayx::testing::WaitUntil([&] { return kill(pid, 0) != 0; }, 10000))
      << "the actor's process still runs";
  EXPECT_THROW(actor.Task(&Recorder::Total).Remote().Get(20000), rayx::TaskError);
}

TEST_F(Runtime, UnregisteredFunctionIsNamedInTheError) {
  try {
    rayx::Task(NotRegistered).Remote(1);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("NotRegistered"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("RAYX_REMOTE"), std::string::npos) << e.what();
  }
}

TEST_F(Runtime, ActorHandlesCanBePassedToTasks) {
  auto actor = rayx::Actor(Recorder::Create).Remote(10);
  actor.Task(&Recorder::Total).Remote().Get();  // running before its handle travels
  EXPECT_EQ(*rayx::Task(AddThroughHandle).Remote(actor, 5).Get(), 15);
  EXPECT_EQ(*actor.Task(&Recorder::Total).Remote().Get(), 15);
}

TEST_F(Runtime, NamedDetachedActorOutlivesItsJob) {
  auto detached =
      rayx::Actor(Recorder::Create).SetName("keeper").SetLifetime(rayx::Detached).Remote(40);
  detached.Task(&Recorder::Record).Remote(2).Get();
  auto plain = rayx::Actor(Recorder::Create).SetName("ephemeral").Remote(0);
  plain.Task(&Recorder::Total).Remote().Get();
  // The same job finds both by name.
  EXPECT_EQ(*rayx::GetActor<Recorder>("ephemeral").Task(&Recorder::Total).Remote().Get(), 0);
  EXPECT_THROW(rayx::Actor(Recorder::Create).SetName("keeper").Remote(0), std::invalid_argument);

  // A new job: the detached actor is there with its state, the other is gone.
  rayx::Shutdown();
  rayx::Options options;
  options.address = cluster_->address();
  options.token = cluster_->token();
  rayx::Init(options);
  auto again = rayx::GetActor<Recorder>("keeper");
  EXPECT_EQ(*again.Task(&Recorder::Total).Remote().Get(), 42);
  // Its job ended, yet it still starts tasks of its own.
  EXPECT_EQ(*again.Task(&Recorder::SquareByTask).Remote(7).Get(60000), 49);
  EXPECT_THROW(rayx::GetActor<Recorder>("ephemeral"), std::runtime_error);
  again.Kill();
}

// A detached actor outlives its job, so no owner is left to return its lease
// when its worker dies: the agent tells the head, which frees its resources
// and its name.
TEST_F(Runtime, ADetachedActorWhoseWorkerDiesAfterItsJobFreesItsResourcesAndName) {
  auto orphan = rayx::Actor(Recorder::Create)
                    .SetName("orphan")
                    .SetLifetime(rayx::Detached)
                    .SetResources({{"CPU", 2}})
                    .Remote(0);
  pid_t pid = *orphan.Task(&Recorder::Pid).Remote().Get();
  rayx::Shutdown();  // its job ends; the actor stays
  rayx::Options options;
  options.address = cluster_->address();
  options.token = cluster_->token();
  rayx::Init(options);
  ASSERT_EQ(*rayx::GetActor<Recorder>("orphan").Task(&Recorder::Pid).Remote().Get(), pid);
  auto held = cluster_->GetStatus();
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->AvailableResources()["CPU"], 3);

  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  rayx::Status freed = cluster_->WaitFor(
      [](const rayx::ClusterStatus& s) { return s.AvailableResources().at("CPU") == 5; }, 10000);
  EXPECT_TRUE(freed.ok()) << "the dead detached actor's 2 CPUs stay booked: " << freed;
  try {
    rayx::GetActor<Recorder>("orphan");
    ADD_FAILURE() << "the dead detached actor's name still resolves";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("orphan"), std::string::npos) << e.what();
  }
}

// A restartable detached actor outlives its owner, so when its worker dies
// after its job ended the head restarts it: its constructor runs again in a
// new worker, the name points there, and a handle from a later job reaches it.
// Once its restarts are spent, it is gone for good.
TEST_F(Runtime, TheHeadRestartsADetachedActorWhoseOwnerIsGone) {
  auto reborn = rayx::Actor(Recorder::Create)
                     .SetName("reborn")
                     .SetLifetime(rayx::Detached)
                     .SetMaxRestarts(1)
                     .Remote(7);
  EXPECT_EQ(*reborn.Task(&Recorder::Record).Remote(5).Get(), 12);
  pid_t first = *reborn.Task(&Recorder::Pid).Remote().Get();
  rayx::Shutdown();  // its owner's job ends
  rayx::Options options;
  options.address = cluster_->address();
  options.token = cluster_->token();
  rayx::Init(options);
  auto handle = rayx::GetActor<Recorder>("reborn");
  ASSERT_EQ(*handle.Task(&Recorder::Pid).Remote().Get(), first);

  ASSERT_EQ(::kill(first, SIGKILL), 0);
  pid_t second = 0;
  ASSERT_TRUE(rayx::testing::WaitUntil(
      [&] {
        try {
          second = *handle.Task(&Recorder::Pid).Remote().Get(10000);
        } catch (const std::exception&) {
          return false;  // the call in flight when it died
        }
        return second != first;
      },
      20000))
      << "the detached actor was not restarted after its worker died";
  EXPECT_TRUE(rayx::testing::PidAlive(second));
  EXPECT_EQ(*handle.Task(&Recorder::Total).Remote().Get(), 7) << "its constructor runs again";
  EXPECT_EQ(*rayx::GetActor<Recorder>("reborn").Task(&Recorder::Pid).Remote().Get(), second);

  // No restarts left: the next death is final, and the name goes with it
  // (once the head hears of the death from the agent).
  ASSERT_EQ(::kill(second, SIGKILL), 0);
  EXPECT_TRUE(rayx::testing::WaitUntil(
      [] {
        try {
          rayx::GetActor<Recorder>("reborn");
          return false;
        } catch (const std::runtime_error&) {
          return true;
        }
      },
      10000))
      << "the name of an actor whose restarts were spent still resolves";
  try {
    handle.Task(&Recorder::Total).Remote().Get(20000);
    ADD_FAILURE() << "a call reached an actor whose restarts were spent";
  } catch (const rayx::TaskError& e) {
    EXPECT_NE(std::string(e.what()).find("ActorDied"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("died"), std::string::npos) << e.what();
  }
}

TEST_F(Runtime, DroppedReferencesFreeTheirObjects) {
  auto* runtime = rayx::detail::CurrentRuntime();
  ASSERT_NE(runtime, nullptr);
  size_t baseline = runtime->ObjectCount();
  {
    std::vector<rayx::ObjectRef<std::vector<int>>> refs;
    for (int i = 0; i < 100; ++i) refs.push_back(rayx::Put(std::vector<int>(1000, i)));
    std::vector<rayx::ObjectRef<int>> results;
    for (int i = 0; i < 100; ++i) results.push_back(rayx::Task(Square).Remote(i));
    rayx::Get(results);
    EXPECT_EQ(runtime->ObjectCount(), baseline + 200);
    auto copy = refs[0];  // copies share one reference
    refs.clear();
    EXPECT_EQ(runtime->ObjectCount(), baseline + 101);
  }
  EXPECT_EQ(runtime->ObjectCount(), baseline);
}

// Regression: idle task workers are handed back (their connections closed
// with a disconnect monitor attached); the runtime must keep working after.
TEST_F(Runtime, KeepsWorkingAfterIdleWorkersAreHandedBack) {
  for (int round = 0; round < 3; ++round) {
    std::vector<rayx::ObjectRef<int>> refs;
    for (int i = 0; i < 20; ++i) refs.push_back(rayx::Task(Square).Remote(i));
    EXPECT_EQ(*refs.back().Get(20000), 361);
    // Every lease returned: all CPUs free again.
    ASSERT_TRUE(cluster_->WaitFor([](const rayx::ClusterStatus& s) {
                   return s.AvailableResources()["CPU"] == 5;
                 }, 10000).ok());
    auto actor = rayx::Actor(Recorder::Create).Remote(round);
    EXPECT_EQ(*actor.Task(&Recorder::Total).Remote().Get(20000), round);
    actor.Kill();
  }
}

TEST_F(Runtime, TheHeadIsNotOnTheTaskPath) {
  auto before = cluster_->GetStatus();
  ASSERT_TRUE(before.ok());
  const auto started = std::chrono::steady_clock::now();
  std::vector<rayx::ObjectRef<int>> refs;
  for (int i = 0; i < 10000; ++i) refs.push_back(rayx::Task(Square).Remote(i % 100));
  int64_t sum = 0;
  for (auto& v : rayx::Get(refs)) sum += *v;
  EXPECT_EQ(sum, 100 * 328350);
  auto after = cluster_->GetStatus();
  ASSERT_TRUE(after.ok());
  // Leases and the two status calls: a few dozen, not 10,000. Besides them,
  // every node's heartbeats, however long the tasks took on a loaded machine
  // (one per period per node, two periods more per node for the edges).
  const int64_t elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::steady_clock::now() - started)
                                 .count();
  const uint64_t heartbeats =
      after->nodes.size() * static_cast<uint64_t>(elapsed_ms / 250 + 2);
  uint64_t head_messages = after->head_messages - before->head_messages;
  EXPECT_LT(head_messages, 100u + heartbeats)
      << head_messages << " head messages for 10000 tasks in " << elapsed_ms << " ms";
}

}  // namespace

// A driver that creates a detached named actor and exits at once hands it to
// the head, which creates it again; its constructor (2.5 s) may outlast the
// agent's worker start limit (1 s here), since the worker says CONSTRUCTING.
TEST(HandOver, ADeployedDetachedActorIsCreatedByTheHeadPastTheWorkerStartLimit) {
  LocalCluster::Options options;
  options.head_node.num_cpus = 2;
  options.head_node.extra_args = {"--worker-start-timeout-ms", "1000"};
  auto started = LocalCluster::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<LocalCluster> cluster = std::move(*started);
  rayx::Options init;
  init.address = cluster->address();
  init.token = cluster->token();
  rayx::Init(init);
  rayx::Actor(Recorder::CreateSlowly)
      .SetName("deployed")
      .SetLifetime(rayx::Detached)
      .Remote(5, 2500);
  rayx::Shutdown();  // at once: its constructor has not run yet

  rayx::Init(init);  // a later job
  auto found = rayx::GetActor<Recorder>("deployed");
  EXPECT_EQ(*found.Task(&Recorder::Total).Remote().Get(60000), 5);
  found.Kill();
  rayx::Shutdown();
  auto status = cluster->WaitFor(
      [](const rayx::ClusterStatus& s) { return s.AvailableResources()["CPU"] == 2; }, 10000);
  EXPECT_TRUE(status.ok()) << "the killed actor's resources were not freed";
}

// Every task of the tree holds a CPU until it blocks; 15 tasks on 2 CPUs
// finish because blocked ones lend theirs (without lending this hangs with
// both CPUs held by tasks waiting for children that cannot start).
TEST(Lending, ARecursiveTreeOfTasksFinishesOnTwoCpus) {
  LocalCluster::Options options;
  options.head_node.num_cpus = 2;
  auto started = LocalCluster::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<LocalCluster> cluster = std::move(*started);
  rayx::Options init;
  init.address = cluster->address();
  init.token = cluster->token();
  rayx::Init(init);
  EXPECT_EQ(*rayx::Task(TreeSize).Remote(3).Get(120000), 15);
  rayx::Shutdown();
  // Every CPU is free again, none overcommitted, nobody blocked.
  auto settled = cluster->WaitFor(
      [](const rayx::ClusterStatus& s) {
        return s.AvailableResources()["CPU"] == 2 && s.blocked_workers == 0 &&
               s.nodes.at(0).cpu_overcommitted == 0;
      },
      10000);
  EXPECT_TRUE(settled.ok()) << settled;
}

int main(int argc, char** argv) {
  if (std::getenv("RAYX_WORKER_MODE")) rayx::Init(argc, argv);  // serves tasks, never returns
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
