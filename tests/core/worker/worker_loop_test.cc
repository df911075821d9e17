// WorkerLoop driven message by message through a fake connection: no process, no socket.
#include "worker/worker_loop.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <poll.h>
#include <zmq.hpp>

#include "common/clock.h"
#include "protocol/codec.h"
#include "protocol/push_tasks.h"
#include "rayx/detail/registry.h"
#include "transport/message.h"

namespace worker_loop_test {

int Add(int a, int b) { return a + b; }
std::string Echo(std::string s) { return s; }
int Fails(int x) { throw std::invalid_argument("x is " + std::to_string(x)); }
std::string Big(int size) { return std::string(static_cast<size_t>(size), 'b'); }

class Counter {
 public:
  static Counter* Create(int start) { return new Counter(start); }
  explicit Counter(int start) : value_(start) {}
  int Add(int by) { return value_ += by; }
  std::string Big(int size) { return std::string(static_cast<size_t>(size), 'c'); }

 private:
  int value_;
};

RAYX_REMOTE(Add, Echo, Fails, Big, Counter::Create, &Counter::Add, &Counter::Big);

// An actor whose calls wait for each other: Meet returns how many calls had
// arrived when it left, waiting up to 5 s for `n` of them (so calls that run
// one at a time return 1, 2, ... instead of n each).
class Meeting {
 public:
  static Meeting* Create(int n) { return new Meeting(n); }
  explicit Meeting(int n) : n_(n) {}
  int Meet() {
    std::unique_lock<std::mutex> lock(mu_);
    ++here_;
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::seconds(5), [&] { return here_ >= n_; });
    return here_;
  }
  int Fail(int x) { throw std::out_of_range("meeting " + std::to_string(x)); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, here_ = 0;
};

RAYX_REMOTE(Meeting::Create, &Meeting::Meet, &Meeting::Fail);
RAYX_ACTOR_CONCURRENCY(Meeting::Create, 3);

// Deferrable functions, as a concurrent Python actor's method is: "Later"
// hands its call to the test (in `later`, with its argument), "LaterOrNow"
// answers at once when its argument is "now", "DeferThenThrow" defers and
// then throws, "DeferAndDrop" defers and drops its DeferredCall.
std::mutex later_mu;
std::vector<std::pair<rayx::detail::DeferredCall, std::string>> later;

std::vector<std::pair<rayx::detail::DeferredCall, std::string>> TakeLater() {
  std::lock_guard<std::mutex> lock(later_mu);
  return std::exchange(later, {});
}

std::function<void()> on_block;

bool RegisterDeferrable() {
  using rayx::detail::ArgViews;
  using rayx::detail::CallControl;
  auto add = [](const std::string& name,
                std::function<std::string(void*, const ArgViews&, CallControl&)> fn) {
    rayx::detail::RemoteFunction f;
    f.name = name;
    f.invoke_deferrable = std::move(fn);
    rayx::detail::FunctionRegistry::Instance().Add("worker-loop-test:" + name, std::move(f));
  };
  add("Later", [](void*, const ArgViews& args, CallControl& call) {
    std::lock_guard<std::mutex> lock(later_mu);
    later.emplace_back(call.Defer(), std::string(args.at(0)));  // the view dies with the call
    return std::string();
  });
  add("LaterOrNow", [](void*, const ArgViews& args, CallControl& call) {
    if (args.at(0) == rayx::detail::Pack(std::string("now"))) return std::string(args.at(0));
    std::lock_guard<std::mutex> lock(later_mu);
    later.emplace_back(call.Defer(), std::string(args.at(0)));
    return std::string();
  });
  add("DeferThenThrow", [](void*, const ArgViews&, CallControl& call) -> std::string {
    std::lock_guard<std::mutex> lock(later_mu);
    later.emplace_back(call.Defer(), "");
    throw std::runtime_error("failed after deferring");
  });
  add("DeferAndDrop", [](void*, const ArgViews&, CallControl& call) {
    call.Defer();
    return std::string();
  });
  // A call that blocks in a get: runs the test's `on_block` (the worker's
  // hook would run WorkerLoop::ReleaseQueued), then answers "done".
  add("Blocks", [](void*, const ArgViews&, CallControl&) {
    if (on_block) on_block();
    return rayx::detail::Pack(std::string("done"));
  });
  // A generator call: yields its argument's count of items ("0", "1", ...)
  // as it runs, then returns how many.
  add("YieldN", [](void*, const ArgViews& args, CallControl& call) {
    int n = rayx::detail::Unpack<int>(args.at(0));
    for (int i = 0; i < n; ++i) call.Yield(rayx::detail::Pack(std::to_string(i)));
    return rayx::detail::Pack(n);
  });
  return true;
}
[[maybe_unused]] const bool deferrable_registered = RegisterDeferrable();

}  // namespace worker_loop_test

namespace rayx::detail {
namespace worker_loop_unit {  // this file's own (unit tests compile in batches)

using protocol::MessageType;

// One call of a request: its function, actor and msgpack-encoded arguments.
struct CallSpec {
  uint64_t call_id;
  std::string function;
  std::vector<std::string> args;
  std::string actor_id;
  bool actor_creation = false;
};

// A WorkerLoop whose replies land in `sent`, as a caller's DEALER would get them.
class WorkerLoopTest : public ::testing::Test {
 protected:
  WorkerLoopTest()
      : servers_(std::make_shared<ObjectServerDirectory>(
            [this]() -> Result<std::vector<std::string>> { return known_servers_; }, clock_,
            ObjectServerDirectory::Options{})),
        loop_(context_, MakeEnv(),
              [this](transport::Frames& out) { sent_.push_back(std::move(out)); }, servers_) {}

