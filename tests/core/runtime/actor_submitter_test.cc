// The actor submitter on one io_context with a fake head and fake workers:
// calls leave in submission order behind the constructor, at most 256 in
// flight, and a dead, failed or killed actor fails its calls.
#include "runtime/actor_submitter.h"

#include <gtest/gtest.h>

#include "submitter_fixture.h"

namespace rayx::detail {
namespace actor_submitter_test {  // this file's own (unit tests compile in batches)

using testing::FakeWorkerConnector;
using testing::operator""_id;

class ActorSubmitterTest : public testing::SubmitterFixture {
 protected:
  ActorSubmitterTest()
      : SubmitterFixture(""),
        submitter_(
            ActorSubmitter::Deps{objects_, head_, faults_, send_queue_, resolver_, clock_, io_},
            ActorSubmitter::Options{JobId::FromWire("job-1"), nullptr}) {}

  void TearDown() override {
    submitter_.Clear();
    Step();
  }

  // Creates actor "a1" (named `name` when set); returns the constructor's result id.
  ObjectId Create(const std::string& name = "", int max_restarts = 0, int max_task_retries = 0,
                  bool detached = false) {
    auto creation = std::make_shared<ObjectCore>();
    creation->id = ObjectId::FromWire("creation");
    objects_.AddPending(creation->id);
    Task task;
    task.function = "Counter::Create";
    task.display = task.function;
    task.object_id = creation->id;
    task.actor_creation = true;
    task.actor_id = ActorId::FromWire("a1");
    ActorOptions options;
    options.name = name;
    options.resources = {{kCpu, 1}};
    options.max_restarts = max_restarts;
    options.max_task_retries = max_task_retries;
    options.detached = detached;
    if (!name.empty()) options.metadata = "meta:" + name;
    task.args.push_back(Arg{"ctor-arg", nullptr});
    submitter_.Create(std::move(task), options, creation);
    return creation->id;
  }
  ObjectId Call(const std::string& method, const std::string& actor_id = "a1") {
    ObjectId id = ObjectId::FromWire("call-" + std::to_string(next_++));
    objects_.AddPending(id);
    Task task;
    task.function = method;
    task.object_id = id;
    task.actor_id = ActorId::FromWire(actor_id);
    task.args.push_back(Arg{"x", nullptr});
    submitter_.Submit(std::move(task));
    return id;
  }
  // Creates "a1" on worker "w1" and returns it.
  FakeWorkerConnector::Worker* Running(const std::string& name = "", int max_restarts = 0,
                                       bool detached = false) {
    Create(name, max_restarts, 0, detached);
    head_.Grant("lease-a1", "w1");
    Step();
    return connector_.At("w1");
  }
  // Creates "a1" on worker "w1" and answers its constructor; returns the worker.
  FakeWorkerConnector::Worker* Constructed(const std::string& name = "", int max_restarts = 0,
                                           bool detached = false) {
    FakeWorkerConnector::Worker* w1 = Running(name, max_restarts, detached);
    EXPECT_NE(w1, nullptr);
    if (w1 == nullptr) return nullptr;
    w1->Reply(w1->calls[0].call_id, "");
    Step();
    return w1;
  }
  // Answers the handle's pending lookup with `info` `times` times, 5 s apart
  // (each time the head's parked wait ended); false once it stops asking.
  bool AnswerLookups(const protocol::ActorInfo& info, int times) {
    for (int i = 0; i < times; ++i) {
      if (head_.lookups.size() != 1) return false;
      clock_.Advance(5000);
      auto done = std::move(head_.lookups.front().second);
      head_.lookups.pop_front();
      done(info);
      Step();
    }
    return head_.lookups.size() == 1;
  }
  // Answers every pending lookup with NotFound (the name is missing), then
  // lets 200 ms pass (kLookupPeriodMs: the next lookup goes out).
  void AnswerMissing() {
    while (!head_.lookups.empty()) {
      auto done = std::move(head_.lookups.front().second);
      head_.lookups.pop_front();
      done(Status::NotFound("no actor named 'svc'"));
      Step();
    }
    clock_.Advance(200);
    io_.run_for(std::chrono::milliseconds(400));
    io_.restart();
  }
  // Answers the pending lookup with `info` running at worker `address`.
  FakeWorkerConnector::Worker* AnswerRunning(protocol::ActorInfo info,
                                             const std::string& address) {
    EXPECT_EQ(head_.lookups.size(), 1u);
    if (head_.lookups.empty()) return nullptr;
    info.starting = false;
    info.worker_address = address;
    info.lease_id = LeaseId::FromWire("lease-" + address);
    head_.lookups.front().second(info);
    Step();
    return connector_.At(address);
  }
  std::vector<std::string> Functions(const FakeWorkerConnector::Worker& worker) {
    std::vector<std::string> out;
    for (const auto& call : worker.calls) out.push_back(call.function);
    return out;
  }

