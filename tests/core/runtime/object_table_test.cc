// The object table alone: Get and Wait wake on completion and time out,
// continuations run once, released results are dropped, arguments resolve.
#include "runtime/object_table.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "rayx/errors.h"

namespace rayx::detail {
namespace object_table_test {  // this file's own (unit tests compile in batches)

using namespace std::chrono_literals;

// "a"_id: an object id for these tests (the table takes any id its owner made).
ObjectId operator""_id(const char* text, size_t size) {
  return ObjectId::FromWire(std::string(text, size));
}

class ObjectTableTest : public ::testing::Test {
 protected:
  ObjectTable& Table(ObjectTable::Options options = {}) {
    if (options.node_ip.empty()) options.node_ip = "10.0.0.1";
    if (!options.on_unwanted) {
      options.on_unwanted = [this](const protocol::ObjectLocation& l) { unwanted_.push_back(l); };
    }
    table_ = std::make_unique<ObjectTable>(std::move(options));
    return *table_;
  }
  static ObjectTable::Completion Value(const std::string& id, const std::string& bytes) {
    return {ObjectId::FromWire(id), std::make_shared<const std::string>(bytes), nullptr, nullptr};
  }
  static ObjectTable::Completion Failure(const std::string& id, const std::string& type) {
    return {ObjectId::FromWire(id), nullptr,
            std::make_shared<ErrorInfo>(
                ErrorInfo{protocol::TaskErrorKind::kException, type, "it broke", "F", "n1"}),
            nullptr};
  }
  static std::shared_ptr<const protocol::ObjectLocation> Remote(const std::string& path) {
    auto location = std::make_shared<protocol::ObjectLocation>();
    location->node_address = "10.0.0.9";
    location->path = path;
    location->size = 3;
    return location;
  }
  static std::vector<ObjectHandle> Handles(const std::vector<std::string>& ids) {
    std::vector<ObjectHandle> handles;
    for (const auto& id : ids) {
      auto core = std::make_shared<ObjectCore>();
      core->id = ObjectId::FromWire(id);
      handles.push_back(core);
    }
    return handles;
  }
  // Blocks until `n` threads wait in Get/Wait (a deadline, not a sleep).
  void AwaitWaiters(size_t n) {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (table_->TEST_waiting() < n) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "nobody blocked in Get/Wait";
      std::this_thread::yield();
    }
  }

