// Failover times on a loopback cluster with the default heartbeat (250 ms) and
// node timeout (1500 ms) and 8 agents with one fake GPU each:
//   head:  SIGKILL the head, run the same `rayx start --head` again at once,
//          and time until a task that needs a new lease has run;
//   actor: SIGKILL the agent under a restartable one-GPU actor and time until
//          the actor answers again from another node.
// Prints each round and the medians. This binary is also its workers' program.
//
//   ./build/bin/rayx_failover_benchmark [rounds]
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "rayx/rayx.h"
#include "util/local_cluster.h"

namespace {

using rayx::testing::LocalCluster;
using rayx::testing::NodeHandle;

std::string Where() {
  const char* ip = std::getenv("RAYX_NODE_IP");
  return ip ? ip : "";
}
int Add(int a, int b) { return a + b; }

class Pinned {
 public:
  static Pinned* Create() { return new Pinned(); }
  std::string Where() { return ::Where(); }
};

RAYX_REMOTE(Where, Add, Pinned::Create, &Pinned::Where);

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

int Fail(const std::string& what) {
  std::cerr << "failover benchmark: " << what << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("RAYX_WORKER_MODE")) rayx::Init(argc, argv);  // serves tasks, never returns
  int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  constexpr int kAgents = 8;
  LocalCluster::Options options;  // the defaults of `rayx start`
  options.head_node.num_cpus = 1;
  options.head_node.num_gpus = 0;
  auto cluster = LocalCluster::Start(options);
  if (!cluster.ok()) return Fail(cluster.status().ToString());
  std::vector<NodeHandle> agents;
  auto node_for = [](int i) {
    return rayx::testing::NodeOptions{
        .num_cpus = 2, .num_gpus = 1,
        .extra_args = {"--node-ip-address", "127.0.0." + std::to_string(i + 2)}};
  };
  for (int i = 0; i < kAgents; ++i) {
    auto node = (*cluster)->AddNode(node_for(i));
    if (!node.ok()) return Fail(node.status().ToString());
    agents.push_back(*node);
  }
  rayx::Options init;
  init.address = (*cluster)->address();
  init.token = (*cluster)->token();
  rayx::Init(init);
  std::cout << "failover on loopback: head + " << kAgents << " agents, heartbeat "
            << options.heartbeat_period_ms << " ms, node timeout " << options.node_timeout_ms
            << " ms, " << rounds << " rounds\n";

  std::vector<double> head_ms, actor_ms;
  for (int r = 0; r < rounds; ++r) {
    // Head: down and up again; a new lease (a resource shape no worker holds yet).
    auto t0 = std::chrono::steady_clock::now();
    rayx::Status restarted = (*cluster)->RestartHead(0);
    if (!restarted.ok()) return Fail("restart the head: " + restarted.ToString());
    double cpus = 1.0 + 0.01 * (r + 1);  // a fresh shape each round: a new lease
    int sum = *rayx::Task(Add).SetResources({{"CPU", cpus}}).Remote(r, 1).Get(60000);
    if (sum != r + 1) return Fail("wrong task result");
    head_ms.push_back(MsSince(t0));

    // Actor: its node's agent dies; it comes back elsewhere.
    auto actor = rayx::Actor(Pinned::Create)
                     .SetResources({{"GPU", 1}})
                     .SetMaxRestarts(1)
                     .SetMaxTaskRetries(1)
                     .Remote();
    std::string ip = *actor.Task(&Pinned::Where).Remote().Get(60000);
    int index = std::atoi(ip.substr(ip.rfind('.') + 1).c_str()) - 2;  // 127.0.0.(i+2)
    if (index < 0 || index >= kAgents) return Fail("the actor runs at " + ip);
    auto t1 = std::chrono::steady_clock::now();
    if (!(*cluster)->KillNode(agents[static_cast<size_t>(index)]).ok()) {
      return Fail("could not kill the agent at " + ip);
    }
    std::string again = *actor.Task(&Pinned::Where).Remote().Get(60000);
    actor_ms.push_back(MsSince(t1));
    if (again == ip) return Fail("the actor answered from its dead node");
    actor.Kill();
    auto back = (*cluster)->AddNode(node_for(index));
    if (!back.ok()) return Fail(back.status().ToString());
    agents[static_cast<size_t>(index)] = *back;
    std::cout << "  round " << r + 1 << ": head SIGKILL -> new lease granted and run "
              << head_ms.back() << " ms; actor's node SIGKILL -> answer from " << again << " "
              << actor_ms.back() << " ms\n";
  }
  std::cout << "median: head SIGKILL -> new lease run " << Median(head_ms)
            << " ms (target <= 2000); actor node death -> answering again " << Median(actor_ms)
            << " ms (target <= 3000)\n";
  rayx::Shutdown();
  return (*cluster)->Stop().ok() ? 0 : 1;
}