  ActorSubmitter submitter_;
};

TEST_F(ActorSubmitterTest, CreationLeasesAWorkerForTheActor) {
  Create();
  ASSERT_EQ(head_.requests.size(), 1u);
  EXPECT_TRUE(head_.requests[0].request.for_actor);
  EXPECT_EQ(head_.requests[0].request.job_id.Hex(), "job-1");
}

TEST_F(ActorSubmitterTest, CallsLeaveInSubmissionOrderBehindTheConstructor) {
  Create();
  std::vector<ObjectId> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(Call("M" + std::to_string(i)));
  head_.Grant("lease-a1", "w1");
  Step();
  auto* worker = connector_.At("w1");
  ASSERT_NE(worker, nullptr);
  ASSERT_EQ(worker->calls.size(), 6u);
  EXPECT_EQ(worker->calls[0].function, "Counter::Create");
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(worker->calls[i + 1].function, "M" + std::to_string(i));
    EXPECT_EQ(worker->calls[i + 1].actor_id, "a1");
    EXPECT_LT(worker->calls[i].call_id, worker->calls[i + 1].call_id);
  }
  for (const auto& call : worker->calls) worker->Reply(call.call_id, "r");
  for (const auto& id : ids) EXPECT_EQ(ErrorOf(id), "");
}

TEST_F(ActorSubmitterTest, AtMost256CallsAreInFlight) {
  auto* worker = Running();
  ASSERT_NE(worker, nullptr);
  for (int i = 0; i < 300; ++i) Call("M");
  Step();
  ASSERT_EQ(worker->calls.size(), kMaxInFlight);  // the constructor and 255 calls
  for (int i = 0; i < 10; ++i) worker->Reply(worker->calls[static_cast<size_t>(i)].call_id, "r");
  Step();
  EXPECT_EQ(worker->calls.size(), kMaxInFlight + 10);
  // Still in order.
  for (size_t i = 1; i < worker->calls.size(); ++i) {
    EXPECT_LT(worker->calls[i - 1].call_id, worker->calls[i].call_id);
  }
}

TEST_F(ActorSubmitterTest, ALostWorkerFailsCallsAsActorDiedAndReturnsTheLease) {
  auto* worker = Running();
  ASSERT_NE(worker, nullptr);
  ObjectId running = Call("M");
  Step();
  worker->Die();
  EXPECT_EQ(ErrorOf(running), "ActorDied");
  EXPECT_EQ(head_.returned, std::vector<std::string>{"lease-a1"});
  // Later calls fail at once.
  ObjectId later = Call("M");
  EXPECT_EQ(ErrorOf(later), "ActorDied");
}

TEST_F(ActorSubmitterTest, AFailedConstructorKillsTheActor) {
  auto* worker = Running();
  ASSERT_NE(worker, nullptr);
  worker->ReplyError(worker->calls[0].call_id, "std::runtime_error", "no GPU");
  EXPECT_EQ(ErrorOf("creation"_id), "std::runtime_error");
  EXPECT_EQ(head_.returned, std::vector<std::string>{"lease-a1"});
  ObjectId later = Call("M");
  try {
    objects_.Get(later, 0);
    FAIL() << "a call to a failed actor succeeded";
  } catch (const TaskError& e) {
    EXPECT_EQ(e.type(), "ActorDied");
    EXPECT_NE(e.remote_message().find("constructor failed: no GPU"), std::string::npos);
  }
}

// A call already sent when the constructor fails: the worker is stopped (its
// lease returned) before it answers; the call still says why the actor died.
TEST_F(ActorSubmitterTest, ACallInFlightWhenTheConstructorFailsGetsTheConstructorsError) {
  auto* worker = Running();
  ASSERT_NE(worker, nullptr);
  ObjectId call = Call("M");
  Step();
  ASSERT_EQ(worker->calls.size(), 2u);
  worker->ReplyError(worker->calls[0].call_id, "std::runtime_error", "no GPU");
  worker->Die();
  try {
    objects_.Get(call, 0);
    FAIL() << "a call to a failed actor succeeded";
  } catch (const TaskError& e) {
    EXPECT_EQ(e.type(), "ActorDied");
    EXPECT_NE(e.remote_message().find("constructor failed: no GPU"), std::string::npos)
        << e.remote_message();
  }
}

TEST_F(ActorSubmitterTest, AnActorThatCannotBePlacedFailsItsCalls) {
  ObjectId creation = Create();
  ObjectId call = Call("M");
  head_.Refuse(Status::Unavailable("infeasible: no node has 8 GPUs"));
  EXPECT_EQ(ErrorOf(creation), "ActorDied");
  EXPECT_EQ(ErrorOf(call), "ActorDied");
}

// What a collective group's creator asks (detail::ActorPlaced): an actor
// waits for a worker only until its lease is granted; a dead one waits for
// nothing, and neither does one this process does not know.
TEST_F(ActorSubmitterTest, AnActorWaitsForAWorkerOnlyUntilItsLeaseIsGranted) {
  const ActorId a1 = ActorId::FromWire("a1");
  EXPECT_FALSE(submitter_.WaitingForWorker(a1)) << "not created yet";
  Create();
  EXPECT_TRUE(submitter_.WaitingForWorker(a1));
  head_.Grant("lease-a1", "w1");
  Step();
  EXPECT_FALSE(submitter_.WaitingForWorker(a1));
  ASSERT_NE(connector_.At("w1"), nullptr);
  connector_.At("w1")->Die();
  EXPECT_FALSE(submitter_.WaitingForWorker(a1)) << "dead (no restarts): it waits for nothing";
}

TEST_F(ActorSubmitterTest, ANamedActorIsRegisteredOnceItsConstructorRan) {
  auto* worker = Running("counter");
  ASSERT_NE(worker, nullptr);
  Step();
  EXPECT_TRUE(head_.registered.empty()) << "registered before the constructor ran";
  worker->Reply(worker->calls[0].call_id, "");
  Step();
  ASSERT_EQ(head_.registered.size(), 1u);
  EXPECT_EQ(head_.registered[0].name, "counter");
  EXPECT_EQ(head_.registered[0].actor_id.Hex(), "a1");
  EXPECT_EQ(head_.registered[0].lease_id.Hex(), "lease-a1");
  EXPECT_EQ(head_.registered[0].worker_address, "w1");
}

// A restartable detached actor registers what the head needs to restart it
// once its owner is gone: its lease request with the constructor call. Only
// the registration carries it, not the handles made from the actor.
TEST_F(ActorSubmitterTest, ARestartableDetachedActorRegistersItsRestartRequest) {
  auto* worker = Running("keeper", /*max_restarts=*/2, /*detached=*/true);
  ASSERT_NE(worker, nullptr);
  worker->Reply(worker->calls[0].call_id, "");
  Step();
  // Its reservation with the constructor (ShareConstructor), then its worker.
  ASSERT_EQ(head_.registered.size(), 2u);
  EXPECT_TRUE(head_.registered[0].starting);
  EXPECT_FALSE(head_.registered[1].starting);
  auto req = protocol::Decode<protocol::RequestLeaseRequest>(head_.registered[1].restart_request);
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->init.function, "Counter::Create");
  EXPECT_EQ(req->init.actor_id.Hex(), "a1");
  EXPECT_EQ(req->init.args, std::vector<std::string>{"ctor-arg"});
  EXPECT_TRUE(req->detached);
  EXPECT_EQ(req->resources, (ResourceMap{{kCpu, 1}}));
  EXPECT_TRUE(submitter_.Describe(ActorId::FromWire("a1")).restart_request.empty())
      << "handles do not carry it";
}

