// PackageCache: fetching in chunks, checking and unpacking off the agent's loop.
#include "agent/package_cache.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <vector>

#include "common/content_hash.h"
#include "common/directory_archive.h"

namespace rayx::worker {
namespace package_cache_test {  // this file's own (unit tests compile in batches)

namespace fs = std::filesystem;

class PackageCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "rayx-package-cache-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    fs::create_directories(dir_ + "/src/sub");
    std::ofstream(dir_ + "/src/hello.txt") << "hello";
    std::ofstream(dir_ + "/src/sub/more.txt") << std::string(3 * 1024 * 1024, 'x');
    auto archive = PackDirectory(dir_ + "/src", {}, 64 << 20);
    ASSERT_TRUE(archive.ok()) << archive.status();
    archive_ = *archive;
    hash_ = ContentHashHex(archive_);
    cache_.emplace(
        io_, dir_ + "/packages",
        [this](const protocol::GetPackageRequest& req) {
          requests_.push_back(req);
          return ++next_id_;
        },
        clock_);
  }
  void TearDown() override {
    cache_.reset();
    fs::remove_all(dir_);
  }

  // Answers the latest request with its chunk of the archive; returns how long
  // OnReply took on the loop.
  std::chrono::microseconds AnswerLatest() {
    const protocol::GetPackageRequest& req = requests_.back();
    protocol::GetPackageReply reply;
    reply.hash = req.hash;
    reply.offset = req.offset;
    reply.total_size = archive_.size();
    std::string_view chunk = std::string_view(archive_).substr(req.offset, req.length);
    auto start = std::chrono::steady_clock::now();
    EXPECT_TRUE(cache_->OnReply(next_id_, reply, chunk));
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                 start);
  }

  // The head's answer to the first chunk request for `hash`: its reply and chunk.
  std::pair<protocol::GetPackageReply, std::string_view> FirstChunk(const std::string& hash) {
    protocol::GetPackageReply reply;
    reply.hash = hash;
    reply.offset = 0;
    reply.total_size = archive_.size();
    return {reply, std::string_view(archive_).substr(0, PackageCache::kChunk)};
  }

  // Runs the loop until `done` holds (results come back from the cache's thread).
  template <typename Pred>
  bool RunUntil(Pred done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      io_.restart();
      io_.run_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  std::string dir_;
  std::string archive_;
  std::string hash_;
  boost::asio::io_context io_;
  ManualClock clock_;
  std::vector<protocol::GetPackageRequest> requests_;
  uint64_t next_id_ = 0;
  std::optional<PackageCache> cache_;
};

TEST_F(PackageCacheTest, WritingHashingAndUnpackingHappenOffTheLoop) {
  std::optional<Result<std::string>> result;
  int calls = 0;
  cache_->Ensure(hash_, [&](Result<std::string> dir) {
    ++calls;
    result = std::move(dir);
  });
  // A second caller shares the fetch.
  std::optional<Result<std::string>> second;
  cache_->Ensure(hash_, [&](Result<std::string> dir) { second = std::move(dir); });
  ASSERT_EQ(requests_.size(), 1u);
  size_t chunks = 0;
  while (!result) {
    size_t before = requests_.size();
    AnswerLatest();
    ++chunks;
    // OnReply only hands the chunk to the cache's thread: nothing is answered
    // and no next request goes out until the loop runs its result.
    EXPECT_FALSE(result.has_value()) << "the fetch finished inside OnReply, on the loop";
    EXPECT_EQ(requests_.size(), before) << "the next chunk was asked for before this one was written";
    ASSERT_TRUE(RunUntil([&] { return result.has_value() || requests_.size() > before; }));
  }
  EXPECT_EQ(chunks, (archive_.size() + PackageCache::kChunk - 1) / PackageCache::kChunk);
  EXPECT_GE(chunks, 1u);
  ASSERT_TRUE(result->ok()) << result->status();
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(second && second->ok());
  EXPECT_EQ(**result, **second);
  std::ifstream hello(**result + "/hello.txt");
  std::string text;
  hello >> text;
  EXPECT_EQ(text, "hello");
  EXPECT_EQ(fs::file_size(**result + "/sub/more.txt"), 3u * 1024 * 1024);
  EXPECT_FALSE(fs::exists(dir_ + "/packages/" + hash_ + ".tar.part"));

  // Present now: answered at once, without a request.
  std::optional<Result<std::string>> again;
  cache_->Ensure(hash_, [&](Result<std::string> dir) { again = std::move(dir); });
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(**again, **result);
  EXPECT_EQ(requests_.size(), chunks);
}

