// WorkerEnv: what a node agent writes is what a worker reads back, and bad values are named.
#include "worker/worker_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

namespace rayx {
namespace worker_env_test {  // this file's own (unit tests compile in batches)

WorkerEnv MakeEnv() {
  WorkerEnv env;
  env.ready_fd = 3;
  env.node_ip = "10.0.0.7";
  env.head_address = "10.0.0.1:6380";
  env.job_id = JobId::FromWire("job-1");
  env.lease_id = LeaseId::FromWire("lease-1");
  env.job_secret = "secret";
  env.cluster_key = "key";
  env.wire_security = "encrypted";
  env.store_dir = "/dev/shm/rayx-store-x";
  env.object_address = "tcp://10.0.0.7:4000";
  env.gpu_ids = {1, 3};
  env.package_hash = "abc";
  env.package_dir = "/tmp/pkg/abc";
  return env;
}

void ExpectSame(const WorkerEnv& a, const WorkerEnv& b) {
  EXPECT_EQ(a.ready_fd, b.ready_fd);
  EXPECT_EQ(a.node_ip, b.node_ip);
  EXPECT_EQ(a.head_address, b.head_address);
  EXPECT_EQ(a.job_id, b.job_id);
  EXPECT_EQ(a.lease_id, b.lease_id);
  EXPECT_EQ(a.job_secret, b.job_secret);
  EXPECT_EQ(a.cluster_key, b.cluster_key);
  EXPECT_EQ(a.wire_security, b.wire_security);
  EXPECT_EQ(a.store_dir, b.store_dir);
  EXPECT_EQ(a.object_address, b.object_address);
  EXPECT_EQ(a.gpu_ids, b.gpu_ids);
  EXPECT_EQ(a.visible_gpu_ids, b.visible_gpu_ids);
  EXPECT_EQ(a.local_rank, b.local_rank);
  EXPECT_EQ(a.package_hash, b.package_hash);
  EXPECT_EQ(a.package_dir, b.package_dir);
}

// Expects Decode to fail with InvalidArgument naming `variable`.
void ExpectRejected(const std::map<std::string, std::string>& vars, const std::string& variable) {
  auto decoded = WorkerEnv::Decode(vars);
  ASSERT_FALSE(decoded.ok()) << variable;
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(decoded.status().message().find(variable), std::string::npos)
      << decoded.status().message();
}

TEST(WorkerEnv, EncodeThenDecodeRoundTrips) {
  WorkerEnv env = MakeEnv();
  auto decoded = WorkerEnv::Decode(env.Encode());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ExpectSame(env, *decoded);
}

TEST(WorkerEnv, GroupRankRoundTripsWithItsGroupsDevices) {
  WorkerEnv env = MakeEnv();
  env.visible_gpu_ids = {0, 1, 2, 3};
  env.local_rank = 2;
  auto vars = env.Encode();
  EXPECT_EQ(vars["CUDA_VISIBLE_DEVICES"], "0,1,2,3");
  EXPECT_EQ(vars["RAYX_LOCAL_RANK"], "2");
  auto decoded = WorkerEnv::Decode(vars);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ExpectSame(env, *decoded);
}

TEST(WorkerEnv, EncodesTheVariablesWorkersAndUserCodeRead) {
  auto vars = MakeEnv().Encode();
  EXPECT_EQ(vars["RAYX_WORKER_MODE"], "1");
  EXPECT_EQ(vars["RAYX_WORKER_READY_FD"], "3");
  EXPECT_EQ(vars["RAYX_NODE_IP"], "10.0.0.7");
  EXPECT_EQ(vars["RAYX_ADDRESS"], "10.0.0.1:6380");
  // The job's credential, never the cluster token.
  EXPECT_EQ(vars["RAYX_JOB_SECRET"], "secret");
  EXPECT_EQ(vars.count("RAYX_CLUSTER_TOKEN"), 0u);
  EXPECT_EQ(vars["RAYX_CLUSTER_KEY"], "key");
  EXPECT_EQ(vars["RAYX_WIRE_SECURITY"], "encrypted");
  EXPECT_EQ(vars["RAYX_GPU_IDS"], "1,3");
  // A worker sees exactly its GPUs, numbered as NVML (which gave the ids) does.
  EXPECT_EQ(vars["CUDA_VISIBLE_DEVICES"], "1,3");
  EXPECT_EQ(vars["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
  EXPECT_EQ(vars["RAYX_PACKAGE_HASH"], "abc");
  EXPECT_EQ(vars.count("RAYX_LOCAL_RANK"), 0u);
}

TEST(WorkerEnv, NoGpusAndNoPackageEncodeEmptyDevicesAndNoPackageVariables) {
  WorkerEnv env = MakeEnv();
  env.gpu_ids.clear();
  env.package_hash.clear();
  env.package_dir.clear();
  auto vars = env.Encode();
  EXPECT_EQ(vars["CUDA_VISIBLE_DEVICES"], "");
  EXPECT_EQ(vars["RAYX_GPU_IDS"], "");
  EXPECT_EQ(vars.count("RAYX_PACKAGE_HASH"), 0u);
  auto decoded = WorkerEnv::Decode(vars);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(decoded->gpu_ids.empty());
}

TEST(WorkerEnv, MissingRequiredVariablesAreNamed) {
  for (const char* name :
       {"RAYX_WORKER_MODE", "RAYX_WORKER_READY_FD", "RAYX_NODE_IP", "RAYX_ADDRESS"}) {
    auto vars = MakeEnv().Encode();
    vars.erase(name);
    ExpectRejected(vars, name);
  }
}

TEST(WorkerEnv, GarbageValuesAreNamed) {
  auto with = [](const char* name, const char* value) {
    auto vars = MakeEnv().Encode();
    vars[name] = value;
    return vars;
  };
  ExpectRejected(with("RAYX_WORKER_READY_FD", "three"), "RAYX_WORKER_READY_FD");
  ExpectRejected(with("RAYX_WORKER_READY_FD", "-1"), "RAYX_WORKER_READY_FD");
  ExpectRejected(with("RAYX_WORKER_READY_FD", "3x"), "RAYX_WORKER_READY_FD");
  ExpectRejected(with("RAYX_GPU_IDS", "0,x"), "RAYX_GPU_IDS");
  ExpectRejected(with("RAYX_GPU_IDS", "0,,1"), "RAYX_GPU_IDS");
  ExpectRejected(with("RAYX_LOCAL_RANK", "first"), "RAYX_LOCAL_RANK");
  ExpectRejected(with("RAYX_ADDRESS", "10.0.0.1:notaport"), "RAYX_ADDRESS");
}

TEST(WorkerEnv, ParseIdListAcceptsEmptyAndCommaSeparatedIds) {
  auto none = WorkerEnv::ParseIdList("");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto some = WorkerEnv::ParseIdList("0,2,7");
  ASSERT_TRUE(some.ok());
  EXPECT_EQ(*some, (std::vector<int>{0, 2, 7}));
  EXPECT_FALSE(WorkerEnv::ParseIdList("a").ok());
}

// Sets the variables for one test and removes them afterwards.
class WorkerEnvFromEnvironment : public ::testing::Test {
 protected:
  void Set(const std::map<std::string, std::string>& vars) {
    for (const auto& [name, value] : vars) {
      ::setenv(name.c_str(), value.c_str(), 1);
      set_.push_back(name);
    }
  }
  void TearDown() override {
    for (const auto& name : set_) ::unsetenv(name.c_str());
  }

 private:
  std::vector<std::string> set_;
};

TEST_F(WorkerEnvFromEnvironment, ReadsWhatEncodeWrote) {
  WorkerEnv env = MakeEnv();
  Set(env.Encode());
  EXPECT_TRUE(WorkerEnv::InWorkerMode());
  auto read = WorkerEnv::FromEnvironment();
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSame(env, *read);
}

TEST_F(WorkerEnvFromEnvironment, ClearingLeavesADriverEnvironment) {
  Set(MakeEnv().Encode());
  WorkerEnv::ClearWorkerOnlyVariables();
  // A program started from a task is a driver ...
  EXPECT_FALSE(WorkerEnv::InWorkerMode());
  EXPECT_EQ(std::getenv("RAYX_WORKER_MODE"), nullptr);
  EXPECT_EQ(std::getenv("RAYX_WORKER_READY_FD"), nullptr);
  // ... while user code still sees where it runs.
  ASSERT_NE(std::getenv("RAYX_NODE_IP"), nullptr);
  EXPECT_STREQ(std::getenv("RAYX_NODE_IP"), "10.0.0.7");
  ASSERT_NE(std::getenv("RAYX_GPU_IDS"), nullptr);
  EXPECT_STREQ(std::getenv("RAYX_GPU_IDS"), "1,3");
}

TEST_F(WorkerEnvFromEnvironment, NotAWorkerIsReportedAsMissingWorkerMode) {
  ::unsetenv("RAYX_WORKER_MODE");
  EXPECT_FALSE(WorkerEnv::InWorkerMode());
  auto read = WorkerEnv::FromEnvironment();
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("RAYX_WORKER_MODE"), std::string::npos);
}

}  // namespace
}  // namespace rayx