TEST_F(ActorSubmitterTest, ANonDetachedActorLeavesItsRestartsToItsOwner) {
  auto* worker = Running("counter", /*max_restarts=*/2);
  ASSERT_NE(worker, nullptr);
  worker->Reply(worker->calls[0].call_id, "");
  Step();
  ASSERT_EQ(head_.registered.size(), 1u);
  EXPECT_TRUE(head_.registered[0].restart_request.empty());
}

TEST_F(ActorSubmitterTest, KillReturnsTheLeaseAndLaterCallsFail) {
  auto* worker = Running();
  ASSERT_NE(worker, nullptr);
  submitter_.Kill(ActorId::FromWire("a1"));
  EXPECT_EQ(head_.returned, std::vector<std::string>{"lease-a1"});
  EXPECT_EQ(ErrorOf(Call("M")), "ActorDied");
}

// The owner's last handle goes (Python's garbage collection): the actor is
// stopped once every call made to it has answered, not before.
TEST_F(ActorSubmitterTest, AReleasedActorStopsOnceItsCallsAnswered) {
  auto* worker = Running();
  ASSERT_NE(worker, nullptr);
  ObjectId call = Call("M");
  Step();
  submitter_.Release(ActorId::FromWire("a1"));
  EXPECT_TRUE(head_.returned.empty()) << "stopped with calls still on their way";
  worker->Reply(worker->calls[0].call_id, "");
  Step();
  EXPECT_TRUE(head_.returned.empty()) << "stopped with a call still on its way";
  ASSERT_EQ(worker->calls.size(), 2u);
  worker->Reply(worker->calls[1].call_id, "r");
  Step();
  EXPECT_EQ(ErrorOf(call), "");
  EXPECT_EQ(head_.returned, std::vector<std::string>{"lease-a1"});
  EXPECT_EQ(ErrorOf(Call("M")), "ActorDied");
}

// Named and detached actors are found by name; a released handle of one does
// not stop it (nor one created elsewhere: Release is the owner's).
TEST_F(ActorSubmitterTest, ReleasingANamedActorLeavesItRunning) {
  auto* worker = Running("counter");
  ASSERT_NE(worker, nullptr);
  worker->Reply(worker->calls[0].call_id, "");
  Step();
  submitter_.Release(ActorId::FromWire("a1"));
  Step();
  EXPECT_TRUE(head_.returned.empty());
  ObjectId call = Call("M");
  Step();
  ASSERT_EQ(worker->calls.size(), 2u);
  worker->Reply(worker->calls[1].call_id, "r");
  Step();
  EXPECT_EQ(ErrorOf(call), "");
}

TEST_F(ActorSubmitterTest, AnAttachedActorIsCalledButItsLeaseIsNotReturned) {
  protocol::ActorInfo info;
  info.actor_id = ActorId::FromWire("b1");
  info.lease_id = LeaseId::FromWire("lease-b1");
  info.worker_address = "w9";
  submitter_.Attach(info);
  EXPECT_EQ(submitter_.Describe(ActorId::FromWire("b1")).worker_address, "w9");
  ObjectId call = Call("M", "b1");
  Step();
  auto* worker = connector_.At("w9");
  ASSERT_NE(worker, nullptr);
  ASSERT_EQ(worker->calls.size(), 1u);
  worker->Die();
  EXPECT_EQ(ErrorOf(call), "ActorDied");
  EXPECT_TRUE(head_.returned.empty()) << "a caller that does not own the actor returned its lease";
}

// ---- Restarts (max_restarts, max_task_retries) --------------------------------

TEST_F(ActorSubmitterTest, ARestartRunsTheConstructorAgainAndLaterCallsReachTheNewWorker) {
  Create("", /*max_restarts=*/1);
  head_.Grant("lease-a1", "w1");
  Step();
  auto* w1 = connector_.At("w1");
  ASSERT_NE(w1, nullptr);
  ObjectId running = Call("M1");
  Step();
  ASSERT_EQ(Functions(*w1), (std::vector<std::string>{"Counter::Create", "M1"}));
  w1->Reply(w1->calls[0].call_id, "");
  w1->Die();
  Step();
  // The call in flight fails (no task retries); the lease goes back; a new one is asked for.
  EXPECT_EQ(ErrorOf(running), "ActorDied");
  EXPECT_NE(MessageOf(running).find("restarting (restart 1 of 1)"), std::string::npos)
      << MessageOf(running);
  EXPECT_EQ(head_.returned, std::vector<std::string>{"lease-a1"});
  ASSERT_EQ(head_.requests.size(), 1u);
  EXPECT_TRUE(head_.requests[0].request.for_actor);
  EXPECT_EQ(head_.requests[0].request.resources, (ResourceMap{{kCpu, 1}}));
  EXPECT_EQ(submitter_.Describe(ActorId::FromWire("a1")).worker_address, "")
      << "no worker while restarting";
  // A call made while it restarts waits for the new instance.
  ObjectId later = Call("M2");
  head_.Grant("lease-a2", "w2");
  Step();
  auto* w2 = connector_.At("w2");
  ASSERT_NE(w2, nullptr);
  ASSERT_EQ(Functions(*w2), (std::vector<std::string>{"Counter::Create", "M2"}));
  EXPECT_EQ(w2->calls[0].args, std::vector<std::string>{"ctor-arg"}) << "same constructor args";
  EXPECT_EQ(submitter_.Describe(ActorId::FromWire("a1")).worker_address, "w2");
  w2->Reply(w2->calls[1].call_id, "r2");
  EXPECT_EQ(ErrorOf(later), "");
}

