// KvStore alone: keys, limits, parked waits on a manual clock, job-scoped keys.
#include "head/kv_store.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/clock.h"
#include "common/content_hash.h"

namespace rayx::scheduler {
namespace kv_store_test {  // this file's own (unit tests compile in batches)

class KvStoreTest : public ::testing::Test {
 protected:
  void TearDown() override {
    // Every test ends with no wait left parked in the fixture's store.
    EXPECT_EQ(kv_.wait_count(), 0u);
  }

  std::optional<std::string> GetOrDie(const std::string& ns, const std::string& key) {
    auto value = kv_.Get(ns, key);
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() ? *value : std::nullopt;
  }

  ManualClock clock_;
  KvStore kv_;
};

TEST_F(KvStoreTest, PutThenGetReturnsValue) {
  auto put = kv_.Put("ns", "k", std::string("v\0w", 3), /*overwrite=*/false, JobId());
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_TRUE(put->added);
  EXPECT_EQ(GetOrDie("ns", "k"), std::string("v\0w", 3));
  EXPECT_EQ(GetOrDie("other", "k"), std::nullopt);
  EXPECT_EQ(GetOrDie("ns", "missing"), std::nullopt);
}

TEST_F(KvStoreTest, PutWithoutOverwriteKeepsOldValueAndIsAlreadyExists) {
  ASSERT_TRUE(kv_.Put("", "k", "one", false, JobId()).ok());
  auto again = kv_.Put("", "k", "two", false, JobId());
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(GetOrDie("", "k"), "one");
  auto over = kv_.Put("", "k", "two", true, JobId());
  ASSERT_TRUE(over.ok()) << over.status();
  EXPECT_FALSE(over->added);
  EXPECT_EQ(GetOrDie("", "k"), "two");
}

TEST_F(KvStoreTest, DeleteRemovesOnlyThatKey) {
  ASSERT_TRUE(kv_.Put("", "a", "1", true, JobId()).ok());
  ASSERT_TRUE(kv_.Put("", "b", "2", true, JobId()).ok());
  auto deleted = kv_.Delete("", "a");
  ASSERT_TRUE(deleted.ok());
  EXPECT_TRUE(*deleted);
  deleted = kv_.Delete("", "a");
  ASSERT_TRUE(deleted.ok());
  EXPECT_FALSE(*deleted);
  EXPECT_EQ(GetOrDie("", "a"), std::nullopt);
  EXPECT_EQ(GetOrDie("", "b"), "2");
}

TEST_F(KvStoreTest, ListByPrefixIsOrderedBoundedAndPerNamespace) {
  for (const char* key : {"job/3", "job/1", "job/2", "jobs", "other", "jo"}) {
    ASSERT_TRUE(kv_.Put("ns", key, "x", true, JobId()).ok());
  }
  ASSERT_TRUE(kv_.Put("ns2", "job/9", "x", true, JobId()).ok());
  auto all = kv_.List("ns", "job/", 0);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->keys, (std::vector<std::string>{"job/1", "job/2", "job/3"}));
  EXPECT_FALSE(all->truncated);
  auto two = kv_.List("ns", "job", 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->keys, (std::vector<std::string>{"job/1", "job/2"}));
  EXPECT_TRUE(two->truncated);
  auto everything = kv_.List("ns", "", 0);
  ASSERT_TRUE(everything.ok());
  EXPECT_EQ(everything->keys.size(), 6u);
}

TEST_F(KvStoreTest, ListNeverReturnsMoreThanTheLimit) {
  KvLimits limits;
  limits.max_list_keys = 3;
  KvStore kv(limits, std::make_unique<InMemoryKvStorage>());
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(kv.Put("", "k" + std::to_string(i), "", true, JobId()).ok());
  auto list = kv.List("", "k", 100);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->keys.size(), 3u);
  EXPECT_TRUE(list->truncated);
}