  static WorkerEnv MakeEnv() {
    WorkerEnv env;
    env.node_ip = "127.0.0.1";
    env.head_address = "127.0.0.1:6380";
    env.job_id = JobId::FromWire("job-1");
    return env;  // no store: every result travels in the reply
  }

  // [routing][envelope][body] of a PushTasksRequest with `calls`.
  static transport::Frames Request(
      const std::vector<CallSpec>& calls,
      uint16_t type = static_cast<uint16_t>(MessageType::kPushTasksRequest),
      const std::string& caller = "caller-1") {
    std::string body;
    protocol::PushTasksWriter writer;
    writer.BeginRequest(&body, "job-1");
    for (const CallSpec& call : calls) {
      writer.Call(call.call_id, call.actor_creation, call.function, call.actor_id,
                  "obj-" + std::to_string(call.call_id), static_cast<uint32_t>(call.args.size()));
      for (const auto& arg : call.args) writer.InlineArg(arg);
    }
    writer.Finish();
    protocol::Envelope env;
    env.t = type;
    env.id = calls.empty() ? 1 : calls.front().call_id;
    transport::Frames frames;
    frames.push_back(transport::MakeFrame(caller));
    frames.push_back(transport::MakeFrame(protocol::Encode(env)));
    frames.push_back(transport::MakeFrame(body));
    return frames;
  }

  // Every result of every reply sent so far, in order; `callers` (when given)
  // gets each result's caller (the reply's routing frame).
  std::vector<protocol::TaskResultView> Results(std::vector<std::string>* callers = nullptr) {
    std::vector<protocol::TaskResultView> all;
    for (auto& reply : sent_) {
      EXPECT_GE(reply.size(), 3u);
      if (!callers) {
        EXPECT_EQ(transport::FrameView(reply[0]), "caller-1");  // back to the sender
      }
      auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(reply[1]));
      EXPECT_TRUE(env.ok());
      EXPECT_EQ(env->t, static_cast<uint16_t>(MessageType::kPushTasksReply));
      std::vector<std::string_view> payload;
      for (size_t i = 3; i < reply.size(); ++i) payload.push_back(transport::FrameView(reply[i]));
      std::vector<protocol::TaskResultView> results;
      Status parsed =
          protocol::ParsePushTasksReply(transport::FrameView(reply[2]), payload, &results);
      EXPECT_TRUE(parsed.ok()) << parsed;
      all.insert(all.end(), results.begin(), results.end());
      if (callers) callers->resize(all.size(), std::string(transport::FrameView(reply[0])));
    }
    return all;
  }

  zmq::context_t context_{1};
  std::vector<transport::Frames> sent_;
  ManualClock clock_;
  // The object servers the head would list.
  std::vector<std::string> known_servers_;
  std::shared_ptr<ObjectServerDirectory> servers_;
  WorkerLoop loop_;
};

TEST_F(WorkerLoopTest, RunsATaskAndRepliesToItsCaller) {
  auto frames = Request({{7, "Add", {Pack(2), Pack(3)}}});
  loop_.Handle(frames);
  auto results = Results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].call_id, 7u);
  EXPECT_EQ(results[0].value.kind, protocol::WireValue::kInline);
  EXPECT_EQ(std::string(results[0].value.bytes), Pack(5));
}

TEST_F(WorkerLoopTest, EveryCallOfABatchIsAnsweredInOrder) {
  std::vector<CallSpec> calls;
  for (uint64_t i = 1; i <= 20; ++i) calls.push_back({i, "Add", {Pack(int(i)), Pack(100)}});
  auto frames = Request(calls);
  loop_.Handle(frames);
  auto results = Results();
  ASSERT_EQ(results.size(), 20u);
  for (uint64_t i = 1; i <= 20; ++i) {
    EXPECT_EQ(results[i - 1].call_id, i);
    EXPECT_EQ(std::string(results[i - 1].value.bytes), Pack(int(i) + 100));
  }
}

TEST_F(WorkerLoopTest, AnExceptionBecomesAnErrorResultWithItsTypeAndNode) {
  auto frames = Request({{3, "Fails", {Pack(4)}}});
  loop_.Handle(frames);
  auto results = Results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].value.kind, protocol::WireValue::kError);
  EXPECT_EQ(results[0].error_type, "std::invalid_argument");
  EXPECT_EQ(results[0].error_message, "x is 4");
  EXPECT_EQ(results[0].error_node, "127.0.0.1");
}

TEST_F(WorkerLoopTest, AWrongArgumentTypeIsReportedAsSuch) {
  auto frames = Request({{3, "Add", {Pack(std::string("two")), Pack(3)}}});
  loop_.Handle(frames);
  auto results = Results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].error_type, "ArgumentTypeError");
}

TEST_F(WorkerLoopTest, AnUnregisteredFunctionIsNamedInTheError) {
  auto frames = Request({{5, "NoSuchFunction", {}}});
  loop_.Handle(frames);
  auto results = Results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].error_type, "FunctionNotFound");
  EXPECT_NE(results[0].error_message.find("NoSuchFunction"), std::string::npos);
  EXPECT_NE(results[0].error_message.find("RAYX_REMOTE"), std::string::npos);
}

TEST_F(WorkerLoopTest, AnActorKeepsItsStateAcrossMessages) {
  auto create = Request({{1, "Counter::Create", {Pack(10)}, "actor-1", true}});
  loop_.Handle(create);
  auto first = Request({{2, "Counter::Add", {Pack(5)}, "actor-1"}});
  loop_.Handle(first);
  auto second = Request({{3, "Counter::Add", {Pack(1)}, "actor-1"}});
  loop_.Handle(second);
  auto results = Results();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].value.kind, protocol::WireValue::kInline);  // created
  EXPECT_EQ(std::string(results[1].value.bytes), Pack(15));
  EXPECT_EQ(std::string(results[2].value.bytes), Pack(16));
}