TEST_F(ActorSubmitterTest, CallsInFlightWithTaskRetriesGoAgainInTheirOrder) {
  Create("", /*max_restarts=*/-1, /*max_task_retries=*/1);
  head_.Grant("lease-a1", "w1");
  ObjectId m1 = Call("M1"), m2 = Call("M2");
  Step();
  auto* w1 = connector_.At("w1");
  ASSERT_NE(w1, nullptr);
  ASSERT_EQ(w1->calls.size(), 3u);
  w1->Die();
  ObjectId m3 = Call("M3");
  Step();
  head_.Grant("lease-a2", "w2");
  Step();
  auto* w2 = connector_.At("w2");
  ASSERT_NE(w2, nullptr);
  EXPECT_EQ(Functions(*w2), (std::vector<std::string>{"Counter::Create", "M1", "M2", "M3"}));
  EXPECT_EQ(w2->calls[1].args, std::vector<std::string>{"x"}) << "a retried call keeps its args";
  for (const auto& call : w2->calls) w2->Reply(call.call_id, "r");
  EXPECT_EQ(ErrorOf(m1), "");
  EXPECT_EQ(ErrorOf(m2), "");
  EXPECT_EQ(ErrorOf(m3), "");
  // The retry allowance is per call: a new call lost on the second worker goes again too.
  ObjectId m4 = Call("M4");
  Step();
  w2->Die();
  Step();
  head_.Grant("lease-a3", "w3");
  Step();
  auto* w3 = connector_.At("w3");
  ASSERT_NE(w3, nullptr);
  EXPECT_EQ(Functions(*w3), (std::vector<std::string>{"Counter::Create", "M4"}));
}

TEST_F(ActorSubmitterTest, WhenRestartsAreExhaustedEveryCallFailsNamingTheCause) {
  Create("", /*max_restarts=*/1);
  head_.Grant("lease-a1", "w1");
  Step();
  connector_.At("w1")->Die();
  Step();
  head_.Grant("lease-a2", "w2");
  Step();
  ObjectId running = Call("M");
  Step();
  connector_.At("w2")->Die();
  Step();
  EXPECT_TRUE(head_.requests.empty()) << "restarted beyond max_restarts";
  EXPECT_EQ(head_.returned, (std::vector<std::string>{"lease-a1", "lease-a2"}));
  for (const ObjectId& id : {running, Call("M")}) {
    EXPECT_EQ(ErrorOf(id), "ActorDied");
    EXPECT_NE(MessageOf(id).find("restarted 1 times already (max_restarts 1), none are left"),
              std::string::npos)
        << MessageOf(id);
    EXPECT_NE(MessageOf(id).find("pid 4242"), std::string::npos) << MessageOf(id);
  }
}

TEST_F(ActorSubmitterTest, AFailedConstructorIsNeverRestarted) {
  Create("", /*max_restarts=*/3);
  head_.Grant("lease-a1", "w1");
  Step();
  auto* w1 = connector_.At("w1");
  ASSERT_NE(w1, nullptr);
  w1->ReplyError(w1->calls[0].call_id, "std::runtime_error", "bad config");
  w1->Die();
  Step();
  EXPECT_TRUE(head_.requests.empty());
  EXPECT_NE(MessageOf(Call("M")).find("constructor failed: bad config"), std::string::npos);
}

TEST_F(ActorSubmitterTest, KillWhileRestartingReturnsTheNewLeaseAndFailsTheCalls) {
  Create("", /*max_restarts=*/1);
  head_.Grant("lease-a1", "w1");
  Step();
  connector_.At("w1")->Die();
  Step();
  ObjectId waiting = Call("M");
  submitter_.Kill(ActorId::FromWire("a1"));
  head_.Grant("lease-a2", "w2");
  Step();
  EXPECT_EQ(head_.returned, (std::vector<std::string>{"lease-a1", "lease-a2"}));
  EXPECT_EQ(connector_.At("w2"), nullptr) << "connected to the worker of a killed actor";
  EXPECT_NE(MessageOf(waiting).find("killed"), std::string::npos) << MessageOf(waiting);
}

TEST_F(ActorSubmitterTest, ANamedActorIsRegisteredAgainWithItsNewWorker) {
  auto* w1 = Constructed("counter", /*max_restarts=*/2);
  ASSERT_NE(w1, nullptr);
  ASSERT_EQ(head_.registered.size(), 1u);
  EXPECT_EQ(head_.registered[0].max_restarts, 2);
  w1->Die();
  Step();
  // The name is reserved again at once, so that no other actor takes it
  // while this one restarts.
  ASSERT_EQ(head_.registered.size(), 2u);
  EXPECT_TRUE(head_.registered[1].starting);
  EXPECT_EQ(head_.registered[1].name, "counter");
  EXPECT_EQ(head_.registered[1].worker_address, "");
  EXPECT_EQ(head_.registered[1].metadata, "meta:counter");
  head_.Grant("lease-a2", "w2");
  Step();
  ASSERT_EQ(head_.registered.size(), 3u);
  EXPECT_FALSE(head_.registered[2].starting);
  EXPECT_EQ(head_.registered[2].worker_address, "w2");
  EXPECT_EQ(head_.registered[2].lease_id.Hex(), "lease-a2");
  EXPECT_EQ(head_.registered[2].max_restarts, 1);
}

// A detached one's reservation for its restart carries its constructor: the
// head finishes the restart should this owner die during it.
TEST_F(ActorSubmitterTest, ADetachedActorsRestartReservationCarriesItsConstructor) {
  auto* w1 = Constructed("keeper", /*max_restarts=*/2, /*detached=*/true);
  ASSERT_NE(w1, nullptr);
  size_t before = head_.registered.size();
  w1->Die();
  Step();
  ASSERT_EQ(head_.registered.size(), before + 1);
  const protocol::ActorInfo& reserve = head_.registered.back();
  EXPECT_TRUE(reserve.starting);
  auto req = protocol::Decode<protocol::RequestLeaseRequest>(reserve.restart_request);
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->init.function, "Counter::Create");
  EXPECT_EQ(req->init.args, std::vector<std::string>{"ctor-arg"});
}

