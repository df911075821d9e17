// Wire messages: round trips and hostile-input-safe decoding.
#include "protocol/codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "common/json.h"
#include "protocol/job_messages.h"
#include "protocol/placement_messages.h"

namespace rayx::protocol {
namespace codec_test {  // this file's own (unit tests compile in batches)

NodeId Id(char c) { return *NodeId::FromHex(std::string(32, c)); }

NodeInfo MakeNodeInfo(char id, bool alive) {
  NodeInfo n;
  n.node_id = Id(id);
  n.address = "10.0.0." + std::string(1, id);
  n.hostname = std::string("host-") + id;
  n.agent_pid = 4242;
  n.is_head_node = alive;
  n.alive = alive;
  n.death_reason = alive ? "" : "no heartbeat";
  n.total = {{"CPU", 8}, {"GPU", 2}, {"memory", 3.4e10}, {"tpu", 4}};
  n.available = {{"CPU", 6.5}, {"tpu", 0}};
  n.labels = {{"zone", "a"}, {"accelerator", "H100"}};
  n.rayx_version = "0.1.0";
  n.registered_at_ms = 1'700'000'000'123;
  n.last_heartbeat_age_ms = 17;
  return n;
}

void ExpectSameNode(const NodeInfo& a, const NodeInfo& b) {
  EXPECT_EQ(a.node_id, b.node_id);
  EXPECT_EQ(a.address, b.address);
  EXPECT_EQ(a.hostname, b.hostname);
  EXPECT_EQ(a.agent_pid, b.agent_pid);
  EXPECT_EQ(a.is_head_node, b.is_head_node);
  EXPECT_EQ(a.alive, b.alive);
  EXPECT_EQ(a.death_reason, b.death_reason);
  EXPECT_EQ(a.total, b.total);
  EXPECT_EQ(a.available, b.available);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.rayx_version, b.rayx_version);
  EXPECT_EQ(a.registered_at_ms, b.registered_at_ms);
  EXPECT_EQ(a.last_heartbeat_age_ms, b.last_heartbeat_age_ms);
}

template <typename T>
T RoundTrip(const T& in) {
  auto out = Decode<T>(Encode(in));
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : T{};
}

TEST(Codec, EnvelopeRoundTrips) {
  Envelope in{7, 9, 0xfedcba9876543210ULL};
  Envelope out = RoundTrip(in);
  EXPECT_EQ(out.v, 7u);
  EXPECT_EQ(out.t, 9);
  EXPECT_EQ(out.id, 0xfedcba9876543210ULL);
}

TEST(Codec, ErrorReplyRoundTrips) {
  ErrorReply out = RoundTrip(ErrorReply{8, "wrong token", "head 10.0.0.1:6380"});
  EXPECT_EQ(out.code, 8);
  EXPECT_EQ(out.message, "wrong token");
  EXPECT_EQ(out.where, "head 10.0.0.1:6380");
}

TEST(Codec, RegisterNodeRequestRoundTrips) {
  RegisterNodeRequest in;
  in.token = "secret";
  in.rayx_version = "0.1.0";
  in.address = "10.0.0.2";
  in.hostname = "worker-1";
  in.agent_pid = 31337;
  in.is_head_node = true;
  in.resources = {{"CPU", 4}, {"tpu", 1.5}};
  in.labels = {{"zone", "b"}};
  RegisterNodeRequest out = RoundTrip(in);
  EXPECT_EQ(out.token, in.token);
  EXPECT_EQ(out.rayx_version, in.rayx_version);
  EXPECT_EQ(out.address, in.address);
  EXPECT_EQ(out.hostname, in.hostname);
  EXPECT_EQ(out.agent_pid, in.agent_pid);
  EXPECT_EQ(out.is_head_node, in.is_head_node);
  EXPECT_EQ(out.resources, in.resources);
  EXPECT_EQ(out.labels, in.labels);
}

TEST(Codec, RegisterNodeReplyRoundTrips) {
  RegisterNodeReply in;
  in.node_id = Id('a');
  in.cluster_id = "c1";
  in.heartbeat_period_ms = 250;
  in.node_timeout_ms = 1500;
  RegisterNodeReply out = RoundTrip(in);
  EXPECT_EQ(out.node_id, in.node_id);
  EXPECT_EQ(out.cluster_id, "c1");
  EXPECT_EQ(out.heartbeat_period_ms, 250);
  EXPECT_EQ(out.node_timeout_ms, 1500);
}

TEST(Codec, HeartbeatRequestAndReplyRoundTrip) {
  HeartbeatRequest in;
  in.node_id = Id('b');
  in.seq = 123456789012ULL;
  in.store_bytes = 5;
  in.spilled_objects = 2;
  HeartbeatRequest out = RoundTrip(in);
  EXPECT_EQ(out.node_id, in.node_id);
  EXPECT_EQ(out.seq, in.seq);
  EXPECT_EQ(out.store_bytes, 5u);
  EXPECT_EQ(out.spilled_objects, 2u);
  EXPECT_FALSE(RoundTrip(HeartbeatReply{false}).known);
  EXPECT_TRUE(RoundTrip(HeartbeatReply{true}).known);
}

// A heartbeat of an agent built before `available` left the message still
// decodes: the head ignores the key it no longer knows.
struct HeartbeatWithAvailability {
  NodeId node_id;
  uint64_t seq = 0;
  ResourceMap available;
  MSGPACK_DEFINE_MAP(node_id, seq, available)
};

TEST(Codec, AHeartbeatThatStillCarriesAvailabilityDecodes) {
  HeartbeatWithAvailability old{Id('c'), 7, {{"CPU", 0.5}}};
  auto decoded = Decode<HeartbeatRequest>(Encode(old));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->node_id, old.node_id);
  EXPECT_EQ(decoded->seq, 7u);
}