// Paging: each page starts after the last key of the one before, so the pages
// together are every key of the prefix, once each, in order.
TEST_F(KvStoreTest, ListPagesOnAfterAStartKey) {
  for (const char* key : {"job/1", "job/2", "job/3", "job/4", "job/5", "jobs", "jo"}) {
    ASSERT_TRUE(kv_.Put("ns", key, "x", true, JobId()).ok());
  }
  std::vector<std::string> seen;
  std::string after;
  for (int page = 0; page < 10; ++page) {
    auto list = kv_.List("ns", "job/", 2, after);
    ASSERT_TRUE(list.ok()) << list.status();
    seen.insert(seen.end(), list->keys.begin(), list->keys.end());
    if (!list->truncated) break;
    after = list->keys.back();
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"job/1", "job/2", "job/3", "job/4", "job/5"}));
  // A start key before the prefix starts at the prefix.
  auto from_start = kv_.List("ns", "job/", 0, "a");
  ASSERT_TRUE(from_start.ok());
  EXPECT_EQ(from_start->keys.size(), 5u);
}

TEST_F(KvStoreTest, DeletePrefixDeletesOnlyThePrefixAtMostTheListLimitPerCall) {
  KvLimits limits;
  limits.max_list_keys = 3;
  KvStore kv(limits, std::make_unique<InMemoryKvStorage>());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(kv.Put("ns", "g/" + std::to_string(i), "", true, JobId()).ok());
  }
  ASSERT_TRUE(kv.Put("ns", "g2/0", "", true, JobId()).ok());
  ASSERT_TRUE(kv.Put("other", "g/0", "", true, JobId()).ok());
  auto first = kv.DeletePrefix("ns", "g/");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->count, 3u);
  EXPECT_TRUE(first->more);
  auto second = kv.DeletePrefix("ns", "g/");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->count, 2u);
  EXPECT_FALSE(second->more);
  EXPECT_EQ(kv.List("ns", "g/", 0)->keys.size(), 0u);
  EXPECT_EQ(kv.List("ns", "g2/", 0)->keys, (std::vector<std::string>{"g2/0"}));
  EXPECT_EQ(kv.List("other", "g/", 0)->keys, (std::vector<std::string>{"g/0"}));
  auto none = kv.DeletePrefix("ns", "g/");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->count, 0u);
  EXPECT_FALSE(none->more);
}