TEST_F(ActorSubmitterTest, ARestartThatCannotBePlacedDropsTheNameReservedForIt) {
  auto* w1 = Constructed("counter", /*max_restarts=*/1);
  ASSERT_NE(w1, nullptr);
  w1->Die();
  Step();
  ASSERT_EQ(head_.registered.size(), 2u);
  EXPECT_TRUE(head_.registered[1].starting);
  head_.Refuse(Status::Unavailable("no node fits now"));
  Step();
  EXPECT_EQ(head_.dropped, std::vector<std::string>{"counter/a1"});
}

TEST_F(ActorSubmitterTest, AHandleOfARestartedNamedActorFindsItsNewWorker) {
  protocol::ActorInfo info;
  info.actor_id = ActorId::FromWire("b1");
  info.name = "svc";
  info.lease_id = LeaseId::FromWire("lease-b1");
  info.worker_address = "w9";
  info.max_restarts = 1;
  submitter_.Attach(info);
  ObjectId first = Call("M", "b1");
  Step();
  connector_.At("w9")->Die();
  Step();
  EXPECT_EQ(ErrorOf(first), "ActorDied");
  EXPECT_TRUE(head_.returned.empty());
  ObjectId waiting = Call("M2", "b1");
  ASSERT_EQ(head_.lookups.size(), 1u);
  EXPECT_EQ(head_.lookups[0].first, "svc");
  info.worker_address = "w10";
  info.lease_id = LeaseId::FromWire("lease-b2");
  info.max_restarts = 0;
  auto done = std::move(head_.lookups[0].second);
  head_.lookups.pop_front();
  done(info);
  Step();
  auto* w10 = connector_.At("w10");
  ASSERT_NE(w10, nullptr);
  ASSERT_EQ(Functions(*w10), std::vector<std::string>{"M2"});
  w10->Reply(w10->calls[0].call_id, "r");
  EXPECT_EQ(ErrorOf(waiting), "");
}

TEST_F(ActorSubmitterTest, AHandleGivesUpWhenTheNameNowBelongsToAnotherActor) {
  protocol::ActorInfo info;
  info.actor_id = ActorId::FromWire("b1");
  info.name = "svc";
  info.lease_id = LeaseId::FromWire("lease-b1");
  info.worker_address = "w9";
  info.max_restarts = -1;
  submitter_.Attach(info);
  Step();
  connector_.At("w9")->Die();
  Step();
  ObjectId waiting = Call("M", "b1");
  ASSERT_EQ(head_.lookups.size(), 1u);
  info.actor_id = ActorId::FromWire("b2");
  info.worker_address = "w11";
  head_.lookups[0].second(info);
  EXPECT_EQ(ErrorOf(waiting), "ActorDied");
  EXPECT_NE(MessageOf(waiting).find("now belongs to another actor"), std::string::npos);
}

// ---- Names reserved at creation (Runtime::CreateActor reserved "counter") -------

TEST_F(ActorSubmitterTest, AnOwnerRegistersItsReservedNameOnlyOnceTheConstructorRan) {
  Create("counter");
  head_.Grant("lease-a1", "w1");
  Step();
  EXPECT_TRUE(head_.registered.empty()) << "named before its constructor ran";
  auto* w1 = connector_.At("w1");
  ASSERT_NE(w1, nullptr);
  w1->Reply(w1->calls[0].call_id, "");
  Step();
  ASSERT_EQ(head_.registered.size(), 1u);
  EXPECT_FALSE(head_.registered[0].starting);
  EXPECT_EQ(head_.registered[0].worker_address, "w1");
  EXPECT_EQ(head_.registered[0].metadata, "meta:counter");
  EXPECT_TRUE(head_.dropped.empty());
}

TEST_F(ActorSubmitterTest, AReservedNameIsDroppedWhenTheActorCannotBePlaced) {
  Create("counter");
  head_.Refuse(Status::Infeasible("no node has 64 GPUs"));
  Step();
  EXPECT_EQ(head_.dropped, std::vector<std::string>{"counter/a1"});
  EXPECT_TRUE(head_.registered.empty());
}

TEST_F(ActorSubmitterTest, AReservedNameIsDroppedWhenTheConstructorFails) {
  Create("counter");
  head_.Grant("lease-a1", "w1");
  Step();
  auto* w1 = connector_.At("w1");
  ASSERT_NE(w1, nullptr);
  w1->ReplyError(w1->calls[0].call_id, "std::runtime_error", "bad config");
  Step();
  EXPECT_EQ(head_.dropped, std::vector<std::string>{"counter/a1"});
  EXPECT_TRUE(head_.registered.empty());
}

TEST_F(ActorSubmitterTest, AReservedNameIsDroppedAtOnceWhenTheActorIsKilledBeforeItsLease) {
  Create("counter");
  submitter_.Kill(ActorId::FromWire("a1"));
  EXPECT_EQ(head_.dropped, std::vector<std::string>{"counter/a1"});
  head_.Grant("lease-a1", "w1");  // arrives after all: given back
  Step();
  EXPECT_EQ(head_.returned, std::vector<std::string>{"lease-a1"});
  EXPECT_EQ(head_.dropped.size(), 1u) << "dropped twice";
  EXPECT_TRUE(head_.registered.empty());
}

