// A node store's capacity: the ledger every writer shares, and the agent's
// spiller, which moves the least recently used objects to disk, finds them
// there, and refuses with the figures when the spill disk is full too.
#include "object_store/store_spiller.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "object_store/store_ledger.h"

namespace rayx {
namespace store_spiller_test {  // this file's own (unit tests compile in batches)

constexpr uint64_t kMiB = 1 << 20;
constexpr char kJob[] = "0123456789abcdef";

class StoreSpillerTest : public ::testing::Test {
 protected:
  StoreSpillerTest() {
    char pattern[] = "/tmp/rayx-spiller-test-XXXXXX";
    root_ = mkdtemp(pattern);
    std::filesystem::create_directories(root_ + "/store");
    std::filesystem::create_directories(root_ + "/spill");
    store_ = SharedMemoryStore(root_ + "/store", root_ + "/spill");
  }
  ~StoreSpillerTest() override { std::filesystem::remove_all(root_); }

  // Object `i`'s name and bytes (a pattern of its own).
  static std::string Name(int i) {
    char object[33];
    std::snprintf(object, sizeof object, "%032x", i);
    return SharedMemoryStore::ObjectName(kJob, object);
  }
  static std::string Bytes(int i, uint64_t size) {
    std::string out(size, '\0');
    for (uint64_t k = 0; k < size; ++k) out[k] = static_cast<char>((k * 31 + i) & 0xff);
    return out;
  }
  // Writes object `i` and sets its access time to `used_s`.
  std::string Put(int i, uint64_t size, int64_t used_s) {
    auto path = store_.Write(Name(i), Bytes(i, size));
    EXPECT_TRUE(path.ok()) << path.status();
    const struct timespec times[2] = {{used_s, 0}, {0, UTIME_OMIT}};
    EXPECT_EQ(::utimensat(AT_FDCWD, path->c_str(), times, 0), 0);
    return *path;
  }
  std::string Read(const std::string& path) {
    auto mapped = store_.Open(path);
    if (!mapped.ok()) return "(" + mapped.status().ToString() + ")";
    return std::string((*mapped)->view());
  }
  bool InStore(int i) const { return std::filesystem::exists(root_ + "/store/" + Name(i)); }
  bool Spilled(int i) const { return std::filesystem::exists(root_ + "/spill/" + Name(i)); }

  std::shared_ptr<StoreLedger> Ledger(uint64_t capacity) {
    auto ledger = StoreLedger::Create(store_.dir(), capacity, store_.spill_dir());
    EXPECT_TRUE(ledger.ok()) << ledger.status();
    return *ledger;
  }
  // A spill disk with plenty of room.
  static StoreSpiller::Options RoomyDisk() {
    StoreSpiller::Options options;
    options.disk_space = [](const std::string&) {
      return std::make_pair(uint64_t{1} << 40, uint64_t{1} << 39);
    };
    return options;
  }

