// The head's named actors alone: reservations and names, the lookups parked
// on a name, and what reaches the head's store.
#include "head/actor_directory.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "recording_outbox.h"

namespace rayx::scheduler {
namespace actor_directory_test {  // this file's own (unit tests compile in batches)

namespace fs = std::filesystem;
using Kind = RecordingOutbox::Kind;

class ActorDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "rayx-actor-directory-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    auto store = HeadStore::Open(dir_ + "/head_state.sqlite3");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    actors_.SetStore(store_.get());
  }
  void TearDown() override {
    store_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // An actor named `name` being created (starting) or running on `lease`.
  static protocol::ActorInfo Actor(const std::string& name, const ActorId& id,
                                   const LeaseId& lease = LeaseId()) {
    protocol::ActorInfo a;
    a.name = name;
    a.actor_id = id;
    a.class_name = "Counter";
    a.starting = lease.IsNil();
    a.lease_id = lease;
    if (!lease.IsNil()) a.worker_address = "tcp://10.0.0.1:" + lease.Hex().substr(0, 4);
    return a;
  }
  // The names the store holds now.
  std::vector<std::string> Stored() {
    auto state = store_->Load();
    EXPECT_TRUE(state.ok()) << state.status();
    std::vector<std::string> names;
    if (state.ok()) {
      for (const auto& a : state->actors) names.push_back(a.name);
    }
    return names;
  }
  static protocol::GetActorRequest Wait(const std::string& name, int64_t wait_ms,
                                        const std::string& stale = "") {
    protocol::GetActorRequest req;
    req.name = name;
    req.wait_ms = wait_ms;
    req.stale_worker = stale;
    return req;
  }

  std::string dir_;
  std::unique_ptr<HeadStore> store_;
  RecordingOutbox outbox_;
  ActorDirectory actors_{outbox_};
};

TEST_F(ActorDirectoryTest, AReservationHoldsTheNameUntilItsActorNamesItsWorker) {
  const ActorId a = ActorId::FromRandom(), b = ActorId::FromRandom();
  const LeaseId lease = LeaseId::FromRandom();
  ASSERT_TRUE(actors_.CheckName(Actor("counter", a)).ok());
  actors_.Reserve(Actor("counter", a), "driver-1");
  ASSERT_NE(actors_.ReservedBy("counter"), nullptr);
  EXPECT_EQ(*actors_.ReservedBy("counter"), "driver-1");
  EXPECT_EQ(actors_.NamesReservedBy("driver-1"), std::vector<std::string>{"counter"});
  // Another actor cannot take it meanwhile, and is told why.
  Status taken = actors_.CheckName(Actor("counter", b));
  EXPECT_EQ(taken.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(taken.message().find("its constructor is still running"), std::string::npos) << taken;
  EXPECT_TRUE(Stored().empty());  // reservations are not stored
  // Its own actor names its worker: found, stored, no longer a reservation.
  ASSERT_TRUE(actors_.CheckName(Actor("counter", a, lease)).ok());
  actors_.Name(Actor("counter", a, lease));
  auto found = actors_.Get("counter");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->lease_id, lease);
  EXPECT_FALSE(found->starting);
  EXPECT_EQ(actors_.ReservedBy("counter"), nullptr);
  EXPECT_EQ(Stored(), std::vector<std::string>{"counter"});
  EXPECT_EQ(actors_.CheckName(Actor("counter", b, LeaseId::FromRandom())).code(),
            StatusCode::kAlreadyExists);
  // Gone with its lease.
  actors_.ForgetLease(lease);
  EXPECT_EQ(actors_.Get("counter").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Stored().empty());
}

TEST_F(ActorDirectoryTest, BadNamesAndMetadataAreRefusedSayingWhy) {
  EXPECT_EQ(actors_.CheckName(Actor("", ActorId::FromRandom())).code(),
            StatusCode::kInvalidArgument);
  auto big = Actor("big", ActorId::FromRandom());
  big.metadata.assign(ActorDirectory::kMaxMetadataBytes + 1, 'm');
  Status refused = actors_.CheckName(big);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("at most 65536"), std::string::npos) << refused;
}

TEST_F(ActorDirectoryTest, OnlyADetachedActorsBoundedConstructorIsKeptWithItsReservation) {
  const ActorId a = ActorId::FromRandom(), d = ActorId::FromRandom();
  auto plain = Actor("plain", a);
  plain.restart_request = "ctor";
  actors_.Reserve(plain, "p");
  EXPECT_TRUE(actors_.Find("plain")->restart_request.empty());
  auto detached = Actor("detached", d);
  detached.detached = true;
  actors_.Reserve(detached, "p");
  EXPECT_TRUE(actors_.Find("detached")->restart_request.empty());
  // Sent again with its constructor call: kept; one too large is not.
  detached.restart_request = "ctor";
  detached.max_restarts = 3;
  actors_.Reserve(detached, "p");
  EXPECT_EQ(actors_.Find("detached")->restart_request, "ctor");
  EXPECT_EQ(actors_.Find("detached")->max_restarts, 3);
  detached.restart_request.assign(ActorDirectory::kMaxReservedConstructorBytes + 1, 'c');
  auto other = detached;
  other.name = "huge";
  other.actor_id = ActorId::FromRandom();
  actors_.Reserve(other, "p");
  EXPECT_TRUE(actors_.Find("huge")->restart_request.empty());
  // Dropped by its own actor only.
  EXPECT_FALSE(actors_.DropReservation("detached", a));
  EXPECT_TRUE(actors_.DropReservation("detached", d));
  EXPECT_EQ(actors_.Find("detached"), nullptr);
}