TEST_F(ActorSubmitterTest, ADetachedActorStillBeingConstructedIsHandedOverWithItsConstructor) {
  Create("keeper", /*max_restarts=*/0, 0, /*detached=*/true);
  ASSERT_EQ(head_.requests.size(), 1u);
  EXPECT_EQ(head_.requests[0].request.actor_id.Hex(), "a1") << "the lease names its actor";
  head_.Grant("lease-a1", "w1");
  Step();
  ASSERT_NE(connector_.At("w1"), nullptr);  // the constructor runs there
  auto handed = submitter_.TakeHandOvers();
  ASSERT_EQ(handed.size(), 1u);
  EXPECT_EQ(handed[0].name, "keeper");
  EXPECT_EQ(handed[0].metadata, "meta:keeper");
  EXPECT_TRUE(handed[0].starting);
  auto req = protocol::Decode<protocol::RequestLeaseRequest>(handed[0].restart_request);
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->init.function, "Counter::Create");
  EXPECT_EQ(req->init.actor_id.Hex(), "a1");
  EXPECT_EQ(req->init.args, std::vector<std::string>{"ctor-arg"});
  EXPECT_TRUE(req->detached);
  // Handed over once, and no longer this process's to drop.
  EXPECT_TRUE(submitter_.TakeHandOvers().empty());
  submitter_.Kill(ActorId::FromWire("a1"));
  EXPECT_TRUE(head_.dropped.empty());
}

TEST_F(ActorSubmitterTest, OnlyDetachedActorsNotYetNamedAreHandedOver) {
  Create("keeper", 0, 0, /*detached=*/true);  // queued: its lease not granted yet
  auto handed = submitter_.TakeHandOvers();
  ASSERT_EQ(handed.size(), 1u);
  auto req = protocol::Decode<protocol::RequestLeaseRequest>(handed[0].restart_request);
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->init.args, std::vector<std::string>{"ctor-arg"}) << "from the queued call";
}

TEST_F(ActorSubmitterTest, ANamedDetachedActorIsNotHandedOverOnceRegistered) {
  ASSERT_NE(Constructed("keeper", 0, /*detached=*/true), nullptr);
  ASSERT_EQ(head_.registered.size(), 2u);
  EXPECT_FALSE(head_.registered.back().starting);
  EXPECT_TRUE(submitter_.TakeHandOvers().empty());
}

// The head gets a detached named actor's constructor with its reservation at
// once, before any lease: should this process die without a word (SIGKILL)
// or end as a task's worker, the head creates the actor itself.
TEST_F(ActorSubmitterTest, ADetachedNamedActorsReservationCarriesItsConstructorAtOnce) {
  Create("keeper", /*max_restarts=*/1, 0, /*detached=*/true);
  ASSERT_EQ(head_.registered.size(), 1u);
  const protocol::ActorInfo& reserve = head_.registered[0];
  EXPECT_TRUE(reserve.starting);
  EXPECT_EQ(reserve.name, "keeper");
  EXPECT_EQ(reserve.metadata, "meta:keeper");
  EXPECT_EQ(reserve.max_restarts, 1);
  EXPECT_TRUE(reserve.worker_address.empty());
  auto req = protocol::Decode<protocol::RequestLeaseRequest>(reserve.restart_request);
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->init.function, "Counter::Create");
  EXPECT_EQ(req->init.args, std::vector<std::string>{"ctor-arg"});
  EXPECT_TRUE(req->detached);
  // Once: not again when its constructor is sent.
  head_.Grant("lease-a1", "w1");
  Step();
  ASSERT_NE(connector_.At("w1"), nullptr);
  EXPECT_EQ(head_.registered.size(), 1u);
}

TEST_F(ActorSubmitterTest, OnlyDetachedNamedActorsShareTheirConstructor) {
  Create("counter", /*max_restarts=*/1);  // named, not detached
  EXPECT_TRUE(head_.registered.empty());
  submitter_.Clear();
  Create("", 0, 0, /*detached=*/true);  // detached, no name: nobody finds it
  EXPECT_TRUE(head_.registered.empty());
}

// A handle got by name while the actor's constructor runs (GetActor answered
// with a reserved name, no worker yet).
protocol::ActorInfo Starting() {
  protocol::ActorInfo info;
  info.actor_id = ActorId::FromWire("b1");
  info.name = "svc";
  info.starting = true;
  return info;
}

// A restarted head keeps no reservations: the owner makes its own again, a
// detached actor's with its constructor; registered names and others' are not.
TEST_F(ActorSubmitterTest, ReservationsAreMadeAgainForARestartedHead) {
  Create("keeper", /*max_restarts=*/0, 0, /*detached=*/true);
  submitter_.Attach(Starting());  // a handle: not this process's to reserve
  size_t before = head_.registered.size();
  submitter_.ReReserveNames();
  ASSERT_EQ(head_.registered.size(), before + 1);
  const protocol::ActorInfo& again = head_.registered.back();
  EXPECT_EQ(again.name, "keeper");
  EXPECT_TRUE(again.starting);
  EXPECT_FALSE(again.restart_request.empty());
  // Once its constructor ran and its worker is named, nothing is reserved.
  head_.Grant("lease-a1", "w1");
  Step();
  auto* w1 = connector_.At("w1");
  ASSERT_NE(w1, nullptr);
  w1->Reply(w1->calls[0].call_id, "");
  Step();
  before = head_.registered.size();
  submitter_.ReReserveNames();
  EXPECT_EQ(head_.registered.size(), before);
}

TEST_F(ActorSubmitterTest, AHandleOfAStartingActorQueuesCallsUntilItsWorkerIsRegistered) {
  submitter_.Attach(Starting());
  ObjectId first = Call("M", "b1");
  ObjectId second = Call("N", "b1");
  Step();
  ASSERT_EQ(head_.lookup_requests.size(), 1u);
  EXPECT_EQ(head_.lookup_requests[0].name, "svc");
  EXPECT_GT(head_.lookup_requests[0].wait_ms, 0) << "the lookup must be parked, not polled";
  // The head's wait ended with the constructor still running: asked again,
  // well past the 60 s a lost worker is waited for.
  ASSERT_TRUE(AnswerLookups(Starting(), 20)) << "stopped waiting within 100 s";
  auto* w9 = AnswerRunning(Starting(), "w9");
  ASSERT_NE(w9, nullptr);
  EXPECT_EQ(Functions(*w9), (std::vector<std::string>{"M", "N"}));
  w9->Reply(w9->calls[0].call_id, "r");
  EXPECT_EQ(ErrorOf(first), "");
  EXPECT_TRUE(head_.returned.empty()) << "a handle does not own the lease";
}