// A detached actor's worker reports its owner's constructor call (to its
// agent, then the head): when it begins, and how it ends, once.
TEST_F(WorkerLoopTest, TheConstructionObserverHearsTheConstructorBeginAndEndOnce) {
  std::vector<std::string> heard;
  loop_.SetConstructionObserver([&](bool began, const std::string& error) {
    heard.push_back(began ? "began" : "ended:" + error);
    if (began) {
      EXPECT_EQ(sent_.size(), 1u) << "told after the constructor ran (only the task's reply)";
    }
  });
  auto task = Request({{1, "Add", {Pack(1), Pack(2)}}});
  loop_.Handle(task);
  EXPECT_TRUE(heard.empty()) << "a task is no constructor";
  auto create = Request({{2, "Counter::Create", {Pack(10)}, "actor-1", true}});
  loop_.Handle(create);
  EXPECT_EQ(heard, (std::vector<std::string>{"began", "ended:"}));
  auto again = Request({{3, "Counter::Create", {Pack(10)}, "actor-1", true}});
  loop_.Handle(again);
  EXPECT_EQ(heard.size(), 2u) << "told only of the first constructor";
}

TEST_F(WorkerLoopTest, TheConstructionObserverHearsWhyAConstructorFailed) {
  std::vector<std::string> heard;
  loop_.SetConstructionObserver([&](bool began, const std::string& error) {
    heard.push_back(began ? "began" : "ended:" + error);
  });
  // Wrong argument type: the constructor cannot run.
  auto create = Request({{1, "Counter::Create", {Pack(std::string("ten"))}, "actor-1", true}});
  loop_.Handle(create);
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[0], "began");
  EXPECT_NE(heard[1].find("ended:ArgumentTypeError: "), std::string::npos) << heard[1];
}

// A detached actor the head restarts is constructed from a file before the
// worker serves calls; the file is removed; a bad one fails with the reason.
TEST_F(WorkerLoopTest, AnActorIsConstructedFromItsInitFile) {
  auto write = [](const protocol::ActorInit& init) {
    std::string path = ::testing::TempDir() + "worker-loop-test.actor-init";
    std::ofstream(path, std::ios::binary) << protocol::Encode(init);
    return path;
  };
  protocol::ActorInit bad{"NoSuch::Create", ActorId::FromWire("actor-1"), {Pack(1)}};
  std::string path = write(bad);
  Status missing = loop_.ConstructFromFile(path);
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("NoSuch::Create"), std::string::npos) << missing;
  EXPECT_FALSE(std::ifstream(path).good()) << "the file is removed";
  EXPECT_FALSE(loop_.ConstructFromFile(path).ok()) << "a missing file";

  path = write({"Counter::Create", ActorId::FromWire("actor-1"), {Pack(40)}});
  ASSERT_TRUE(loop_.ConstructFromFile(path).ok());
  auto call = Request({{2, "Counter::Add", {Pack(2)}, "actor-1"}});
  loop_.Handle(call);
  auto results = Results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(std::string(results[0].value.bytes), Pack(42)) << "constructed with its arguments";
}

TEST_F(WorkerLoopTest, AnActorCallWithoutAnActorFails) {
  auto frames = Request({{2, "Counter::Add", {Pack(5)}, "actor-1"}});
  loop_.Handle(frames);
  auto results = Results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].value.kind, protocol::WireValue::kError);
  EXPECT_NE(results[0].error_message.find("no actor"), std::string::npos)
      << results[0].error_message;
}

TEST_F(WorkerLoopTest, ALargeResultTravelsInItsOwnFrame) {
  int size = static_cast<int>(protocol::kMaxInlineWireValue) + 10;
  auto frames = Request({{9, "Big", {Pack(size)}}});
  loop_.Handle(frames);
  auto results = Results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].value.kind, protocol::WireValue::kFrame);
  EXPECT_EQ(std::string(results[0].value.bytes), Pack(std::string(size, 'b')));
}

// --- Deferred calls: answered later, from another thread ---------------------

// Whether `fd` becomes readable within `timeout_ms`.
bool Readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

TEST_F(WorkerLoopTest, ADeferredCallIsAnsweredWhenItsThreadCompletesIt) {
  auto frames = Request({{1, "Later", {Pack(std::string("x"))}}, {2, "Add", {Pack(1), Pack(2)}}});
  loop_.Handle(frames);
  auto results = Results();
  ASSERT_EQ(results.size(), 1u) << "the call behind the deferred one is answered at once";
  EXPECT_EQ(results[0].call_id, 2u);
  EXPECT_EQ(loop_.deferred_count(), 1u);
  EXPECT_FALSE(Readable(loop_.completion_fd(), 0)) << "nothing answered yet";

  auto calls = worker_loop_test::TakeLater();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].second, Pack(std::string("x"))) << "the argument, copied during the call";
  std::thread answer([call = calls[0].first] { call.Succeed(Pack(std::string("done"))); });
  answer.join();
  ASSERT_TRUE(Readable(loop_.completion_fd(), 5000)) << "the answer wakes the loop";
  loop_.CompleteDeferred();
  EXPECT_FALSE(Readable(loop_.completion_fd(), 0)) << "the fd is cleared once answers are taken";
  results = Results();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].call_id, 1u);
  EXPECT_EQ(results[1].value.kind, protocol::WireValue::kInline);
  EXPECT_EQ(std::string(results[1].value.bytes), Pack(std::string("done")));
  EXPECT_EQ(loop_.deferred_count(), 0u);
}