  std::string root_;
  SharedMemoryStore store_{""};
};

TEST_F(StoreSpillerTest, TheLedgerIsOnePageEveryProcessOfTheNodeShares) {
  auto agent = Ledger(4 * kMiB);
  auto writer = StoreLedger::Open(store_.dir());
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->capacity(), 4 * kMiB);
  EXPECT_EQ((*writer)->spill_dir(), store_.spill_dir());
  EXPECT_TRUE((*writer)->TryReserve(3 * kMiB));
  EXPECT_EQ(agent->used(), 3 * kMiB);  // the same memory
  EXPECT_FALSE((*writer)->TryReserve(2 * kMiB));  // past the capacity: nothing reserved
  EXPECT_EQ(agent->used(), 3 * kMiB);
  EXPECT_TRUE((*writer)->TryReserve(kMiB));
  EXPECT_FALSE((*writer)->TryReserve(1));
  // The agent's count: the directory held nothing, and a reservation made
  // while it counted is kept.
  const uint64_t before = agent->reserved_total();
  EXPECT_TRUE((*writer)->TryReserve(0));
  ASSERT_TRUE(agent->TryReserve(0));
  agent->Reserve(kMiB);  // e.g. another writer, mid-count
  agent->SetCounted(0, before);
  EXPECT_EQ(agent->used(), kMiB);
  agent->SetCounted(0, agent->reserved_total());
  EXPECT_EQ(agent->used(), 0u);
  EXPECT_TRUE((*writer)->TryReserve(4 * kMiB));
  const uint64_t epoch = (*writer)->spill_epoch();
  agent->BumpSpillEpoch();
  EXPECT_EQ((*writer)->spill_epoch(), epoch + 1);
  // Unbounded: every reservation fits.
  auto unbounded = Ledger(0);
  EXPECT_TRUE(unbounded->TryReserve(uint64_t{1} << 50));
}

TEST_F(StoreSpillerTest, AStoreWithoutALedgerOrWithGarbageIsRefused) {
  EXPECT_EQ(StoreLedger::Open(store_.dir()).status().code(), StatusCode::kNotFound);
  std::ofstream(store_.dir() + "/" + StoreLedger::kFileName) << std::string(8192, 'x');
  EXPECT_EQ(StoreLedger::Open(store_.dir()).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(StoreSpillerTest, MakeRoomSpillsTheLeastRecentlyUsedAndTheyAreStillRead) {
  auto ledger = Ledger(4 * kMiB);
  std::string paths[4];
  for (int i = 0; i < 4; ++i) paths[i] = Put(i, kMiB, 1000 + i);  // 0 is the least recent
  ASSERT_TRUE(store_.Open(paths[0]).ok());  // ... until it is read now
  const uint64_t epoch = ledger->spill_epoch();
  StoreSpiller spiller(store_, ledger, RoomyDisk());
  ASSERT_TRUE(spiller.MakeRoom(kMiB + kMiB / 2).ok());
  // Objects 1 and 2 were the least recently used: they went, nothing else.
  EXPECT_TRUE(InStore(0));
  EXPECT_FALSE(InStore(1));
  EXPECT_FALSE(InStore(2));
  EXPECT_TRUE(InStore(3));
  EXPECT_TRUE(Spilled(1) && Spilled(2));
  EXPECT_FALSE(Spilled(0) || Spilled(3));
  // The ledger holds the store's count and the reservation; readers were told.
  EXPECT_EQ(ledger->used(), 2 * kMiB + kMiB + kMiB / 2);
  EXPECT_EQ(ledger->spilled_bytes(), 2 * kMiB);
  EXPECT_EQ(ledger->spill_epoch(), epoch + 1);
  // Every object reads back byte-exact through its unchanged path.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Read(paths[i]), Bytes(i, kMiB)) << i;
  auto usage = spiller.Count();
  EXPECT_EQ(usage.stored_objects, 2u);
  EXPECT_EQ(usage.spilled_objects, 2u);
  EXPECT_EQ(usage.stored_bytes, 2 * kMiB);
  EXPECT_EQ(usage.spilled_bytes, 2 * kMiB);
  // A spilled object's delete removes its spilled file; a job's end, all.
  EXPECT_FALSE(store_.Remove(paths[1]));
  EXPECT_FALSE(Spilled(1));
  EXPECT_FALSE(store_.Exists(paths[1]));
  EXPECT_TRUE(store_.Exists(paths[2]));
  EXPECT_EQ(store_.RemovePrefix(std::string(kJob) + "-"), 3u);
  EXPECT_FALSE(Spilled(2));
}

TEST_F(StoreSpillerTest, AnObjectAProcessIsReadingStaysInMemoryUntilItLetsGo) {
  auto ledger = Ledger(3 * kMiB);
  std::string paths[3];
  for (int i = 0; i < 3; ++i) paths[i] = Put(i, kMiB, 1000 + i);  // 0 is the least recent
  StoreSpiller spiller(store_, ledger, RoomyDisk());
  {
    auto mapped = store_.Open(paths[0]);
    ASSERT_TRUE(mapped.ok()) << mapped.status();
    auto reading = ClaimForReading(*mapped, (*mapped)->path());
    const int claims = ReadClaim::held_now();
    EXPECT_GE(claims, 1);
    // Open marked object 0 used now: age it again, so that only the claim
    // keeps it from being the first to go.
    const struct timespec times[2] = {{999, 0}, {0, UTIME_OMIT}};
    ASSERT_EQ(::utimensat(AT_FDCWD, paths[0].c_str(), times, 0), 0);
    ASSERT_TRUE(spiller.MakeRoom(kMiB).ok());
    EXPECT_TRUE(InStore(0));  // being read: passed over
    EXPECT_FALSE(Spilled(0));
    EXPECT_FALSE(InStore(1));  // the next least recently used went instead
    EXPECT_TRUE(Spilled(1));
    // When everything left is being read or needed, the refusal says so.
    auto second = store_.Open(paths[2]);
    ASSERT_TRUE(second.ok());
    auto reading2 = ClaimForReading(*second, (*second)->path());
    Status full = spiller.MakeRoom(2 * kMiB);
    EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
    EXPECT_NE(full.message().find("2 object(s) of 2.00 MiB that processes are reading"),
              std::string::npos)
        << full;
    EXPECT_TRUE(InStore(0) && InStore(2));
    EXPECT_EQ(std::string((*mapped)->view()), Bytes(0, kMiB));
  }
  // Let go: the least recently used goes now, and reads back byte-exact.
  ASSERT_TRUE(spiller.MakeRoom(2 * kMiB).ok());
  EXPECT_TRUE(Spilled(0));
  EXPECT_TRUE(InStore(2));
  EXPECT_EQ(Read(paths[0]), Bytes(0, kMiB));
}

TEST_F(StoreSpillerTest, ReadClaimsStopAtTheProcessBudget) {
  std::string path = Put(0, 16, 1000);
  const int before = ReadClaim::held_now();
  std::vector<std::unique_ptr<ReadClaim>> claims;
  for (int i = before; i < ReadClaim::max_held() + 3; ++i) {
    claims.push_back(std::make_unique<ReadClaim>(path));
  }
  int held = 0;
  for (const auto& claim : claims) held += claim->held() ? 1 : 0;
  EXPECT_EQ(held, ReadClaim::max_held() - before);  // the rest read without a claim
  EXPECT_EQ(ReadClaim::held_now(), ReadClaim::max_held());
  claims.clear();
  EXPECT_EQ(ReadClaim::held_now(), before);
  EXPECT_FALSE(ReadClaim(root_ + "/store/missing").held());
  EXPECT_EQ(ReadClaim::held_now(), before);
}

TEST_F(StoreSpillerTest, ObjectsBeingWrittenOrKeptForReuseAreCountedButNeverSpilled) {
  auto ledger = Ledger(3 * kMiB);
  Put(0, kMiB, 1000);
  std::ofstream(store_.dir() + "/" + Name(1) + ".partial") << std::string(kMiB, 'p');
  std::ofstream(store_.dir() + "/.free-" + Name(2)) << std::string(kMiB, 'f');
  StoreSpiller spiller(store_, ledger, RoomyDisk());
  EXPECT_EQ(spiller.Count().stored_bytes, 3 * kMiB);
  EXPECT_EQ(spiller.last().stored_objects, 1u);
  ASSERT_TRUE(spiller.MakeRoom(kMiB).ok());
  EXPECT_TRUE(Spilled(0));
  // Nothing but those two is left, and they are not objects: no more room.
  Status full = spiller.MakeRoom(2 * kMiB);
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("nothing more can be spilled"), std::string::npos) << full;
  EXPECT_TRUE(std::filesystem::exists(store_.dir() + "/" + Name(1) + ".partial"));
}

TEST_F(StoreSpillerTest, ASpillLimitReachedFailsWithTheFiguresAndLosesNothing) {
  auto ledger = Ledger(4 * kMiB);
  std::string paths[4];
  for (int i = 0; i < 4; ++i) paths[i] = Put(i, kMiB, 1000 + i);
  StoreSpiller::Options options = RoomyDisk();
  options.spill_limit = 2 * kMiB;
  options.held_objects = [] { return uint64_t{1}; };  // the agent's ObjectPins
  StoreSpiller spiller(store_, ledger, options);
  Status full = spiller.MakeRoom(3 * kMiB);
  ASSERT_EQ(full.code(), StatusCode::kResourceExhausted) << full;
  // What is used, by whom, the limit, and what to do.
  EXPECT_NE(full.message().find("no room for 3.00 MiB"), std::string::npos) << full;
  EXPECT_NE(full.message().find("It holds 2.00 MiB of its 4.00 MiB in 2 object(s)"),
            std::string::npos) << full;
  EXPECT_NE(full.message().find(std::string("job ") + kJob + ": 2.00 MiB"), std::string::npos)
      << full;
  EXPECT_NE(full.message().find("holds 2.00 MiB of its limit 2.00 MiB (--object-spill-limit)"),
            std::string::npos) << full;
  EXPECT_NE(full.message().find("--object-store-memory"), std::string::npos) << full;
  EXPECT_NE(full.message().find("1 of them held by ObjectRefs inside other values"),
            std::string::npos)
      << full;
  // Nothing was lost: all four read back, two from the store, two from disk.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Read(paths[i]), Bytes(i, kMiB)) << i;
  // What fits still does.
  EXPECT_TRUE(spiller.MakeRoom(2 * kMiB).ok());
}

TEST_F(StoreSpillerTest, AFullSpillDiskStopsSpillingBeforeNinetyFivePercent) {
  auto ledger = Ledger(2 * kMiB);
  Put(0, kMiB, 1000);
  Put(1, kMiB, 1001);
  StoreSpiller::Options options;
  // 100 MiB, of which 4.5 are free: one more MiB would pass 95%.
  options.disk_space = [](const std::string&) {
    return std::make_pair(100 * kMiB, 4 * kMiB + kMiB / 2);
  };
  StoreSpiller spiller(store_, ledger, options);
  Status full = spiller.MakeRoom(kMiB);
  ASSERT_EQ(full.code(), StatusCode::kResourceExhausted) << full;
  EXPECT_NE(full.message().find("would pass 95% full"), std::string::npos) << full;
  EXPECT_TRUE(InStore(0) && InStore(1));
}

TEST_F(StoreSpillerTest, AnObjectLargerThanTheStoreIsRefusedAtOnce) {
  auto ledger = Ledger(2 * kMiB);
  Put(0, kMiB, 1000);
  StoreSpiller spiller(store_, ledger, RoomyDisk());
  Status big = spiller.MakeRoom(3 * kMiB);
  EXPECT_EQ(big.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(big.message().find("larger than the whole object store"), std::string::npos) << big;
  EXPECT_TRUE(InStore(0));  // nothing was spilled for it
}

TEST_F(StoreSpillerTest, WithoutASpillDirectoryAFullStoreSaysSo) {
  store_ = SharedMemoryStore(root_ + "/store");
  auto ledger = Ledger(kMiB);
  Put(0, kMiB, 1000);
  StoreSpiller spiller(store_, ledger, RoomyDisk());
  Status full = spiller.MakeRoom(kMiB);
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("spills nowhere"), std::string::npos) << full;
}

}  // namespace store_spiller_test
}  // namespace rayx
