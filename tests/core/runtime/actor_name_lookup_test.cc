// A handle's wait for a worker of its actor's name, answer by answer: when it
// is found, when the actor is gone and why, and how long a constructor may run.
#include "runtime/actor_name_lookup.h"

#include <gtest/gtest.h>

#include <string>

namespace rayx::detail {
namespace actor_name_lookup_test {  // this file's own (unit tests compile in batches)

using Kind = ActorNameLookup::Verdict::Kind;

constexpr int64_t kT0 = 1'000'000;
constexpr int64_t kTimeout = 60'000;

class ActorNameLookupTest : public ::testing::Test {
 protected:
  ActorNameLookup Lookup(const std::string& old_address = "", bool reservation_seen = false) {
    return ActorNameLookup("svc", id_, old_address, kT0 + kTimeout, kTimeout, reservation_seen);
  }
  // The name's entry: its worker (empty: none), reserved or not.
  Result<protocol::ActorInfo> Entry(const std::string& worker, bool starting = false) {
    protocol::ActorInfo info;
    info.name = "svc";
    info.actor_id = id_;
    info.worker_address = worker;
    info.starting = starting;
    return info;
  }
  static Result<protocol::ActorInfo> Missing() {
    return Status::NotFound("no actor named 'svc'");
  }

  ActorId id_ = ActorId::FromRandom();
};

TEST_F(ActorNameLookupTest, ANewWorkerIsFoundAndTheOldOneIsNot) {
  auto lookup = Lookup("tcp://old:1");
  EXPECT_EQ(lookup.Step(Entry("tcp://old:1"), kT0).kind, Kind::kAskAgain);
  EXPECT_EQ(lookup.WaitMs(kT0, 5000), 5000);  // parked at the head
  EXPECT_EQ(lookup.Step(Entry("tcp://new:2"), kT0 + 10).kind, Kind::kFound);
}

TEST_F(ActorNameLookupTest, ANameTakenByAnotherActorMeansItsGone) {
  auto lookup = Lookup("tcp://old:1");
  auto other = Entry("tcp://other:3");
  other->actor_id = ActorId::FromRandom();
  auto verdict = lookup.Step(other, kT0);
  EXPECT_EQ(verdict.kind, Kind::kGone);
  EXPECT_EQ(verdict.why, "the actor's name 'svc' now belongs to another actor (its worker died)");
}

// An owner restarting its actor reserves the name again right behind the
// lost lease's end: a reservation found missing once is looked at again, and
// taken for gone only when still missing kLookupPeriodMs later.
TEST_F(ActorNameLookupTest, AReservationMissingTwiceApartIsGoneOnceIsNot) {
  auto lookup = Lookup("", /*reservation_seen=*/true);
  EXPECT_EQ(lookup.Step(Missing(), kT0).kind, Kind::kAskAgain);
  EXPECT_EQ(lookup.WaitMs(kT0, 5000), 0);  // asked at once: still missing?
  EXPECT_EQ(lookup.Step(Entry("", /*starting=*/true), kT0 + 50).kind, Kind::kAskAgain);
  EXPECT_EQ(lookup.WaitMs(kT0 + 50, 5000), 5000);  // back, so parked again
  EXPECT_EQ(lookup.Step(Missing(), kT0 + 100).kind, Kind::kAskAgain);
  EXPECT_EQ(lookup.Step(Missing(), kT0 + 100 + kLookupPeriodMs - 1).kind, Kind::kAskAgain);
  auto gone = lookup.Step(Missing(), kT0 + 100 + kLookupPeriodMs);
  EXPECT_EQ(gone.kind, Kind::kGone);
  EXPECT_NE(gone.why.find("its name is gone before its constructor finished"), std::string::npos)
      << gone.why;
}

TEST_F(ActorNameLookupTest, ANameTheHeadWasRestartingThatGoesIsGoneAtOnce) {
  auto lookup = Lookup("tcp://old:1");
  // Seen with no worker and not reserved: the head creates it again; then a
  // reservation (its creator) does not make a later miss any softer.
  EXPECT_EQ(lookup.Step(Entry(""), kT0).kind, Kind::kAskAgain);
  EXPECT_EQ(lookup.Step(Entry("", true), kT0 + 10).kind, Kind::kAskAgain);
  auto gone = lookup.Step(Missing(), kT0 + 20);
  EXPECT_EQ(gone.kind, Kind::kGone);
  EXPECT_NE(gone.why.find("the head was restarting the actor named 'svc'"), std::string::npos);
}

TEST_F(ActorNameLookupTest, AMissingNameNeverSeenReservedWaitsForTheDeadline) {
  auto lookup = Lookup();
  EXPECT_EQ(lookup.Step(Missing(), kT0).kind, Kind::kAskAgain);
  EXPECT_EQ(lookup.Step(Missing(), kT0 + kTimeout - 1).kind, Kind::kAskAgain);
  auto gone = lookup.Step(Missing(), kT0 + kTimeout);
  EXPECT_EQ(gone.kind, Kind::kGone);
  EXPECT_EQ(gone.why,
            "the actor named 'svc' did not start within 60 s (last lookup of 'svc': no actor "
            "named 'svc')");
}

// A name held with no worker is proof its constructor runs: each such answer
// moves the deadline to a full timeout from then.
TEST_F(ActorNameLookupTest, AConstructorThatStillRunsPushesTheDeadlineBack) {
  auto lookup = Lookup("tcp://old:1");
  EXPECT_EQ(lookup.Step(Entry("", true), kT0 + kTimeout - 5).kind, Kind::kAskAgain);
  EXPECT_EQ(lookup.deadline_ms(), kT0 + 2 * kTimeout - 5);
  EXPECT_EQ(lookup.Step(Entry("tcp://old:1"), kT0 + 2 * kTimeout - 6).kind, Kind::kAskAgain);
  auto gone = lookup.Step(Entry("tcp://old:1"), kT0 + 2 * kTimeout - 5);
  EXPECT_EQ(gone.kind, Kind::kGone);
  EXPECT_NE(gone.why.find("the actor's worker died and the actor did not answer again within 60 s"
                          " (last lookup of 'svc': still its old worker)"),
            std::string::npos)
      << gone.why;
  EXPECT_EQ(Lookup().WaitMs(kT0 + kTimeout - 3, 5000), 3);  // never past the deadline
}

}  // namespace actor_name_lookup_test
}  // namespace rayx::detail
