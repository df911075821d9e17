// `rayx status` rendering.
#include "status_format.h"

#include <gtest/gtest.h>

#include <string>

#include "util/test_helpers.h"

namespace rayx::cli {
namespace status_format_test {  // this file's own (unit tests compile in batches)

constexpr double kGiB = 1024.0 * 1024 * 1024;

NodeInfo MakeNode(char id, const std::string& address, bool head, double cpus, double gpus,
                  double memory_gib, double tpus = 0) {
  NodeInfo n;
  n.node_id = *NodeId::FromHex(std::string(32, id));
  n.address = address;
  n.hostname = "host-" + address;
  n.agent_pid = 1234;
  n.is_head_node = head;
  n.total = {{"CPU", cpus}, {"GPU", gpus}, {"memory", memory_gib * kGiB}};
  if (tpus > 0) n.total["tpu"] = tpus;
  n.available = n.total;
  n.rayx_version = "0.1.0";
  n.last_heartbeat_age_ms = 42;
  return n;
}

ClusterStatus MakeStatus() {
  ClusterStatus s;
  s.rayx_version = "0.1.0";
  s.cluster_id = "c0ffee";
  s.head_uptime_ms = 3'725'000;  // 1h 2m 5s
  s.heartbeat_period_ms = 250;
  s.node_timeout_ms = 1500;
  NodeInfo head = MakeNode('a', "10.0.0.1", true, 3, 0, 8);
  NodeInfo worker = MakeNode('b', "10.0.0.2", false, 2, 0, 8, 4);
  worker.labels = {{"zone", "us-east"}, {"accelerator", "H100"}};
  NodeInfo dead = MakeNode('c', "10.0.0.3", false, 16, 8, 64);
  dead.alive = false;
  dead.death_reason = "no heartbeat for 1600 ms";
  dead.available.clear();
  s.nodes = {head, worker, dead};
  return s;
}

using ::rayx::testing::Contains;

TEST(FormatClusterStatus, ListsAliveNodesAndMarksHead) {
  std::string out = FormatClusterStatus(MakeStatus(), "10.0.0.1:6380", 1'700'000'000'000, false);
  EXPECT_TRUE(Contains(out, "Cluster status: ")) << out;
  EXPECT_TRUE(Contains(out, "Cluster c0ffee at 10.0.0.1:6380 (rayx 0.1.0, head up 1h 2m 5s)"))
      << out;
  EXPECT_TRUE(Contains(out, " node_" + std::string(32, 'a') + "  10.0.0.1  (head)\n")) << out;
  EXPECT_TRUE(Contains(out, " node_" + std::string(32, 'b') + "  10.0.0.2\n")) << out;
}

TEST(FormatClusterStatus, DeadSectionShowsReason) {
  std::string out = FormatClusterStatus(MakeStatus(), "h:1", 0, false);
  size_t alive = out.find("Alive:");
  size_t dead = out.find("Dead:");
  ASSERT_NE(alive, std::string::npos);
  ASSERT_NE(dead, std::string::npos);
  size_t dead_line = out.find(" node_" + std::string(32, 'c') + "  10.0.0.3  no heartbeat for 1600 ms");
  ASSERT_NE(dead_line, std::string::npos) << out;
  EXPECT_GT(dead_line, dead);
  EXPECT_FALSE(Contains(out, "(no dead nodes)"));
  // The dead node is not listed as alive.
  EXPECT_EQ(out.find("node_" + std::string(32, 'c')), dead_line + 1);
}

TEST(FormatClusterStatus, UsageCountsOnlyAliveNodes) {
  ClusterStatus s = MakeStatus();
  s.nodes[1].available["CPU"] = 0.5;
  s.nodes[1].available["tpu"] = 1;
  s.nodes[0].available["memory"] = 6 * kGiB;
  std::string out = FormatClusterStatus(s, "h:1", 0, false);
  EXPECT_TRUE(Contains(out, " 1.5/5 CPU\n")) << out;
  EXPECT_TRUE(Contains(out, " 0/0 GPU\n")) << out;  // the dead node's 8 GPUs do not count
  EXPECT_TRUE(Contains(out, " 3/4 tpu\n")) << out;
  EXPECT_TRUE(Contains(out, " 2.00 GiB/16.00 GiB memory\n")) << out;
}

TEST(FormatClusterStatus, IdleClusterShowsZeroUsage) {
  std::string out = FormatClusterStatus(MakeStatus(), "h:1", 0, false);
  EXPECT_TRUE(Contains(out, " 0/5 CPU\n")) << out;
  EXPECT_TRUE(Contains(out, " 0/4 tpu\n")) << out;
  EXPECT_TRUE(Contains(out, "0 B/16.00 GiB memory\n")) << out;
  // CPU, GPU and memory come before custom resources.
  EXPECT_LT(out.find(" CPU\n"), out.find(" GPU\n"));
  EXPECT_LT(out.find(" GPU\n"), out.find(" memory\n"));
  EXPECT_LT(out.find(" memory\n"), out.find(" tpu\n"));
}

TEST(FormatClusterStatus, EmptyClusterSaysSo) {
  ClusterStatus s;
  s.cluster_id = "x";
  std::string out = FormatClusterStatus(s, "h:1", 0, false);
  EXPECT_TRUE(Contains(out, "(no alive nodes)")) << out;
  EXPECT_TRUE(Contains(out, "(no dead nodes)")) << out;
  EXPECT_TRUE(Contains(out, " 0/0 CPU\n")) << out;
}

TEST(FormatClusterStatus, NonVerboseHasNoNodeBlocks) {
  std::string out = FormatClusterStatus(MakeStatus(), "h:1", 0, false);
  EXPECT_FALSE(Contains(out, "Node: node_")) << out;
  EXPECT_FALSE(Contains(out, "labels:")) << out;
}

TEST(FormatClusterStatus, VerboseAddsNodeBlocksWithLabels) {
  std::string out = FormatClusterStatus(MakeStatus(), "h:1", 0, true);
  EXPECT_TRUE(Contains(out, "\nNode: node_" + std::string(32, 'a') + "\n")) << out;
  EXPECT_TRUE(Contains(out, "\nNode: node_" + std::string(32, 'b') + "\n")) << out;
  EXPECT_TRUE(Contains(out, "\nNode: node_" + std::string(32, 'c') + " (dead)\n")) << out;
  EXPECT_TRUE(Contains(out, "  labels: accelerator=H100,zone=us-east\n")) << out;
  EXPECT_TRUE(Contains(out, "hostname: host-10.0.0.2")) << out;
  EXPECT_TRUE(Contains(out, "last heartbeat: 42 ms ago")) << out;
  EXPECT_TRUE(Contains(out, "  died: no heartbeat for 1600 ms\n")) << out;
  EXPECT_TRUE(Contains(out, "  Resources: CPU 16, GPU 8, memory 64.00 GiB\n")) << out;
  EXPECT_TRUE(Contains(out, "   0/4 tpu\n")) << out;  // per-node usage, deeper indent
}

TEST(FormatResourceList, OrdersWellKnownFirstAndFormatsMemory) {
  ResourceMap r = {{"tpu", 4}, {"CPU", 2}, {"memory", 1.5 * kGiB}, {"GPU", 0}, {"a", 0.5}};
  EXPECT_EQ(FormatResourceList(r), "CPU 2, GPU 0, memory 1.50 GiB, a 0.5, tpu 4");
  EXPECT_EQ(FormatResourceList({{"tpu", 1}}), "tpu 1");
  EXPECT_EQ(FormatResourceList({}), "");
}

}  // namespace
}  // namespace rayx::cli

