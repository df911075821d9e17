// Reading a node's role from SLURM's or a container platform's variables.
#include "platform_env.h"

#include <gtest/gtest.h>

#include <map>

#include "launch_supervisor.h"

namespace rayx::cli {
namespace platform_env_test {  // this file's own (unit tests compile in batches)

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(PlatformEnv, ReadsAContainerPlatformsTorchVariables) {
  auto role = DetectPlatformRole(Env({{"RANK", "2"},
                                      {"WORLD_SIZE", "4"},
                                      {"MASTER_ADDR", "job-worker-0"},
                                      {"MASTER_PORT", "29500"}}));
  ASSERT_TRUE(role.ok()) << role.status();
  EXPECT_EQ(role->node_rank, 2);
  EXPECT_EQ(role->num_nodes, 4);
  EXPECT_EQ(role->head_host, "job-worker-0");
  EXPECT_EQ(role->head_port, uint16_t{29500});
  EXPECT_EQ(role->source, "RANK/WORLD_SIZE");
}

TEST(PlatformEnv, MasterPortIsOptional) {
  auto role =
      DetectPlatformRole(Env({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "10.0.0.1"}}));
  ASSERT_TRUE(role.ok()) << role.status();
  EXPECT_FALSE(role->head_port.has_value());
}

TEST(PlatformEnv, NamesWhatIsMissingOrMalformed) {
  auto none = DetectPlatformRole(Env({}));
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("SLURM_PROCID"), std::string::npos);

  auto partial = DetectPlatformRole(Env({{"RANK", "1"}, {"WORLD_SIZE", "2"}}));
  EXPECT_EQ(partial.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(partial.status().message().find("MASTER_ADDR is not set"), std::string::npos)
      << partial.status();

  auto past = DetectPlatformRole(Env({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}));
  EXPECT_NE(past.status().message().find("RANK=2 is not a node index below WORLD_SIZE=2"),
            std::string::npos)
      << past.status();

  auto junk = DetectPlatformRole(Env({{"RANK", "one"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}));
  EXPECT_NE(junk.status().message().find("RANK=one"), std::string::npos) << junk.status();

  auto port = DetectPlatformRole(
      Env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}));
  EXPECT_NE(port.status().message().find("MASTER_PORT=70000 is not a port"), std::string::npos)
      << port.status();

  auto zero = DetectPlatformRole(Env({{"RANK", "0"}, {"WORLD_SIZE", "0"}, {"MASTER_ADDR", "h"}}));
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
}

TEST(PlatformEnv, ReadsSlurmInsideSrunBeforeTorchVariables) {
  auto role = DetectPlatformRole(Env({{"SLURM_PROCID", "1"},
                                      {"SLURM_NODEID", "1"},
                                      {"SLURM_NNODES", "3"},
                                      {"SLURM_NTASKS", "3"},
                                      {"SLURM_JOB_NODELIST", "gpu[07-09]"},
                                      {"SLURM_STEP_NODELIST", "gpu[08-09],gpu11"},
                                      {"RANK", "5"},
                                      {"WORLD_SIZE", "8"},
                                      {"MASTER_ADDR", "elsewhere"}}));
  ASSERT_TRUE(role.ok()) << role.status();
  EXPECT_EQ(role->source, "SLURM");
  EXPECT_EQ(role->node_rank, 1);
  EXPECT_EQ(role->num_nodes, 3);
  EXPECT_EQ(role->head_host, "gpu08") << "the step's first node, not the job's";
  EXPECT_FALSE(role->head_port.has_value());
}

TEST(PlatformEnv, RefusesSeveralSlurmTasksPerNode) {
  auto role = DetectPlatformRole(Env({{"SLURM_PROCID", "3"},
                                      {"SLURM_NODEID", "1"},
                                      {"SLURM_NNODES", "2"},
                                      {"SLURM_NTASKS", "8"},
                                      {"SLURM_NODELIST", "n[1-2]"}}));
  EXPECT_EQ(role.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(role.status().message().find("8 tasks on 2 nodes"), std::string::npos) << role.status();
  EXPECT_NE(role.status().message().find("--ntasks-per-node=1"), std::string::npos);
}

TEST(PlatformEnv, NodeZeroNeverAdvertisesLoopbackOrAnotherMachinesAddress) {
  EXPECT_FALSE(NodeZeroMayAdvertise("127.0.0.1")) << "Kubeflow's MASTER_ADDR=localhost";
  EXPECT_FALSE(NodeZeroMayAdvertise("127.0.1.1")) << "Debian's hostname entry";
  EXPECT_FALSE(NodeZeroMayAdvertise("0.0.0.0"));
  EXPECT_FALSE(NodeZeroMayAdvertise("203.0.113.7")) << "not an address of this machine";
}

TEST(PlatformEnv, FirstSlurmHostOfCompressedLists) {
  EXPECT_EQ(*FirstSlurmHost("node1"), "node1");
  EXPECT_EQ(*FirstSlurmHost("a1,a2"), "a1");
  EXPECT_EQ(*FirstSlurmHost("gpu[07-09,12],cpu1"), "gpu07");
  EXPECT_EQ(*FirstSlurmHost("rack[3,5]-n1"), "rack3-n1");
  EXPECT_EQ(*FirstSlurmHost("x[001]"), "x001");
  EXPECT_EQ(*FirstSlurmHost("gpu-node.example.org"), "gpu-node.example.org");
  for (const char* bad : {"", "[1-2]", "n[", "n]", "n[a-b]", ",n1", "n[1-2]x[3]"}) {
    auto r = FirstSlurmHost(bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
  }
}

// rayx launch numbers nodes by the platform's rank label when every placed
// node has a distinct numeric one; anything less keeps placement order.
TEST(NodeOrderByRankLabel, FollowsThePlatformsNodeRanksOnlyWhenEveryNodeHasOne) {
  std::vector<protocol::BundleLocation> placed(3);
  placed[0].node_id = "a";
  placed[1].node_id = "b";
  placed[2].node_id = "c";
  std::map<std::string, LabelMap> labels = {{"a", {{kNodeRankLabel, "2"}}},
                                            {"b", {{kNodeRankLabel, "0"}, {"zone", "x"}}},
                                            {"c", {{kNodeRankLabel, "10"}}}};
  EXPECT_EQ(NodeOrderByRankLabel(placed, labels), (std::vector<size_t>{1, 0, 2}));
  auto missing = labels;
  missing["c"].erase(kNodeRankLabel);
  EXPECT_TRUE(NodeOrderByRankLabel(placed, missing).empty());
  auto twice = labels;
  twice["c"][kNodeRankLabel] = "0";
  EXPECT_TRUE(NodeOrderByRankLabel(placed, twice).empty());
  auto text = labels;
  text["a"][kNodeRankLabel] = "2x";
  EXPECT_TRUE(NodeOrderByRankLabel(placed, text).empty());
  EXPECT_TRUE(NodeOrderByRankLabel(placed, {}).empty());

  LaunchPlan plan;
  plan.group.locations = placed;
  EXPECT_EQ(plan.NodeLocation(0).node_id, "a") << "no order: placement order";
  plan.node_bundle = NodeOrderByRankLabel(placed, labels);
  EXPECT_EQ(plan.NodeLocation(0).node_id, "b");
  EXPECT_EQ(plan.BundleOf(2), 2u);
}

}  // namespace
}  // namespace rayx::cli