TEST(Codec, UnregisterRequestAndReplyRoundTrip) {
  UnregisterNodeRequest out = RoundTrip(UnregisterNodeRequest{Id('c'), "rayx stop"});
  EXPECT_EQ(out.node_id, Id('c'));
  EXPECT_EQ(out.reason, "rayx stop");
  EXPECT_FALSE(RoundTrip(UnregisterNodeReply{false}).ok);
  EXPECT_TRUE(RoundTrip(UnregisterNodeReply{true}).ok);
}

TEST(Codec, ClusterStatusRequestAndReplyRoundTrip) {
  EXPECT_EQ(RoundTrip(GetClusterStatusRequest{"tok"}).token, "tok");
  GetClusterStatusReply in;
  in.status.rayx_version = "0.1.0";
  in.status.cluster_id = "cluster-9";
  in.status.head_uptime_ms = 60'000;
  in.status.heartbeat_period_ms = 250;
  in.status.node_timeout_ms = 1500;
  in.status.nodes = {MakeNodeInfo('1', true), MakeNodeInfo('2', false)};
  GetClusterStatusReply out = RoundTrip(in);
  EXPECT_EQ(out.status.rayx_version, "0.1.0");
  EXPECT_EQ(out.status.cluster_id, "cluster-9");
  EXPECT_EQ(out.status.head_uptime_ms, 60'000);
  EXPECT_EQ(out.status.heartbeat_period_ms, 250);
  EXPECT_EQ(out.status.node_timeout_ms, 1500);
  ASSERT_EQ(out.status.nodes.size(), 2u);
  ExpectSameNode(out.status.nodes[0], in.status.nodes[0]);
  ExpectSameNode(out.status.nodes[1], in.status.nodes[1]);
}

TEST(Codec, UnknownKeysAreIgnoredAndMissingKeysKeepDefaults) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(2);
  pk.pack(std::string("id"));
  pk.pack(uint64_t{5});
  pk.pack(std::string("future_field"));
  pk.pack(std::string("x"));
  auto env = Decode<Envelope>(std::string_view(buf.data(), buf.size()));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->id, 5u);
  EXPECT_EQ(env->v, kProtocolVersion);
  EXPECT_EQ(env->t, 0);
}

template <typename T>
void ExpectInvalid(std::string_view bytes, const std::string& what = "") {
  Result<T> r = Status::Internal("unset");
  EXPECT_NO_THROW(r = Decode<T>(bytes));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  if (!what.empty()) {
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status();
  }
}