TEST_F(ActorDirectoryTest, ALookupParkedOnANameIsAnsweredWhenItsEntryChangesOrItsWaitEnds) {
  const ActorId a = ActorId::FromRandom();
  actors_.Reserve(Actor("counter", a), "driver-1");
  outbox_.Take();
  actors_.Lookup({"handle-1", 7}, Wait("counter", 5000), /*now_ms=*/1000);
  actors_.Lookup({"handle-2", 8}, Wait("missing", 2000), 1000);
  EXPECT_EQ(actors_.parked_lookups(), 2u);
  EXPECT_TRUE(outbox_.Take().empty());
  // The worker is named: the first lookup hears at once, with no constructor.
  auto running = Actor("counter", a, LeaseId::FromRandom());
  running.restart_request = "the owner's";
  actors_.Name(running);
  auto records = outbox_.Take();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].kind, Kind::kActorFound);
  EXPECT_EQ(records[0].peer, "handle-1");
  EXPECT_EQ(records[0].actor.worker_address, running.worker_address);
  EXPECT_TRUE(records[0].actor.restart_request.empty());
  // The other ends at its deadline, NotFound.
  actors_.ExpireLookups(2999);
  EXPECT_TRUE(outbox_.Take().empty());
  actors_.ExpireLookups(3000);
  records = outbox_.Take();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].kind, Kind::kFail);
  EXPECT_EQ(records[0].status.code(), StatusCode::kNotFound);
  EXPECT_EQ(actors_.parked_lookups(), 0u);
  // A worker other than the stale one is ready: answered without parking.
  actors_.Lookup({"handle-3", 9}, Wait("counter", 5000, "tcp://gone:1"), 4000);
  EXPECT_EQ(outbox_.Take().size(), 1u);
  EXPECT_EQ(actors_.parked_lookups(), 0u);
}

TEST_F(ActorDirectoryTest, ANamesRestartKeepsItsRowWhileTakenAndRewritesIt) {
  const ActorId a = ActorId::FromRandom();
  const LeaseId lease = LeaseId::FromRandom();
  auto actor = Actor("svc", a, lease);
  actor.detached = true;
  actor.restart_request = "ctor";
  actor.max_restarts = 2;
  actors_.Name(actor);
  actors_.Lookup({"handle", 1}, Wait("svc", 5000, actor.worker_address), 0);
  outbox_.Take();
  // Its worker died: taken out for a restart, its row kept.
  auto restartable = actors_.TakeRestartable(lease);
  ASSERT_EQ(restartable.size(), 1u);
  EXPECT_EQ(actors_.Find("svc"), nullptr);
  EXPECT_EQ(Stored(), std::vector<std::string>{"svc"});
  EXPECT_TRUE(outbox_.Take().empty());  // nobody hears of a name that comes back at once
  // Named again with no worker (the restart runs), then with the new one.
  restartable[0].lease_id = LeaseId();
  restartable[0].worker_address.clear();
  actors_.Put(restartable[0]);
  auto heard = outbox_.Take();  // the parked handle hears the change (and asks again)
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0].kind, Kind::kActorFound);
  EXPECT_TRUE(heard[0].actor.worker_address.empty());
  const LeaseId next = LeaseId::FromRandom();
  protocol::ActorInfo* entry = actors_.Mutable("svc");
  entry->lease_id = next;
  entry->worker_address = "tcp://10.0.0.2:1";
  actors_.Changed("svc");
  EXPECT_EQ(store_->Load()->actors.at(0).lease_id, next);
  // A restart that cannot run: the name is gone, row and all.
  actors_.Take("svc");
  actors_.Gone("svc");
  EXPECT_TRUE(Stored().empty());
  EXPECT_EQ(actors_.size(), 0u);
}

TEST_F(ActorDirectoryTest, ANameHeldForItsOwnerBecomesItsReservationAndIsNotStored) {
  const ActorId a = ActorId::FromRandom();
  const LeaseId lease = LeaseId::FromRandom();
  auto actor = Actor("worker", a, lease);
  actor.max_restarts = 1;
  actors_.Name(actor);
  ASSERT_EQ(Stored(), std::vector<std::string>{"worker"});
  actors_.HoldForOwner(lease, "driver-9");
  const protocol::ActorInfo* held = actors_.Find("worker");
  ASSERT_NE(held, nullptr);
  EXPECT_TRUE(held->starting);
  EXPECT_TRUE(held->lease_id.IsNil());
  EXPECT_EQ(*actors_.ReservedBy("worker"), "driver-9");
  EXPECT_TRUE(Stored().empty());
  // Taken over by the head: stored as restartable only with a constructor.
  actors_.Unreserve("worker");
  actors_.StoreRestartable("worker");
  EXPECT_TRUE(Stored().empty());
  actors_.Mutable("worker")->restart_request = "ctor";
  actors_.StoreRestartable("worker");
  EXPECT_EQ(Stored(), std::vector<std::string>{"worker"});
  EXPECT_TRUE(actors_.Find("worker")->starting);  // still a reservation in memory
  // Erased: its row goes (a reservation with no creator is the stored kind).
  actors_.Erase("worker");
  EXPECT_TRUE(Stored().empty());
}

TEST_F(ActorDirectoryTest, RestoreBringsBackWhatAPreviousHeadStored) {
  const LeaseId lease = LeaseId::FromRandom();
  actors_.Name(Actor("kept", ActorId::FromRandom(), lease));
  auto state = store_->Load();
  ASSERT_TRUE(state.ok());
  RecordingOutbox outbox;
  ActorDirectory restored(outbox);
  restored.Restore(state->actors);
  ASSERT_NE(restored.Find("kept"), nullptr);
  EXPECT_EQ(restored.Find("kept")->lease_id, lease);
}

}  // namespace actor_directory_test
}  // namespace rayx::scheduler