TEST_F(KvStoreTest, DeletePrefixRefusesAnEmptyPrefixAndKeepsEveryKey) {
  ASSERT_TRUE(kv_.Put("ns", "k", "v", true, JobId()).ok());
  auto refused = kv_.DeletePrefix("ns", "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("empty prefix"), std::string::npos)
      << refused.status();
  EXPECT_EQ(GetOrDie("ns", "k"), "v");
}

// Job-scoped keys deleted by prefix are not deleted again (nor miscounted)
// when their job ends.
TEST_F(KvStoreTest, KeysDeletedByPrefixLeaveTheirJobsIndex) {
  JobId job = JobId::FromWire("job-1");
  ASSERT_TRUE(kv_.Put("ns", "g/1", "", true, job).ok());
  ASSERT_TRUE(kv_.Put("ns", "h/1", "", true, job).ok());
  ASSERT_EQ(kv_.DeletePrefix("ns", "g/")->count, 1u);
  EXPECT_EQ(kv_.OnJobFinished(job), 1u);
  EXPECT_EQ(kv_.size(), 0u);
}

TEST_F(KvStoreTest, OversizedKeyValueAndNamespaceNameTheLimitAndSize) {
  struct Case {
    std::string ns, key, value, limit, size;
  };
  for (const Case& c : {Case{"", std::string(1025, 'k'), "", "1024", "1025"},
                        Case{"", "k", std::string((1 << 20) + 1, 'v'), "1048576", "1048577"},
                        Case{std::string(257, 'n'), "k", "", "256", "257"}}) {
    auto put = kv_.Put(c.ns, c.key, c.value, true, JobId());
    ASSERT_FALSE(put.ok());
    EXPECT_EQ(put.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(put.status().message().find("limit of " + c.limit + " bytes"), std::string::npos)
        << put.status();
    EXPECT_NE(put.status().message().find(c.size + " bytes"), std::string::npos) << put.status();
  }
  // At the limits exactly: accepted.
  EXPECT_TRUE(kv_.Put(std::string(256, 'n'), std::string(1024, 'k'), std::string(1 << 20, 'v'),
                      true, JobId())
                  .ok());
  auto empty = kv_.Put("", "", "v", true, JobId());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(kv_.Get("", std::string(1025, 'k')).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(kv_.size(), 1u);
}

TEST_F(KvStoreTest, WaitForPresentKeyAnswersAtOnce) {
  ASSERT_TRUE(kv_.Put("", "k", "v", true, JobId()).ok());
  auto value = kv_.Wait("", "k", {"peer", 1}, clock_.NowMs() + 1000);
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, "v");
}

TEST_F(KvStoreTest, ParkedWaitIsAnsweredByPut) {
  auto parked = kv_.Wait("ns", "k", {"peer-a", 7}, clock_.NowMs() + 1000);
  ASSERT_TRUE(parked.ok());
  EXPECT_EQ(*parked, std::nullopt);
  auto parked2 = kv_.Wait("ns", "k", {"peer-b", 8}, clock_.NowMs() + 1000);
  ASSERT_TRUE(parked2.ok());
  EXPECT_EQ(kv_.wait_count(), 2u);
  // Another namespace's key does not answer it.
  auto other = kv_.Put("ns2", "k", "no", true, JobId());
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->answered.empty());
  auto put = kv_.Put("ns", "k", "yes", true, JobId());
  ASSERT_TRUE(put.ok());
  ASSERT_EQ(put->answered.size(), 2u);
  for (const auto& answer : put->answered) {
    ASSERT_TRUE(answer.value.ok());
    EXPECT_EQ(*answer.value, "yes");
  }
  EXPECT_EQ(put->answered[0].waiter.peer, "peer-a");
  EXPECT_EQ(put->answered[0].waiter.request_id, 7u);
  EXPECT_EQ(put->answered[1].waiter.peer, "peer-b");
  // Nothing is left to time out.
  clock_.Advance(5000);
  EXPECT_TRUE(kv_.ExpireWaits(clock_.NowMs()).empty());
}

TEST_F(KvStoreTest, ParkedWaitTimesOutAtItsDeadlineOnly) {
  ASSERT_TRUE(kv_.Wait("", "late", {"p", 1}, clock_.NowMs() + 500).ok());
  ASSERT_TRUE(kv_.Wait("", "later", {"p", 2}, clock_.NowMs() + 900).ok());
  clock_.Advance(499);
  EXPECT_TRUE(kv_.ExpireWaits(clock_.NowMs()).empty());
  clock_.Advance(1);
  auto expired = kv_.ExpireWaits(clock_.NowMs());
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].waiter.request_id, 1u);
  EXPECT_EQ(expired[0].value.status().code(), StatusCode::kTimedOut);
  EXPECT_NE(expired[0].value.status().message().find("\"late\""), std::string::npos);
  EXPECT_EQ(kv_.wait_count(), 1u);
  clock_.Advance(400);
  expired = kv_.ExpireWaits(clock_.NowMs());
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].waiter.request_id, 2u);
  // A put after the deadline answers no one.
  auto put = kv_.Put("", "late", "v", true, JobId());
  ASSERT_TRUE(put.ok());
  EXPECT_TRUE(put->answered.empty());
}