// What the generic decoder (any msgpack, then the field list) makes of `bytes`.
Result<Envelope> DecodeEnvelopeGenerically(std::string_view bytes) {
  msgpack::object_handle handle;
  RAYX_RETURN_IF_ERROR(detail::ParseOne(bytes.data(), bytes.size(), DecodeLimits{}, &handle));
  try {
    Envelope out{};
    handle.get().convert(out);
    return out;
  } catch (const std::exception& e) {
    return Status::InvalidArgument(e.what());
  }
}

TEST(Decode, EnvelopeFastPathAgreesWithTheGenericDecoder) {
  std::mt19937_64 rng(99);
  std::vector<uint64_t> ids = {0, 1, 127, 128, 255, 256, 65535, 65536, 1ull << 32, ~0ull};
  for (uint64_t id : ids) {
    Envelope env;
    env.t = static_cast<uint16_t>(rng());
    env.id = id;
    auto out = Decode<Envelope>(Encode(env));
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->id, id);
    EXPECT_EQ(out->t, env.t);
    EXPECT_EQ(out->v, env.v);
  }
  // Mutations: both decoders accept the same bytes and read the same fields.
  Envelope env;
  env.t = 52;
  env.id = 1234567;
  const std::string valid = Encode(env);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = valid;
    bytes[static_cast<size_t>(rng()) % bytes.size()] = static_cast<char>(byte(rng));
    auto fast = Decode<Envelope>(bytes);
    auto generic = DecodeEnvelopeGenerically(bytes);
    ASSERT_EQ(fast.ok(), generic.ok()) << i;
    if (fast.ok()) {
      ASSERT_EQ(fast->v, generic->v);
      ASSERT_EQ(fast->t, generic->t);
      ASSERT_EQ(fast->id, generic->id);
    }
  }
}

TEST(Decode, RejectsEmptyBytes) { ExpectInvalid<Envelope>("", "empty frame"); }

TEST(Decode, RandomBytesNeverThrowOrCrash) {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> len(0, 48);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int i = 0; i < 20000; ++i) {
    std::string bytes(static_cast<size_t>(len(rng)), '\0');
    for (char& c : bytes) c = static_cast<char>(byte(rng));
    // Random bytes may happen to be a valid message; when not, the error is clean.
    auto check = [&](const Status& s) {
      if (!s.ok()) {
        ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
      }
    };
    ASSERT_NO_THROW(check(Decode<Envelope>(bytes).status()));
    ASSERT_NO_THROW(check(Decode<RegisterNodeRequest>(bytes).status()));
    ASSERT_NO_THROW(check(Decode<GetClusterStatusReply>(bytes).status()));
  }
}

TEST(Decode, MutatedValidEncodingsNeverThrowOrCrash) {
  GetClusterStatusReply reply;
  reply.status.nodes = {MakeNodeInfo('1', true), MakeNodeInfo('2', false)};
  const std::string valid = Encode(reply);
  std::mt19937 rng(777);
  std::uniform_int_distribution<size_t> pos(0, valid.size() - 1);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int i = 0; i < 5000; ++i) {
    std::string bytes = valid;
    for (int k = 0; k < 3; ++k) bytes[pos(rng)] = static_cast<char>(byte(rng));
    Status s;
    ASSERT_NO_THROW(s = Decode<GetClusterStatusReply>(bytes).status());
    if (!s.ok()) {
      ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    }
  }
}

TEST(Decode, EveryTruncationIsRejected) {
  RegisterNodeRequest req;
  req.token = "t";
  req.resources = {{"CPU", 2}};
  req.labels = {{"k", "v"}};
  const std::string valid = Encode(req);
  ASSERT_TRUE(Decode<RegisterNodeRequest>(valid).ok());
  for (size_t n = 0; n < valid.size(); ++n) {
    SCOPED_TRACE(n);
    ExpectInvalid<RegisterNodeRequest>(std::string_view(valid).substr(0, n));
  }
  ExpectInvalid<RegisterNodeRequest>(std::string_view(valid).substr(0, valid.size() / 2),
                                     "truncated");
}