TEST_F(PackageCacheTest, APackageThatDoesNotMatchItsHashFailsAndLeavesNothing) {
  std::string wrong = ContentHashHex("something else");
  std::optional<Result<std::string>> result;
  cache_->Ensure(wrong, [&](Result<std::string> dir) { result = std::move(dir); });
  ASSERT_EQ(requests_.size(), 1u);
  auto [reply, chunk] = FirstChunk(wrong);
  ASSERT_TRUE(cache_->OnReply(next_id_, reply, chunk));
  // Only whole archives are checked; feed the rest.
  while (!result) {
    size_t before = requests_.size();
    ASSERT_TRUE(RunUntil([&] { return result.has_value() || requests_.size() > before; }));
    if (result) break;
    const auto& req = requests_.back();
    reply.offset = req.offset;
    ASSERT_TRUE(cache_->OnReply(next_id_, reply,
                                std::string_view(archive_).substr(req.offset, req.length)));
  }
  ASSERT_FALSE(result->ok());
  EXPECT_NE(result->status().message().find("does not match its hash"), std::string::npos)
      << result->status();
  EXPECT_FALSE(fs::exists(dir_ + "/packages/" + wrong));
}

// A request the head never answers (a lost message, a head restart) is sent
// again, then the fetch fails: no start waits on it for ever.
TEST_F(PackageCacheTest, AnUnansweredRequestIsSentAgainThenTheFetchFails) {
  std::optional<Result<std::string>> result;
  cache_->Ensure(hash_, [&](Result<std::string> dir) { result = std::move(dir); });
  ASSERT_EQ(requests_.size(), 1u);
  clock_.Advance(PackageCache::kRequestTimeoutMs - 1);
  cache_->Expire();
  EXPECT_EQ(requests_.size(), 1u) << "asked again before the timeout";
  clock_.Advance(1);
  cache_->Expire();
  ASSERT_EQ(requests_.size(), 2u);
  EXPECT_EQ(requests_[1].hash, hash_);
  EXPECT_EQ(requests_[1].offset, 0u);
  for (int i = 2; i < PackageCache::kAttempts; ++i) {
    clock_.Advance(PackageCache::kRequestTimeoutMs);
    cache_->Expire();
  }
  ASSERT_EQ(requests_.size(), static_cast<size_t>(PackageCache::kAttempts));
  EXPECT_FALSE(result.has_value());
  clock_.Advance(PackageCache::kRequestTimeoutMs);
  cache_->Expire();
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->status().code(), StatusCode::kTimedOut);
  EXPECT_NE(result->status().message().find(hash_.substr(0, 12)), std::string::npos)
      << result->status();
  // The next start that needs it fetches it afresh, and an answer completes it.
  std::optional<Result<std::string>> again;
  cache_->Ensure(hash_, [&](Result<std::string> dir) { again = std::move(dir); });
  ASSERT_EQ(requests_.size(), static_cast<size_t>(PackageCache::kAttempts) + 1);
  while (!again) {
    size_t before = requests_.size();
    AnswerLatest();
    ASSERT_TRUE(RunUntil([&] { return again.has_value() || requests_.size() > before; }));
  }
  EXPECT_TRUE(again->ok()) << again->status();
}

