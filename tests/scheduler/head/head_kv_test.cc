// The head's key-value messages, driven through HeadService on a manual clock.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "head/head_service.h"
#include "protocol/codec.h"
#include "protocol/kv_messages.h"
#include "transport/message.h"

namespace rayx::scheduler {
namespace head_kv_test {  // this file's own (unit tests compile in batches)

using protocol::MessageType;
using transport::Frames;
using transport::FrameView;

constexpr char kToken[] = "kv-token";
constexpr char kPeerA[] = "driver-a";
constexpr char kPeerB[] = "driver-b";

// One message the head sent through its outbox.
struct Sent {
  std::string peer;
  protocol::Envelope env;
  std::string body;
};

class HeadKvTest : public ::testing::Test {
 protected:
  HeadKvTest() : service_(MakeOptions(), clock_) {
    service_.SetOutbox([this](const std::string& peer, Frames frames) {
      auto env = protocol::Decode<protocol::Envelope>(FrameView(frames.at(0)));
      ASSERT_TRUE(env.ok()) << env.status();
      outbox_.push_back({peer, *env, std::string(FrameView(frames.at(1)))});
    });
  }

  void TearDown() override { EXPECT_EQ(service_.kv().wait_count(), 0u); }

  static HeadServiceOptions MakeOptions() {
    HeadServiceOptions o;
    o.token = kToken;
    o.cluster_id = "cluster-kv";
    o.heartbeat_period_ms = 100;
    o.where = "head";
    return o;
  }

  // Registers `peer` as a driver; returns its job id.
  JobId RegisterDriver(const std::string& peer) {
    protocol::RegisterDriverRequest req;
    req.token = kToken;
    req.rayx_version = kRayxVersion;
    auto reply = Call<protocol::RegisterDriverReply>(peer, req);
    EXPECT_FALSE(reply.job_id.IsNil());
    return reply.job_id;
  }

  // Sends `req` from `peer`; returns the raw reply, if any.
  template <typename Req>
  std::optional<Frames> Send(const std::string& peer, const Req& req) {
    Frames frames = transport::MakeMessage(req, ++next_id_);
    return service_.Handle(frames, peer);
  }

  // Sends and expects a reply of type Reply.
  template <typename Reply, typename Req>
  Reply Call(const std::string& peer, const Req& req) {
    auto reply = Send(peer, req);
    EXPECT_TRUE(reply.has_value());
    if (!reply) return Reply{};
    auto env = protocol::Decode<protocol::Envelope>(FrameView((*reply)[0]));
    EXPECT_TRUE(env.ok());
    EXPECT_EQ(env->t, static_cast<uint16_t>(Reply::kType))
        << protocol::Decode<protocol::ErrorReply>(FrameView((*reply)[1]))->message;
    EXPECT_EQ(env->id, next_id_);
    auto body = protocol::Decode<Reply>(FrameView((*reply)[1]));
    EXPECT_TRUE(body.ok()) << body.status();
    return body.ok() ? *body : Reply{};
  }

  template <typename Req>
  protocol::ErrorReply CallError(const std::string& peer, const Req& req) {
    auto reply = Send(peer, req);
    EXPECT_TRUE(reply.has_value());
    if (!reply) return {};
    auto env = protocol::Decode<protocol::Envelope>(FrameView((*reply)[0]));
    EXPECT_EQ(env->t, static_cast<uint16_t>(MessageType::kErrorReply));
    auto body = protocol::Decode<protocol::ErrorReply>(FrameView((*reply)[1]));
    EXPECT_TRUE(body.ok());
    return body.ok() ? *body : protocol::ErrorReply{};
  }

  static protocol::KvPutRequest Put(std::string key, std::string value, bool overwrite = true,
                                    JobId job_id = JobId()) {
    protocol::KvPutRequest req;
    req.ns = "test";
    req.key = std::move(key);
    req.value = std::move(value);
    req.overwrite = overwrite;
    req.job_id = std::move(job_id);
    return req;
  }
  static protocol::KvGetRequest Get(std::string key) { return {"test", std::move(key)}; }
  static protocol::KvWaitRequest Wait(std::string key, int64_t timeout_ms) {
    return {"test", std::move(key), timeout_ms};
  }