TEST(Decode, RejectsTrailingGarbage) {
  std::string bytes = Encode(Envelope{}) + "xyz";
  ExpectInvalid<Envelope>(bytes, "3 unexpected bytes after");
}

TEST(Decode, RejectsDeepNesting) {
  std::string bytes(10000, static_cast<char>(0x91));  // fixarray of one element
  bytes += static_cast<char>(0xc0);                   // nil
  ExpectInvalid<Envelope>(bytes, "nested deeper than 16 arrays and maps");
}

TEST(Decode, RejectsNestedHeadersClaimingMoreThanTheFrameHolds) {
  // Ten arrays of 100,000 elements each (under max_array), nested, in 30
  // bytes: msgpack-c alone would allocate 2.4 MB per header.
  std::string bytes;
  for (int i = 0; i < 10; ++i) bytes += std::string("\xdc\x86\xa0", 3);
  ExpectInvalid<RegisterNodeRequest>(bytes, "more than its bytes can hold");
}

TEST(Decode, ShapeErrorsNameTheMessage) {
  ExpectInvalid<RegisterNodeRequest>(Encode(std::map<std::string, int>{{"labels", 3}}),
                                     "RegisterNodeRequest does not have the expected fields");
  ExpectInvalid<NodeInfo>(Encode(7), "message does not have the expected fields");
}

TEST(Decode, AcceptsNestingWithinTheDepthLimit) {
  std::string bytes(4, static_cast<char>(0x91));
  bytes += static_cast<char>(0xc0);
  // Well-formed msgpack of the wrong shape: a shape error, not a parse error.
  ExpectInvalid<Envelope>(bytes, "expected fields");
}

TEST(Decode, RejectsHugeArrayHeaderWithFewBytes) {
  const char array32[] = {static_cast<char>(0xdd), '\xff', '\xff', '\xff', '\xff', 1, 2, 3};
  ExpectInvalid<Envelope>(std::string_view(array32, sizeof array32),
                          "an array of 4294967295 elements is over the limit of 131072");
  const char map32[] = {static_cast<char>(0xdf), '\xff', '\xff', '\xff', '\xff', 1, 2};
  ExpectInvalid<Envelope>(std::string_view(map32, sizeof map32),
                          "a map of 4294967295 entries is over the limit of 131072");
  const char str32[] = {static_cast<char>(0xdb), '\xff', '\xff', '\xff', '\xff', 'a'};
  ExpectInvalid<Envelope>(std::string_view(str32, sizeof str32));
  const char bin32[] = {static_cast<char>(0xc6), '\x7f', '\xff', '\xff', '\xff', 'a'};
  ExpectInvalid<Envelope>(std::string_view(bin32, sizeof bin32));
  const char fixext1[] = {static_cast<char>(0xd4), 1, 2};  // ext types are not accepted
  ExpectInvalid<Envelope>(std::string_view(fixext1, sizeof fixext1), "ext values are not accepted");
}

TEST(Decode, RejectsWrongShapedValues) {
  ExpectInvalid<Envelope>(Encode(std::string("not a map")), "expected fields");
  ExpectInvalid<Envelope>(Encode(42), "expected fields");
  // A map of the right keys holding values of the wrong types.
  std::map<std::string, std::string> wrong = {{"v", "one"}, {"t", "two"}};
  ExpectInvalid<Envelope>(Encode(wrong), "expected fields");
  // A field value out of its type's range (t is 16-bit).
  std::map<std::string, uint64_t> big = {{"t", 70000}};
  ExpectInvalid<Envelope>(Encode(big), "expected fields");
  // A string where ClusterStatus (a map) is expected.
  std::map<std::string, std::string> status = {{"status", "oops"}};
  ExpectInvalid<GetClusterStatusReply>(Encode(status), "expected fields");
  // Non-string keys.
  std::map<int, int> int_keys = {{1, 2}};
  ExpectInvalid<Envelope>(Encode(int_keys), "expected fields");
}