// An actor whose calls run on other threads asks to exit through its exit
// call's answer: the answers before it are sent first, then the process ends
// (here: the test's exit hook), and nothing after it is sent.
TEST_F(WorkerLoopTest, AnExitAnswerEndsTheWorkerAfterTheAnswersBeforeIt) {
  auto frames = Request({{1, "Later", {Pack(1)}}, {2, "Later", {Pack(2)}}, {3, "Later", {Pack(3)}}});
  loop_.Handle(frames);
  auto calls = worker_loop_test::TakeLater();
  ASSERT_EQ(calls.size(), 3u);
  int exited = -1;
  loop_.SetExit([&exited](int status) { exited = status; });
  calls[0].first.Succeed(Pack(std::string("nap done")));
  calls[1].first.Fail(WorkerLoop::kWorkerExitAnswer, "7");
  calls[2].first.Succeed(Pack(std::string("after the exit")));
  ASSERT_TRUE(Readable(loop_.completion_fd(), 5000));
  loop_.CompleteDeferred();
  EXPECT_EQ(exited, 7);
  auto results = Results();
  ASSERT_EQ(results.size(), 1u) << "only the answer before the exit left";
  EXPECT_EQ(results[0].call_id, 1u);
  EXPECT_EQ(std::string(results[0].value.bytes), Pack(std::string("nap done")));
}

TEST_F(WorkerLoopTest, DeferredResultsLeaveInTheOrderAnsweredToTheirOwnCallers) {
  auto first = Request({{1, "Later", {Pack(1)}}, {2, "Later", {Pack(2)}}},
                       static_cast<uint16_t>(MessageType::kPushTasksRequest), "caller-1");
  loop_.Handle(first);
  auto second = Request({{1, "Later", {Pack(3)}}},
                        static_cast<uint16_t>(MessageType::kPushTasksRequest), "caller-2");
  loop_.Handle(second);
  EXPECT_TRUE(sent_.empty());
  EXPECT_EQ(loop_.deferred_count(), 3u);
  auto calls = worker_loop_test::TakeLater();
  ASSERT_EQ(calls.size(), 3u);
  // Answered backwards, from three threads at once.
  std::vector<std::thread> threads;
  for (int i = 2; i >= 0; --i) {
    threads.emplace_back([call = calls[i].first, i] { call.Succeed(Pack(i * 10)); });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(Readable(loop_.completion_fd(), 5000));
  loop_.CompleteDeferred();
  std::vector<std::string> callers;
  auto results = Results(&callers);
  ASSERT_EQ(results.size(), 3u);
  for (size_t i = 0; i < results.size(); ++i) {
    // Caller 2's call 1 answered 20, caller 1's calls 1 and 2 answered 0 and 10.
    int value = Unpack<int>(results[i].value.bytes);
    if (callers[i] == "caller-2") {
      EXPECT_EQ(results[i].call_id, 1u);
      EXPECT_EQ(value, 20);
    } else {
      EXPECT_EQ(callers[i], "caller-1");
      EXPECT_EQ(value, results[i].call_id == 1 ? 0 : 10);
    }
  }
  EXPECT_EQ(loop_.deferred_count(), 0u);
}

// Each item leaves at once (its own reply, ahead of the call's result), in
// order, numbered; the call behind the generator is answered after it.
TEST_F(WorkerLoopTest, AGeneratorCallSendsEachItemAsItIsYieldedBeforeItsResult) {
  auto frames = Request({{1, "YieldN", {Pack(3)}}, {2, "Add", {Pack(1), Pack(2)}}});
  loop_.Handle(frames);
  EXPECT_GE(sent_.size(), 3u) << "one reply per item, sent as it is yielded";
  auto results = Results();
  ASSERT_EQ(results.size(), 5u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(results[i].call_id, 1u);
    EXPECT_TRUE(results[i].item);
    EXPECT_EQ(results[i].item_index, i);
    EXPECT_EQ(std::string(results[i].value.bytes), Pack(std::to_string(i)));
  }
  EXPECT_EQ(results[3].call_id, 1u);
  EXPECT_FALSE(results[3].item);
  EXPECT_EQ(std::string(results[3].value.bytes), Pack(3)) << "its result: the item count";
  EXPECT_EQ(results[4].call_id, 2u);
}

// A deferred call's items go through its DeferredCall, answered from
// another thread; they leave before its result, and none after it.
TEST_F(WorkerLoopTest, ADeferredGeneratorsItemsPrecedeItsResultAndNoneFollowIt) {
  auto frames = Request({{4, "Later", {Pack(0)}}});
  loop_.Handle(frames);
  auto calls = worker_loop_test::TakeLater();
  ASSERT_EQ(calls.size(), 1u);
  std::thread producer([call = calls[0].first] {
    call.Item(Pack(std::string("first")));
    call.Item(Pack(std::string("second")));
    call.Succeed(Pack(2));
    call.Item(Pack(std::string("too late")));
  });
  producer.join();
  ASSERT_TRUE(Readable(loop_.completion_fd(), 5000));
  loop_.CompleteDeferred();
  auto results = Results();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[0].item);
  EXPECT_EQ(results[0].item_index, 0u);
  EXPECT_EQ(std::string(results[0].value.bytes), Pack(std::string("first")));
  EXPECT_EQ(results[1].item_index, 1u);
  EXPECT_FALSE(results[2].item);
  EXPECT_EQ(std::string(results[2].value.bytes), Pack(2));
  EXPECT_EQ(loop_.deferred_count(), 0u);
}