// Its creator dropped the reservation (the constructor failed) or ended
// first: the handle's calls fail once a second look, 200 ms later, finds the
// name still gone, not after the 60 s a lost worker is waited for.
TEST_F(ActorSubmitterTest, AHandleOfAStartingActorFailsItsCallsWhenTheNameGoes) {
  submitter_.Attach(Starting());
  ObjectId call = Call("M", "b1");
  Step();
  ASSERT_EQ(head_.lookups.size(), 1u);
  auto done = std::move(head_.lookups.front().second);
  head_.lookups.pop_front();
  done(Status::NotFound("no actor named 'svc'"));
  Step();
  EXPECT_TRUE(head_.lookups.empty()) << "asked again at once: it would spin";
  EXPECT_TRUE(Pending(call)) << "failed on the first look";
  clock_.Advance(200);
  io_.run_for(std::chrono::milliseconds(400));
  io_.restart();
  ASSERT_EQ(head_.lookups.size(), 1u);
  EXPECT_EQ(head_.lookup_requests.back().wait_ms, 0) << "the second look is answered at once";
  head_.lookups.front().second(Status::NotFound("no actor named 'svc'"));
  Step();
  EXPECT_EQ(ErrorOf(call), "ActorDied");
  EXPECT_NE(MessageOf(call).find("was being created, and its name is gone"), std::string::npos)
      << MessageOf(call);
}

// An owner restarting the actor reserves its name again right behind the
// lost lease: a name missing on one look and reserved on the next is waited
// for.
TEST_F(ActorSubmitterTest, AHandleOfAStartingActorWaitsThroughANameMissingOnce) {
  submitter_.Attach(Starting());
  ObjectId call = Call("M", "b1");
  Step();
  ASSERT_EQ(head_.lookups.size(), 1u);
  AnswerMissing();
  ASSERT_TRUE(AnswerLookups(Starting(), 1));
  EXPECT_GT(head_.lookup_requests.back().wait_ms, 0) << "parked again once the name is back";
  auto* w9 = AnswerRunning(Starting(), "w9");
  ASSERT_NE(w9, nullptr);
  EXPECT_EQ(Functions(*w9), std::vector<std::string>{"M"});
  EXPECT_TRUE(Pending(call)) << "its call was failed";
}

// Only looks that find the name missing one after another count: an error in
// between (the head down while it restarts) starts the count again.
TEST_F(ActorSubmitterTest, AnErrorBetweenTwoMissingLooksStartsTheCountAgain) {
  submitter_.Attach(Starting());
  ObjectId call = Call("M", "b1");
  Step();
  AnswerMissing();
  ASSERT_EQ(head_.lookups.size(), 1u);
  auto done = std::move(head_.lookups.front().second);
  head_.lookups.pop_front();
  done(Status::Unavailable("the head restarts"));
  Step();
  clock_.Advance(200);
  io_.run_for(std::chrono::milliseconds(400));
  io_.restart();
  AnswerMissing();  // missing once more: the first of a new count
  EXPECT_TRUE(Pending(call)) << MessageOf(call);
}

// A reservation seen while waiting for the constructor is forgotten once the
// worker runs: when that worker dies later, a name missing twice while its
// owner restarts it is not taken for the end of a creation.
TEST_F(ActorSubmitterTest, AReservationSeenBeforeTheWorkerRanDoesNotCountAfterItDies) {
  protocol::ActorInfo restartable = Starting();
  restartable.max_restarts = 1;
  submitter_.Attach(restartable);
  ObjectId first = Call("M", "b1");
  Step();
  auto* w9 = AnswerRunning(restartable, "w9");
  ASSERT_NE(w9, nullptr);
  w9->Reply(w9->calls[0].call_id, "r");
  EXPECT_EQ(ErrorOf(first), "");
  w9->Die();
  Step();
  ObjectId second = Call("N", "b1");
  Step();
  for (int i = 0; i < 3; ++i) {
    ASSERT_FALSE(head_.lookups.empty()) << "stopped looking";
    AnswerMissing();
  }
  EXPECT_TRUE(Pending(second)) << MessageOf(second);
}

TEST_F(ActorSubmitterTest, AHandleFailsAtOnceWhenTheHeadsRestartOfItsActorFails) {
  protocol::ActorInfo restarting = Starting();
  restarting.starting = false;  // a name with no worker: the head restarts it
  submitter_.Attach(restarting);
  ObjectId call = Call("M", "b1");
  Step();
  // Still restarting when the head's 5 s wait ended.
  ASSERT_TRUE(AnswerLookups(restarting, 1));
  head_.lookups.front().second(Status::NotFound("no actor named 'svc'"));
  Step();
  EXPECT_EQ(ErrorOf(call), "ActorDied") << "waited out the 60 s instead";
  EXPECT_NE(MessageOf(call).find("the restart failed"), std::string::npos) << MessageOf(call);
}

TEST_F(ActorSubmitterTest, AHandleWaitsPast60sForAConstructorTheHeadRuns) {
  protocol::ActorInfo restarting = Starting();
  restarting.starting = false;  // the head creates it again (a model to load)
  submitter_.Attach(restarting);
  ObjectId call = Call("M", "b1");
  Step();
  ASSERT_TRUE(AnswerLookups(restarting, 20)) << "gave up within 100 s";
  // Passed on meanwhile, it is waited for by name there too.
  protocol::ActorInfo described = submitter_.Describe(ActorId::FromWire("b1"));
  EXPECT_TRUE(described.starting);
  EXPECT_EQ(described.name, "svc");
  auto* w9 = AnswerRunning(restarting, "w9");
  ASSERT_NE(w9, nullptr);
  w9->Reply(w9->calls[0].call_id, "r");
  EXPECT_EQ(ErrorOf(call), "");
}

