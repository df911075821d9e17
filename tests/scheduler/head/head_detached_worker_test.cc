// The runtime of a detached actor's worker may still register with the head
// after the actor's job has ended (a Python actor the head restarts loads its
// class from the KV), without reviving the job; nobody else may.
#include <gtest/gtest.h>

#include <string>

#include "head_fixture.h"

namespace rayx::scheduler {
namespace head_detached_worker_test {  // this file's own (unit tests compile in batches)

using namespace testing_fixture;  // NOLINT: the fixture's names and constants

class HeadDetachedWorkerTest : public HeadFixture {};

TEST_F(HeadDetachedWorkerTest, ADetachedActorsWorkerRegistersAfterItsJobEndedAndNoOtherDoes) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  JobId job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  LeaseId detached = Lease(job, {{"CPU", 1}}, "", kDriver, /*detached=*/true).lease_id;
  LeaseId plain = Lease(job, {{"CPU", 1}}).lease_id;
  protocol::FinishJobRequest finish;
  finish.job_id = job;
  Call<protocol::FinishJobReply>(finish, kDriver, 3);

  protocol::RegisterDriverRequest worker = Driver(job);
  worker.host_lease_id = detached;
  EXPECT_EQ(Call<protocol::RegisterDriverReply>(worker, "detached-worker", 4).job_id, job);
  protocol::KvGetRequest get{"ns", "key"};
  EXPECT_FALSE(Call<protocol::KvGetReply>(get, "detached-worker", 5).found)
      << "the registered worker may use the head";
  protocol::DriverHeartbeatRequest beat;
  beat.job_id = job;
  EXPECT_FALSE(Call<protocol::DriverHeartbeatReply>(beat, "detached-worker", 6).known)
      << "the job is not revived";

  for (const LeaseId& lease : {plain, LeaseId(), LeaseId::FromWire("no-such-lease")}) {
    worker.host_lease_id = lease;
    auto refused = CallError(worker, "other-worker", 7);
    EXPECT_EQ(refused.code, static_cast<uint8_t>(StatusCode::kNotFound)) << lease;
    EXPECT_NE(refused.message.find("is not running (it ended)"), std::string::npos)
        << refused.message;
  }
}

// After a head restart the worker reconnects at once, before its agent has
// rejoined: its lease is only stored then, and still counts.
TEST_F(HeadDetachedWorkerTest, ADetachedActorsWorkerRegistersBeforeItsNodeRejoins) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  JobId job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  LeaseId detached = Lease(job, {{"CPU", 1}}, "", kDriver, /*detached=*/true).lease_id;
  protocol::FinishJobRequest finish;
  finish.job_id = job;
  Call<protocol::FinishJobReply>(finish, kDriver, 3);
  StartHead();
  protocol::RegisterDriverRequest worker = Driver(job);
  worker.host_lease_id = detached;
  EXPECT_EQ(Call<protocol::RegisterDriverReply>(worker, "detached-worker", 4).job_id, job);
}

// The head forgets the runtimes of a job when it ends (it would otherwise
// remember every driver and worker runtime the cluster ever had): a driver
// that goes on is told to register again, and then that its job ended.
TEST_F(HeadDetachedWorkerTest, AnEndedJobsRuntimesAreForgotten) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  size_t agents = head_->authenticated_peer_count();
  JobId job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  EXPECT_EQ(Call<protocol::RegisterDriverReply>(Driver(job), "worker-runtime", 3).job_id, job);
  EXPECT_EQ(head_->authenticated_peer_count(), agents + 2);
  protocol::FinishJobRequest finish;
  finish.job_id = job;
  Call<protocol::FinishJobReply>(finish, kDriver, 4);
  EXPECT_EQ(head_->authenticated_peer_count(), agents);
  protocol::KvGetRequest get{"ns", "key"};
  auto refused = CallError(get, kDriver, 5);
  EXPECT_EQ(refused.code, static_cast<uint8_t>(StatusCode::kUnauthenticated));
  EXPECT_EQ(refused.message.rfind("register first", 0), 0u) << refused.message;
  auto ended = CallError(Driver(job), kDriver, 6);
  EXPECT_EQ(ended.code, static_cast<uint8_t>(StatusCode::kNotFound)) << ended.message;
}

}  // namespace
}  // namespace rayx::scheduler