// A task that blocks in a get hands back the tasks queued behind it (the
// rest of its batch and what waits on the socket), unstarted, and answers
// itself as usual; nothing it handed back runs here.
TEST_F(WorkerLoopTest, ATaskThatBlocksHandsBackTheTasksQueuedBehindIt) {
  int drained = 0;
  loop_.SetDrain([&](const std::function<void(transport::Frames&)>& take) {
    if (drained++ > 0) return;  // one message waits, once
    auto waiting = Request({{7, "Add", {Pack(1), Pack(1)}}, {8, "Echo", {Pack(std::string("e"))}}},
                           static_cast<uint16_t>(MessageType::kPushTasksRequest), "caller-2");
    take(waiting);
  });
  worker_loop_test::on_block = [this] {
    loop_.ReleaseQueued();
    loop_.ReleaseQueued();  // a later slice of the same wait: nothing twice
  };
  auto frames = Request({{1, "Add", {Pack(1), Pack(2)}},
                         {2, "Blocks", {}},
                         {3, "Add", {Pack(3), Pack(4)}},
                         {4, "Echo", {Pack(std::string("x"))}}});
  loop_.Handle(frames);
  worker_loop_test::on_block = nullptr;
  std::vector<std::string> callers;
  auto results = Results(&callers);
  ASSERT_EQ(results.size(), 6u);
  std::map<uint64_t, std::pair<std::string, std::string>> by_call;  // id -> caller, error type
  for (size_t i = 0; i < results.size(); ++i) {
    by_call[results[i].call_id + (callers[i] == "caller-2" ? 100 : 0)] = {
        callers[i], std::string(results[i].error_type)};
  }
  EXPECT_EQ(by_call[1].second, "") << "it ran before the blocking call";
  EXPECT_EQ(by_call[2].second, "") << "the blocked call answers itself";
  EXPECT_EQ(by_call[3].second, "Requeued");
  EXPECT_EQ(by_call[4].second, "Requeued");
  EXPECT_EQ(by_call[107].second, "Requeued") << "the waiting message's calls, to their caller";
  EXPECT_EQ(by_call[108].second, "Requeued");
  EXPECT_EQ(results.back().call_id, 2u) << "handed back before the blocked call ends";
}

// An actor's calls keep their order: its worker hands nothing back; and no
// call runs outside a batch's run.
TEST_F(WorkerLoopTest, AnActorsWorkerAndAnIdleLoopHandNothingBack) {
  bool drained = false;
  loop_.SetDrain([&](const std::function<void(transport::Frames&)>&) { drained = true; });
  loop_.ReleaseQueued();
  EXPECT_FALSE(drained) << "no call runs";
  auto create = Request({{1, "Counter::Create", {Pack(0)}, "actor-1", true}});
  loop_.Handle(create);
  worker_loop_test::on_block = [this] { loop_.ReleaseQueued(); };
  auto frames = Request({{2, "Blocks", {}, "actor-1"}, {3, "Counter::Add", {Pack(5)}, "actor-1"}});
  loop_.Handle(frames);
  worker_loop_test::on_block = nullptr;
  EXPECT_FALSE(drained);
  auto results = Results();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[2].call_id, 3u);
  EXPECT_EQ(std::string(results[2].value.bytes), Pack(5)) << "it ran, in order";
}

TEST_F(WorkerLoopTest, ADeferrableFunctionThatAnswersAtOnceIsNotDeferred) {
  auto frames = Request({{1, "LaterOrNow", {Pack(std::string("now"))}}});
  loop_.Handle(frames);
  auto results = Results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(std::string(results[0].value.bytes), Pack(std::string("now")));
  EXPECT_EQ(loop_.deferred_count(), 0u);
  EXPECT_TRUE(worker_loop_test::TakeLater().empty());
}

TEST_F(WorkerLoopTest, ACallThatThrowsAfterDeferringAnswersWithItsErrorOnce) {
  auto frames = Request({{4, "DeferThenThrow", {}}});
  loop_.Handle(frames);
  auto results = Results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].error_type, "std::runtime_error");
  EXPECT_EQ(loop_.deferred_count(), 0u);
  auto calls = worker_loop_test::TakeLater();
  ASSERT_EQ(calls.size(), 1u);
  calls[0].first.Succeed(Pack(1));  // too late: the caller has its answer
  ASSERT_TRUE(Readable(loop_.completion_fd(), 5000));
  loop_.CompleteDeferred();
  EXPECT_EQ(sent_.size(), 1u) << "no second answer";
}

TEST_F(WorkerLoopTest, ADeferredCallNobodyAnswersFailsInsteadOfBeingLost) {
  auto frames = Request({{6, "DeferAndDrop", {}}});
  loop_.Handle(frames);
  ASSERT_TRUE(Readable(loop_.completion_fd(), 5000));
  loop_.CompleteDeferred();
  auto results = Results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].call_id, 6u);
  EXPECT_EQ(results[0].error_type, "CallDropped");
  EXPECT_EQ(loop_.deferred_count(), 0u);
}

TEST_F(WorkerLoopTest, OnlyTheFirstAnswerOfADeferredCallCounts) {
  auto frames = Request({{1, "Later", {Pack(0)}}});
  loop_.Handle(frames);
  auto calls = worker_loop_test::TakeLater();
  ASSERT_EQ(calls.size(), 1u);
  calls[0].first.Fail("ValueError", "bad value");
  calls[0].first.Succeed(Pack(1));
  ASSERT_TRUE(Readable(loop_.completion_fd(), 5000));
  loop_.CompleteDeferred();
  auto results = Results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].error_type, "ValueError");
  EXPECT_EQ(results[0].error_message, "bad value");
}

TEST_F(WorkerLoopTest, ALargeDeferredResultTravelsInItsOwnFrame) {
  auto frames = Request({{1, "Later", {Pack(0)}}});
  loop_.Handle(frames);
  auto calls = worker_loop_test::TakeLater();
  ASSERT_EQ(calls.size(), 1u);
  std::string big(protocol::kMaxInlineWireValue + 10, 'd');
  calls[0].first.Succeed(big);
  ASSERT_TRUE(Readable(loop_.completion_fd(), 5000));
  loop_.CompleteDeferred();
  auto results = Results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].value.kind, protocol::WireValue::kFrame);
  EXPECT_EQ(std::string(results[0].value.bytes), big);
}