TEST_F(ActorSubmitterTest, AnOwnedNamedActorThatDiesForGoodDropsWhatTheHeadMayStillHold) {
  // Registered, but the worker died before the registration reached the
  // head, which refused it and kept the reservation: the drop frees it.
  auto* w1 = Constructed("counter");
  ASSERT_NE(w1, nullptr);
  ASSERT_EQ(head_.registered.size(), 1u);
  w1->Die();
  Step();
  EXPECT_EQ(head_.dropped, std::vector<std::string>{"counter/a1"});
}

TEST_F(ActorSubmitterTest, AHandleWithoutWorkerOrNameFailsItsCallsAtOnce) {
  protocol::ActorInfo info = Starting();
  info.name.clear();
  submitter_.Attach(info);
  ObjectId call = Call("M", "b1");
  Step();
  EXPECT_TRUE(head_.lookups.empty()) << "nothing to look up without a name";
  EXPECT_EQ(ErrorOf(call), "ActorDied");
  EXPECT_NE(MessageOf(call).find("cannot be found"), std::string::npos) << MessageOf(call);
}

TEST_F(ActorSubmitterTest, KillingAStartingActorThroughAHandleStopsItOnceItsWorkerIsKnown) {
  submitter_.Attach(Starting());
  ObjectId call = Call("M", "b1");
  Step();
  submitter_.Kill(ActorId::FromWire("b1"));
  EXPECT_EQ(ErrorOf(call), "ActorDied");
  EXPECT_TRUE(head_.returned.empty());
  protocol::ActorInfo running = Starting();
  running.starting = false;
  running.worker_address = "w9";
  running.lease_id = LeaseId::FromWire("lease-b1");
  ASSERT_EQ(head_.lookups.size(), 1u);
  head_.lookups.front().second(running);
  Step();
  EXPECT_EQ(head_.returned, std::vector<std::string>{"lease-b1"});
  EXPECT_EQ(connector_.At("w9"), nullptr) << "connected to a killed actor";
}

TEST_F(ActorSubmitterTest, ALeaseTheHeadDeclaredLostRestartsTheActor) {
  Create("", /*max_restarts=*/1);
  head_.Grant("lease-a1", "w1");
  Step();
  ObjectId running = Call("M");
  Step();
  submitter_.LoseLease(LeaseId::FromWire("lease-a1"), "node 10.0.0.7 (abcd) was declared dead");
  Step();
  EXPECT_EQ(ErrorOf(running), "ActorDied");
  EXPECT_NE(MessageOf(running).find("was lost: node 10.0.0.7 (abcd) was declared dead"),
            std::string::npos)
      << MessageOf(running);
  ASSERT_EQ(head_.requests.size(), 1u) << "no restart";
  head_.Grant("lease-a2", "w2");
  Step();
  EXPECT_EQ(submitter_.Describe(ActorId::FromWire("a1")).worker_address, "w2");
}

TEST_F(ActorSubmitterTest, ACallToAnUnknownActorFails) {
  EXPECT_EQ(ErrorOf(Call("M", "nobody")), "ActorDied");
}

// Transport faults (FaultyWorkerConnector): calls that arrive late still
// arrive in submission order, behind the constructor.
TEST_F(ActorSubmitterTest, CallsDelayedOnTheWayArriveInSubmissionOrder) {
  faults_.Hold("w1");
  Create();
  head_.Grant("lease-a1", "w1");
  ObjectId m1 = Call("M1"), m2 = Call("M2");
  Step();
  auto* w1 = connector_.At("w1");
  ASSERT_NE(w1, nullptr);
  EXPECT_TRUE(w1->calls.empty()) << "held on the way";
  ObjectId m3 = Call("M3");
  Step();
  faults_.Release("w1");
  ASSERT_EQ(Functions(*w1), (std::vector<std::string>{"Counter::Create", "M1", "M2", "M3"}));
  for (const auto& call : w1->calls) w1->Reply(call.call_id, "r");
  EXPECT_EQ(ErrorOf(m1), "");
  EXPECT_EQ(ErrorOf(m2), "");
  EXPECT_EQ(ErrorOf(m3), "");
}

// Calls lost on the way with a connection that then drops go again, in their
// order, to the restarted actor when they have task retries.
TEST_F(ActorSubmitterTest, CallsLostWithADroppedConnectionGoAgainToTheRestartedActor) {
  Create("", /*max_restarts=*/-1, /*max_task_retries=*/1);
  head_.Grant("lease-a1", "w1");
  Step();
  auto* w1 = connector_.At("w1");
  ASSERT_NE(w1, nullptr);
  w1->Reply(w1->calls[0].call_id, "");  // the constructor ran
  faults_.DropSends("w1", 100);
  ObjectId m1 = Call("M1"), m2 = Call("M2");
  Step();
  EXPECT_EQ(Functions(*w1), (std::vector<std::string>{"Counter::Create"})) << "lost on the way";
  faults_.Disconnect("w1");
  Step();
  EXPECT_EQ(head_.returned, std::vector<std::string>{"lease-a1"});
  head_.Grant("lease-a2", "w2");
  Step();
  auto* w2 = connector_.At("w2");
  ASSERT_NE(w2, nullptr);
  EXPECT_EQ(Functions(*w2), (std::vector<std::string>{"Counter::Create", "M1", "M2"}));
  for (const auto& call : w2->calls) w2->Reply(call.call_id, "r");
  EXPECT_EQ(ErrorOf(m1), "");
  EXPECT_EQ(ErrorOf(m2), "");
}

// A send refused (the worker's socket has no peer): without restarts the
// actor is dead, its call fails as ActorDied and its lease goes back.
TEST_F(ActorSubmitterTest, ARefusedSendFailsTheCallAsActorDied) {
  auto* worker = Running();
  ASSERT_NE(worker, nullptr);
  faults_.FailNextSend("w1");
  ObjectId call = Call("M");
  Step();
  EXPECT_EQ(ErrorOf(call), "ActorDied");
  EXPECT_EQ(head_.returned, std::vector<std::string>{"lease-a1"});
}

}  // namespace
}  // namespace rayx::detail
