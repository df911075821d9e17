// The task submitter on one io_context with a fake head and fake workers:
// one lease request at a time per shape, pipelining once saturated, idle
// leases returned on a manual clock, lost workers' tasks failed or moved.
#include "runtime/task_submitter.h"

#include <gtest/gtest.h>

#include "submitter_fixture.h"

namespace rayx::detail {
namespace task_submitter_test {  // this file's own (unit tests compile in batches)

using testing::FakeWorkerConnector;
using testing::operator""_id;

class TaskSubmitterTest : public testing::SubmitterFixture {
 protected:
  TaskSubmitterTest()
      : SubmitterFixture("tcp://10.0.0.7:7000"),
        submitter_(
            TaskSubmitter::Deps{objects_, head_, faults_, send_queue_, resolver_, clock_, io_},
            TaskSubmitter::Options{JobId::FromWire("job-1"), nullptr}) {}

  void TearDown() override {
    submitter_.Clear();
    Step();
  }

  // Submits `function` with inline `arg`; returns its result's id.
  ObjectId Submit(const std::string& function, const std::string& arg = "x") {
    ObjectId id = ObjectId::FromWire("result-" + std::to_string(next_++));
    objects_.AddPending(id);
    Task task;
    task.function = function;
    task.object_id = id;
    task.args.push_back(Arg{arg, nullptr});
    submitter_.Submit(task, std::nullopt, Placement{});
    return id;
  }
  // Submits `function`("first", ref `arg_id`); returns its result's id.
  ObjectId SubmitWithRef(const ObjectId& arg_id, const std::string& function = "G") {
    ObjectId id = ObjectId::FromWire("result-" + std::to_string(next_++));
    objects_.AddPending(id);
    auto ref = std::make_shared<ObjectCore>();
    ref->id = arg_id;
    Task task;
    task.function = function;
    task.object_id = id;
    task.args.push_back(Arg{"first", nullptr});
    task.args.push_back(Arg{"", ref});
    submitter_.Submit(task, std::nullopt, Placement{});
    return id;
  }
  static std::shared_ptr<const protocol::ObjectLocation> StoredOn(const std::string& node,
                                                                  const std::string& path) {
    auto location = std::make_shared<protocol::ObjectLocation>();
    location->node_address = node;
    location->object_address = "tcp://" + node + ":7000";
    location->path = path;
    location->size = 1 << 20;
    return location;
  }
  // Completes `id` as stored on `node` at /store/<id>, made by a task whose
  // reruns are counted in `*recomputed`.
  void StoreRecomputable(const ObjectId& id, const std::string& node, int* recomputed) {
    objects_.AddPending(id);
    ObjectTable::Completion done{id, nullptr, nullptr, StoredOn(node, "/store/" + id.Hex())};
    done.recompute = [recomputed] { ++*recomputed; };
    objects_.Complete(std::move(done));
  }
  // Grants the waiting lease request as a worker at `address` and lets the
  // cluster count as saturated, so queued calls pipeline onto it.
  FakeWorkerConnector::Worker* GrantSaturated(const std::string& lease_id,
                                              const std::string& address) {
    head_.Grant(lease_id, address);
    Step();
    clock_.Advance(TaskSubmitter::kSaturatedAfterMs + 1);
    submitter_.Tick();
    Step();
    return connector_.At(address);
  }