// Many answers from many threads: each is sent once, none is lost.
TEST_F(WorkerLoopTest, EveryDeferredCallIsAnsweredOnceUnderConcurrentAnswers) {
  constexpr int kCalls = 600;  // past one reply's 256 results
  std::vector<CallSpec> specs;
  for (int i = 1; i <= kCalls; ++i) specs.push_back({uint64_t(i), "Later", {Pack(i)}});
  auto frames = Request(specs);
  loop_.Handle(frames);
  auto calls = worker_loop_test::TakeLater();
  ASSERT_EQ(calls.size(), size_t(kCalls));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&calls, t] {
      for (size_t i = t; i < calls.size(); i += 4) calls[i].first.Succeed(calls[i].second);
    });
  }
  // The loop drains while the threads answer, as RunWorker would.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (loop_.deferred_count() > 0 && std::chrono::steady_clock::now() < deadline) {
    if (Readable(loop_.completion_fd(), 100)) loop_.CompleteDeferred();
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(loop_.deferred_count(), 0u);
  auto results = Results();
  ASSERT_EQ(results.size(), size_t(kCalls));
  std::vector<int> seen(kCalls + 1, 0);
  for (const auto& r : results) {
    ASSERT_GE(r.call_id, 1u);
    ASSERT_LE(r.call_id, uint64_t(kCalls));
    ++seen[r.call_id];
    EXPECT_EQ(Unpack<int>(r.value.bytes), int(r.call_id)) << "each call got its own answer";
  }
  for (int i = 1; i <= kCalls; ++i) EXPECT_EQ(seen[i], 1) << "call " << i;
}

// RAYX_ACTOR_CONCURRENCY: the calls of a C++ actor run on a pool of threads.
TEST_F(WorkerLoopTest, ACppActorWithMaxConcurrencyRunsItsCallsAtOnce) {
  auto create = Request({{1, "Meeting::Create", {Pack(3)}, "actor-1", true}});
  loop_.Handle(create);
  auto calls = Request({{2, "Meeting::Meet", {}, "actor-1"},
                        {3, "Meeting::Meet", {}, "actor-1"},
                        {4, "Meeting::Fail", {Pack(7)}, "actor-1"},
                        {5, "Meeting::Meet", {}, "actor-1"}});
  loop_.Handle(calls);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (loop_.deferred_count() > 0 && std::chrono::steady_clock::now() < deadline) {
    if (Readable(loop_.completion_fd(), 100)) loop_.CompleteDeferred();
  }
  ASSERT_EQ(loop_.deferred_count(), 0u);
  auto results = Results();
  ASSERT_EQ(results.size(), 5u);
  EXPECT_EQ(results[0].call_id, 1u);  // created
  for (size_t i = 1; i < results.size(); ++i) {
    if (results[i].call_id == 4) {
      EXPECT_EQ(results[i].error_type, "std::out_of_range");
      EXPECT_EQ(results[i].error_message, "meeting 7");
    } else {
      EXPECT_EQ(Unpack<int>(results[i].value.bytes), 3) << "all three met: they ran at once";
    }
  }
}

// A stored argument whose node's object server is gone (the connection is
// refused): the call does not run, and its error is ObjectLost carrying the
// lost copy's path, which the caller uses to compute the argument again; the
// message names the node.
TEST_F(WorkerLoopTest, AnUnreadableStoredArgumentIsObjectLostNamingItsNode) {
  // A port nothing listens on: bound, then closed.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  protocol::ObjectLocation gone;
  gone.node_address = "127.0.0.9";
  gone.object_address = "tcp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  known_servers_ = {gone.object_address};  // a node of the cluster, now gone
  gone.path = "/store/lost";
  gone.size = 8;
  std::string body;
  protocol::PushTasksWriter writer;
  writer.BeginRequest(&body, "job-1");
  writer.Call(6, false, "Add", "", "obj-6", 2);
  writer.InlineArg(Pack(1));
  writer.StoredArg(gone);
  writer.Finish();
  auto frames = Request({{6, "Add", {Pack(1), Pack(2)}}});
  frames[2] = transport::MakeFrame(body);
  loop_.Handle(frames);
  auto results = Results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].value.kind, protocol::WireValue::kError);
  EXPECT_EQ(results[0].error_type, "ObjectLost");
  EXPECT_EQ(results[0].error_node, "/store/lost");
  EXPECT_NE(results[0].error_message.find("127.0.0.9"), std::string::npos)
      << results[0].error_message;
  EXPECT_NE(results[0].error_message.find("argument 1 of Add"), std::string::npos)
      << results[0].error_message;
}

TEST_F(WorkerLoopTest, AMalformedBatchIsAnsweredWithAnErrorReply) {
  auto frames = Request({{4, "Add", {Pack(1), Pack(2)}}});
  frames[2] = transport::MakeFrame("not a batch");
  loop_.Handle(frames);
  ASSERT_EQ(sent_.size(), 1u);
  ASSERT_GE(sent_[0].size(), 3u);
  EXPECT_EQ(transport::FrameView(sent_[0][0]), "caller-1");
  auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(sent_[0][1]));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->t, static_cast<uint16_t>(MessageType::kErrorReply));
  EXPECT_EQ(env->id, 4u);
}

TEST_F(WorkerLoopTest, AnotherProtocolVersionIsRefused) {
  auto frames = Request({{4, "Add", {Pack(1), Pack(2)}}});
  protocol::Envelope env;
  env.v = kProtocolVersion + 1;
  env.t = static_cast<uint16_t>(MessageType::kPushTasksRequest);
  env.id = 4;
  frames[1] = transport::MakeFrame(protocol::Encode(env));
  loop_.Handle(frames);
  ASSERT_EQ(sent_.size(), 1u);
  auto reply = protocol::Decode<protocol::Envelope>(transport::FrameView(sent_[0][1]));
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->t, static_cast<uint16_t>(MessageType::kErrorReply));
}

