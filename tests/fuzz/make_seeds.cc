// Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/) with
// rayx's own encoders, so the seeds stay valid as the formats change: small
// valid inputs, and near-valid ones (truncated, over a bound) that start the
// fuzzer at the edges. Run by scripts/fuzz.sh --seeds; the output is committed.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/directory_archive.h"
#include "fuzz_util.h"
#include "message_types.h"
#include "protocol/push_tasks.h"
#include "rayx/detail/registry.h"

namespace fs = std::filesystem;

namespace rayx::fuzz {
namespace {

class Corpus {
 public:
  Corpus(const fs::path& root, const std::string& target) : dir_(root / target) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void Add(const std::string& name, std::string_view bytes) {
    std::ofstream out(dir_ / name, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    Check(static_cast<bool>(out), "cannot write " + (dir_ / name).string());
  }

 private:
  fs::path dir_;
};

template <typename T>
std::string Packed(const T& value) {
  return rayx::detail::Pack(value);
}

// The Point of fuzz_call_args.cc, as it travels.
struct PointSeed {
  double x = 0;
  double y = 0;
  std::string label;
  MSGPACK_DEFINE_MAP(x, y, label)
};

// Arguments split at NUL bytes, as fuzz_user_input.cc reads them.
std::string Args(const std::vector<std::string>& args) {
  std::string out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0) out.push_back('\0');
    out += args[i];
  }
  return out;
}

// msgpack of `depth` one-element arrays around a nil.
std::string Nested(size_t depth) {
  return std::string(depth, static_cast<char>(0x91)) + static_cast<char>(0xc0);
}

void Envelopes(const fs::path& root) {
  Corpus c(root, "envelope");
  protocol::Envelope env;
  env.t = static_cast<uint16_t>(protocol::MessageType::kPushTasksRequest);
  env.id = 12345;
  c.Add("push-tasks", protocol::Encode(env));
  env.t = 1;
  env.id = ~0ull;
  c.Add("error-reply-max-id", protocol::Encode(env));
  // Generic forms the fast path leaves to the generic decoder.
  std::map<std::string, uint64_t> extra = {{"v", kProtocolVersion}, {"t", 2}, {"id", 1}, {"x", 9}};
  c.Add("extra-key", Packed(extra));
  std::map<std::string, std::string> wrong = {{"v", "one"}};
  c.Add("wrong-type", Packed(wrong));
  c.Add("deep", Nested(40));
  std::string env_bytes = protocol::Encode(env);
  c.Add("truncated", env_bytes.substr(0, env_bytes.size() - 1));
}

// A selector byte, a limits byte, then the body.
std::string MessageInput(uint8_t selector, std::string_view body) {
  return FuzzInputWriter().Byte(selector).Byte(0).Rest(body).bytes();
}

void Messages(const fs::path& root) {
  Corpus c(root, "messages");
  // Every type, default-constructed: the fuzzer learns each field name.
  ForEachType([&]<typename T>(uint8_t selector) {
    c.Add("type-" + std::to_string(selector), MessageInput(selector, protocol::Encode(T{})));
  });
  using namespace rayx::protocol;  // NOLINT
  RegisterNodeRequest reg;
  reg.token = "token";
  reg.rayx_version = kRayxVersion;
  reg.address = "127.0.0.2";
  reg.hostname = "node-1";
  reg.agent_pid = 4242;
  reg.resources = {{"CPU", 8}, {"GPU", 2}, {"memory", 3.4e10}};
  reg.labels = {{"zone", "a"}};
  const std::string reg_bytes = Encode(reg);
  c.Add("register-node", MessageInput(SelectorOf<RegisterNodeRequest>(), reg_bytes));
  c.Add("register-node-truncated",
        MessageInput(SelectorOf<RegisterNodeRequest>(), reg_bytes.substr(0, reg_bytes.size() / 2)));
  GetClusterStatusReply status;
  NodeInfo node;
  node.address = "127.0.0.3";
  node.total = {{"CPU", 4}, {"tpu", 1}};
  node.available = {{"CPU", 2.5}};
  node.labels = {{"accelerator", "H100"}};
  node.alive = true;
  status.status.nodes = {node, node};
  c.Add("cluster-status", MessageInput(SelectorOf<GetClusterStatusReply>(), Encode(status)));
  CreatePlacementGroupRequest pg;
  pg.name = "group";
  pg.strategy = PlacementStrategy::kStrictSpread;
  pg.bundles = {{{"CPU", 1}}, {{"GPU", 0.5}}};
  pg.label_selector = {{"zone", "a"}};
  c.Add("create-placement-group",
        MessageInput(SelectorOf<CreatePlacementGroupRequest>(), Encode(pg)));
  WorkerOutputNotice output;
  output.job_id = JobId::FromWire("00000000000000aa");
  output.batches = {{"train_step pid=4242, ip=10.0.0.2", {"loss 0.31", "", std::string(300, 'x')}},
                    {"Counter pid=7, ip=10.0.0.3", {"added 5"}}};
  c.Add("worker-output", MessageInput(SelectorOf<WorkerOutputNotice>(), Encode(output)));
  output.processes = true;
  c.Add("process-output", MessageInput(SelectorOf<WorkerOutputNotice>(), Encode(output)));
  HeartbeatRequest beat;
  beat.seq = 7;
  beat.counted = true;
  beat.tasks = {10, 8, 1, 1};
  beat.collectives = {{"allreduce", 3, 1, 1500, {1, 1, 0, 0, 0, 0, 0, 1}},
                      {"barrier", 1, 0, 20, {1, 0, 0, 0, 0, 0, 0, 0}}};
  c.Add("heartbeat-counted", MessageInput(SelectorOf<HeartbeatRequest>(), Encode(beat)));
  ListStateReply listed;
  CollectiveGroupInfo group;
  group.group = "ring";
  group.attempt_id = "a1";
  group.world_size = 2;
  group.members = {{0, LeaseId::FromRandom()}, {1, LeaseId::FromRandom()}};
  listed.collective_groups = {group};
  group.ended = "rank 1: its node died";
  listed.collective_groups.push_back(group);
  c.Add("list-state-groups", MessageInput(SelectorOf<ListStateReply>(), Encode(listed)));
  KvPutRequest put;
  put.ns = "collective";
  put.key = "group/rank/0";
  put.value = std::string(100, 'v');
  c.Add("kv-put", FuzzInputWriter()
                      .Byte(SelectorOf<KvPutRequest>())
                      .Byte(1)  // the KV limits
                      .Rest(Encode(put))
                      .bytes());
  SubmitJobRequest job;
  job.entrypoint = {"python", "train.py"};
  job.env = {{"A", "1"}};
  c.Add("submit-job", MessageInput(SelectorOf<SubmitJobRequest>(), Encode(job)));
  StartWorkerRequest start;
  start.executable = "/bin/true";
  start.gpu_ids = {0, 1};
  start.worker_env = {{"K", "V"}};
  start.init.function = "Counter::Create";
  start.init.args = {Packed(5)};
  c.Add("start-worker", MessageInput(SelectorOf<StartWorkerRequest>(), Encode(start)));
  c.Add("error-reply", MessageInput(SelectorOf<ErrorReply>(),
                                    Encode(ErrorReply{3, "not found", "head"})));
  c.Add("actor-init", MessageInput(kFirstRecord + 1, Encode(start.init)));
  c.Add("deep", MessageInput(SelectorOf<RegisterNodeRequest>(), Nested(17)));
  // A map declaring 100,000 entries: within max_map, over what 6 bytes hold.
  c.Add("huge-map-header", MessageInput(SelectorOf<RegisterNodeRequest>(),
                                        std::string("\xde\x86\xa0\x80\x80\x80", 6)));
}

void PushTasks(const fs::path& root) {
  Corpus c(root, "push_tasks");
  protocol::PushTasksWriter w;
  std::string body;
  w.BeginRequest(&body, "0123456789abcdef");
  w.Call(1, false, "Plus", "", "obj-1", 2);
  w.InlineArg(Packed(1));
  w.FrameArg(0);
  w.Call(2, true, "Counter::Create", "actor-1", "obj-2", 1);
  protocol::ObjectLocation loc{"127.0.0.2", "tcp://127.0.0.2:7000", "/tmp/store/obj", 1 << 20, ""};
  w.StoredArg(loc);
  w.Finish();
  const std::string frame = Packed(std::string(300, 'x'));
  c.Add("request", FuzzInputWriter().Byte(0).Byte(1).Part(frame).Rest(body).bytes());
  c.Add("request-missing-frame", FuzzInputWriter().Byte(0).Byte(0).Rest(body).bytes());
  c.Add("request-truncated",
        FuzzInputWriter().Byte(0).Byte(1).Part(frame).Rest(body.substr(0, 30)).bytes());
  std::string reply;
  w.BeginReply(&reply);
  w.InlineResult(1, Packed(3));
  w.FrameResult(2, 0);
  w.StoredResult(3, loc);
  w.ErrorResult(4, protocol::TaskErrorKind::kObjectLost, "argument 0 of Plus could not be read",
                "/tmp/store/obj");
  w.Finish();
  c.Add("reply", FuzzInputWriter().Byte(1).Byte(1).Part(frame).Rest(reply).bytes());
  std::string huge = reply;
  huge[0] = huge[1] = huge[2] = huge[3] = '\xff';
  c.Add("reply-huge-count", FuzzInputWriter().Byte(1).Byte(1).Part(frame).Rest(huge).bytes());
}

// A selector (the function's index in fuzz_call_args.cc), the argument count,
// then the arguments, the last one unprefixed.
std::string CallInput(uint8_t function, const std::vector<std::string>& args) {
  FuzzInputWriter w;
  w.Byte(function).Byte(static_cast<uint8_t>(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    if (i + 1 == args.size()) {
      w.Rest(args[i]);
    } else {
      w.Part(args[i]);
    }
  }
  return w.bytes();
}

// A Tree of fuzz_call_args.cc, [value, [children...]], `depth` levels deep.
std::string TreeBytes(size_t depth) {
  std::string inner = Packed(std::make_tuple(int64_t{7}, std::vector<int>{}));
  for (size_t i = 1; i < depth; ++i) {
    // [i, [inner]]: a fixarray of 2, the value, a fixarray of 1, the child.
    inner = std::string("\x92", 1) + Packed(static_cast<int64_t>(i)) + "\x91" + inner;
  }
  return inner;
}

void CallArgs(const fs::path& root) {
  Corpus c(root, "call_args");
  c.Add("depth", CallInput(0, {TreeBytes(3)}));
  // A Tree nests two arrays per level: 64 levels are 128 arrays deep, the most
  // a value may nest; 65 are one level too deep.
  c.Add("depth-at-limit", CallInput(0, {TreeBytes(64)}));
  c.Add("depth-over-limit", CallInput(0, {TreeBytes(65)}));
  c.Add("add", CallInput(1, {Packed(int64_t{2}), Packed(int64_t{-40})}));
  c.Add("add-wrong-type", CallInput(1, {Packed(std::string("two")), Packed(2)}));
  c.Add("concat", CallInput(2, {Packed(std::string("a")),
                                Packed(std::vector<std::string>{"b", "c"})}));
  c.Add("norm", CallInput(3, {Packed(std::vector<double>{3, 4})}));
  c.Add("norm-huge-header", CallInput(3, {std::string("\xdd\x7f\xff\xff\xff\xcb", 6)}));
  std::map<std::string, std::vector<int32_t>> keys = {{"a", {1, 2}}, {"b", {}}};
  c.Add("count-keys", CallInput(4, {Packed(keys)}));
  PointSeed point{1.5, -2.0, "p"};
  c.Add("describe", CallInput(5, {Packed(point), Packed(3)}));
  c.Add("describe-nil", CallInput(5, {Packed(point), Packed(msgpack::type::nil_t())}));
  c.Add("size", CallInput(6, {std::string("raw bytes")}));
  c.Add("echo", CallInput(7, {Packed(std::make_tuple(1, std::string("x"), true))}));
  c.Add("scale", CallInput(8, {Packed(2.5f), Packed(true)}));
  std::map<int64_t, decltype(point)> points = {{1, point}};
  c.Add("points", CallInput(9, {Packed(points), Packed(std::vector<uint8_t>{1, 2, 3})}));
  c.Add("split", CallInput(10, {Packed(std::vector<Bytes>{Bytes{"ab"}, Bytes{""}})}));
  c.Add("box-make", CallInput(11, {Packed(std::string("box"))}));
  c.Add("box-get", CallInput(12, {}));
  c.Add("box-set", CallInput(13, {Packed(std::vector<uint8_t>{104, 105})}));
  c.Add("box-grow", CallInput(14, {TreeBytes(2)}));
  c.Add("wrong-arity", CallInput(1, {Packed(1)}));
  c.Add("trailing-bytes", CallInput(1, {Packed(1), Packed(2) + "x"}));
}

void PythonValues(const fs::path& root) {
  Corpus c(root, "python_values");
  c.Add("int", Packed(42));
  c.Add("negative", Packed(int64_t{-1} << 40));
  c.Add("u64", Packed(~uint64_t{0}));
  c.Add("float", Packed(2.5));
  c.Add("str", Packed(std::string("héllo")));
  c.Add("bin", Packed(Bytes{"\x00\x01"}));
  c.Add("list", Packed(std::make_tuple(1, std::string("a"), 2.5, true, msgpack::type::nil_t())));
  std::map<std::string, std::vector<double>> weights = {{"w", {1.0, 2.5}}};
  c.Add("dict", Packed(weights));
  // A map keyed by an array: a tuple key in Python.
  c.Add("array-key", std::string("\x81\x92\x01\x02\xa1x", 6));
  // A map keyed by a map: no hashable equivalent.
  c.Add("map-key", std::string("\x81\x81\x01\x02\x03", 5));
  c.Add("deep-at-limit", Nested(rayx::detail::kMaxValueDepth));
  c.Add("deep-over-limit", Nested(rayx::detail::kMaxValueDepth + 1));
  c.Add("bad-utf8", std::string("\xa2\xff\xfe", 3));
  c.Add("ext", std::string("\xd4\x01\x02", 3));
  c.Add("truncated", std::string("\x93\x01\x02", 3));
}

// A ustar header block for one member, for archives tar would not write.
std::string UstarHeader(const std::string& name, char type, size_t size,
                        const std::string& link = "") {
  std::string h(512, '\0');
  name.copy(h.data(), std::min<size_t>(name.size(), 100));
  std::snprintf(h.data() + 100, 8, "%07o", 0644u);
  std::snprintf(h.data() + 108, 8, "%07o", 0u);
  std::snprintf(h.data() + 116, 8, "%07o", 0u);
  std::snprintf(h.data() + 124, 12, "%011zo", size);
  std::snprintf(h.data() + 136, 12, "%011o", 0u);
  h[156] = type;
  link.copy(h.data() + 157, std::min<size_t>(link.size(), 100));
  std::memcpy(h.data() + 257, "ustar\0" "00", 8);
  std::memset(h.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char ch : h) sum += ch;
  std::snprintf(h.data() + 148, 8, "%06o", sum);
  h[155] = ' ';
  return h;
}

std::string Member(const std::string& name, const std::string& data) {
  std::string out = UstarHeader(name, '0', data.size()) + data;
  out.resize((out.size() + 511) / 512 * 512, '\0');
  return out;
}

void Archives(const fs::path& root) {
  Corpus c(root, "archive");
  // Packed by rayx itself: files, a folder, a link inside.
  fs::path dir = fs::temp_directory_path() / ("rayx-seed-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  std::ofstream(dir / "train.py") << "print('hi')\n";
  std::ofstream(dir / "sub" / "data.txt") << "1 2 3\n";
  fs::create_symlink("../train.py", dir / "sub" / "link");
  auto packed = PackDirectory(dir.string(), {}, 1 << 20);
  fs::remove_all(dir);
  Check(packed.ok(), "PackDirectory: " + packed.status().ToString());
  c.Add("packed", *packed);
  c.Add("packed-truncated", packed->substr(0, packed->size() / 2));
  const std::string end(1024, '\0');
  c.Add("plain-file", Member("a.txt", "abc") + end);
  c.Add("dot-dot", Member("../escape.txt", "out") + end);
  c.Add("absolute", Member("/tmp/rayx-fuzz-absolute.txt", "out") + end);
  c.Add("symlink-out", UstarHeader("out", '2', 0, "/etc") + end);
  c.Add("symlink-up", UstarHeader("up", '2', 0, "../..") + end);
  c.Add("through-symlink",
        UstarHeader("dir", '2', 0, "..") + Member("dir/escape.txt", "out") + end);
  c.Add("huge-size", UstarHeader("big", '0', 077777777777) + end);
}

void UserInput(const fs::path& root) {
  Corpus c(root, "user_input");
  auto add = [&](const std::string& name, uint8_t selector, std::string_view text) {
    c.Add(name, FuzzInputWriter().Byte(selector).Rest(text).bytes());
  };
  add("resources", 0, R"({"tpu": 4, "ssd": 1.5e3})");
  add("resources-empty", 0, " { } ");
  add("resources-reserved", 0, R"({"CPU": 1})");
  add("resources-over-limit", 0, R"({"tpu": 1e15})");
  add("resources-escape", 0, R"({"t\"pu": 1})");
  add("labels", 1, "zone=us-east/1a,accelerator=H100");
  add("labels-trailing-comma", 1, "a=1,");
  add("flags", 2, Args({"--address", "127.0.0.1:6380", "--port=6380", "--head", "--num-cpus",
                        "2.5", "--env", "A=1", "--", "prog"}));
  add("flags-bad-int", 2, Args({"--port", "99999"}));
  add("flags-unknown", 2, Args({"--bogus"}));
  add("host-port", 3, "10.0.0.1:6380");
  add("host-default-port", 0x83, "head-node");
  add("host-bad-port", 3, "host:0");
}

}  // namespace
}  // namespace rayx::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_ROOT (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  rayx::fuzz::Envelopes(root);
  rayx::fuzz::Messages(root);
  rayx::fuzz::PushTasks(root);
  rayx::fuzz::CallArgs(root);
  rayx::fuzz::PythonValues(root);
  rayx::fuzz::Archives(root);
  rayx::fuzz::UserInput(root);
  std::printf("seeds written under %s\n", root.c_str());
  return 0;
}