namespace rayx::cli {
namespace status_format_test {  // this file's own (unit tests compile in batches)

TEST(FormatClusterStatus, VerboseShowsEachNodesObjectStore) {
  ClusterStatus s;
  NodeInfo node;
  node.node_id = *NodeId::FromHex(std::string(32, 'd'));
  node.address = "10.0.0.9";
  node.total = {{"CPU", 1}};
  node.available = node.total;
  node.store_dir = "/dev/shm/rayx-store-abc";
  node.object_store_bytes = 3 * 1024 * 1024;
  node.object_store_capacity = 256 * 1024 * 1024;
  node.object_store_objects = 2;
  node.object_spilled_bytes = 5 * 1024 * 1024;
  node.object_spilled_objects = 4;
  s.nodes = {node};
  std::string out = FormatClusterStatus(s, "h:1", 0, true);
  EXPECT_NE(out.find("object store: 3.00 MiB of 256.00 MiB in /dev/shm/rayx-store-abc (2 "
                     "objects); spilled to disk: 5.00 MiB (4 objects)"),
            std::string::npos)
      << out;
  // The summary adds the nodes up.
  s.nodes.push_back(node);
  s.nodes.back().node_id = *NodeId::FromHex(std::string(32, 'e'));
  out = FormatClusterStatus(s, "h:1", 0, false);
  EXPECT_NE(out.find(" 6.00 MiB/512.00 MiB object store (4 objects), 10.00 MiB spilled to disk "
                     "(8 objects)"),
            std::string::npos)
      << out;
}

TEST(FormatClusterStatus, DemandsListPendingShapesWithCounts) {
  ClusterStatus s;
  s.pending_demands = {{"{CPU: 1, GPU: 1}", 8}};
  std::string out = FormatClusterStatus(s, "h:1", 0, false);
  EXPECT_NE(out.find("Demands:\n {CPU: 1, GPU: 1}: 8 pending"), std::string::npos) << out;
  EXPECT_EQ(out.find("(no resource demands)"), std::string::npos);
}

}  // namespace
}  // namespace rayx::cli