  TaskSubmitter submitter_;
};

TEST_F(TaskSubmitterTest, ABurstAsksForOneLeaseAtATime) {
  for (int i = 0; i < 10; ++i) Submit("F");
  Step();
  ASSERT_EQ(head_.requests.size(), 1u);
  EXPECT_EQ(head_.requests[0].request.job_id.Hex(), "job-1");
  EXPECT_EQ(head_.requests[0].request.resources, (ResourceMap{{kCpu, 1}}));
}

TEST_F(TaskSubmitterTest, ResultsCompleteTheirObjects) {
  ObjectId id = Submit("F", "arg");
  Step();
  head_.Grant("lease-1", "w1");
  Step();
  auto* worker = connector_.At("w1");
  ASSERT_NE(worker, nullptr);
  ASSERT_EQ(worker->calls.size(), 1u);
  EXPECT_EQ(worker->calls[0].function, "F");
  EXPECT_EQ(worker->calls[0].return_id, id.Hex());
  EXPECT_EQ(worker->calls[0].args, std::vector<std::string>{"arg"});
  worker->Reply(worker->calls[0].call_id, "42");
  EXPECT_EQ(objects_.Get(id, 0).view, "42");
}

TEST_F(TaskSubmitterTest, PipelinesOnceTheClusterIsSaturated) {
  std::vector<ObjectId> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(Submit("F"));
  Step();
  head_.Grant("lease-1", "w1");
  Step();
  auto* worker = connector_.At("w1");
  ASSERT_NE(worker, nullptr);
  // Free slots may exist: one task per worker, and another worker is asked for.
  EXPECT_EQ(worker->calls.size(), 1u);
  ASSERT_EQ(head_.requests.size(), 1u);
  // The lease request waits past kSaturatedAfterMs: queue the rest on this worker.
  clock_.Advance(TaskSubmitter::kSaturatedAfterMs + 1);
  submitter_.Tick();
  Step();
  ASSERT_EQ(worker->calls.size(), 10u);
  // In submission order, batched: fewer messages than calls.
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(worker->calls[i].return_id, ids[i].Hex());
  EXPECT_LE(worker->messages, 2);
  for (const auto& call : worker->calls) worker->Reply(call.call_id, "ok");
  for (const auto& id : ids) EXPECT_EQ(ErrorOf(id), "");
}

// A worker whose running call blocks hands back the calls pipelined behind
// it (Requeued): they keep their arguments, go to another worker, and the
// blocked one gets nothing more until its call ends.
TEST_F(TaskSubmitterTest, CallsHandedBackByABlockedWorkerRunElsewhere) {
  std::vector<ObjectId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(Submit("F", "arg-" + std::to_string(i)));
  Step();
  head_.Grant("lease-1", "w1");
  Step();
  clock_.Advance(TaskSubmitter::kSaturatedAfterMs + 1);
  submitter_.Tick();
  Step();
  auto* blocked = connector_.At("w1");
  ASSERT_NE(blocked, nullptr);
  ASSERT_EQ(blocked->calls.size(), 3u) << "pipelined";
  blocked->ReplyError(blocked->calls[1].call_id, "Requeued", "handed back", "n1");
  blocked->ReplyError(blocked->calls[2].call_id, "Requeued", "handed back", "n1");
  Step();
  EXPECT_EQ(blocked->calls.size(), 3u) << "nothing more to the blocked worker";
  ASSERT_FALSE(head_.requests.empty()) << "another worker is asked for";
  head_.Grant("lease-2", "w2");
  Step();
  auto* other = connector_.At("w2");
  ASSERT_NE(other, nullptr);
  ASSERT_FALSE(other->calls.empty());
  EXPECT_EQ(other->calls[0].args, std::vector<std::string>{"arg-1"}) << "its arguments kept";
  for (size_t i = 0; i < other->calls.size(); ++i) {  // each reply may send the next
    other->Reply(other->calls[i].call_id, "ok");
    Step();
  }
  EXPECT_EQ(other->calls.size(), 2u) << "both handed-back calls ran there";
  // The blocked call ends: its worker takes calls again.
  blocked->Reply(blocked->calls[0].call_id, "ok");
  Step();
  for (const auto& id : ids) {
    if (ErrorOf(id).empty()) continue;
    ADD_FAILURE() << id.Hex() << ": " << ErrorOf(id);
  }
  size_t before = blocked->calls.size() + other->calls.size();
  Submit("F");
  Step();
  EXPECT_EQ(blocked->calls.size() + other->calls.size(), before + 1) << "a new call is sent";
}

// Workers that take long to start (a Python interpreter) raise the threshold:
// a lease request that waits less than twice the fastest grant is a worker
// starting, not a full cluster, so the waiting tasks are not pipelined.
TEST_F(TaskSubmitterTest, SlowWorkerStartsAreNotMistakenForSaturation) {
  std::vector<ObjectId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(Submit("F"));
  Step();
  clock_.Advance(400);  // the first worker took 400 ms to start
  head_.Grant("lease-1", "w1");
  Step();
  auto* worker = connector_.At("w1");
  ASSERT_NE(worker, nullptr);
  ASSERT_EQ(worker->calls.size(), 1u);
  clock_.Advance(500);  // the second request: starting, not saturated (< 800 ms)
  submitter_.Tick();
  Step();
  EXPECT_EQ(worker->calls.size(), 1u) << "pipelined while another worker was still starting";
  clock_.Advance(301);  // now past twice the fastest start: saturated
  submitter_.Tick();
  Step();
  EXPECT_EQ(worker->calls.size(), 3u);
}

// Ray's max_retries: the calls a dead worker was running go to another worker
// while they have retries left, in their order; the others fail, naming the tries.
TEST_F(TaskSubmitterTest, CallsOfADeadWorkerRunAgainWhileTheyHaveRetries) {
  auto submit = [&](int retries) {
    ObjectId id = ObjectId::FromWire("result-" + std::to_string(next_++));
    objects_.AddPending(id);
    Task task;
    task.function = "F";
    task.object_id = id;
    task.args.push_back(Arg{"arg-of-" + id.Hex(), nullptr});
    task.retries_left = retries;
    submitter_.Submit(task, std::nullopt, Placement{});
    return id;
  };
  ObjectId kept = submit(1), lost = submit(0), kept_too = submit(2);
  Step();
  auto* w1 = GrantSaturated("lease-1", "w1");
  ASSERT_NE(w1, nullptr);
  ASSERT_EQ(w1->calls.size(), 3u);
  w1->Die();
  Step();
  EXPECT_EQ(ErrorOf(lost), "WorkerCrashed");
  EXPECT_EQ(head_.returned, std::vector<std::string>{"lease-1"});
  ASSERT_FALSE(head_.requests.empty()) << "no new worker asked for the retried calls";
  auto* w2 = GrantSaturated("lease-2", "w2");
  ASSERT_NE(w2, nullptr);
  ASSERT_EQ(w2->calls.size(), 2u);
  EXPECT_EQ(w2->calls[0].return_id, kept.Hex());
  EXPECT_EQ(w2->calls[1].return_id, kept_too.Hex());
  // With their arguments: a retried call keeps them until its result arrives.
  EXPECT_EQ(w2->calls[0].args, std::vector<std::string>{"arg-of-" + kept.Hex()});
  // The call with no retry left dies with the second worker; the other runs.
  w2->Reply(w2->calls[1].call_id, "done");
  w2->Die();
  Step();
  EXPECT_EQ(ErrorOf(kept), "WorkerCrashed");
  EXPECT_EQ(ErrorOf(kept_too), "");
  try {
    objects_.Get(kept, 0);
  } catch (const TaskError& e) {
    EXPECT_NE(e.remote_message().find("the last of 2 tries"), std::string::npos)
        << e.remote_message();
  }
}

// Ray's retry_exceptions: a raised exception uses a retry (the task runs again
// with its arguments); without it, or with no retry left, the error stays, and
// so does rayx's own error (a wrong argument type fails the same way again).
TEST_F(TaskSubmitterTest, RetryExceptionsRunsATaskThatRaisedAgain) {
  auto submit = [&](bool retry_exceptions, const std::string& prefix = "") {
    ObjectId id = ObjectId::FromWire("result-" + std::to_string(next_++));
    objects_.AddPending(id);
    Task task;
    task.function = "F";
    task.object_id = id;
    task.args.push_back(Arg{"arg-of-" + id.Hex(), nullptr});
    task.retries_left = 1;
    task.retry_exceptions = retry_exceptions;
    task.retriable_value_prefix = prefix;
    submitter_.Submit(task, std::nullopt, Placement{});
    return id;
  };
  ObjectId retried = submit(true), plain = submit(false), marked = submit(true, "EXC:"),
           typed = submit(true);
  Step();
  auto* w1 = GrantSaturated("lease-1", "w1");
  ASSERT_NE(w1, nullptr);
  ASSERT_EQ(w1->calls.size(), 4u);
  w1->ReplyError(w1->calls[0].call_id, "std::runtime_error", "flaky");
  w1->ReplyError(w1->calls[1].call_id, "std::runtime_error", "flaky");
  w1->Reply(w1->calls[2].call_id, "EXC:a Python exception");
  w1->ReplyError(w1->calls[3].call_id, "ArgumentTypeError", "argument 0 is not an int");
  Step();
  EXPECT_EQ(ErrorOf(plain), "std::runtime_error") << "retried without retry_exceptions";
  EXPECT_EQ(ErrorOf(typed), "ArgumentTypeError") << "rayx's own error was retried";
  // The exceptions ran again, with their arguments.
  ASSERT_EQ(w1->calls.size(), 6u);
  EXPECT_EQ(w1->calls[4].return_id, retried.Hex());
  EXPECT_EQ(w1->calls[4].args, std::vector<std::string>{"arg-of-" + retried.Hex()});
  EXPECT_EQ(w1->calls[5].return_id, marked.Hex());
  // Out of retries: the second exception is the result.
  w1->ReplyError(w1->calls[4].call_id, "std::runtime_error", "flaky again");
  w1->Reply(w1->calls[5].call_id, "EXC:again");
  Step();
  EXPECT_EQ(w1->calls.size(), 6u);
  EXPECT_EQ(ErrorOf(retried), "std::runtime_error");
  EXPECT_EQ(objects_.Get(marked, 0).view, "EXC:again");
}

// The head declared a worker's node dead while its connection still stands
// (a stopped node): LoseLease treats it as lost at once, with the reason.
TEST_F(TaskSubmitterTest, ALeaseTheHeadDeclaredLostIsHandledAsALostWorker) {
  ObjectId id = Submit("F");
  Step();
  head_.Grant("lease-1", "w1");
  Step();
  ASSERT_NE(connector_.At("w1"), nullptr);
  EXPECT_FALSE(submitter_.LoseLease(LeaseId::FromWire("lease-unknown"), "x"));
  EXPECT_TRUE(
      submitter_.LoseLease(LeaseId::FromWire("lease-1"), "node 10.0.0.7 (abcd) was declared dead"));
  Step();
  EXPECT_EQ(ErrorOf(id), "WorkerCrashed");  // no retries left in this test's tasks
  try {
    objects_.Get(id, 0);
  } catch (const TaskError& e) {
    EXPECT_NE(e.remote_message().find("was lost: node 10.0.0.7 (abcd) was declared dead"),
              std::string::npos)
        << e.remote_message();
  }
  EXPECT_EQ(head_.returned, std::vector<std::string>{"lease-1"});
  EXPECT_EQ(submitter_.TEST_default_workers(), 0u);
}

TEST_F(TaskSubmitterTest, ReturnsAnIdleLeaseAfterTheIdleTime) {
  ObjectId id = Submit("F");
  Step();
  head_.Grant("lease-1", "w1");
  Step();
  auto* worker = connector_.At("w1");
  ASSERT_NE(worker, nullptr);
  worker->Reply(worker->calls[0].call_id, "done");
  clock_.Advance(TaskSubmitter::kIdleLeaseMs);
  submitter_.Tick();
  EXPECT_TRUE(head_.returned.empty()) << "returned before the idle time passed";
  EXPECT_EQ(submitter_.TEST_default_workers(), 1u);
  clock_.Advance(1);
  submitter_.Tick();
  EXPECT_EQ(head_.returned, std::vector<std::string>{"lease-1"});
  EXPECT_EQ(submitter_.TEST_default_workers(), 0u);
}

TEST_F(TaskSubmitterTest, ABusyLeaseIsNotReturned) {
  Submit("F");
  Step();
  head_.Grant("lease-1", "w1");
  Step();
  clock_.Advance(10 * TaskSubmitter::kIdleLeaseMs);
  submitter_.Tick();
  EXPECT_TRUE(head_.returned.empty());
}

TEST_F(TaskSubmitterTest, ALostWorkerFailsItsRunningTasksAndGivesItsLeaseBack) {
  ObjectId id = Submit("F");
  Step();
  head_.Grant("lease-1", "w1");
  Step();
  auto* worker = connector_.At("w1");
  ASSERT_NE(worker, nullptr);
  worker->Die();
  EXPECT_EQ(ErrorOf(id), "WorkerCrashed");
  EXPECT_EQ(head_.returned, std::vector<std::string>{"lease-1"});
  Step();  // the connection is dropped from the pool
  EXPECT_EQ(submitter_.TEST_default_workers(), 0u);
}

TEST_F(TaskSubmitterTest, TasksNeverSentGoToAnotherWorker) {
  connector_.gone_addresses["w1"] = true;
  ObjectId id = Submit("F");
  Step();
  head_.Grant("lease-1", "w1");
  Step();  // the send fails: w1 is lost, its task goes back to the queue
  EXPECT_EQ(head_.returned, std::vector<std::string>{"lease-1"});
  ASSERT_EQ(head_.requests.size(), 1u);
  head_.Grant("lease-2", "w2");
  Step();
  auto* worker = connector_.At("w2");
  ASSERT_NE(worker, nullptr);
  ASSERT_EQ(worker->calls.size(), 1u);
  EXPECT_EQ(worker->calls[0].return_id, id.Hex());
  worker->Reply(worker->calls[0].call_id, "ok");
  EXPECT_EQ(ErrorOf(id), "");
}

TEST_F(TaskSubmitterTest, AnInfeasibleLeaseFailsTheQueuedTasks) {
  ObjectId a = Submit("F");
  ObjectId b = Submit("F");
  Step();
  head_.Refuse(Status::Infeasible("infeasible: no node has 64 GPUs"));
  EXPECT_EQ(ErrorOf(a), "Infeasible");
  EXPECT_EQ(ErrorOf(b), "Infeasible");
}

TEST_F(TaskSubmitterTest, AWorkerThatCannotStartFailsTheQueuedTasks) {
  ObjectId a = Submit("F");
  Step();
  head_.Refuse(Status::Unavailable("the worker exited at once"));
  EXPECT_EQ(ErrorOf(a), "WorkerStartFailed");
}

TEST_F(TaskSubmitterTest, ATaskWaitsForItsPendingArgument) {
  objects_.AddPending("dep"_id);
  auto dep = std::make_shared<ObjectCore>();
  dep->id = "dep"_id;
  objects_.AddPending("result"_id);
  Task task;
  task.function = "G";
  task.object_id = "result"_id;
  task.args.push_back(Arg{"", dep});
  submitter_.Submit(task, std::nullopt, Placement{});
  Step();
  EXPECT_TRUE(head_.requests.empty()) << "leased before the argument was ready";
  objects_.Complete({"dep"_id, std::make_shared<const std::string>("dep-value"), nullptr, nullptr});
  Step();
  ASSERT_EQ(head_.requests.size(), 1u);
  head_.Grant("lease-1", "w1");
  Step();
  auto* worker = connector_.At("w1");
  ASSERT_NE(worker, nullptr);
  ASSERT_EQ(worker->calls.size(), 1u);
  EXPECT_EQ(worker->calls[0].args, std::vector<std::string>{"dep-value"});
}

// A value before a pending reference keeps its bytes when resolution resumes
// after the reference completes (it once arrived empty).
TEST_F(TaskSubmitterTest, ValuesBeforeAPendingArgumentSurviveTheWait) {
  objects_.AddPending("dep"_id);
  auto dep = std::make_shared<ObjectCore>();
  dep->id = "dep"_id;
  objects_.AddPending("result"_id);
  Task task;
  task.function = "G";
  task.object_id = "result"_id;
  task.args.push_back(Arg{"first", nullptr});
  task.args.push_back(Arg{"", dep});
  task.args.push_back(Arg{"last", nullptr});
  submitter_.Submit(task, std::nullopt, Placement{});
  Step();
  objects_.Complete({"dep"_id, std::make_shared<const std::string>("dep-value"), nullptr, nullptr});
  Step();
  ASSERT_EQ(head_.requests.size(), 1u);
  head_.Grant("lease-1", "w1");
  Step();
  auto* worker = connector_.At("w1");
  ASSERT_NE(worker, nullptr);
  ASSERT_EQ(worker->calls.size(), 1u);
  EXPECT_EQ(worker->calls[0].args, (std::vector<std::string>{"first", "dep-value", "last"}));
}

TEST_F(TaskSubmitterTest, AFailedArgumentFailsTheTask) {
  objects_.AddPending("dep"_id);
  objects_.Complete({"dep"_id, nullptr,
                     std::make_shared<ErrorInfo>(ErrorInfo{protocol::TaskErrorKind::kException,
                                                           "ValueError", "bad", "P", ""}),
                     nullptr});
  auto dep = std::make_shared<ObjectCore>();
  dep->id = "dep"_id;
  objects_.AddPending("result"_id);
  Task task;
  task.function = "G";
  task.object_id = "result"_id;
  task.args.push_back(Arg{"", dep});
  submitter_.Submit(task, std::nullopt, Placement{});
  Step();
  EXPECT_EQ(ErrorOf("result"_id), "ValueError");
  EXPECT_TRUE(head_.requests.empty());
}

// Lineage for arguments: the worker could not read a stored argument (its
// node died). The task that made it runs again, and the call goes again once
// the new copy is there, reading that copy; it never ran, so it uses no retry.
TEST_F(TaskSubmitterTest, AnArgumentLostWithItsNodeIsComputedAgainAndTheCallSentAgain) {
  int recomputed = 0;
  StoreRecomputable("made"_id, "10.0.0.9", &recomputed);
  ObjectId id = SubmitWithRef("made"_id);
  Step();
  head_.Grant("lease-1", "w1");
  Step();
  auto* worker = connector_.At("w1");
  ASSERT_NE(worker, nullptr);
  ASSERT_EQ(worker->calls.size(), 1u);
  EXPECT_EQ(worker->calls[0].args, (std::vector<std::string>{"first", "stored:/store/made"}));
  // The worker names the copy it could not read by its store path.
  worker->ReplyError(worker->calls[0].call_id, "ObjectLost", "argument 1 could not be read",
                     "/store/made");
  Step();
  EXPECT_EQ(recomputed, 1);
  EXPECT_EQ(worker->calls.size(), 1u) << "sent again before its argument was made again";
  // The task that made it ran again, on another node.
  objects_.Complete({"made"_id, nullptr, nullptr, StoredOn("10.0.0.10", "/store/made-again")});
  Step();
  ASSERT_EQ(worker->calls.size(), 2u);
  EXPECT_EQ(worker->calls[1].return_id, id.Hex());
  EXPECT_EQ(worker->calls[1].args,
            (std::vector<std::string>{"first", "stored:/store/made-again"}));
  worker->Reply(worker->calls[1].call_id, "42");
  Step();
  EXPECT_EQ(objects_.Get(id, 0).view, "42");
}

// Nothing can make the argument again (a Put, or its task has no retries
// left): the call fails with ObjectLost naming the node, and an ObjectLost
// about another node is the call's own error, not a lost argument.
TEST_F(TaskSubmitterTest, AnArgumentThatCannotBeMadeAgainFailsTheCallWithObjectLost) {
  objects_.AddPending("put"_id);
  objects_.Complete({"put"_id, nullptr, nullptr, StoredOn("10.0.0.9", "/store/put")});
  ObjectId lost = SubmitWithRef("put"_id);
  ObjectId other = SubmitWithRef("put"_id);
  Step();
  auto* worker = GrantSaturated("lease-1", "w1");
  ASSERT_NE(worker, nullptr);
  ASSERT_EQ(worker->calls.size(), 2u);
  worker->ReplyError(worker->calls[0].call_id, "ObjectLost", "argument 1 could not be read",
                     "/store/put");
  worker->ReplyError(worker->calls[1].call_id, "ObjectLost", "a nested Get failed", "10.0.0.5");
  Step();
  EXPECT_EQ(worker->calls.size(), 2u);
  try {
    objects_.Get(lost, 0);
    FAIL() << "a call whose argument is lost for good returned";
  } catch (const TaskError& e) {
    EXPECT_EQ(e.type(), "ObjectLost");
    EXPECT_EQ(e.node(), "10.0.0.9");
    EXPECT_NE(e.remote_message().find("made by Put"), std::string::npos) << e.remote_message();
  }
  try {
    objects_.Get(other, 0);
    FAIL() << "a failed call returned";
  } catch (const TaskError& e) {
    EXPECT_EQ(e.remote_message(), "a nested Get failed");
  }
}

// Two arguments lost with one node, one of which nothing can make again: the
// call fails, and the other, already marked to be made again, still is (its
// entry does not stay pending with nobody computing it).
TEST_F(TaskSubmitterTest, AMixOfRecoverableAndLostArgumentsFailsButStillRecomputes) {
  int recomputed = 0;
  StoreRecomputable("made"_id, "10.0.0.9", &recomputed);
  objects_.AddPending("put"_id);
  objects_.Complete({"put"_id, nullptr, nullptr, StoredOn("10.0.0.9", "/store/put")});
  objects_.AddPending("result"_id);
  Task task;
  task.function = "G";
  task.object_id = "result"_id;
  for (const ObjectId& id : {"made"_id, "put"_id}) {
    auto ref = std::make_shared<ObjectCore>();
    ref->id = id;
    task.args.push_back(Arg{"", ref});
  }
  submitter_.Submit(task, std::nullopt, Placement{});
  Step();
  head_.Grant("lease-1", "w1");
  Step();
  auto* worker = connector_.At("w1");
  ASSERT_NE(worker, nullptr);
  ASSERT_EQ(worker->calls.size(), 1u);
  worker->ReplyError(worker->calls[0].call_id, "ObjectLost", "argument 0 could not be read",
                     "/store/made");
  Step();
  EXPECT_EQ(ErrorOf("result"_id), "ObjectLost");
  EXPECT_EQ(recomputed, 1) << "the recoverable argument was left pending with nobody making it";
}

// Transport faults (FaultyWorkerConnector). A message lost on the way is found
// out only when its connection drops; its calls then count as a dead worker's:
// WorkerCrashed without retries (the next test: run again with one).
TEST_F(TaskSubmitterTest, CallsLostWithADroppedConnectionFailAsWorkerCrashedWithoutRetries) {
  faults_.DropSends("w1", 100);
  ObjectId kept = Submit("F"), lost = Submit("F");
  Step();
  auto* w1 = GrantSaturated("lease-1", "w1");
  ASSERT_NE(w1, nullptr);
  EXPECT_TRUE(w1->calls.empty()) << "every message to w1 is lost on the way";
  EXPECT_GE(faults_.dropped("w1"), 1);
  faults_.Disconnect("w1");
  Step();
  EXPECT_EQ(ErrorOf(lost), "WorkerCrashed");
  EXPECT_EQ(ErrorOf(kept), "WorkerCrashed");
  EXPECT_EQ(head_.returned, std::vector<std::string>{"lease-1"});
}

TEST_F(TaskSubmitterTest, ACallLostWithADroppedConnectionRunsOnAnotherWorkerWithARetry) {
  faults_.DropSends("w1", 100);
  ObjectId id = "result-retried"_id;
  objects_.AddPending(id);
  Task task;
  task.function = "F";
  task.object_id = id;
  task.args.push_back(Arg{"arg", nullptr});
  task.retries_left = 1;
  submitter_.Submit(task, std::nullopt, Placement{});
  Step();
  auto* w1 = GrantSaturated("lease-1", "w1");
  ASSERT_NE(w1, nullptr);
  EXPECT_TRUE(w1->calls.empty());
  faults_.Disconnect("w1");
  Step();
  ASSERT_FALSE(head_.requests.empty()) << "no new worker asked for the retried call";
  auto* w2 = GrantSaturated("lease-2", "w2");
  ASSERT_NE(w2, nullptr);
  ASSERT_EQ(w2->calls.size(), 1u);
  EXPECT_EQ(w2->calls[0].return_id, id.Hex());
  EXPECT_EQ(w2->calls[0].args, std::vector<std::string>{"arg"});
  w2->Reply(w2->calls[0].call_id, "ok");
  EXPECT_EQ(ErrorOf(id), "");
}

// A send refused on a worker already running a call: the worker is lost, its
// running call fails, and the call it never got goes to another worker.
TEST_F(TaskSubmitterTest, ASendRefusedMidwayFailsTheRunningCallAndMovesTheUnsentOne) {
  ObjectId running = Submit("F"), unsent = Submit("F");
  Step();
  head_.Grant("lease-1", "w1");
  Step();
  auto* w1 = connector_.At("w1");
  ASSERT_NE(w1, nullptr);
  ASSERT_EQ(w1->calls.size(), 1u);
  // Saturated: the second call is pipelined onto w1, and that send is refused.
  faults_.FailNextSend("w1");
  clock_.Advance(TaskSubmitter::kSaturatedAfterMs + 1);
  submitter_.Tick();
  Step();
  EXPECT_EQ(w1->calls.size(), 1u);
  EXPECT_EQ(ErrorOf(running), "WorkerCrashed");
  EXPECT_EQ(head_.returned, std::vector<std::string>{"lease-1"});
  ASSERT_FALSE(head_.requests.empty());
  head_.Grant("lease-2", "w2");
  Step();
  auto* w2 = connector_.At("w2");
  ASSERT_NE(w2, nullptr);
  ASSERT_EQ(w2->calls.size(), 1u);
  EXPECT_EQ(w2->calls[0].return_id, unsent.Hex());
  w2->Reply(w2->calls[0].call_id, "ok");
  EXPECT_EQ(ErrorOf(unsent), "");
}

// The runtime's submitter lets a dropped worker's calls wait a moment for the
// head to say why it ended: the memory monitor's kill fails them with
// OutOfMemory, and silence with WorkerCrashed once the wait is over.
class TaskSubmitterLossTest : public testing::SubmitterFixture {
 protected:
  static constexpr int64_t kWaitMs = 50;
  TaskSubmitterLossTest()
      : SubmitterFixture("tcp://10.0.0.7:7000"),
        submitter_(
            TaskSubmitter::Deps{objects_, head_, faults_, send_queue_, resolver_, clock_, io_},
            TaskSubmitter::Options{JobId::FromWire("job-1"), nullptr, true, kWaitMs}) {}
  void TearDown() override {
    submitter_.Clear();
    Step();
  }
  // One task, running on worker "w1" of lease-1.
  ObjectId Run() {
    ObjectId id = ObjectId::FromWire("result-" + std::to_string(next_++));
    objects_.AddPending(id);
    Task task;
    task.function = "F";
    task.object_id = id;
    task.args.push_back(Arg{"x", nullptr});
    submitter_.Submit(task, std::nullopt, Placement{});
    Step();
    head_.Grant("lease-1", "w1");
    Step();
    EXPECT_NE(connector_.At("w1"), nullptr);
    return id;
  }
  // Run(), then its worker's connection drops.
  ObjectId RunAndLose() {
    ObjectId id = Run();
    auto* worker = connector_.At("w1");
    EXPECT_EQ(worker->calls.size(), 1u);
    worker->Die();
    Step();
    return id;
  }
  std::string MessageOf(const ObjectId& id) {
    try {
      objects_.Get(id, 0);
    } catch (const TaskError& e) {
      return e.remote_message();
    }
    return "";
  }
  bool Pending(const ObjectId& id) {
    return !objects_.Wait({std::make_shared<ObjectCore>(ObjectCore{id, ""})}, 1, 0)[0];
  }
  TaskSubmitter submitter_;
};

TEST_F(TaskSubmitterLossTest, TheHeadsReasonThatFollowsTheDropNamesTheCause) {
  ObjectId id = RunAndLose();
  EXPECT_TRUE(Pending(id)) << "failed before the head could say why";
  // Kept meanwhile: given back, the head would end it and tell nobody why.
  EXPECT_TRUE(head_.returned.empty());
  EXPECT_TRUE(submitter_.LoseLease(LeaseId::FromWire("lease-1"),
                                   "worker pid 7 on node 10.0.0.7 was killed by signal 9: the "
                                   "node's memory monitor killed it",
                                   protocol::TaskErrorKind::kOutOfMemory));
  EXPECT_EQ(ErrorOf(id), "OutOfMemory");
  EXPECT_NE(MessageOf(id).find("memory monitor killed it"), std::string::npos) << MessageOf(id);
  EXPECT_FALSE(submitter_.LoseLease(LeaseId::FromWire("lease-1"), "again", protocol::TaskErrorKind::kOutOfMemory))
      << "answered once";
  EXPECT_TRUE(head_.returned.empty()) << "the head ended the lease itself";
}

TEST_F(TaskSubmitterLossTest, SilenceFailsTheCallsAsACrashOnceTheWaitIsOver) {
  ObjectId id = RunAndLose();
  EXPECT_TRUE(Pending(id));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (Pending(id) && std::chrono::steady_clock::now() < deadline) {
    io_.restart();
    io_.run_one_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(ErrorOf(id), "WorkerCrashed");
  EXPECT_NE(MessageOf(id).find("crashed or was killed"), std::string::npos) << MessageOf(id);
  EXPECT_EQ(head_.returned, std::vector<std::string>{"lease-1"});
}

TEST_F(TaskSubmitterLossTest, AReasonThatCameFirstIsUsedAtOnce) {
  ObjectId id = Run();
  ASSERT_TRUE(submitter_.LoseLease(LeaseId::FromWire("lease-1"), "killed: memory", protocol::TaskErrorKind::kOutOfMemory));
  Step();
  EXPECT_EQ(ErrorOf(id), "OutOfMemory");
}

}  // namespace
}  // namespace rayx::detail
