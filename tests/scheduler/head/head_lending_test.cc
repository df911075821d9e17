// LeaseBlockedNotice through the whole HeadService (router, credentials,
// status, list) and across a head restart, on a manual clock: a worker's
// runtime lends its lease's CPU while blocked, only its own job may, and a
// restarted head accounts leases that overcommit a node and learns again
// which are blocked.
#include <gtest/gtest.h>

#include <string>

#include "head_fixture.h"

namespace rayx::scheduler {
namespace head_lending_test {

using namespace testing_fixture;  // NOLINT: the fixture's names and constants

class HeadLendingTest : public HeadFixture {
 protected:
  void TearDown() override {
    if (head_) {
      rayx::Status books = head_->leases().CheckAccounting();
      EXPECT_TRUE(books.ok()) << books;
    }
    HeadFixture::TearDown();
  }

  // Handles `body` from `peer`, whose connection proved `who`; the reply's
  // type (0: none now).
  template <typename Req>
  uint16_t SendAs(const Req& body, const std::string& peer, const transport::Principal& who,
                  uint64_t id = 0) {
    Frames frames = transport::MakeMessage(body, id);
    auto reply = head_->Handle(frames, peer, who);
    if (!reply) return 0;
    auto env = protocol::Decode<protocol::Envelope>(transport::FrameView((*reply)[0]));
    return env.ok() ? env->t : 0;
  }
  // The runtime at `peer` inside `lease`'s worker registers, with its job's credential.
  void RegisterRuntime(const JobId& job, const LeaseId& lease, const std::string& peer,
                       uint64_t id) {
    protocol::RegisterDriverRequest runtime = Driver(job);
    runtime.host_lease_id = lease;
    EXPECT_EQ(SendAs(runtime, peer, transport::Principal::Job(job), id),
              static_cast<uint16_t>(MessageType::kRegisterDriverReply));
  }
  void Notify(const JobId& job, const LeaseId& lease, const std::string& peer, bool blocked) {
    protocol::LeaseBlockedNotice notice;
    notice.lease_id = lease;
    notice.blocked = blocked;
    EXPECT_EQ(SendAs(notice, peer, transport::Principal::Job(job)), 0u) << "a notice has no reply";
    ExpectBooksAgree();
  }
  void ExpectBooksAgree() {
    rayx::Status books = head_->leases().CheckAccounting();
    EXPECT_TRUE(books.ok()) << books;
  }
  double CpuAvailable() { return Status().nodes.at(0).available.at("CPU"); }
};

TEST_F(HeadLendingTest, AWorkersRuntimeLendsItsCpuAndStatusAndListShowIt) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  auto job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  auto parent = Lease(job, {{"CPU", 4}});
  RegisterRuntime(job, parent.lease_id, "rt-parent", 3);
  EXPECT_EQ(CpuAvailable(), 0);

  Notify(job, parent.lease_id, "rt-parent", true);
  ClusterStatus status = Status();
  EXPECT_EQ(status.nodes.at(0).available.at("CPU"), 4);
  EXPECT_EQ(status.nodes.at(0).available.at("GPU"), 2);
  EXPECT_EQ(status.blocked_workers, 1u);
  EXPECT_EQ(status.lent_cpu, 4);
  auto listed = Call<protocol::ListStateReply>(protocol::ListStateRequest{kToken}, "cli", 4);
  ASSERT_EQ(listed.leases.size(), 1u);
  EXPECT_EQ(listed.leases[0].state, protocol::LeaseState::kBlocked);

  Notify(job, parent.lease_id, "rt-parent", false);
  EXPECT_EQ(CpuAvailable(), 0);
  EXPECT_EQ(Status().blocked_workers, 0u);
}

TEST_F(HeadLendingTest, AJobsCredentialCannotLendTheCpuOfAnotherJobsLease) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  auto victim = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  auto lease = Lease(victim, {{"CPU", 4}});
  auto attacker = Call<protocol::RegisterDriverReply>(Driver(), "other-driver", 3).job_id;
  // The attacker's runtime claims to run inside the victim's lease.
  RegisterRuntime(attacker, lease.lease_id, "rt-attacker", 4);
  uint64_t refused = head_->rejected_count();
  protocol::LeaseBlockedNotice claim;
  claim.lease_id = lease.lease_id;
  claim.blocked = true;
  EXPECT_EQ(SendAs(claim, "rt-attacker", transport::Principal::Job(attacker)),
            static_cast<uint16_t>(MessageType::kErrorReply))
      << "refused, and the sender told why";
  EXPECT_EQ(head_->rejected_count(), refused + 1);
  ExpectBooksAgree();
  EXPECT_EQ(CpuAvailable(), 0) << "nothing was lent";
  // Nor may a driver (it holds the cluster's credential, not the lease).
  protocol::LeaseBlockedNotice notice;
  notice.lease_id = lease.lease_id;
  notice.blocked = true;
  SendAs(notice, kDriver, transport::Principal::Cluster());
  EXPECT_EQ(CpuAvailable(), 0);
  EXPECT_EQ(Status().blocked_workers, 0u);
}