  ManualClock clock_;
  HeadService service_;
  std::vector<Sent> outbox_;
  uint64_t next_id_ = 0;
};

TEST_F(HeadKvTest, PeerWithoutTokenIsRefused) {
  for (uint16_t type = static_cast<uint16_t>(MessageType::kKvPutRequest);
       type <= static_cast<uint16_t>(MessageType::kKvListRequest); type += 2) {
    protocol::Envelope env;
    env.t = type;
    env.id = 5;
    Frames frames;
    frames.push_back(transport::MakeFrame(protocol::Encode(env)));
    frames.push_back(transport::MakeFrame(protocol::Encode(Put("k", "v"))));
    auto reply = service_.Handle(frames, "stranger");
    ASSERT_TRUE(reply.has_value());
    auto err = protocol::Decode<protocol::ErrorReply>(FrameView((*reply)[1]));
    ASSERT_TRUE(err.ok());
    EXPECT_EQ(err->code, static_cast<uint8_t>(StatusCode::kUnauthenticated))
        << protocol::MessageTypeName(type);
  }
  // A connection that proved nothing is not registered either.
  protocol::RegisterDriverRequest bad;
  bad.rayx_version = kRayxVersion;
  Frames hello = transport::MakeMessage(bad, 7);
  auto refused = service_.Handle(hello, kPeerA, transport::Principal());
  ASSERT_TRUE(refused.has_value());
  auto err = protocol::Decode<protocol::ErrorReply>(FrameView((*refused)[1]));
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(err->code, static_cast<uint8_t>(StatusCode::kUnauthenticated));
  EXPECT_EQ(CallError(kPeerA, Put("k", "v")).code,
            static_cast<uint8_t>(StatusCode::kUnauthenticated));
  EXPECT_EQ(service_.kv().size(), 0u);
}

TEST_F(HeadKvTest, PutGetDeleteListRoundTrip) {
  RegisterDriver(kPeerA);
  EXPECT_TRUE(Call<protocol::KvPutReply>(kPeerA, Put("a/1", "one")).added);
  EXPECT_TRUE(Call<protocol::KvPutReply>(kPeerA, Put("a/2", std::string("t\0o", 3))).added);
  EXPECT_FALSE(Call<protocol::KvPutReply>(kPeerA, Put("a/1", "uno")).added);
  auto exists = CallError(kPeerA, Put("a/1", "again", /*overwrite=*/false));
  EXPECT_EQ(exists.code, static_cast<uint8_t>(StatusCode::kAlreadyExists)) << exists.message;

  auto got = Call<protocol::KvGetReply>(kPeerA, Get("a/2"));
  EXPECT_TRUE(got.found);
  EXPECT_EQ(got.value, std::string("t\0o", 3));
  EXPECT_FALSE(Call<protocol::KvGetReply>(kPeerA, Get("zzz")).found);

  auto list = Call<protocol::KvListReply>(kPeerA, protocol::KvListRequest{"test", "a/", 1});
  EXPECT_EQ(list.keys, (std::vector<std::string>{"a/1"}));
  EXPECT_TRUE(list.truncated);

  EXPECT_TRUE(Call<protocol::KvDeleteReply>(kPeerA, protocol::KvDeleteRequest{"test", "a/1"})
                  .deleted);
  EXPECT_FALSE(Call<protocol::KvDeleteReply>(kPeerA, protocol::KvDeleteRequest{"test", "a/1"})
                   .deleted);
  EXPECT_FALSE(Call<protocol::KvGetReply>(kPeerA, Get("a/1")).found);
}

TEST_F(HeadKvTest, DeleteByPrefixAndListPagesOverTheWire) {
  RegisterDriver(kPeerA);
  for (const char* key : {"g/1", "g/2", "g/3", "g2/1"}) {
    ASSERT_TRUE(Call<protocol::KvPutReply>(kPeerA, Put(key, "x")).added);
  }
  protocol::KvListRequest page{"test", "g/", 2};
  auto first = Call<protocol::KvListReply>(kPeerA, page);
  EXPECT_EQ(first.keys, (std::vector<std::string>{"g/1", "g/2"}));
  ASSERT_TRUE(first.truncated);
  page.start_after = first.keys.back();
  auto second = Call<protocol::KvListReply>(kPeerA, page);
  EXPECT_EQ(second.keys, (std::vector<std::string>{"g/3"}));
  EXPECT_FALSE(second.truncated);

  protocol::KvDeleteRequest by_prefix{"test", "g/", /*prefix=*/true};
  auto deleted = Call<protocol::KvDeleteReply>(kPeerA, by_prefix);
  EXPECT_TRUE(deleted.deleted);
  EXPECT_EQ(deleted.count, 3u);
  EXPECT_FALSE(deleted.more);
  EXPECT_FALSE(Call<protocol::KvGetReply>(kPeerA, Get("g/2")).found);
  EXPECT_TRUE(Call<protocol::KvGetReply>(kPeerA, Get("g2/1")).found) << "another prefix";
  EXPECT_EQ(Call<protocol::KvDeleteReply>(kPeerA, by_prefix).count, 0u);

  auto empty = CallError(kPeerA, protocol::KvDeleteRequest{"test", "", /*prefix=*/true});
  EXPECT_EQ(empty.code, static_cast<uint8_t>(StatusCode::kInvalidArgument)) << empty.message;
  EXPECT_TRUE(Call<protocol::KvGetReply>(kPeerA, Get("g2/1")).found);
}

TEST_F(HeadKvTest, OversizedKeyAndValueAreRefusedNamingTheLimit) {
  RegisterDriver(kPeerA);
  auto key = CallError(kPeerA, Put(std::string(2000, 'k'), "v"));
  EXPECT_EQ(key.code, static_cast<uint8_t>(StatusCode::kInvalidArgument));
  EXPECT_NE(key.message.find("KV key of 2000 bytes is over the limit of 1024 bytes"),
            std::string::npos)
      << key.message;
  auto value = CallError(kPeerA, Put("k", std::string((1 << 20) + 10, 'v')));
  EXPECT_EQ(value.code, static_cast<uint8_t>(StatusCode::kInvalidArgument));
  EXPECT_NE(value.message.find("KV value of 1048586 bytes is over the limit of 1048576 bytes"),
            std::string::npos)
      << value.message;
  EXPECT_EQ(service_.kv().size(), 0u);
}

TEST_F(HeadKvTest, ParkedWaitIsAnsweredByAPutFromAnotherPeer) {
  RegisterDriver(kPeerA);
  RegisterDriver(kPeerB);
  EXPECT_FALSE(Send(kPeerA, Wait("rendezvous", 10000)).has_value());
  uint64_t wait_id = next_id_;
  EXPECT_EQ(service_.kv().wait_count(), 1u);
  EXPECT_TRUE(outbox_.empty());
  EXPECT_TRUE(Call<protocol::KvPutReply>(kPeerB, Put("rendezvous", "10.0.0.1:1234")).added);
  ASSERT_EQ(outbox_.size(), 1u);
  EXPECT_EQ(outbox_[0].peer, kPeerA);
  EXPECT_EQ(outbox_[0].env.t, static_cast<uint16_t>(MessageType::kKvWaitReply));
  EXPECT_EQ(outbox_[0].env.id, wait_id);
  auto reply = protocol::Decode<protocol::KvWaitReply>(outbox_[0].body);
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->value, "10.0.0.1:1234");
  // A wait for a present key is answered at once, through the outbox too.
  EXPECT_FALSE(Send(kPeerA, Wait("rendezvous", 10000)).has_value());
  ASSERT_EQ(outbox_.size(), 2u);
  EXPECT_EQ(outbox_[1].env.id, next_id_);
}

TEST_F(HeadKvTest, ParkedWaitTimesOutWhenTheClockPassesItsDeadline) {
  RegisterDriver(kPeerA);
  EXPECT_FALSE(Send(kPeerA, Wait("never", 1000)).has_value());
  uint64_t wait_id = next_id_;
  clock_.Advance(999);
  service_.ExpireSilentNodes();
  EXPECT_TRUE(outbox_.empty());
  clock_.Advance(1);
  service_.ExpireSilentNodes();
  ASSERT_EQ(outbox_.size(), 1u);
  EXPECT_EQ(outbox_[0].peer, kPeerA);
  EXPECT_EQ(outbox_[0].env.t, static_cast<uint16_t>(MessageType::kErrorReply));
  EXPECT_EQ(outbox_[0].env.id, wait_id);
  auto err = protocol::Decode<protocol::ErrorReply>(outbox_[0].body);
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(err->code, static_cast<uint8_t>(StatusCode::kTimedOut));
  EXPECT_NE(err->message.find("\"never\""), std::string::npos) << err->message;
  // A zero timeout answers at once.
  auto now = CallError(kPeerA, Wait("never", 0));
  EXPECT_EQ(now.code, static_cast<uint8_t>(StatusCode::kTimedOut));
}

TEST_F(HeadKvTest, JobScopedKeysGoWhenTheJobFinishes) {
  JobId job = RegisterDriver(kPeerA);
  RegisterDriver(kPeerB);
  ASSERT_TRUE(Call<protocol::KvPutReply>(kPeerA, Put("group/rank0", "x", true, job)).added);
  ASSERT_TRUE(Call<protocol::KvPutReply>(kPeerA, Put("user-key", "y")).added);
  Call<protocol::FinishJobReply>(kPeerA, protocol::FinishJobRequest{job});
  EXPECT_FALSE(Call<protocol::KvGetReply>(kPeerB, Get("group/rank0")).found);
  EXPECT_TRUE(Call<protocol::KvGetReply>(kPeerB, Get("user-key")).found);
}

// `rayx train` reads the records of node-kept checkpoints with the cluster
// token alone (no registration): by run (a run name holding '/' is another
// run) and job, and deletes them with `drop`.
TEST_F(HeadKvTest, CheckpointRecordsAreListedByRunAndJobAndDroppedForTheCli) {
  RegisterDriver(kPeerA);
  for (auto [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"train/ckpt/aaaa/a0-s1/run", "r1"},
           {"train/ckpt/aaaa/a0-s2/run", "r2"},
           {"train/ckpt/aaaa/a0-s1/run/with/slash", "other run"},
           {"train/ckpt/bbbb/a0-s1/run", "b1"}}) {
    protocol::KvPutRequest put = Put(key, value);
    put.ns = "rayx";
    Call<protocol::KvPutReply>(kPeerA, put);
  }
  protocol::CheckpointRecordsRequest req;
  req.run = "run";
  auto all = Call<protocol::CheckpointRecordsReply>(kPeerB, req);  // never registered
  EXPECT_EQ(all.records, (std::vector<std::string>{"r1", "r2", "b1"}));
  EXPECT_FALSE(all.truncated);
  req.job = "aaaa";
  EXPECT_EQ(Call<protocol::CheckpointRecordsReply>(kPeerB, req).records,
            (std::vector<std::string>{"r1", "r2"}));
  req.drop = true;
  auto dropped = Call<protocol::CheckpointRecordsReply>(kPeerB, req);
  EXPECT_EQ(dropped.keys, (std::vector<std::string>{"train/ckpt/aaaa/a0-s1/run",
                                                     "train/ckpt/aaaa/a0-s2/run"}));
  req = {};
  auto left = Call<protocol::CheckpointRecordsReply>(kPeerB, req);
  EXPECT_EQ(left.records, (std::vector<std::string>{"other run", "b1"}));
}

}  // namespace
}  // namespace rayx::scheduler
