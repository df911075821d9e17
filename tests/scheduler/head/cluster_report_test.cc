// What the head exports: Prometheus' text and the dashboard's JSON from its
// tables, Train runs' records read with bounds, and the output tail.
#include "head/cluster_report.h"

#include <gtest/gtest.h>

#include "head_fixture.h"
#include "protocol/codec.h"
#include "protocol/train_record.h"

namespace rayx::scheduler {
namespace cluster_report_test {  // this file's own (unit tests compile in batches)

using namespace testing_fixture;  // NOLINT: the fixture's names and constants

class ClusterReportTest : public HeadFixture {
 protected:
  void PutKv(const JobId& job, const std::string& ns, const std::string& key,
             const std::string& value) {
    protocol::KvPutRequest put;
    put.ns = ns;
    put.key = key;
    put.value = value;
    put.job_id = job;
    Call<protocol::KvPutReply>(put, kDriver, 31);
  }
  // The line of sample `name{labels}`, or "" when there is none.
  static std::string Sample(const std::string& text, const std::string& prefix) {
    size_t at = text.find("\n" + prefix + " ");
    if (at == std::string::npos) return "";
    size_t end = text.find('\n', at + 1);
    return text.substr(at + 1, end - at - 1);
  }
};

TEST_F(ClusterReportTest, MetricsCountNodesResourcesAndLeases) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  JobId job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  Lease(job, {{"CPU", 1}, {"GPU", 1}});
  std::string text = PrometheusText(*head_);
  EXPECT_EQ(Sample(text, "rayx_nodes{state=\"alive\"}"), "rayx_nodes{state=\"alive\"} 1");
  EXPECT_EQ(Sample(text, "rayx_resources{resource=\"GPU\"}"), "rayx_resources{resource=\"GPU\"} 2");
  EXPECT_EQ(Sample(text, "rayx_resources_used{resource=\"GPU\"}"),
            "rayx_resources_used{resource=\"GPU\"} 1");
  EXPECT_NE(text.find("rayx_leases{kind=\"actor\",state=\""), std::string::npos) << text;
  // Every family says what it is once, before its samples.
  EXPECT_NE(text.find("# TYPE rayx_head_messages_total counter\n"), std::string::npos);
  size_t help = text.find("# HELP rayx_node_resources_used ");
  size_t sample = text.find("rayx_node_resources_used{");
  EXPECT_LT(help, sample);
}

TEST_F(ClusterReportTest, GpuSamplesFromHeartbeatsBecomeGpuMetrics) {
  auto node = Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  protocol::HeartbeatRequest beat;
  beat.node_id = node.node_id;
  beat.seq = 1;
  beat.epoch = node.epoch;
  beat.gpus = {{0, "H100", 0.5, 1ull << 30, 80ull << 30, 61, 350.5},
               {1, "H100", 1.0, 2ull << 30, 80ull << 30, 70, 700}};
  Send(beat, kAgent, 3);
  beat.seq = 2;
  beat.gpus.clear();  // the heartbeats between samples carry none: the last sample stays
  Send(beat, kAgent, 4);
  std::string text = PrometheusText(*head_);
  std::string labels = "{node_id=\"" + node.node_id.Hex() + "\",address=\"10.0.0.7\",device=\"1\",name=\"H100\"}";
  EXPECT_EQ(Sample(text, "rayx_gpu_power_watts" + labels), "rayx_gpu_power_watts" + labels + " 700");
  EXPECT_EQ(Sample(text, "rayx_gpu_utilization_ratio" + labels),
            "rayx_gpu_utilization_ratio" + labels + " 1");
  EXPECT_EQ(Sample(text, "rayx_gpu_memory_used_bytes" + labels),
            "rayx_gpu_memory_used_bytes" + labels + " 2147483648");
  EXPECT_NE(StateJson(*head_).find("\"gpu_usage\":[{\"device\":0,\"name\":\"H100\""),
            std::string::npos);
}

TEST_F(ClusterReportTest, DriversTaskCountsAddUpFromTheirHeartbeats) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  JobId job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  JobId other = Call<protocol::RegisterDriverReply>(Driver(), "driver-2", 3).job_id;
  auto beat = [&](const JobId& j, const std::string& peer, uint64_t submitted, uint64_t failed) {
    protocol::DriverHeartbeatRequest req;
    req.job_id = j;
    req.tasks = {submitted, submitted - failed, failed, 1};
    Call<protocol::DriverHeartbeatReply>(req, peer, 40);
  };
  beat(job, kDriver, 10, 1);
  beat(job, kDriver, 25, 2);  // counts so far, not increments
  beat(other, "driver-2", 5, 0);
  const protocol::TaskCounters& totals = head_->work_totals().tasks;
  EXPECT_EQ(totals.submitted, 30u);
  EXPECT_EQ(totals.finished, 28u);
  EXPECT_EQ(totals.failed, 2u);
  EXPECT_EQ(totals.retried, 2u);
  std::string text = PrometheusText(*head_);
  EXPECT_EQ(Sample(text, "rayx_tasks_total{state=\"submitted\"}"),
            "rayx_tasks_total{state=\"submitted\"} 30");
  // A driver's job ending keeps what it did in the totals.
  Call<protocol::FinishJobReply>(protocol::FinishJobRequest{job}, kDriver, 41);
  EXPECT_EQ(head_->work_totals().tasks.submitted, 30u);
}