  std::unique_ptr<ObjectTable> table_;
  std::vector<protocol::ObjectLocation> unwanted_;
};

TEST_F(ObjectTableTest, GetReturnsAValuePutBefore) {
  ObjectTable& table = Table();
  table.AddValue("a"_id, std::make_shared<const std::string>("abc"));
  EXPECT_EQ(table.Get("a"_id, 0).view, "abc");
  EXPECT_EQ(table.size(), 1u);
}

TEST_F(ObjectTableTest, GetWakesWhenTheResultArrives) {
  ObjectTable& table = Table();
  table.AddPending("a"_id);
  auto got =
      std::async(std::launch::async, [&] { return std::string(table.Get("a"_id, 10000).view); });
  AwaitWaiters(1);
  table.Complete(Value("a", "done"));
  ASSERT_EQ(got.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(got.get(), "done");
}

// INT64_MAX (a caller's "forever") waits for the object: added to now it
// would overflow into the past and time out at once.
TEST_F(ObjectTableTest, AHugeTimeoutWaitsInsteadOfOverflowing) {
  ObjectTable& table = Table();
  table.AddPending("a"_id);
  table.AddPending("b"_id);
  auto got = std::async(std::launch::async,
                        [&] { return std::string(table.Get("a"_id, INT64_MAX).view); });
  auto waited =
      std::async(std::launch::async, [&] { return table.Wait(Handles({"b"}), 1, INT64_MAX); });
  AwaitWaiters(2);
  table.Complete(Value("a", "done"));
  table.Complete(Value("b", "done"));
  ASSERT_EQ(got.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(got.get(), "done");
  ASSERT_EQ(waited.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(waited.get(), std::vector<bool>{true});
}

// Spin-then-block: a result that ends during the spin is taken without the
// thread ever sleeping on the condition variable.
TEST_F(ObjectTableTest, ASpinningGetTakesAResultThatArrivesDuringItsSpin) {
  ObjectTable& table = Table({.spin_us = 60'000'000});
  table.AddPending("a"_id);
  table.AddPending("other"_id);
  auto got =
      std::async(std::launch::async, [&] { return std::string(table.Get("a"_id, 60000).view); });
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (table.TEST_spinning() < 1) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "Get never spun";
    std::this_thread::yield();
  }
  // Another object's end makes the spinner look, and spin on: it never sleeps.
  table.Complete(Value("other", "not this one"));
  EXPECT_EQ(table.TEST_spinning(), 1u);
  EXPECT_EQ(table.TEST_waiting(), 0u);
  table.Complete(Value("a", "done"));
  ASSERT_EQ(got.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(got.get(), "done");
  EXPECT_EQ(table.TEST_spinning(), 0u);
}

// A spin that sees nothing end sleeps, and is woken like any Get.
TEST_F(ObjectTableTest, ASpinThatEndsEmptyHandedSleepsUntilTheResult) {
  ObjectTable& table = Table({.spin_us = 1000});
  table.AddPending("a"_id);
  auto got =
      std::async(std::launch::async, [&] { return std::string(table.Get("a"_id, 60000).view); });
  AwaitWaiters(1);
  table.Complete(Value("a", "done"));
  ASSERT_EQ(got.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(got.get(), "done");
}

// The spin never outlasts the caller's timeout.
TEST_F(ObjectTableTest, ASpinEndsAtTheGetsTimeout) {
  ObjectTable& table = Table({.spin_us = 60'000'000});
  table.AddPending("a"_id);
  auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(table.Get("a"_id, 20), GetTimeoutError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  EXPECT_EQ(table.TEST_spinning(), 0u);
}

TEST_F(ObjectTableTest, GetTimesOutOnAPendingObject) {
  ObjectTable& table = Table();
  table.AddPending("a"_id);
  EXPECT_THROW(table.Get("a"_id, 20), GetTimeoutError);
}

TEST_F(ObjectTableTest, GetThrowsTheTaskErrorOfAFailedObject) {
  ObjectTable& table = Table();
  table.AddPending("a"_id);
  table.Complete(Failure("a", "ValueError"));
  try {
    table.Get("a"_id, 0);
    FAIL() << "Get of a failed object returned";
  } catch (const TaskError& e) {
    EXPECT_EQ(e.type(), "ValueError");
  }
}

TEST_F(ObjectTableTest, GetOfAFreedObjectThrows) {
  ObjectTable& table = Table();
  EXPECT_THROW(table.Get("nope"_id, 0), std::runtime_error);
}

TEST_F(ObjectTableTest, ShutdownFailsPendingObjectsAndWakesGet) {
  ObjectTable& table = Table();
  table.AddPending("a"_id);
  auto got = std::async(std::launch::async, [&] {
    try {
      table.Get("a"_id, -1);
      return std::string("returned");
    } catch (const TaskError& e) {
      return e.type();
    }
  });
  AwaitWaiters(1);
  table.FailAllPending(ErrorInfo::Of(protocol::TaskErrorKind::kRuntimeStopped, "stopped"));
  ASSERT_EQ(got.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(got.get(), "RuntimeStopped");
}

TEST_F(ObjectTableTest, TasksAreCountedWhenSubmittedAndOnceWhenTheyEnd) {
  ObjectTable& table = Table();
  table.AddPendingTask("a"_id);
  table.AddPendingTask("b"_id);
  table.AddPendingTask("c"_id);
  table.AddPendingTask("a"_id);  // already there: not a second task
  table.AddPending("not-a-task"_id);
  table.Complete(Value("a", "x"));
  table.Complete(Value("a", "again"));  // lineage remaking it: not a second finish
  table.Complete(Failure("b", "ValueError"));
  table.Complete(Value("not-a-task", "y"));
  table.CountRetry();
  table.FailAllPending(ErrorInfo::Of(protocol::TaskErrorKind::kRuntimeStopped, "stopped"));
  protocol::TaskCounters counts = table.counters().Read().tasks;
  EXPECT_EQ(counts.submitted, 3u);
  EXPECT_EQ(counts.finished, 1u);
  EXPECT_EQ(counts.failed, 2u) << "b's error and c at shutdown";
  EXPECT_EQ(counts.retried, 1u);
}

TEST_F(ObjectTableTest, WaitReturnsOnceEnoughAreReady) {
  ObjectTable& table = Table();
  for (const ObjectId& id : {"a"_id, "b"_id, "c"_id}) table.AddPending(id);
  auto handles = Handles({"a", "b", "c"});
  auto ready = std::async(std::launch::async, [&] { return table.Wait(handles, 2, 10000); });
  AwaitWaiters(1);
  std::vector<ObjectTable::Completion> batch{Value("a", "1"), Value("c", "3")};
  table.CompleteAll(batch);
  EXPECT_TRUE(batch.empty());
  ASSERT_EQ(ready.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(ready.get(), (std::vector<bool>{true, false, true}));
}

TEST_F(ObjectTableTest, WaitTimesOutWithWhatIsReady) {
  ObjectTable& table = Table();
  table.AddPending("a"_id);
  table.AddValue("b"_id, std::make_shared<const std::string>("x"));
  EXPECT_EQ(table.Wait(Handles({"a", "b"}), 2, 20), (std::vector<bool>{false, true}));
}

TEST_F(ObjectTableTest, ContinuationsRunOnceOnCompletion) {
  ObjectTable& table = Table();
  table.AddPending("a"_id);
  int runs = 0;
  ASSERT_TRUE(table.AddWaiter("a"_id, [&] { ++runs; }));
  table.Complete(Value("a", "1"));
  table.Complete(Value("a", "2"));  // a duplicate reply runs nothing again
  EXPECT_EQ(runs, 1);
  // Not pending any more: nothing to wait for.
  EXPECT_FALSE(table.AddWaiter("a"_id, [&] { ++runs; }));
  EXPECT_FALSE(table.AddWaiter("unknown"_id, [&] { ++runs; }));
  EXPECT_EQ(runs, 1);
}

TEST_F(ObjectTableTest, AResultReleasedBeforeItArrivesIsDroppedAndItsFileUnwanted) {
  ObjectTable& table = Table();
  table.AddPending("a"_id);
  ObjectTable::Released released = table.Release("a"_id);
  EXPECT_EQ(released.location, nullptr);
  EXPECT_EQ(table.size(), 1u);  // kept until its result arrives
  table.Complete({"a"_id, nullptr, nullptr, Remote("/store/a")});
  EXPECT_EQ(table.size(), 0u);
  ASSERT_EQ(unwanted_.size(), 1u);
  EXPECT_EQ(unwanted_[0].path, "/store/a");
}

TEST_F(ObjectTableTest, ReleaseHandsBackAStoredObjectsLocation) {
  ObjectTable& table = Table();
  table.AddPending("a"_id);
  table.Complete({"a"_id, nullptr, nullptr, Remote("/store/a")});
  ObjectTable::Released released = table.Release("a"_id);
  ASSERT_NE(released.location, nullptr);
  EXPECT_EQ(released.location->path, "/store/a");
  EXPECT_FALSE(released.shared_out);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_TRUE(unwanted_.empty());
}

// Generator items: `id` of stream `stream` (the generator call's result).
ObjectTable::Completion Item(const std::string& stream, const std::string& id,
                             const std::string& bytes,
                             std::shared_ptr<const protocol::ObjectLocation> location = nullptr) {
  ObjectTable::Completion c;
  c.id = ObjectId::FromWire(id);
  c.stream = ObjectId::FromWire(stream);
  if (location) {
    c.location = std::move(location);
  } else {
    c.value = std::make_shared<const std::string>(bytes);
  }
  return c;
}

TEST_F(ObjectTableTest, AnItemThatArrivesUnclaimedIsHeldByItsStreamUntilClaimed) {
  ObjectTable& table = Table();
  table.AddPending("gen"_id);
  table.Complete(Item("gen", "i0", "zero"));
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.TEST_unclaimed_items(), 1u);
  table.ClaimStreamItem("gen"_id, "i0"_id);
  EXPECT_EQ(table.TEST_unclaimed_items(), 0u) << "the claimer holds it now";
  EXPECT_EQ(table.Get("i0"_id, 0).view, "zero");
  table.Release("i0"_id);
  EXPECT_EQ(table.size(), 1u);
}

TEST_F(ObjectTableTest, AnItemClaimedBeforeItArrivesIsCompletedByItsArrival) {
  ObjectTable& table = Table();
  table.AddPending("gen"_id);
  table.ClaimStreamItem("gen"_id, "i0"_id);
  auto got = std::async(std::launch::async, [&] { return std::string(table.Get("i0"_id, 10000).view); });
  AwaitWaiters(1);
  table.Complete(Item("gen", "i0", "zero"));
  EXPECT_EQ(got.get(), "zero");
  EXPECT_EQ(table.TEST_unclaimed_items(), 0u);
  table.Complete(Value("gen", "1 item"));
  EXPECT_EQ(table.Get("i0"_id, 0).view, "zero") << "the stream's end leaves items that came";
}

TEST_F(ObjectTableTest, AClaimedItemThatNeverComesFailsWhenItsStreamEnds) {
  ObjectTable& table = Table();
  table.AddPending("gen"_id);
  table.ClaimStreamItem("gen"_id, "i0"_id);
  auto got = std::async(std::launch::async, [&] {
    try {
      table.Get("i0"_id, 10000);
      return std::string("a value");
    } catch (const TaskError& e) {
      return e.type();
    }
  });
  AwaitWaiters(1);
  table.Complete(Failure("gen", "WorkerCrashed"));
  EXPECT_EQ(got.get(), "GeneratorEnded") << "not left pending for ever";
  EXPECT_EQ(table.TEST_unclaimed_items(), 0u);
  // Claimed after the end: it fails at once.
  table.ClaimStreamItem("gen"_id, "i1"_id);
  EXPECT_THROW(table.Get("i1"_id, 0), TaskError);
  table.Release("i0"_id);
  table.Release("i1"_id);
  table.Release("gen"_id);
  EXPECT_EQ(table.size(), 0u) << "nothing of the stream is left";
}

TEST_F(ObjectTableTest, ReleasingAStreamReleasesItsUnclaimedItemsAndLaterOnesAreUnwanted) {
  ObjectTable& table = Table();
  table.AddPending("gen"_id);
  table.Complete(Item("gen", "i0", "zero"));
  table.Complete(Item("gen", "i1", "", Remote("/store/i1")));
  table.ClaimStreamItem("gen"_id, "i2"_id);  // claimed, on its way
  ObjectTable::Released released = table.Release("gen"_id);
  ASSERT_EQ(released.unclaimed_items.size(), 1u) << "the stored unclaimed item's file goes";
  EXPECT_EQ(released.unclaimed_items[0]->path, "/store/i1");
  EXPECT_EQ(table.TEST_unclaimed_items(), 0u);
  EXPECT_THROW(table.Get("i2"_id, 0), TaskError) << "its claimer is not left waiting";
  table.Complete(Item("gen", "i3", "", Remote("/store/i3")));
  ASSERT_EQ(unwanted_.size(), 1u) << "an item after its stream was released";
  EXPECT_EQ(unwanted_[0].path, "/store/i3");
  table.Complete(Value("gen", "4 items"));
  table.Release("i2"_id);
  EXPECT_EQ(table.size(), 0u);
}

TEST_F(ObjectTableTest, ResolveArgReportsEachState) {
  ObjectTable& table = Table();
  table.AddValue("value"_id, std::make_shared<const std::string>("bytes"));
  table.AddPending("pending"_id);
  table.AddPending("failed"_id);
  table.Complete(Failure("failed", "Boom"));
  table.AddPending("stored"_id);
  table.Complete({"stored"_id, nullptr, nullptr, Remote("/store/s")});

  std::string bytes;
  protocol::ObjectLocation location;
  ErrorInfo error;
  EXPECT_EQ(table.ResolveArg("value"_id, &bytes, &location, &error), ObjectTable::ArgState::kValue);
  EXPECT_EQ(bytes, "bytes");
  EXPECT_EQ(table.ResolveArg("pending"_id, &bytes, &location, &error),
            ObjectTable::ArgState::kPending);
  EXPECT_EQ(table.ResolveArg("unknown"_id, &bytes, &location, &error),
            ObjectTable::ArgState::kUnknown);
  EXPECT_EQ(table.ResolveArg("failed"_id, &bytes, &location, &error),
            ObjectTable::ArgState::kFailed);
  EXPECT_EQ(error.type, "Boom");
  EXPECT_EQ(table.ResolveArg("stored"_id, &bytes, &location, &error),
            ObjectTable::ArgState::kStored);
  EXPECT_EQ(location.path, "/store/s");
  // Handed to another process: releasing it says so, so its file is not reused.
  EXPECT_TRUE(table.Release("stored"_id).shared_out);
}

TEST_F(ObjectTableTest, GetPullsARemoteObjectOnceAndKeepsIt) {
  int pulls = 0;
  ObjectTable::Options options;
  options.pull = [&](const protocol::ObjectLocation& location) -> Result<std::string> {
    ++pulls;
    return "from " + location.path;
  };
  ObjectTable& table = Table(std::move(options));
  table.AddPending("a"_id);
  table.Complete({"a"_id, nullptr, nullptr, Remote("/store/a")});
  EXPECT_EQ(table.Get("a"_id, 0).view, "from /store/a");
  EXPECT_EQ(table.Get("a"_id, 0).view, "from /store/a");
  EXPECT_EQ(pulls, 1);
}

// True when the spiller could take `path` now: no process claims it for reading.
bool Unclaimed(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return free;
}

TEST_F(ObjectTableTest, BytesOfAMappedObjectClaimItsFileWhileTheProgramHoldsThem) {
  char pattern[] = "/tmp/rayx-object-table-test-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  const std::string path = dir + "/object";
  std::ofstream(path) << "abc";
  int maps = 0;
  ObjectTable::Options options;
  options.map_local = [&](const protocol::ObjectLocation& location) {
    ++maps;
    return MappedObject::Open(location.path);
  };
  ObjectTable& table = Table(std::move(options));
  auto location = std::make_shared<protocol::ObjectLocation>(*Remote(path));
  location->node_address = "10.0.0.1";  // this node: mapped in place
  table.AddPending("a"_id);
  table.Complete({"a"_id, nullptr, nullptr, location});
  ASSERT_TRUE(Unclaimed(path));
  {
    ObjectBytes first = table.Get("a"_id, 0);
    EXPECT_EQ(first.view, "abc");
    EXPECT_FALSE(Unclaimed(path));  // the spiller passes it over
    ObjectBytes second = table.Get("a"_id, 0);  // the cached mapping, the same claim
    EXPECT_EQ(second.keepalive, first.keepalive);
    first = {};
    EXPECT_FALSE(Unclaimed(path));
  }
  // Let go: the table's own cached mapping claims nothing.
  EXPECT_TRUE(Unclaimed(path));
  EXPECT_EQ(table.Get("a"_id, 0).view, "abc");
  EXPECT_TRUE(Unclaimed(path));
  EXPECT_EQ(maps, 1);
  std::filesystem::remove_all(dir);
}

TEST_F(ObjectTableTest, AFailedPullIsAnObjectLostError) {
  ObjectTable::Options options;
  options.pull = [](const protocol::ObjectLocation&) -> Result<std::string> {
    return Status::Unavailable("node gone");
  };
  ObjectTable& table = Table(std::move(options));
  table.AddPending("a"_id);
  table.Complete({"a"_id, nullptr, nullptr, Remote("/store/a")});
  try {
    table.Get("a"_id, 0);
    FAIL() << "Get of a lost object returned";
  } catch (const TaskError& e) {
    EXPECT_EQ(e.type(), "ObjectLost");
    EXPECT_NE(e.remote_message().find("node gone"), std::string::npos) << e.remote_message();
    EXPECT_NE(e.remote_message().find("no retries left"), std::string::npos) << e.remote_message();
  }
}

// Lineage: the stored copy cannot be read (its node died); the task that made
// it runs again (the recompute closure) and Get returns the new value. The
// closure is used once: a second loss with none left is ObjectLost.
TEST_F(ObjectTableTest, ALostStoredCopyIsComputedAgainByItsTask) {
  ObjectTable::Options options;
  options.pull = [](const protocol::ObjectLocation&) -> Result<std::string> {
    return Status::Unavailable("node gone");
  };
  ObjectTable& table = Table(std::move(options));
  table.AddPending("a"_id);
  int runs = 0;
  ObjectTable::Completion stored{"a"_id, nullptr, nullptr, Remote("/store/a")};
  stored.recompute = [&] {
    ++runs;
    // The task ran again; its new copy is another lost one (no retries left).
    table.Complete({"a"_id, nullptr, nullptr, Remote("/store/a2")});
  };
  table.Complete(std::move(stored));
  try {
    table.Get("a"_id, 1000);
    FAIL() << "Get of an object lost twice returned";
  } catch (const TaskError& e) {
    EXPECT_EQ(e.type(), "ObjectLost");
  }
  EXPECT_EQ(runs, 1);

  table.AddPending("b"_id);
  ObjectTable::Completion b{"b"_id, nullptr, nullptr, Remote("/store/b")};
  b.recompute = [&] {
    table.Complete(
        {"b"_id, std::make_shared<const std::string>("computed again"), nullptr, nullptr});
  };
  table.Complete(std::move(b));
  EXPECT_EQ(table.Get("b"_id, 1000).view, "computed again");
}

// A worker could not read a task argument's stored copy: the table takes the
// recompute closure once and the entry waits for the new copy; a copy with no
// closure (a Put, no retries left) is lost; a copy elsewhere or already being
// made again only needs resolving again.
TEST_F(ObjectTableTest, AStoredArgumentsLostCopyIsComputedAgainOnce) {
  ObjectTable& table = Table();
  table.AddPending("made"_id);
  int runs = 0;
  ObjectTable::Completion made{"made"_id, nullptr, nullptr, Remote("/store/made")};
  made.recompute = [&] { ++runs; };
  table.Complete(std::move(made));
  std::function<void()> recompute;
  // Another copy's loss is not this one's.
  EXPECT_EQ(table.OnStoredCopyLost("made"_id, "/store/elsewhere", &recompute),
            ObjectTable::CopyLost::kResolveAgain);
  EXPECT_FALSE(recompute);
  ASSERT_EQ(table.OnStoredCopyLost("made"_id, "/store/made", &recompute),
            ObjectTable::CopyLost::kResolveAgain);
  ASSERT_TRUE(recompute);
  recompute();
  EXPECT_EQ(runs, 1);
  std::string bytes;
  protocol::ObjectLocation location;
  ErrorInfo error;
  EXPECT_EQ(table.ResolveArg("made"_id, &bytes, &location, &error),
            ObjectTable::ArgState::kPending);
  // A second worker reports the same loss: the task already runs again.
  std::function<void()> again;
  EXPECT_EQ(table.OnStoredCopyLost("made"_id, "/store/made", &again),
            ObjectTable::CopyLost::kResolveAgain);
  EXPECT_FALSE(again);

  table.AddPending("put"_id);
  table.Complete({"put"_id, nullptr, nullptr, Remote("/store/put")});
  EXPECT_EQ(table.OnStoredCopyLost("put"_id, "/store/put", &again), ObjectTable::CopyLost::kLost);
  EXPECT_EQ(table.ResolveArg("put"_id, &bytes, &location, &error), ObjectTable::ArgState::kStored);
  EXPECT_EQ(table.OnStoredCopyLost("freed"_id, "/store/freed", &again),
            ObjectTable::CopyLost::kLost);
}

}  // namespace
}  // namespace rayx::detail
