// The flat binary task messages: round trips and hostile-input-safe parsing.
#include "protocol/push_tasks.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace rayx::protocol {
namespace push_tasks_test {  // this file's own (unit tests compile in batches)

ObjectLocation MakeLocation() {
  ObjectLocation loc;
  loc.node_address = "10.0.0.7";
  loc.object_address = "tcp://10.0.0.7:4000";
  loc.path = "/dev/shm/rayx-store-abc/job-obj";
  loc.size = 123456789;
  loc.grant = "grant-of-job";
  return loc;
}

// Two calls: a task with an inline, a frame and a stored argument, and an
// actor creation without arguments.
std::string MakeRequest() {
  std::string body;
  PushTasksWriter w;
  w.BeginRequest(&body, "job-1");
  w.Call(7, false, "Add", "", "obj-7", 3);
  w.InlineArg("\x01");
  w.FrameArg(0);
  w.StoredArg(MakeLocation());
  w.Call(8, true, "Counter::Create", "actor-1", "obj-8", 0);
  w.Finish();
  return body;
}

std::string MakeReply() {
  std::string body;
  PushTasksWriter w;
  w.BeginReply(&body);
  w.InlineResult(7, "\x02");
  w.FrameResult(8, 0);
  w.StoredResult(9, MakeLocation());
  w.ExceptionResult(10, "std::invalid_argument", "x must be positive", "10.0.0.7");
  w.ErrorResult(11, TaskErrorKind::kOutOfMemory, "the memory monitor stopped it", "10.0.0.8");
  w.Finish();
  return body;
}

TEST(PushTasks, RequestRoundTrips) {
  std::string body = MakeRequest();
  std::vector<std::string_view> payload = {"big argument"};
  PushTasksView view;
  ASSERT_TRUE(ParsePushTasksRequest(body, payload, &view).ok());
  EXPECT_EQ(view.job_id, "job-1");
  ASSERT_EQ(view.calls.size(), 2u);
  const TaskCallView& add = view.calls[0];
  EXPECT_EQ(add.call_id, 7u);
  EXPECT_FALSE(add.actor_creation);
  EXPECT_EQ(add.function, "Add");
  EXPECT_EQ(add.actor_id, "");
  EXPECT_EQ(add.return_id, "obj-7");
  ASSERT_EQ(add.arg_count, 3u);
  ASSERT_EQ(view.args.size(), 3u);
  EXPECT_EQ(view.args[add.first_arg].kind, WireValue::kInline);
  EXPECT_EQ(view.args[add.first_arg].bytes, "\x01");
  EXPECT_EQ(view.args[add.first_arg + 1].kind, WireValue::kFrame);
  EXPECT_EQ(view.args[add.first_arg + 1].bytes, "big argument");
  EXPECT_EQ(view.args[add.first_arg + 2].kind, WireValue::kStored);
  EXPECT_EQ(view.args[add.first_arg + 2].stored.path, MakeLocation().path);
  EXPECT_EQ(view.args[add.first_arg + 2].stored.object_address, MakeLocation().object_address);
  EXPECT_EQ(view.args[add.first_arg + 2].stored.size, MakeLocation().size);
  EXPECT_EQ(view.args[add.first_arg + 2].stored.grant, MakeLocation().grant);
  const TaskCallView& create = view.calls[1];
  EXPECT_EQ(create.call_id, 8u);
  EXPECT_TRUE(create.actor_creation);
  EXPECT_EQ(create.function, "Counter::Create");
  EXPECT_EQ(create.actor_id, "actor-1");
  EXPECT_EQ(create.arg_count, 0u);
}

// An error's kind is one of the named ones: another number is refused.
TEST(PushTasks, AnErrorOfUnknownKindIsRefused) {
  std::string body;
  PushTasksWriter w;
  w.BeginReply(&body);
  w.ErrorResult(1, TaskErrorKind::kActorDied, "gone", "10.0.0.7");
  w.Finish();
  std::vector<TaskResultView> results;
  ASSERT_TRUE(ParsePushTasksReply(body, {}, &results).ok());
  EXPECT_EQ(results.at(0).error_kind, TaskErrorKind::kActorDied);
  body[4 + 8 + 1] = 99;  // count, call id, value kind: then the error's kind
  Status parsed = ParsePushTasksReply(body, {}, &results);
  EXPECT_EQ(parsed.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.message().find("unknown kind 99"), std::string::npos) << parsed;
}

TEST(PushTasks, ReplyRoundTrips) {
  std::string body = MakeReply();
  std::vector<std::string_view> payload = {"big result"};
  std::vector<TaskResultView> results;
  ASSERT_TRUE(ParsePushTasksReply(body, payload, &results).ok());
  ASSERT_EQ(results.size(), 5u);
  EXPECT_EQ(results[0].call_id, 7u);
  EXPECT_EQ(results[0].value.kind, WireValue::kInline);
  EXPECT_EQ(results[0].value.bytes, "\x02");
  EXPECT_EQ(results[1].value.kind, WireValue::kFrame);
  EXPECT_EQ(results[1].value.bytes, "big result");
  EXPECT_EQ(results[2].value.kind, WireValue::kStored);
  EXPECT_EQ(results[2].value.stored.node_address, "10.0.0.7");
  EXPECT_EQ(results[3].call_id, 10u);
  EXPECT_EQ(results[3].value.kind, WireValue::kError);
  EXPECT_EQ(results[3].error_kind, TaskErrorKind::kException);
  EXPECT_EQ(results[3].error_type, "std::invalid_argument");
  EXPECT_EQ(results[3].error_message, "x must be positive");
  EXPECT_EQ(results[3].error_node, "10.0.0.7");
  // One of rayx's kinds travels as its number, with its name as the type.
  EXPECT_EQ(results[4].error_kind, TaskErrorKind::kOutOfMemory);
  EXPECT_EQ(results[4].error_type, "OutOfMemory");
  EXPECT_EQ(results[4].error_node, "10.0.0.8");
}

TEST(PushTasks, ParsingReusesTheViewAndForgetsTheLastMessage) {
  PushTasksView view;
  std::vector<std::string_view> payload = {"x"};
  ASSERT_TRUE(ParsePushTasksRequest(MakeRequest(), payload, &view).ok());
  std::string empty;
  PushTasksWriter w;
  w.BeginRequest(&empty, "job-2");
  w.Finish();
  ASSERT_TRUE(ParsePushTasksRequest(empty, {}, &view).ok());
  EXPECT_EQ(view.job_id, "job-2");
  EXPECT_TRUE(view.calls.empty());
  EXPECT_TRUE(view.args.empty());
}

TEST(PushTasks, SmallestCallsAndResultsParse) {
  std::string body;
  PushTasksWriter w;
  w.BeginRequest(&body, "");
  for (uint64_t id = 1; id <= 3; ++id) w.Call(id, false, "", "", "", 0);
  w.Finish();
  PushTasksView view;
  ASSERT_TRUE(ParsePushTasksRequest(body, {}, &view).ok());
  EXPECT_EQ(view.calls.size(), 3u);
  std::string reply;
  w.BeginReply(&reply);
  for (uint64_t id = 1; id <= 3; ++id) w.InlineResult(id, "");
  w.Finish();
  std::vector<TaskResultView> results;
  ASSERT_TRUE(ParsePushTasksReply(reply, {}, &results).ok());
  EXPECT_EQ(results.size(), 3u);
}

// A generator call's items travel before its result, each with its index.
TEST(PushTasks, GeneratorItemsRoundTripAndEveryTruncationIsRejected) {
  std::string body;
  PushTasksWriter w;
  w.BeginReply(&body);
  uint32_t first = 0, second = 1, third = 2;
  w.InlineResult(7, "item zero", &first);
  w.FrameResult(7, 0, &second);
  ObjectLocation stored{"10.0.0.7", "tcp://10.0.0.7:5000", "/dev/shm/x", 99};
  w.StoredResult(7, stored, &third);
  w.InlineResult(7, "3 items");
  w.Finish();
  std::vector<std::string_view> payload = {"big item"};
  std::vector<TaskResultView> results;
  ASSERT_TRUE(ParsePushTasksReply(body, payload, &results).ok());
  ASSERT_EQ(results.size(), 4u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(results[i].item) << i;
    EXPECT_EQ(results[i].item_index, i);
    EXPECT_EQ(results[i].call_id, 7u);
  }
  EXPECT_EQ(results[0].value.bytes, "item zero");
  EXPECT_EQ(results[1].value.kind, WireValue::kFrame);
  EXPECT_EQ(results[1].value.bytes, "big item");
  EXPECT_EQ(results[2].value.kind, WireValue::kStored);
  EXPECT_EQ(results[2].value.stored.size, 99u);
  EXPECT_FALSE(results[3].item) << "the call's own result ends it";
  EXPECT_EQ(results[3].value.bytes, "3 items");
  for (size_t n = 0; n < body.size(); ++n) {
    Status s = ParsePushTasksReply(std::string_view(body).substr(0, n), payload, &results);
    ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << n;
  }
}

// An item is a value: an error, another item or an index past the limit is
// malformed (the caller refuses the connection rather than guess).
TEST(PushTasks, AnItemOfTheWrongKindOrPastTheLimitIsRejected) {
  auto reply_with_item = [](uint32_t index, uint8_t kind) {
    std::string body(4, '\0');
    uint32_t count = 1;
    std::memcpy(body.data(), &count, 4);
    uint64_t call = 1;
    body.append(reinterpret_cast<const char*>(&call), 8);
    body.push_back(static_cast<char>(WireValue::kItem));
    body.append(reinterpret_cast<const char*>(&index), 4);
    body.push_back(static_cast<char>(kind));
    uint32_t len = 0;
    body.append(reinterpret_cast<const char*>(&len), 4);  // an empty str
    body.append(std::string(8, '\0'));                     // room for an error's strs
    return body;
  };
  std::vector<TaskResultView> results;
  std::string fine = reply_with_item(5, static_cast<uint8_t>(WireValue::kInline));
  fine.resize(fine.size() - 8);
  ASSERT_TRUE(ParsePushTasksReply(fine, {}, &results).ok());
  EXPECT_EQ(results.at(0).item_index, 5u);
  for (uint8_t kind : {static_cast<uint8_t>(WireValue::kError), static_cast<uint8_t>(WireValue::kItem)}) {
    Status s = ParsePushTasksReply(reply_with_item(5, kind), {}, &results);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << int(kind);
    EXPECT_NE(s.message().find("item"), std::string::npos) << s;
  }
  std::string past = reply_with_item(kMaxGeneratorItems + 1, 0);
  past.resize(past.size() - 8);
  EXPECT_EQ(ParsePushTasksReply(past, {}, &results).code(), StatusCode::kInvalidArgument);
}

TEST(PushTasks, GeneratorItemIdsAreDistinctObjectIds) {
  const std::string call = std::string(16, 'a') + "00000000000000ff";
  std::string zero = GeneratorItemId(call, 0), one = GeneratorItemId(call, 1);
  EXPECT_EQ(zero.size(), call.size());
  EXPECT_NE(zero, call);
  EXPECT_NE(zero, one);
  EXPECT_EQ(zero, GeneratorItemId(call, 0)) << "caller and worker derive the same id";
  EXPECT_EQ(zero.substr(0, 16), call.substr(0, 16)) << "the process's prefix stays";
  EXPECT_EQ(zero.substr(16), "00000100000000ff");
  EXPECT_EQ(GeneratorItemId(call, kMaxGeneratorItems).size(), call.size());
  EXPECT_EQ(GeneratorItemId(call, kMaxGeneratorItems + 1), "") << "past the limit";
  EXPECT_EQ(GeneratorItemId("short", 0), "");
  EXPECT_EQ(GeneratorItemId(std::string(16, 'a') + "not-hex-at-all!!", 0), "");
}

TEST(PushTasks, EveryTruncationIsRejected) {
  std::vector<std::string_view> payload = {"x"};
  const std::string request = MakeRequest();
  const std::string reply = MakeReply();
  PushTasksView view;
  std::vector<TaskResultView> results;
  for (size_t n = 0; n < request.size(); ++n) {
    Status s = ParsePushTasksRequest(std::string_view(request).substr(0, n), payload, &view);
    ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << n;
  }
  for (size_t n = 0; n < reply.size(); ++n) {
    Status s = ParsePushTasksReply(std::string_view(reply).substr(0, n), payload, &results);
    ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << n;
  }
}

TEST(PushTasks, RejectsTrailingBytesAndMissingFrames) {
  PushTasksView view;
  std::vector<std::string_view> payload = {"x"};
  EXPECT_FALSE(ParsePushTasksRequest(MakeRequest() + "z", payload, &view).ok());
  // The frame argument names payload frame 0, which is not there.
  Status missing = ParsePushTasksRequest(MakeRequest(), {}, &view);
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  std::vector<TaskResultView> results;
  EXPECT_FALSE(ParsePushTasksReply(MakeReply(), {}, &results).ok());
}

TEST(PushTasks, ErrorsSayWhichCallOrResultAndWhere) {
  PushTasksView view;
  Status missing = ParsePushTasksRequest(MakeRequest(), {}, &view);
  EXPECT_NE(missing.message().find("malformed PushTasksRequest: argument 1 (of 3) of call 0 (of "
                                   "2) is cut short, of unknown kind 1, or names a missing frame"),
            std::string::npos)
      << missing;
  EXPECT_NE(missing.message().find(" at byte "), std::string::npos) << missing;
  std::string request = MakeRequest();
  // Cut inside the stored argument of the first call.
  Status cut = ParsePushTasksRequest(std::string_view(request).substr(0, 73), {"x"}, &view);
  EXPECT_NE(cut.message().find("argument 2 (of 3) of call 0 (of 2) is cut short"),
            std::string::npos)
      << cut;
  std::string reply = MakeReply();
  std::vector<TaskResultView> results;
  Status extra = ParsePushTasksReply(reply + "zz", {"x"}, &results);
  EXPECT_NE(extra.message().find("bytes after the last result at byte " +
                                 std::to_string(reply.size()) + " of " +
                                 std::to_string(reply.size() + 2)),
            std::string::npos)
      << extra;
}

TEST(PushTasks, RejectsHugeArgumentCountsWithFewBytes) {
  std::string body;
  PushTasksWriter w;
  w.BeginRequest(&body, "j");
  w.Call(1, false, "f", "", "", 0xffffffffu);  // and no arguments follow
  w.Finish();
  PushTasksView view;
  Status s = ParsePushTasksRequest(body, {}, &view);
  EXPECT_NE(s.message().find("the argument count 4294967295 of call 0 (of 1) exceeds the body"),
            std::string::npos)
      << s;
}

TEST(PushTasks, RejectsHugeCountsWithFewBytes) {
  std::string body;
  PushTasksWriter w;
  w.BeginRequest(&body, "j");
  w.Finish();
  uint32_t huge = 0xffffffffu;
  std::memcpy(body.data() + 5, &huge, 4);  // after str "j"
  PushTasksView view;
  Status s = ParsePushTasksRequest(body, {}, &view);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("call count"), std::string::npos) << s;
  std::string reply(4, '\xff');
  std::vector<TaskResultView> results;
  EXPECT_FALSE(ParsePushTasksReply(reply, {}, &results).ok());
}

TEST(PushTasks, RandomAndMutatedBytesNeverCrash) {
  std::mt19937 rng(4242);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::string_view> payload = {"a", "b"};
  PushTasksView view;
  std::vector<TaskResultView> results;
  const std::string request = MakeRequest();
  const std::string reply = MakeReply();
  for (int i = 0; i < 20000; ++i) {
    std::string req = request, rep = reply;
    for (int k = 0; k < 3; ++k) {
      req[static_cast<size_t>(rng()) % req.size()] = static_cast<char>(byte(rng));
      rep[static_cast<size_t>(rng()) % rep.size()] = static_cast<char>(byte(rng));
    }
    Status a = ParsePushTasksRequest(req, payload, &view);
    Status b = ParsePushTasksReply(rep, payload, &results);
    if (!a.ok()) {
      ASSERT_EQ(a.code(), StatusCode::kInvalidArgument);
    }
    if (!b.ok()) {
      ASSERT_EQ(b.code(), StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace rayx::protocol