TEST(WireEnums, TravelAsNumbersAndRoundTrip) {
  CreatePlacementGroupRequest req;
  req.strategy = PlacementStrategy::kStrictSpread;
  EXPECT_EQ(RoundTrip(req).strategy, PlacementStrategy::kStrictSpread);
  std::map<std::string, uint8_t> wire = {{"strategy", 3}};
  EXPECT_EQ(Encode(req).find("STRICT"), std::string::npos) << "a number, not the name";
  auto decoded = Decode<CreatePlacementGroupRequest>(Encode(wire));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->strategy, PlacementStrategy::kStrictSpread);
  PlacementGroupInfo info;
  info.state = PlacementGroupState::kInfeasible;
  EXPECT_EQ(RoundTrip(info).state, PlacementGroupState::kInfeasible);
  RequestLeaseRequest lease;
  lease.strategy = LeaseStrategy::kNodeAffinity;
  EXPECT_EQ(RoundTrip(lease).strategy, LeaseStrategy::kNodeAffinity);
}

TEST(WireEnums, OutOfRangeValuesAreRefusedNamingTheRange) {
  ExpectInvalid<CreatePlacementGroupRequest>(
      Encode(std::map<std::string, uint64_t>{{"strategy", 4}}),
      "placement strategy 4 is not one of 0..3");
  ExpectInvalid<PlacementGroupInfo>(Encode(std::map<std::string, uint64_t>{{"state", 1u << 20}}),
                                    "placement group state 1048576 is not one of 0..3");
  ExpectInvalid<RequestLeaseRequest>(Encode(std::map<std::string, int64_t>{{"strategy", -1}}),
                                     "scheduling strategy is not a number from 0 to 2");
  ExpectInvalid<RequestLeaseRequest>(
      Encode(std::map<std::string, std::string>{{"strategy", "EVERYWHERE"}}),
      "unknown scheduling strategy 'EVERYWHERE': use DEFAULT, SPREAD or NODE_AFFINITY");
}

TEST(WireEnums, NamesFromStateFilesBeforeProtocol4AreAccepted) {
  auto group = Decode<PlacementGroupInfo>(Encode(std::map<std::string, std::string>{
      {"strategy", "STRICT_PACK"}, {"state", "CREATED"}}));
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ(group->strategy, PlacementStrategy::kStrictPack);
  EXPECT_EQ(group->state, PlacementGroupState::kCreated);
  auto lease = Decode<RequestLeaseRequest>(Encode(std::map<std::string, std::string>{{"strategy", ""}}));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->strategy, LeaseStrategy::kDefault);
}

// Protocol 10: a submitted job's state and a listed lease's kind and state.
TEST(WireEnums, JobAndLeaseStatesTravelAsNumbersAndOlderStoredNamesAreRead) {
  JobInfo job;
  job.state = JobState::kStopped;
  EXPECT_EQ(RoundTrip(job).state, JobState::kStopped);
  EXPECT_EQ(Encode(job).find("STOPPED"), std::string::npos) << "a number, not the name";
  EXPECT_TRUE(Ended(JobState::kFailed));
  EXPECT_FALSE(Ended(JobState::kRunning));
  // A head state file written before protocol 10 holds the state's name.
  auto stored = Decode<JobInfo>(Encode(std::map<std::string, std::string>{{"state", "SUCCEEDED"}}));
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->state, JobState::kSucceeded);
  ExpectInvalid<JobInfo>(Encode(std::map<std::string, uint64_t>{{"state", 5}}),
                         "job state 5 is not one of 0..4");
  LeaseListEntry lease;
  lease.kind = LeaseKind::kActor;
  lease.state = LeaseState::kBlocked;
  EXPECT_EQ(RoundTrip(lease).kind, LeaseKind::kActor);
  EXPECT_EQ(RoundTrip(lease).state, LeaseState::kBlocked);
  EXPECT_EQ(Name(LeaseState::kBlocked), "BLOCKED");
  EXPECT_EQ(Name(LeaseKind::kProcess), "process");
}