TEST_F(KvStoreTest, WaitsAreBoundedPerPeerAndInTotal) {
  KvLimits limits;
  limits.max_waits_per_peer = 2;
  limits.max_waits = 3;
  KvStore kv(limits, std::make_unique<InMemoryKvStorage>());
  int64_t deadline = clock_.NowMs() + 1000;
  ASSERT_TRUE(kv.Wait("", "a", {"p1", 1}, deadline).ok());
  ASSERT_TRUE(kv.Wait("", "b", {"p1", 2}, deadline).ok());
  auto third = kv.Wait("", "c", {"p1", 3}, deadline);
  EXPECT_EQ(third.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(third.status().message().find("limit 2"), std::string::npos) << third.status();
  ASSERT_TRUE(kv.Wait("", "c", {"p2", 1}, deadline).ok());
  auto fourth = kv.Wait("", "d", {"p3", 1}, deadline);
  EXPECT_EQ(fourth.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(fourth.status().message().find("limit 3"), std::string::npos) << fourth.status();
  EXPECT_EQ(kv.wait_count(), 3u);
  // An answered wait frees its slot.
  ASSERT_TRUE(kv.Put("", "a", "v", true, JobId()).ok());
  EXPECT_TRUE(kv.Wait("", "e", {"p1", 4}, deadline).ok());
  EXPECT_EQ(kv.ExpireWaits(deadline).size(), 3u);
  EXPECT_EQ(kv.wait_count(), 0u);
}

TEST_F(KvStoreTest, JobScopedKeysAreRemovedWhenTheJobEnds) {
  ASSERT_TRUE(kv_.Put("", "user", "stays", true, JobId()).ok());
  ASSERT_TRUE(kv_.Put("collective", "g/rank0", "addr", true, JobId::FromWire("job-1")).ok());
  ASSERT_TRUE(kv_.Put("collective", "g/rank1", "addr", true, JobId::FromWire("job-1")).ok());
  ASSERT_TRUE(kv_.Put("collective", "h/rank0", "addr", true, JobId::FromWire("job-2")).ok());
  // Overwritten without a job: no longer the job's.
  ASSERT_TRUE(kv_.Put("collective", "g/rank1", "mine", true, JobId()).ok());
  EXPECT_EQ(kv_.OnJobFinished(JobId::FromWire("job-1")), 1u);
  EXPECT_EQ(GetOrDie("collective", "g/rank0"), std::nullopt);
  EXPECT_EQ(GetOrDie("collective", "g/rank1"), "mine");
  EXPECT_EQ(GetOrDie("collective", "h/rank0"), "addr");
  EXPECT_EQ(GetOrDie("", "user"), "stays");
  EXPECT_EQ(kv_.OnJobFinished(JobId::FromWire("job-1")), 0u);
  // A deleted job-scoped key is not counted again.
  ASSERT_TRUE(kv_.Delete("collective", "h/rank0").ok());
  EXPECT_EQ(kv_.OnJobFinished(JobId::FromWire("job-2")), 0u);
  EXPECT_EQ(kv_.size(), 2u);
}


// What a job, a namespace and the store hold is bounded in bytes and keys;
// a refusal gives the figures.
TEST_F(KvStoreTest, AJobsKeysAreBoundedInBytesAndCount) {
  KvLimits limits;
  limits.max_job_bytes = 1000;
  limits.max_job_keys = 3;
  KvStore kv(limits, std::make_unique<InMemoryKvStorage>());
  const JobId job = JobId::FromWire("aaaaaaaaaaaaaaaa");
  ASSERT_TRUE(kv.Put("ns", "k1", std::string(500, 'v'), false, job).ok());
  auto over = kv.Put("ns", "k2", std::string(500, 'v'), false, job);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(over.status().message().find("job aaaaaaaaaaaaaaaa holds 1 keys of 502 bytes"),
            std::string::npos)
      << over.status();
  EXPECT_NE(over.status().message().find("limit of 1000 bytes"), std::string::npos);
  // Another job, or a key of no job, is not counted against it.
  EXPECT_TRUE(kv.Put("ns", "k2", std::string(500, 'v'), false, JobId::FromWire("b")).ok());
  EXPECT_TRUE(kv.Put("ns", "k3", std::string(500, 'v'), false, JobId()).ok());
  // Replacing its own key with a smaller value always fits.
  EXPECT_TRUE(kv.Put("ns", "k1", "small", true, job).ok());
  ASSERT_TRUE(kv.Put("ns", "k4", "v", false, job).ok());
  ASSERT_TRUE(kv.Put("ns", "k5", "v", false, job).ok());
  auto keys = kv.Put("ns", "k6", "v", false, job);
  EXPECT_NE(keys.status().message().find("limit of 3 keys"), std::string::npos) << keys.status();
  // The job's end frees its share.
  EXPECT_EQ(kv.OnJobFinished(job), 3u);
  EXPECT_TRUE(kv.Put("ns", "k6", std::string(900, 'v'), false, job).ok());
}

TEST_F(KvStoreTest, ANamespaceAndTheWholeStoreAreBounded) {
  KvLimits limits;
  limits.max_namespace_total_bytes = 1000;
  limits.max_namespace_keys = 100;
  limits.max_total_bytes = 1500;
  KvStore kv(limits, std::make_unique<InMemoryKvStorage>());
  ASSERT_TRUE(kv.Put("a", "k1", std::string(900, 'v'), false, JobId()).ok());
  auto ns_full = kv.Put("a", "k2", std::string(200, 'v'), false, JobId());
  EXPECT_EQ(ns_full.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(ns_full.status().message().find("namespace \"a\" holds 1 keys of 902 bytes"),
            std::string::npos)
      << ns_full.status();
  ASSERT_TRUE(kv.Put("b", "k1", std::string(500, 'v'), false, JobId()).ok());
  auto full = kv.Put("c", "k1", std::string(200, 'v'), false, JobId());
  EXPECT_NE(full.status().message().find("store holds 2 keys of 1404 bytes"), std::string::npos)
      << full.status();
  ASSERT_TRUE(kv.Delete("a", "k1").ok());
  EXPECT_TRUE(kv.Put("c", "k1", std::string(200, 'v'), false, JobId()).ok());
}

// Exported code is content-addressed: another job cannot put its own code
// under a key that names other code, nor replace what is there.
TEST_F(KvStoreTest, CodeKeysHoldOnlyTheCodeTheirHashNames) {
  const std::string code = "cloudpickled function";
  const std::string hash = Sha256Hex(code).substr(0, 40);
  const std::string key = "detached/" + hash;
  ASSERT_TRUE(kv_.Put("rayx.py.fn", key, code, true, JobId()).ok());
  auto evil = kv_.Put("rayx.py.fn", key, "other code", true, JobId::FromWire("other"));
  EXPECT_EQ(evil.status().code(), StatusCode::kAlreadyExists) << evil.status();
  EXPECT_EQ(GetOrDie("rayx.py.fn", key), code);
  // The same code again changes nothing: not even its scope (a job's end
  // must not take a detached actor's class with it).
  ASSERT_TRUE(kv_.Put("rayx.py.fn", key, code, true, JobId::FromWire("other")).ok());
  kv_.OnJobFinished(JobId::FromWire("other"));
  EXPECT_EQ(GetOrDie("rayx.py.fn", key), code);
  // A new key must name its value's hash.
  auto forged = kv_.Put("rayx.py.fn", "detached/" + Sha256Hex("x").substr(0, 40), "y", true,
                        JobId());
  EXPECT_EQ(forged.status().code(), StatusCode::kInvalidArgument) << forged.status();
  auto job_key = kv_.Put("rayx.py.fn", "0123456789abcdef/" + std::string(40, 'a'), "y", true,
                         JobId::FromWire("0123456789abcdef"));
  EXPECT_EQ(job_key.status().code(), StatusCode::kInvalidArgument) << job_key.status();
  // Other keys and namespaces are plain.
  EXPECT_TRUE(kv_.Put("rayx.py.fn", "notes", "anything", true, JobId()).ok());
  EXPECT_TRUE(kv_.Put("other", "detached/" + std::string(40, 'a'), "y", true, JobId()).ok());
}

}  // namespace
}  // namespace rayx::scheduler
