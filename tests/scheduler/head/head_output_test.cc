// Workers' output through the head: an agent's WorkerOutputNotice goes to the
// drivers of its job that asked for it (log_to_driver), and a driver's
// FlushOutputRequest is answered once every agent answered, after their lines.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "head_fixture.h"

namespace rayx::scheduler {
namespace head_output_test {  // this file's own (unit tests compile in batches)

using namespace testing_fixture;  // NOLINT: the fixture's names and constants

class HeadOutputTest : public HeadFixture {
 protected:
  protocol::WorkerOutputNotice Output(const JobId& job, const std::string& line) {
    protocol::WorkerOutputNotice notice;
    notice.job_id = job;
    notice.batches.push_back({"train_step pid=42, ip=10.0.0.7", {line}});
    return notice;
  }
  size_t SentOfType(MessageType type) const {
    size_t n = 0;
    for (const auto& s : sent_) n += s.type == static_cast<uint16_t>(type);
    return n;
  }
  void RegisterSecondAgent() {
    auto hello = Hello();
    hello.address = "10.0.0.8";
    Call<protocol::RegisterNodeReply>(hello, "agent-b", 1);
  }
};

TEST_F(HeadOutputTest, OutputGoesToTheDriversOfItsJobThatAskedForIt) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  JobId job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  auto quiet = Driver(job);
  quiet.log_to_driver = false;
  Call<protocol::RegisterDriverReply>(quiet, "quiet-driver", 3);
  JobId other = Call<protocol::RegisterDriverReply>(Driver(), "other-driver", 4).job_id;
  sent_.clear();

  Send(Output(job, "loss 0.31"), kAgent, 0);
  auto [to, notice] = Take<protocol::WorkerOutputNotice>();
  EXPECT_EQ(to.peer, kDriver);
  ASSERT_EQ(notice.batches.size(), 1u);
  EXPECT_EQ(notice.batches[0].source, "train_step pid=42, ip=10.0.0.7");
  EXPECT_EQ(notice.batches[0].lines, std::vector<std::string>{"loss 0.31"});
  EXPECT_EQ(SentOfType(MessageType::kWorkerOutputNotice), 0u)
      << "the driver that said log_to_driver=False and the other job's got it too";
  Send(Output(other, "b"), kAgent, 0);
  EXPECT_EQ(Take<protocol::WorkerOutputNotice>().first.peer, "other-driver");
  // Only node agents' notices are passed on.
  Send(Output(job, "forged"), "other-driver", 0);
  EXPECT_EQ(SentOfType(MessageType::kWorkerOutputNotice), 0u);
}

TEST_F(HeadOutputTest, AJobsOwnProcessesLinesAreKeptForThePageNeverSentToItsDrivers) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  JobId job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  sent_.clear();
  // The entrypoint is the driver: its own lines must not come back to it.
  auto own = Output(job, "entrypoint line");
  own.processes = true;
  Send(own, kAgent, 0);
  EXPECT_EQ(SentOfType(MessageType::kWorkerOutputNotice), 0u);
  auto json = head_->output_tail().Json(job.Hex());
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find("\"process_lines\":[{\"source\":\"train_step pid=42, ip=10.0.0.7\","
                       "\"line\":\"entrypoint line\"}]"),
            std::string::npos)
      << *json;
}

TEST_F(HeadOutputTest, AFlushIsAnsweredAfterEveryAgentsLines) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  RegisterSecondAgent();
  JobId job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  sent_.clear();

  protocol::FlushOutputRequest flush;
  flush.job_id = job;
  EXPECT_EQ(Send(flush, kDriver, 11).first, 0) << "answered later";
  auto [to_a, asked_a] = Take<protocol::FlushOutputRequest>();
  auto [to_b, asked_b] = Take<protocol::FlushOutputRequest>();
  EXPECT_EQ(std::set<std::string>({to_a.peer, to_b.peer}),
            std::set<std::string>({kAgent, "agent-b"}));
  EXPECT_EQ(asked_a.job_id, job);
  EXPECT_EQ(to_a.id, to_b.id);

  Send(Output(job, "last line of a"), to_a.peer, 0);
  Send(protocol::FlushOutputReply{}, to_a.peer, to_a.id);
  EXPECT_EQ(SentOfType(MessageType::kFlushOutputReply), 0u) << "the other agent has not answered";
  Send(protocol::FlushOutputReply{}, to_b.peer, to_b.id);
  ASSERT_EQ(sent_.size(), 2u);
  EXPECT_EQ(sent_[0].type, static_cast<uint16_t>(MessageType::kWorkerOutputNotice))
      << "the lines go before the answer";
  auto [answer_to, answer] = Take<protocol::FlushOutputReply>();
  EXPECT_EQ(answer_to.peer, kDriver);
  EXPECT_EQ(answer_to.id, 11u);
  EXPECT_EQ(answer.unanswered, 0u);
  // A late or repeated answer changes nothing.
  Send(protocol::FlushOutputReply{}, to_b.peer, to_b.id);
  EXPECT_EQ(SentOfType(MessageType::kFlushOutputReply), 0u);
}

TEST_F(HeadOutputTest, ASilentAgentHoldsAFlushBackOneSecondAndIsCounted) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  JobId job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  sent_.clear();
  protocol::FlushOutputRequest flush;
  flush.job_id = job;
  Send(flush, kDriver, 12);
  Take<protocol::FlushOutputRequest>();
  clock_.Advance(999);
  head_->ExpireSilentNodes();
  EXPECT_EQ(SentOfType(MessageType::kFlushOutputReply), 0u);
  clock_.Advance(1);
  head_->ExpireSilentNodes();
  auto [to, answer] = Take<protocol::FlushOutputReply>();
  EXPECT_EQ(to.peer, kDriver);
  EXPECT_EQ(answer.unanswered, 1u);
}

TEST_F(HeadOutputTest, AJobNobodyPrintsIsFlushedAtOnce) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  auto driver = Driver();
  driver.log_to_driver = false;
  JobId job = Call<protocol::RegisterDriverReply>(driver, kDriver, 2).job_id;
  sent_.clear();
  protocol::FlushOutputRequest flush;
  flush.job_id = job;
  auto answer = Call<protocol::FlushOutputReply>(flush, kDriver, 13);
  EXPECT_EQ(answer.unanswered, 0u);
  EXPECT_EQ(SentOfType(MessageType::kFlushOutputRequest), 0u) << "no agent was asked";
}

}  // namespace head_output_test
}  // namespace rayx::scheduler