TEST_F(ClusterReportTest, NodesWorkersCountsAndCollectiveOpsBecomeAHistogram) {
  auto node = Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  JobId job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  // Counted in the processes, as the agent and the driver send them.
  WorkCounters workers, driver;
  workers.TaskSubmitted();
  workers.TaskSubmitted();
  workers.TaskEnded(false);
  workers.CollectiveOpDone(WorkCounters::Op::kAllReduce, std::chrono::microseconds(50), false);
  workers.CollectiveOpDone(WorkCounters::Op::kAllReduce, std::chrono::milliseconds(5), false);
  workers.CollectiveOpDone(WorkCounters::Op::kAllReduce, std::chrono::seconds(100), true);
  driver.CollectiveOpDone(WorkCounters::Op::kBarrier, std::chrono::milliseconds(2), false);
  driver.TaskSubmitted();
  auto heartbeat = [&](uint64_t seq, bool counted) {
    protocol::HeartbeatRequest beat;
    beat.node_id = node.node_id;
    beat.seq = seq;
    beat.epoch = node.epoch;
    beat.counted = counted;
    if (counted) {
      WorkCounts counts = workers.Read();
      beat.tasks = counts.tasks;
      beat.collectives = counts.Collectives();
    }
    Send(beat, kAgent, 10 + seq);
  };
  heartbeat(1, true);
  heartbeat(2, false);  // between the counted ones: nothing to count, not zeros
  heartbeat(3, true);   // the same counts again: nothing new
  protocol::DriverHeartbeatRequest driver_beat;
  driver_beat.job_id = job;
  driver_beat.tasks = driver.Read().tasks;
  driver_beat.collectives = driver.Read().Collectives();
  // A hostile or newer sender's unknown op and malformed histogram are ignored.
  driver_beat.collectives.push_back({"allreduce\"}", 5, 0, 1, {1, 2, 3}});
  driver_beat.collectives.push_back({"scatter", 5, 0, 1, std::vector<uint64_t>(8, 1)});
  Call<protocol::DriverHeartbeatReply>(driver_beat, kDriver, 40);

  EXPECT_EQ(head_->work_totals().tasks.submitted, 3u) << "2 nested by workers, 1 by the driver";
  EXPECT_EQ(head_->work_totals().tasks.finished, 1u);
  std::string text = PrometheusText(*head_);
  const std::string h = "rayx_collective_operation_duration_seconds";
  EXPECT_EQ(Sample(text, h + "_bucket{op=\"allreduce\",le=\"0.0001\"}"),
            h + "_bucket{op=\"allreduce\",le=\"0.0001\"} 1");
  EXPECT_EQ(Sample(text, h + "_bucket{op=\"allreduce\",le=\"0.01\"}"),
            h + "_bucket{op=\"allreduce\",le=\"0.01\"} 2") << "cumulative";
  EXPECT_EQ(Sample(text, h + "_bucket{op=\"allreduce\",le=\"60\"}"),
            h + "_bucket{op=\"allreduce\",le=\"60\"} 2");
  EXPECT_EQ(Sample(text, h + "_bucket{op=\"allreduce\",le=\"+Inf\"}"),
            h + "_bucket{op=\"allreduce\",le=\"+Inf\"} 3");
  EXPECT_EQ(Sample(text, h + "_count{op=\"allreduce\"}"), h + "_count{op=\"allreduce\"} 3");
  EXPECT_EQ(Sample(text, h + "_sum{op=\"allreduce\"}"), h + "_sum{op=\"allreduce\"} 100.00505");
  EXPECT_EQ(Sample(text, h + "_count{op=\"barrier\"}"), h + "_count{op=\"barrier\"} 1");
  EXPECT_EQ(Sample(text, "rayx_collective_operations_failed_total{op=\"allreduce\"}"),
            "rayx_collective_operations_failed_total{op=\"allreduce\"} 1");
  EXPECT_EQ(text.find("op=\"scatter\""), std::string::npos);
  // A histogram's samples come after its one HELP and TYPE.
  EXPECT_LT(text.find("# TYPE " + h + " histogram\n"), text.find(h + "_bucket"));
  EXPECT_LT(text.find(h + "_count{op=\"barrier\"}"),
            text.find("# HELP rayx_collective_operations_failed_total"));

  // The node dies: what its workers did stays counted.
  Send(protocol::UnregisterNodeRequest{node.node_id, "stopped"}, kAgent, 50);
  EXPECT_EQ(head_->work_totals().tasks.submitted, 3u);
  EXPECT_EQ(head_->work_totals().ops[0].count, 3u);
}