TEST_F(WorkerLoopTest, OtherMessagesAndShortOnesAreIgnored) {
  auto other = Request({{4, "Add", {Pack(1), Pack(2)}}},
                       static_cast<uint16_t>(MessageType::kHeartbeatRequest));
  loop_.Handle(other);
  transport::Frames short_message;
  short_message.push_back(transport::MakeFrame("caller-1"));
  loop_.Handle(short_message);
  EXPECT_TRUE(sent_.empty());
}


// ---- Containment: what a worker maps, pulls and writes for a call.

// A worker of job kJob with a store in a temp dir, fed pushes built by Push.
class WorkerLoopContainment : public ::testing::Test {
 protected:
  static constexpr char kJob[] = "0123456789abcdef";
  static constexpr char kOtherJob[] = "fedcba9876543210";
  static constexpr char kOwnServer[] = "tcp://127.0.0.1:1";

  // One argument: inline bytes, or a location.
  struct Arg {
    std::string bytes;
    std::optional<protocol::ObjectLocation> stored;
  };
  struct Call {
    uint64_t call_id;
    std::string function;
    std::vector<Arg> args;
    std::string actor_id;
    bool actor_creation = false;
  };

  WorkerLoopContainment() {
    char pattern[] = "/tmp/rayx-worker-loop-XXXXXX";
    root_ = mkdtemp(pattern);
    store_ = root_ + "/rayx-store-test";
    std::filesystem::create_directories(store_);
    WorkerEnv env;
    env.node_ip = "127.0.0.1";
    env.head_address = "127.0.0.1:6380";
    env.job_id = JobId::FromWire(kJob);
    env.store_dir = store_;
    env.object_address = kOwnServer;
    servers_ = std::make_shared<ObjectServerDirectory>(
        [this]() -> Result<std::vector<std::string>> { return known_servers_; }, clock_,
        ObjectServerDirectory::Options{}, std::vector<std::string>{kOwnServer});
    PullOptions pull;
    pull.max_object_bytes = 1 << 20;
    pull.connect_timeout_ms = 2000;
    loop_ = std::make_unique<WorkerLoop>(
        context_, env, [this](transport::Frames& out) { sent_.push_back(std::move(out)); },
        servers_, pull);
  }
  ~WorkerLoopContainment() override { std::filesystem::remove_all(root_); }

  static std::string ObjectId(int n) {
    std::string hex = std::to_string(n);
    return std::string(32 - hex.size(), '0') + hex;
  }

  // Writes `bytes` as object `n` of job kJob; returns its location.
  protocol::ObjectLocation StoreObject(int n, const std::string& bytes) {
    auto path = SharedMemoryStore(store_).Write(kJob + std::string("-") + ObjectId(n), bytes);
    EXPECT_TRUE(path.ok()) << path.status();
    return Local(path.ok() ? *path : "", bytes.size());
  }
  static protocol::ObjectLocation Local(const std::string& path, uint64_t size) {
    protocol::ObjectLocation location;
    location.node_address = "127.0.0.1";
    location.object_address = kOwnServer;
    location.path = path;
    location.size = size;
    return location;
  }

  void Push(const std::string& job, const std::vector<Call>& calls) {
    std::string body;
    protocol::PushTasksWriter writer;
    writer.BeginRequest(&body, job);
    for (const Call& call : calls) {
      writer.Call(call.call_id, call.actor_creation, call.function, call.actor_id,
                  ObjectId(1000 + static_cast<int>(call.call_id)),
                  static_cast<uint32_t>(call.args.size()));
      for (const Arg& arg : call.args) {
        if (arg.stored) {
          writer.StoredArg(*arg.stored);
        } else {
          writer.InlineArg(arg.bytes);
        }
      }
    }
    writer.Finish();
    protocol::Envelope env;
    env.t = static_cast<uint16_t>(MessageType::kPushTasksRequest);
    env.id = calls.front().call_id;
    transport::Frames frames;
    frames.push_back(transport::MakeFrame("caller-1"));
    frames.push_back(transport::MakeFrame(protocol::Encode(env)));
    frames.push_back(transport::MakeFrame(body));
    loop_->Handle(frames);
  }

  // The results of the last reply (its frames stay in sent_).
  std::vector<protocol::TaskResultView> LastResults() {
    EXPECT_FALSE(sent_.empty());
    std::vector<protocol::TaskResultView> results;
    if (sent_.empty()) return results;
    auto& reply = sent_.back();
    std::vector<std::string_view> payload;
    for (size_t i = 3; i < reply.size(); ++i) payload.push_back(transport::FrameView(reply[i]));
    Status parsed = protocol::ParsePushTasksReply(transport::FrameView(reply[2]), payload, &results);
    EXPECT_TRUE(parsed.ok()) << parsed;
    return results;
  }

  // The one result of a push of `call` from this worker's job.
  protocol::TaskResultView RunOne(const Call& call, const std::string& job = kJob) {
    Push(job, {call});
    auto results = LastResults();
    EXPECT_EQ(results.size(), 1u);
    return results.empty() ? protocol::TaskResultView{} : results[0];
  }

  std::string root_, store_;
  zmq::context_t context_{1};
  std::vector<transport::Frames> sent_;
  ManualClock clock_;
  std::vector<std::string> known_servers_;
  std::shared_ptr<ObjectServerDirectory> servers_;
  std::unique_ptr<WorkerLoop> loop_;
};

TEST_F(WorkerLoopContainment, ATaskOfAnotherJobIsRefusedNamingBothJobs) {
  auto result = RunOne({1, "Big", {{Pack(200 * 1024)}}}, kOtherJob);
  EXPECT_EQ(result.value.kind, protocol::WireValue::kError);
  EXPECT_EQ(result.error_type, "WrongJob");
  EXPECT_NE(result.error_message.find(kJob), std::string::npos) << result.error_message;
  EXPECT_NE(result.error_message.find(kOtherJob), std::string::npos) << result.error_message;
  // An actor's creation too.
  result = RunOne({2, "Counter::Create", {{Pack(1)}}, "actor-1", true}, kOtherJob);
  EXPECT_EQ(result.error_type, "WrongJob");
  // Nothing was written for the invented job.
  for (const auto& entry : std::filesystem::directory_iterator(store_)) {
    ADD_FAILURE() << "a file in the store: " << entry.path();
  }
}