// Before the restart the parent blocked, its child ran on the lent CPU and
// the parent resumed: the node is overcommitted. The restarted head keeps
// both live workers when the node rejoins (it does not stop one because the
// CPU is not free) and, once the parent's runtime says it is blocked again
// (before or after the rejoin), lends the parent's CPU and the overdraft is gone.
class HeadRestartLendingTest : public HeadLendingTest,
                               public ::testing::WithParamInterface<bool> {};

TEST_P(HeadRestartLendingTest, OvercommittedLeasesSurviveARestartAndBlockedOnesLendAgain) {
  const bool notice_before_rejoin = GetParam();
  auto joined = Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  auto job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  auto parent = Lease(job, {{"CPU", 4}});
  RegisterRuntime(job, parent.lease_id, "rt-parent", 3);
  Notify(job, parent.lease_id, "rt-parent", true);
  auto child = Lease(job, {{"CPU", 4}});
  Notify(job, parent.lease_id, "rt-parent", false);
  EXPECT_EQ(Status().nodes.at(0).cpu_overcommitted, 4);
  Notify(job, parent.lease_id, "rt-parent", true);  // it waits again when the head dies

  StartHead();
  Call<protocol::RegisterDriverReply>(Driver(job), kDriver, 10);
  auto rejoin = [&] {
    protocol::RegisterNodeRequest req = Hello();
    req.rejoin = true;
    req.previous_node_id = joined.node_id;
    req.previous_epoch = joined.epoch;
    req.live_leases = {{parent.lease_id, job, {{"CPU", 4}}, {}, 4242, false},
                       {child.lease_id, job, {{"CPU", 4}}, {}, 4243, false}};
    Call<protocol::RegisterNodeReply>(req, kAgent, 11);
    for (const auto& s : sent_) {
      EXPECT_NE(s.type, static_cast<uint16_t>(MessageType::kKillWorkersRequest))
          << "a live worker was stopped for CPU the node had lent";
    }
    ExpectBooksAgree();
  };
  if (notice_before_rejoin) {
    // The runtime registers again and resyncs before its node is back.
    RegisterRuntime(job, parent.lease_id, "rt-parent", 12);
    Notify(job, parent.lease_id, "rt-parent", true);
    rejoin();
  } else {
    rejoin();
    EXPECT_EQ(Status().nodes.at(0).cpu_overcommitted, 4) << "a restarted head knows no blocked lease";
    EXPECT_EQ(Status().blocked_workers, 0u);
    RegisterRuntime(job, parent.lease_id, "rt-parent", 12);
    Notify(job, parent.lease_id, "rt-parent", true);
  }
  ClusterStatus status = Status();
  EXPECT_EQ(status.nodes.at(0).cpu_overcommitted, 0);
  EXPECT_EQ(status.nodes.at(0).available.at("CPU"), 0);
  EXPECT_EQ(status.blocked_workers, 1u);
  EXPECT_EQ(head_->leases().lease_count(), 2u);

  // The parent resumes and both end: every CPU is free again, once.
  Notify(job, parent.lease_id, "rt-parent", false);
  uint64_t id = 20;
  for (const auto& lease : {child.lease_id, parent.lease_id}) {
    protocol::ReturnLeaseRequest give_back;
    give_back.lease_id = lease;
    EXPECT_TRUE(Call<protocol::ReturnLeaseReply>(give_back, kDriver, id++).ok);
    ExpectBooksAgree();
  }
  EXPECT_EQ(CpuAvailable(), 4);
  EXPECT_EQ(Status().nodes.at(0).cpu_overcommitted, 0);
}

INSTANTIATE_TEST_SUITE_P(NoticeOrder, HeadRestartLendingTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "NoticeBeforeRejoin" : "NoticeAfterRejoin";
                         });

}  // namespace head_lending_test
}  // namespace rayx::scheduler