// A slow head: the answer to the first send comes after the request was sent
// again. It is the same chunk: taken, and the second answer is dropped.
TEST_F(PackageCacheTest, ALateAnswerToAnEarlierSendIsTaken) {
  std::optional<Result<std::string>> result;
  cache_->Ensure(hash_, [&](Result<std::string> dir) { result = std::move(dir); });
  ASSERT_EQ(requests_.size(), 1u);
  clock_.Advance(PackageCache::kRequestTimeoutMs);
  cache_->Expire();
  ASSERT_EQ(requests_.size(), 2u);
  auto [reply, chunk] = FirstChunk(hash_);
  ASSERT_TRUE(cache_->OnReply(1, reply, chunk)) << "the late answer to the first send";
  EXPECT_FALSE(cache_->OnReply(2, reply, chunk)) << "the same chunk twice";
  while (!result) {
    size_t before = requests_.size();
    ASSERT_TRUE(RunUntil([&] { return result.has_value() || requests_.size() > before; }));
    if (!result) AnswerLatest();
  }
  EXPECT_TRUE(result->ok()) << result->status();
}

TEST_F(PackageCacheTest, ResultsArrivingAfterTheCacheIsGoneAreDropped) {
  bool called = false;
  cache_->Ensure(hash_, [&](Result<std::string>) { called = true; });
  AnswerLatest();
  cache_.reset();  // waits for the write in progress
  io_.restart();
  io_.run_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(called);
}


// A package is a plain tar archive: a compressed one (a 50 KB gzip that would
// inflate to 50 MiB) is refused after its download, and nothing is unpacked.
TEST_F(PackageCacheTest, ACompressedPackageIsRefusedAndNothingIsUnpacked) {
  std::string command = "head -c 52428800 /dev/zero > '" + dir_ + "/zeros' && tar -czf '" +
                        dir_ + "/bomb.tgz' -C '" + dir_ + "' zeros";
  ASSERT_EQ(std::system(command.c_str()), 0);
  std::ifstream in(dir_ + "/bomb.tgz", std::ios::binary);
  archive_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  hash_ = ContentHashHex(archive_);
  std::optional<Result<std::string>> result;
  cache_->Ensure(hash_, [&](Result<std::string> dir) { result = std::move(dir); });
  AnswerLatest();
  ASSERT_TRUE(RunUntil([&] { return result.has_value(); }));
  ASSERT_FALSE(result->ok());
  EXPECT_EQ(result->status().code(), StatusCode::kInvalidArgument) << result->status();
  EXPECT_NE(result->status().message().find("gzip-compressed"), std::string::npos)
      << result->status();
  EXPECT_FALSE(fs::exists(dir_ + "/packages/" + hash_));
  EXPECT_FALSE(fs::exists(dir_ + "/packages/" + hash_ + ".unpacking"));
  EXPECT_FALSE(fs::exists(dir_ + "/packages/" + hash_ + ".tar.part"));
}

// A reply declaring more than any package within the unpack limits could be
// fails the fetch before anything is written.
TEST_F(PackageCacheTest, ADownloadLargerThanTheLimitsAllowIsRefusedAtOnce) {
  TarLimits limits;
  limits.max_unpacked_bytes = 1 << 20;
  limits.max_entries = 10;
  cache_.emplace(
      io_, dir_ + "/packages",
      [this](const protocol::GetPackageRequest& req) {
        requests_.push_back(req);
        return ++next_id_;
      },
      clock_, limits);
  std::optional<Result<std::string>> result;
  cache_->Ensure(hash_, [&](Result<std::string> dir) { result = std::move(dir); });
  protocol::GetPackageReply reply;
  reply.hash = hash_;
  reply.total_size = uint64_t{1} << 40;
  EXPECT_TRUE(cache_->OnReply(next_id_, reply, std::string_view(archive_).substr(0, 100)));
  ASSERT_TRUE(result.has_value()) << "refused inside OnReply, before any write";
  EXPECT_EQ(result->status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result->status().message().find("1099511627776"), std::string::npos)
      << result->status();
  EXPECT_NE(result->status().message().find("--max-package-unpacked-bytes"), std::string::npos);
}

}  // namespace
}  // namespace rayx::worker