TEST_F(ClusterReportTest, TrainRecordsAreShownAndMetricsExportedMalformedOnesSkipped) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  JobId job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  protocol::TrainRunRecord record;
  record.run = "llama \"7b\"";
  record.job = job.Hex();
  record.attempt = 1;
  record.reports = 3;
  record.history = {{{"loss", 2.0}}, {{"loss", 1.0}}, {{"loss", 0.5}, {"step", 2}}};
  record.checkpoints = 2;
  record.checkpoint_bytes = 3 << 20;
  record.last_checkpoint_bytes = 2 << 20;
  PutKv(job, protocol::kTrainRecordNamespace, job.Hex() + "/a", protocol::Encode(record));
  PutKv(job, protocol::kTrainRecordNamespace, job.Hex() + "/b", std::string("\xc1garbage", 8));

  std::string text = PrometheusText(*head_);
  std::string labels = "{job=\"" + job.Hex() + "\",run=\"llama \\\"7b\\\"\"";
  EXPECT_EQ(Sample(text, "rayx_train_reports_total" + labels + "}"),
            "rayx_train_reports_total" + labels + "} 3");
  EXPECT_EQ(Sample(text, "rayx_train_attempt" + labels + "}"), "rayx_train_attempt" + labels + "} 1");
  EXPECT_EQ(Sample(text, "rayx_train_metric" + labels + ",metric=\"loss\"}"),
            "rayx_train_metric" + labels + ",metric=\"loss\"} 0.5");
  EXPECT_EQ(Sample(text, "rayx_train_checkpoints_total" + labels + "}"),
            "rayx_train_checkpoints_total" + labels + "} 2");
  EXPECT_EQ(Sample(text, "rayx_train_checkpoint_bytes_total" + labels + "}"),
            "rayx_train_checkpoint_bytes_total" + labels + "} 3145728");
  EXPECT_EQ(Sample(text, "rayx_train_last_checkpoint_bytes" + labels + "}"),
            "rayx_train_last_checkpoint_bytes" + labels + "} 2097152");

  std::string json = StateJson(*head_);
  EXPECT_NE(json.find("\"train_runs\":[{\"run\":\"llama \\\"7b\\\"\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"history\":[{\"loss\":2},{\"loss\":1},{\"loss\":0.5,\"step\":2}]"),
            std::string::npos);
  EXPECT_EQ(json.find("garbage"), std::string::npos);
  EXPECT_NE(json.find("\"placement_group_state\":[\"PENDING\",\"CREATED\""), std::string::npos);
}

TEST_F(ClusterReportTest, TheOutputTailKeepsTheNewestLinesOfTheNewestJobs) {
  OutputTail tail(OutputTail::Options{.max_jobs = 2, .max_bytes_per_job = 30});
  JobId a = JobId::FromRandom(), b = JobId::FromRandom(), c = JobId::FromRandom();
  protocol::WorkerOutputNotice notice;
  notice.job_id = a;
  notice.batches.push_back({"f pid=1", {"one", "two", "three", "four", "<script>"}});
  tail.Add(notice);
  auto json = tail.Json(a.Hex());
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(*json, "{\"job_id\":\"" + a.Hex() +
                       "\",\"lines\":[{\"source\":\"f pid=1\",\"line\":\"four\"},"
                       "{\"source\":\"f pid=1\",\"line\":\"<script>\"}],\"dropped\":3,"
                       "\"process_lines\":[],\"process_dropped\":0}");
  // The job's own processes' lines (its entrypoint) are kept apart, bounded alike.
  protocol::WorkerOutputNotice own;
  own.job_id = a;
  own.processes = true;
  own.batches.push_back({"python3 pid=2", {"driver says hi"}});
  tail.Add(own);
  json = tail.Json(a.Hex());
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find("\"process_lines\":[{\"source\":\"python3 pid=2\",\"line\":\"driver "
                       "says hi\"}],\"process_dropped\":0"),
            std::string::npos)
      << *json;
  EXPECT_NE(json->find("\"line\":\"four\""), std::string::npos) << "the workers' lines stay";
  notice.job_id = b;
  tail.Add(notice);
  notice.job_id = c;
  tail.Add(notice);
  EXPECT_EQ(tail.job_count(), 2u);
  EXPECT_EQ(tail.Json(a.Hex()).status().code(), StatusCode::kNotFound) << "the oldest job went";
  EXPECT_TRUE(tail.Json(c.Hex()).ok());
  EXPECT_EQ(tail.Json("not hex").status().code(), StatusCode::kNotFound);
}

TEST_F(ClusterReportTest, AgentsOutputReachesTheTail) {
  Call<protocol::RegisterNodeReply>(Hello(), kAgent, 1);
  JobId job = Call<protocol::RegisterDriverReply>(Driver(), kDriver, 2).job_id;
  protocol::WorkerOutputNotice notice;
  notice.job_id = job;
  notice.batches.push_back({"f pid=1", {"hello"}});
  Send(notice, kAgent, 0);
  Send(notice, "not-an-agent", 0);
  auto json = head_->output_tail().Json(job.Hex());
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->find("hello"), json->rfind("hello")) << "only the agent's notice counts";
}

}  // namespace cluster_report_test
}  // namespace rayx::scheduler