TEST_F(WorkerLoopContainment, LargeResultsAreStoredOnlyUnderTheWorkersOwnJob) {
  auto own = RunOne({1, "Big", {{Pack(200 * 1024)}}});
  ASSERT_EQ(own.value.kind, protocol::WireValue::kStored) << own.error_message;
  EXPECT_EQ(own.value.stored.path, store_ + "/" + kJob + "-" + ObjectId(1001));
  EXPECT_TRUE(std::filesystem::exists(own.value.stored.path));

  // A named actor is shared: another job's call runs, its result inline.
  ASSERT_EQ(RunOne({2, "Counter::Create", {{Pack(1)}}, "actor-1", true}).value.kind,
            protocol::WireValue::kInline);
  auto other = RunOne({3, "Counter::Big", {{Pack(200 * 1024)}}, "actor-1"}, kOtherJob);
  EXPECT_EQ(other.value.kind, protocol::WireValue::kFrame) << other.error_message;
  EXPECT_EQ(other.value.bytes.size(), Pack(std::string(200 * 1024, 'c')).size());
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(store_)) {
    EXPECT_EQ(entry.path().filename().string().rfind(kJob, 0), 0u) << entry.path();
    ++files;
  }
  EXPECT_EQ(files, 1u);
}

TEST_F(WorkerLoopContainment, AStoredArgumentOfThisStoreIsMappedWhenItsSizeMatches) {
  auto hello = StoreObject(1, Pack(std::string("hello")));
  auto result = RunOne({1, "Echo", {{"", hello}}});
  ASSERT_EQ(result.value.kind, protocol::WireValue::kInline) << result.error_message;
  EXPECT_EQ(std::string(result.value.bytes), Pack(std::string("hello")));

  hello.size += 1;
  result = RunOne({2, "Echo", {{"", hello}}});
  EXPECT_EQ(result.error_type, "InvalidArgument");
  EXPECT_NE(result.error_message.find("declares"), std::string::npos) << result.error_message;
}

// Paths a caller names on this node: only objects of the store are opened.
TEST_F(WorkerLoopContainment, APathOutsideTheStoreIsRefusedAndNeverRead) {
  const std::string secret = root_ + "/secret";
  std::ofstream(secret, std::ios::binary) << Pack(std::string("the secret"));
  const uint64_t size = std::filesystem::file_size(secret);
  std::vector<std::string> paths = {
      secret,
      store_ + "/../secret",
      store_ + "/" + kJob + "-" + ObjectId(1) + "/../../secret",
      store_ + "/not-an-object",
      store_,
  };
  // A link planted under an object's name, and a FIFO (which would block a
  // reader that opened it).
  const std::string link = store_ + "/" + kJob + "-" + ObjectId(2);
  std::filesystem::create_symlink(secret, link);
  paths.push_back(link);
  const std::string fifo = store_ + "/" + kJob + "-" + ObjectId(3);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  paths.push_back(fifo);
  std::filesystem::create_directory(store_ + "/" + kJob + "-" + ObjectId(4));
  paths.push_back(store_ + "/" + kJob + "-" + ObjectId(4));
  uint64_t id = 1;
  for (const auto& path : paths) {
    auto result = RunOne({id++, "Echo", {{"", Local(path, size)}}});
    EXPECT_EQ(result.value.kind, protocol::WireValue::kError) << path;
    EXPECT_EQ(result.error_type, "InvalidArgument") << path << ": " << result.error_message;
    EXPECT_EQ(std::string(result.value.bytes).find("secret"), std::string::npos) << path;
  }
}

// A location on another node: pulled only from a known object server, and
// only when its declared size is within bounds; refused before connecting.
TEST_F(WorkerLoopContainment, APullGoesOnlyToAKnownObjectServerWithinItsBound) {
  // A TCP listener that counts who connects.
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 16), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  protocol::ObjectLocation elsewhere;
  elsewhere.node_address = "127.0.0.9";
  elsewhere.object_address = "tcp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  elsewhere.path = "/dev/shm/rayx-store-x/" + std::string(kJob) + "-" + ObjectId(1);
  elsewhere.size = 100;

  auto start = std::chrono::steady_clock::now();
  auto result = RunOne({1, "Echo", {{"", elsewhere}}});
  EXPECT_EQ(result.error_type, "InvalidArgument");
  EXPECT_NE(result.error_message.find("not the object server of any alive node"),
            std::string::npos)
      << result.error_message;
  EXPECT_EQ(servers_->fetches(), 1u) << "an unknown address asks the head once";
  result = RunOne({2, "Echo", {{"", elsewhere}}});
  EXPECT_EQ(servers_->fetches(), 1u) << "and not again within the refresh period";

  // Known, but declaring more than a pull takes: refused before connecting.
  known_servers_ = {elsewhere.object_address};
  clock_.Advance(5000);
  elsewhere.size = uint64_t{2} << 30;
  result = RunOne({3, "Echo", {{"", elsewhere}}});
  EXPECT_EQ(result.error_type, "InvalidArgument");
  EXPECT_NE(result.error_message.find("2147483648"), std::string::npos) << result.error_message;
  EXPECT_NE(result.error_message.find("1048576"), std::string::npos) << result.error_message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_LT(::accept(listener, nullptr, nullptr), 0) << "something connected to the listener";
  ::close(listener);
}

}  // namespace
}  // namespace rayx::detail