// JSON for people (rayx::ToJson: `--format json`, the dashboard's API) names
// the enums; the wire form of the same value stays a number.
TEST(WireEnums, JsonNamesTheEnumsAndLeavesTheWireAsItWas) {
  LeaseListEntry lease;
  lease.kind = LeaseKind::kProcess;
  lease.state = LeaseState::kRunning;
  const std::string json = ToJson(lease);
  EXPECT_NE(json.find("\"kind\":\"process\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"state\":\"RUNNING\""), std::string::npos) << json;
  EXPECT_EQ(Encode(lease).find("process"), std::string::npos);
  PlacementGroupInfo group;
  group.state = PlacementGroupState::kCreated;
  group.strategy = PlacementStrategy::kStrictSpread;
  const std::string text = ToJson(group);
  EXPECT_NE(text.find("\"state\":\"CREATED\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"strategy\":\"STRICT_SPREAD\""), std::string::npos) << text;
  EXPECT_FALSE(rayx::detail::PackingForJson());  // over when ToJson returns
}

TEST(WireEnums, ParseNamesTheValidNames) {
  EXPECT_EQ(*Parse<PlacementStrategy>("SPREAD"), PlacementStrategy::kSpread);
  EXPECT_EQ(Name(PlacementGroupState::kRemoved), "REMOVED");
  auto bad = Parse<PlacementStrategy>("SCATTER");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "unknown placement strategy 'SCATTER': use PACK, SPREAD, STRICT_PACK or STRICT_SPREAD");
}

TEST(Decode, RejectsOversizedFrame) {
  std::string bytes(kMaxControlFrameBytes + 1, static_cast<char>(0xc0));
  ExpectInvalid<Envelope>(bytes, "exceeds the limit");
}

TEST(Decode, HonoursCallerLimits) {
  RegisterNodeRequest req;
  for (int i = 0; i < 10; ++i) req.resources["r" + std::to_string(i)] = i;
  DecodeLimits tight;
  tight.max_map = 4;
  EXPECT_TRUE(Decode<RegisterNodeRequest>(Encode(req)).ok());
  auto r = Decode<RegisterNodeRequest>(Encode(req), tight);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(CheckProtocolVersion, AcceptsOwnVersion) {
  EXPECT_TRUE(CheckProtocolVersion(Envelope{}, "this head").ok());
}

TEST(CheckProtocolVersion, MismatchNamesBothVersions) {
  Envelope env;
  env.v = kProtocolVersion + 41;
  Status s = CheckProtocolVersion(env, "this head");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("protocol " + std::to_string(kProtocolVersion + 41)),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("this head speaks protocol " + std::to_string(kProtocolVersion)),
            std::string::npos)
      << s;
}

TEST(ErrorReply, ToStatusMapsCodesAndAppendsWhere) {
  Status s = ErrorReply{static_cast<uint8_t>(StatusCode::kUnauthenticated), "bad token", "head h:1"}
                 .ToStatus();
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(s.message(), "bad token [head h:1]");
  Status bare = ErrorReply{static_cast<uint8_t>(StatusCode::kNotFound), "gone", ""}.ToStatus();
  EXPECT_EQ(bare, Status::NotFound("gone"));
}

Status FromCode(uint8_t code) { return ErrorReply{code, "m", ""}.ToStatus(); }

TEST(ErrorReply, ToStatusMapsOkAndUnknownCodesToInternal) {
  EXPECT_EQ(FromCode(0).code(), StatusCode::kInternal);
  EXPECT_EQ(FromCode(11).code(), StatusCode::kInternal);
  EXPECT_EQ(FromCode(9).code(), StatusCode::kInfeasible);
  EXPECT_EQ(FromCode(10).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(FromCode(255).code(), StatusCode::kInternal);
  EXPECT_EQ(FromCode(255).message(), "m");
  EXPECT_EQ(FromCode(1).code(), StatusCode::kInvalidArgument);
}

TEST(MessageTypeName, NamesKnownAndUnknownTypes) {
  EXPECT_EQ(MessageTypeName(2), "RegisterNodeRequest");
  EXPECT_EQ(MessageTypeName(9), "GetClusterStatusReply");
  EXPECT_EQ(MessageTypeName(999), "unknown(999)");
}

}  // namespace
}  // namespace rayx::protocol
