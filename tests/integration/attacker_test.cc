// Attacks on every port of a running cluster, first by a process that holds no
// credential (or another cluster's), then by an authenticated member of another
// job: each is refused, nothing runs, and the cluster keeps serving a real job
// meanwhile. This test binary is also the workers' program (RAYX_WORKER_MODE).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "common/address.h"
#include "protocol/codec.h"
#include "protocol/job_messages.h"
#include "protocol/kv_messages.h"
#include "protocol/placement_messages.h"
#include "protocol/process_messages.h"
#include "protocol/push_tasks.h"
#include "rayx/rayx.h"
#include "runtime/runtime.h"
#include "transport/message.h"
#include "transport/security.h"
#include "transport/sync_client.h"
#include "transport/zmq_frame.h"
#include "util/local_cluster.h"
#include "util/subprocess.h"
#include "util/test_helpers.h"

namespace fs = std::filesystem;

// Writes `path`: proof that a call ran. Outside the anonymous namespace, as
// user functions usually are.
int Touch(std::string path) {
  std::ofstream(path) << "ran";
  return 1;
}

class Counter {
 public:
  static Counter* Create() { return new Counter(); }
  int Add(int n) { return total_ += n; }

 private:
  int total_ = 0;
};

RAYX_REMOTE(Touch, Counter::Create, &Counter::Add);

namespace rayx::testing {
namespace {

using namespace std::chrono_literals;
using transport::ClientSecurity;
using transport::Credential;
using transport::Frames;
using transport::WireSecurity;

// A DEALER that proves `security` (or nothing at all) and sends raw frames.
class Peer {
 public:
  // `source`: the address to connect from ("" lets the kernel choose).
  Peer(const std::string& endpoint, std::optional<ClientSecurity> security,
       const std::string& routing_id = "", const std::string& source = "")
      : socket_(context_, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    if (!routing_id.empty()) socket_.set(zmq::sockopt::routing_id, routing_id);
    if (security) transport::MakeClient(socket_, *security);
    std::string host_port = endpoint.rfind("tcp://", 0) == 0 ? endpoint.substr(6) : endpoint;
    socket_.connect("tcp://" + (source.empty() ? "" : source + ":0;") + host_port);
  }
  // Never blocks: a connection the server refused takes nothing.
  void Send(std::vector<std::string> frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      zmq::message_t m(frames[i].data(), frames[i].size());
      auto flags = zmq::send_flags::dontwait;
      if (i + 1 < frames.size()) flags = flags | zmq::send_flags::sndmore;
      if (!socket_.send(m, flags)) return;
    }
  }
  // One reply's frames, or nullopt after `timeout`.
  std::optional<std::vector<std::string>> Receive(std::chrono::milliseconds timeout) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, timeout) <= 0) return std::nullopt;
    Frames frames = transport::ReceiveFrames(socket_);
    std::vector<std::string> out;
    for (auto& f : frames) out.emplace_back(f.View());
    return out;
  }
  // The ErrorReply's code, or nullopt when the reply was not an error (or
  // none came).
  std::optional<StatusCode> ErrorOf(const std::vector<std::string>& request,
                                    std::chrono::milliseconds timeout = 5000ms) {
    Send(request);
    auto reply = Receive(timeout);
    if (!reply || reply->size() < 2) return std::nullopt;
    auto env = protocol::Decode<protocol::Envelope>((*reply)[0]);
    if (!env.ok() || env->t != static_cast<uint16_t>(protocol::MessageType::kErrorReply)) {
      return std::nullopt;
    }
    auto error = protocol::Decode<protocol::ErrorReply>((*reply)[1]);
    if (!error.ok()) return std::nullopt;
    return static_cast<StatusCode>(error->code);
  }

 private:
  zmq::context_t context_{1};
  zmq::socket_t socket_;
};

template <typename M>
std::vector<std::string> Request(const M& body, uint64_t id, std::vector<std::string> more = {}) {
  protocol::Envelope env;
  env.t = static_cast<uint16_t>(M::kType);
  env.id = id;
  std::vector<std::string> frames{protocol::Encode(env), protocol::Encode(body)};
  for (auto& m : more) frames.push_back(std::move(m));
  return frames;
}

// A task call of Touch(`path`) as a caller of `job` sends it to a worker.
std::vector<std::string> TouchCall(const std::string& job, const std::string& path) {
  protocol::Envelope env;
  env.t = static_cast<uint16_t>(protocol::MessageType::kPushTasksRequest);
  env.id = 1;
  std::string body;
  protocol::PushTasksWriter writer;
  writer.BeginRequest(&body, job);
  writer.Call(1, false, "Touch", "", ObjectId::FromRandom().Hex(), 1);
  writer.InlineArg(protocol::Encode(path));
  writer.Finish();
  return {protocol::Encode(env), body};
}

// The TCP ports `pid` listens on, from /proc (the sockets among its fds).
std::vector<int> ListeningPorts(int pid) {
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& fd : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::string target = fs::read_symlink(fd.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::vector<int> ports;
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);  // header
  while (std::getline(tcp, line)) {
    std::istringstream in(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
    in >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >>
        inode;
    if (state == "0A" && inodes.count(inode)) {
      ports.push_back(std::stoi(local.substr(local.find(':') + 1), nullptr, 16));
    }
  }
  return ports;
}

// One cluster for the suite: a driver (this process) with a named actor, a
// stored object, a Python worker, and the addresses an attacker would find by
// scanning.
class Attacker : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    LocalCluster::Options options;
    options.head_node.num_cpus = 4;
    auto started = LocalCluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = std::move(*started).release();
    rayx::Options init;
    init.address = cluster_->address();
    init.token = cluster_->token();
    rayx::Init(init);
    counter_ = new rayx::ActorHandle<Counter>(
        rayx::Actor(Counter::Create).SetName("victim").Remote());
    ASSERT_EQ(*counter_->Task(&Counter::Add).Remote(1).Get(60000), 1);
    // A stored object of this job (1 MiB: it goes to the node's store).
    stored_ = new rayx::ObjectRef<std::vector<uint8_t>>(rayx::Put(std::vector<uint8_t>(1 << 20, 7)));
    auto& runtime = rayx::detail::RequireRuntime();
    job_ = runtime.job_id().Hex();
    protocol::GetActorRequest get;
    get.name = "victim";
    auto found = runtime.CallHead<protocol::GetActorReply>(get, 10000);
    ASSERT_TRUE(found.ok()) << found.status();
    worker_ = found->actor.worker_address;
    auto status = cluster_->GetStatus();
    ASSERT_TRUE(status.ok()) << status.status();
    objects_ = status->nodes.at(0).object_address;
    store_dir_ = status->nodes.at(0).store_dir;
    checkpoint_dir_ = status->nodes.at(0).checkpoint_dir;
    // A Python actor's worker, of another job (a Python driver in the
    // background; the Python package is next to the CLI).
    fs::path build = fs::path(RayxCliPath()).parent_path().parent_path();
    python_driver_ = new BackgroundCommand(BackgroundCommand::Start(
        {"/usr/bin/python3", "-c",
         "import os, time, rayx\n"
         "rayx.init()\n"
         "@rayx.remote\n"
         "class Victim:\n"
         "    def pid(self):\n"
         "        return os.getpid()\n"
         "v = Victim.remote()\n"
         "print(rayx.get(v.pid.remote()), flush=True)\n"
         "time.sleep(600)\n"},
        cluster_->temp_dir(),
        {{"PYTHONPATH", (build / "python").string()},
         {"RAYX_ADDRESS", cluster_->address()},
         {"RAYX_TOKEN", cluster_->token()}},
        "python-driver"));
    ASSERT_TRUE(WaitUntil([] { return python_driver_->Out().find('\n') != std::string::npos; },
                          120000))
        << python_driver_->Err();
    int python_pid = std::stoi(python_driver_->Out());
    auto ports = ListeningPorts(python_pid);
    ASSERT_EQ(ports.size(), 1u) << "the Python worker (pid " << python_pid << ") listens on "
                                << ports.size() << " ports";
    python_worker_ = "tcp://127.0.0.1:" + std::to_string(ports[0]);
  }
  static void TearDownTestSuite() {
    delete python_driver_;  // SIGKILLed: its job ends with it
    delete stored_;
    delete counter_;
    rayx::Shutdown();
    delete cluster_;
  }

  // A new job the cluster registers (its members would hold only its
  // credential); its driver's connection stays open until the test ends.
  Result<protocol::RegisterDriverReply> NewJob() {
    auto as_cluster = transport::SyncClient::Connect(
        *ParseHostPort(cluster_->address()), ClientSecurity::ClusterToHead(cluster_->token()));
    if (!as_cluster.ok()) return as_cluster.status();
    protocol::RegisterDriverRequest new_job;
    new_job.rayx_version = kRayxVersion;
    auto reply = (*as_cluster)->Call<protocol::RegisterDriverReply>(new_job, 5000);
    drivers_.push_back(std::move(*as_cluster));
    return reply;
  }
  std::vector<std::unique_ptr<transport::SyncClient>> drivers_;
  // A path that a call that ran would create.
  std::string Marker(const std::string& name) {
    return cluster_->temp_dir() + "/attack-" + name + "-" + std::to_string(getpid());
  }
  // The file of this job's stored object in the node's store.
  std::string StoredPath() {
    for (const auto& e : fs::directory_iterator(store_dir_)) {
      if (e.path().filename().string().rfind(job_ + "-", 0) == 0) return e.path().string();
    }
    return "";
  }
  // The checkpoint directory of the node whose object server is objects_ (as
  // the node told the head).
  std::string CheckpointDir() { return checkpoint_dir_; }
  // The cluster still serves the real job.
  void ExpectServing() {
    EXPECT_GT(*counter_->Task(&Counter::Add).Remote(1).Get(60000), 1);
    auto value = stored_->Get(60000);
    ASSERT_EQ(value->size(), size_t{1} << 20);
    EXPECT_EQ((*value)[12345], 7);
  }

  static LocalCluster* cluster_;
  static BackgroundCommand* python_driver_;
  static rayx::ActorHandle<Counter>* counter_;
  static rayx::ObjectRef<std::vector<uint8_t>>* stored_;
  static std::string job_, worker_, objects_, store_dir_, checkpoint_dir_, python_worker_;
};

LocalCluster* Attacker::cluster_ = nullptr;
BackgroundCommand* Attacker::python_driver_ = nullptr;
rayx::ActorHandle<Counter>* Attacker::counter_ = nullptr;
rayx::ObjectRef<std::vector<uint8_t>>* Attacker::stored_ = nullptr;
std::string Attacker::job_, Attacker::worker_, Attacker::objects_, Attacker::store_dir_,
    Attacker::checkpoint_dir_, Attacker::python_worker_;

// A call of rayx.py.xlang running os.system(`command`) (what an attacker sends
// a Python worker), as a caller of `job`.
std::vector<std::string> XlangCall(const std::string& job, const std::string& command) {
  protocol::Envelope env;
  env.t = static_cast<uint16_t>(protocol::MessageType::kPushTasksRequest);
  env.id = 1;
  std::string body;
  protocol::PushTasksWriter writer;
  writer.BeginRequest(&body, job);
  writer.Call(1, false, "rayx.py.xlang", "", ObjectId::FromRandom().Hex(), 3);
  writer.InlineArg(protocol::Encode(std::string("os")));
  writer.InlineArg(protocol::Encode(std::string("system")));
  writer.InlineArg(protocol::Encode(command));
  writer.Finish();
  return {protocol::Encode(env), body};
}

// No credential, another cluster's token, and a hand-written client: no port
// answers, nothing runs, no object goes.
TEST_F(Attacker, StrangersReachNoHandlerOnAnyPort) {
  std::string marker = Marker("stranger");
  std::string path = StoredPath();
  ASSERT_FALSE(path.empty());
  auto wrong = Credential::Cluster("not-this-clusters-token");
  // Nothing; another cluster's token (over CURVE its client expects another
  // key: the head never completes the handshake); the cluster's public key
  // with a key pair of its own (the handshake reaches ZAP, which refuses it);
  // another cluster's derived PLAIN password.
  std::string cluster_key = Credential::Cluster(cluster_->token()).CurvePublicKey();
  std::vector<std::optional<ClientSecurity>> strangers = {
      std::nullopt,
      ClientSecurity::ClusterToHead("not-this-clusters-token"),
      ClientSecurity::Head(wrong, cluster_key),
      ClientSecurity{WireSecurity::kAuthenticated, wrong, ""},
  };
  for (size_t i = 0; i < strangers.size(); ++i) {
    SCOPED_TRACE("stranger " + std::to_string(i));
    // The head: registering a driver or a node, stopping the cluster.
    Peer head(cluster_->address(), strangers[i]);
    protocol::RegisterDriverRequest driver;
    driver.token = cluster_->token();  // even the right token in the body does nothing
    driver.rayx_version = kRayxVersion;
    head.Send(Request(driver, 1));
    protocol::StopClusterRequest stop;
    stop.token = cluster_->token();
    head.Send(Request(stop, 2));
    EXPECT_FALSE(head.Receive(500ms)) << "the head answered a stranger";
    // The object server: reserving ports, deleting, reading logs, pulling.
    Peer objects(objects_, strangers[i]);
    objects.Send(Request(protocol::ReservePortRequest{}, 3));
    protocol::DeleteObjectsRequest del;
    del.paths = {path};
    objects.Send(Request(del, 4));
    protocol::PullObjectRequest pull;
    pull.path = "/etc/passwd";
    pull.length = 100;
    objects.Send(Request(pull, 5));
    protocol::HoldObjectsRequest hold;
    hold.paths = {path};
    objects.Send(Request(hold, 6));
    EXPECT_FALSE(objects.Receive(500ms)) << "the object server answered a stranger";
    // The worker: running a registered function, with a 64 MiB frame and
    // deeply nested msgpack behind it.
    Peer worker(worker_, strangers[i]);
    worker.Send(TouchCall(job_, marker));
    worker.Send({std::string(64 << 20, 'x')});
    std::string nested(1000000, '\x91');
    worker.Send({nested, nested});
    EXPECT_FALSE(worker.Receive(500ms)) << "the worker answered a stranger";
    // The Python worker: os.system through rayx.py.xlang.
    Peer python(python_worker_, strangers[i]);
    python.Send(XlangCall(job_, "touch " + marker));
    EXPECT_FALSE(python.Receive(500ms)) << "the Python worker answered a stranger";
  }
  EXPECT_FALSE(fs::exists(marker)) << "a stranger's call ran";
  EXPECT_TRUE(fs::exists(path)) << "a stranger deleted a stored object";
  ExpectServing();
  // The servers said whom they refused (rate-limited), naming the address.
  std::ifstream log(cluster_->head_log_path());
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_TRUE(Contains(text.str(), "head: refused a CURVE connection from 127.0.0.1")) << text.str();
  std::string agent_log;
  for (const auto& e : fs::directory_iterator(fs::path(cluster_->head_log_path()).parent_path())) {
    if (e.path().filename() != "agent.log") continue;
    std::ifstream in(e.path());
    std::stringstream t;
    t << in.rdbuf();
    agent_log = t.str();
  }
  EXPECT_TRUE(Contains(agent_log, "refused a PLAIN connection from 127.0.0.1")) << agent_log;
}

TEST_F(Attacker, AHandWrittenNullMechanismClientGetsNothing) {
  for (const std::string& endpoint :
       {"tcp://" + cluster_->address(), objects_, worker_, python_worker_}) {
    SCOPED_TRACE(endpoint);
    zmq::context_t context(1);
    zmq::socket_t raw(context, zmq::socket_type::stream);
    raw.set(zmq::sockopt::linger, 0);
    raw.connect(endpoint);
    zmq::pollitem_t item{raw.handle(), 0, ZMQ_POLLIN, 0};
    ASSERT_EQ(zmq::poll(&item, 1, 3000ms), 1);
    zmq::message_t routing, notice;
    ASSERT_TRUE(raw.recv(routing));
    ASSERT_TRUE(raw.recv(notice));
    // ZMTP 3.0: greeting with the NULL mechanism, READY as a DEALER, a call.
    std::string greeting("\xff\0\0\0\0\0\0\0\x01\x7f\x03\x00", 12);
    greeting += std::string("NULL") + std::string(16, '\0') + std::string(32, '\0');
    std::string body = std::string("\x05READY") + "\x0bSocket-Type" +
                       std::string("\0\0\0\x06", 4) + "DEALER";
    std::string ready = std::string("\x04") + static_cast<char>(body.size()) + body;
    for (const std::string& bytes : {greeting, ready}) {
      raw.send(zmq::buffer(routing.to_string_view()), zmq::send_flags::sndmore);
      raw.send(zmq::buffer(bytes));
    }
    // What comes back is at most the server's greeting, never a message.
    std::string received;
    auto deadline = std::chrono::steady_clock::now() + 1s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (zmq::poll(&item, 1, 100ms) <= 0) continue;
      zmq::message_t id, data;
      if (!raw.recv(id) || !raw.recv(data)) break;
      received += data.to_string();
    }
    EXPECT_EQ(received.find("READY"), std::string::npos) << "the handshake went through";
  }
  ExpectServing();
}

// An authenticated member of another job (its workers' credential) reaches
// only its own job: not this job's workers, objects (to delete, hold or read
// without this job's grant), leases, keys or sessions, and nothing of the
// cluster's.
TEST_F(Attacker, AnotherJobsMemberIsConfinedToItsJob) {
  // Job B: registered by the cluster, whose members hold only B's credential.
  auto b = NewJob();
  ASSERT_TRUE(b.ok()) << b.status();
  Credential job_b = *Credential::Cluster(cluster_->token()).ForJob(b->job_id);
  const JobId job_a = JobId::FromWire(job_);
  auto mode = b->wire_security ? WireSecurity::kEncrypted : WireSecurity::kAuthenticated;
  std::string cluster_key = Credential::Cluster(cluster_->token()).CurvePublicKey();

  // This job's worker does not let B in; B cannot even derive A's credential.
  EXPECT_FALSE(job_b.ForJob(job_a).ok());
  std::string marker = Marker("other-job");
  Peer worker(worker_, ClientSecurity{mode, job_b, job_b.CurvePublicKey()});
  worker.Send(TouchCall(job_, marker));
  worker.Send(TouchCall(b->job_id.Hex(), marker));
  EXPECT_FALSE(worker.Receive(500ms)) << "another job's worker answered B";
  Peer python(python_worker_, ClientSecurity{mode, job_b, job_b.CurvePublicKey()});
  python.Send(XlangCall(b->job_id.Hex(), "touch " + marker));
  EXPECT_FALSE(python.Receive(500ms)) << "another job's Python worker answered B";

  // The head: nothing of the cluster's, nothing for job A.
  Peer head(cluster_->address(), ClientSecurity::Head(job_b, cluster_key), "rayx-attacker-b");
  protocol::RegisterNodeRequest node;
  node.rayx_version = kRayxVersion;
  node.address = "127.0.0.1";
  EXPECT_EQ(head.ErrorOf(Request(node, 1)), StatusCode::kUnauthenticated);
  protocol::SubmitJobRequest submit;
  submit.entrypoint = {"true"};
  EXPECT_EQ(head.ErrorOf(Request(submit, 2)), StatusCode::kUnauthenticated);
  // The state listing shows B its own leases and groups only (none): not A's.
  head.Send(Request(protocol::ListStateRequest{}, 3));
  auto listed = head.Receive(5000ms);
  ASSERT_TRUE(listed && listed->size() == 2);
  auto state = protocol::Decode<protocol::ListStateReply>((*listed)[1]);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_TRUE(state->leases.empty()) << state->leases.size() << " leases of other jobs shown";
  protocol::StopClusterRequest stop;
  EXPECT_EQ(head.ErrorOf(Request(stop, 4)), StatusCode::kUnauthenticated);
  protocol::RegisterDriverRequest join_a;
  join_a.rayx_version = kRayxVersion;
  join_a.job_id = job_a;
  EXPECT_EQ(head.ErrorOf(Request(join_a, 5)), StatusCode::kUnauthenticated);
  protocol::RegisterDriverRequest new_one;
  new_one.rayx_version = kRayxVersion;
  EXPECT_EQ(head.ErrorOf(Request(new_one, 6)), StatusCode::kUnauthenticated)
      << "a job's credential started a new job";
  // As itself (job B) it registers, and may act for B only.
  protocol::RegisterDriverRequest join_b;
  join_b.rayx_version = kRayxVersion;
  join_b.job_id = b->job_id;
  head.Send(Request(join_b, 7));
  auto joined = head.Receive(5000ms);
  ASSERT_TRUE(joined && joined->size() == 2);
  ASSERT_TRUE(protocol::Decode<protocol::RegisterDriverReply>((*joined)[1]).ok());
  protocol::RequestLeaseRequest lease;
  lease.job_id = job_a;
  lease.resources = {{"CPU", 1}};
  EXPECT_EQ(head.ErrorOf(Request(lease, 8)), StatusCode::kUnauthenticated);
  protocol::FinishJobRequest finish;
  finish.job_id = job_a;
  EXPECT_EQ(head.ErrorOf(Request(finish, 9)), StatusCode::kUnauthenticated);
  protocol::KvPutRequest put;
  put.ns = "rayx.py.fn";
  put.key = job_ + "/f";
  put.value = "evil";
  put.job_id = job_a;
  EXPECT_EQ(head.ErrorOf(Request(put, 10)), StatusCode::kUnauthenticated);
  protocol::DriverHeartbeatRequest beat;
  beat.job_id = job_a;
  EXPECT_EQ(head.ErrorOf(Request(beat, 11)), StatusCode::kUnauthenticated);

  // The object server: B cannot delete A's object nor read the cluster's
  // process output; B's requests are processed in order, so the answered
  // ReservePort after the delete shows that the delete was seen.
  std::string path = StoredPath();
  ASSERT_FALSE(path.empty());
  Peer objects(objects_, ClientSecurity::ObjectServer(mode, job_b, cluster_key));
  protocol::DeleteObjectsRequest del;
  del.paths = {path};
  objects.Send(Request(del, 12));
  objects.Send(Request(protocol::ReservePortRequest{}, 13));
  auto port = objects.Receive(5000ms);
  ASSERT_TRUE(port.has_value()) << "B's connection to the object server was refused";
  EXPECT_TRUE(fs::exists(path)) << "another job deleted this job's object";
  protocol::ReadLogRequest read;
  read.lease_id = LeaseId::FromWire("anything");
  EXPECT_EQ(objects.ErrorOf(Request(read, 14)), StatusCode::kUnauthenticated);
  // Nor the node's log files (`rayx logs`).
  read.file = "agent.log";
  EXPECT_EQ(objects.ErrorOf(Request(read, 141)), StatusCode::kUnauthenticated);
  EXPECT_EQ(objects.ErrorOf(Request(protocol::ListLogsRequest{}, 142)),
            StatusCode::kUnauthenticated);
  // Holds (ObjectRefs inside values): B holds none of A's objects and no
  // file outside the store; handing A's object to a "container" of A's
  // does nothing either (no reply), nor does a hold then a delete by B.
  protocol::HoldObjectsRequest hold;
  hold.paths = {path};
  EXPECT_EQ(objects.ErrorOf(Request(hold, 15)), StatusCode::kInvalidArgument);
  hold.paths = {"/etc/passwd"};
  EXPECT_EQ(objects.ErrorOf(Request(hold, 16)), StatusCode::kInvalidArgument);
  protocol::HoldObjectsRequest contain;
  contain.container = path;
  contain.paths = {path, "/etc/passwd"};
  objects.Send(Request(contain, 17));
  objects.Send(Request(del, 18));
  objects.Send(Request(protocol::ReservePortRequest{}, 19));
  ASSERT_TRUE(objects.Receive(5000ms).has_value());
  EXPECT_TRUE(fs::exists(path)) << "another job's holds reached this job's object";
  // Reads: B pulls none of A's objects without A's grant, neither with none
  // nor with one signed by B; with A's grant (what A sends with an argument
  // to another job's actor) it reads that object and only that one.
  const std::string name = fs::path(path).filename().string();
  protocol::PullObjectRequest pull;
  pull.path = path;
  pull.length = 64;
  EXPECT_EQ(objects.ErrorOf(Request(pull, 20)), StatusCode::kUnauthenticated);
  pull.grant = Credential::ReadGrant(job_b.secret(), name);
  EXPECT_EQ(objects.ErrorOf(Request(pull, 21)), StatusCode::kUnauthenticated);
  pull.grant = Credential::Cluster(cluster_->token()).GrantRead(name);
  ASSERT_FALSE(pull.grant.empty());
  objects.Send(Request(pull, 22));
  auto granted = objects.Receive(5000ms);
  ASSERT_TRUE(granted && granted->size() == 3) << "A's grant did not open A's object";
  auto pulled = protocol::Decode<protocol::PullObjectReply>((*granted)[1]);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->size, fs::file_size(path));
  EXPECT_EQ((*granted)[2].size(), 64u);
  pull.path = path + "-other";  // a grant opens its one object (see security_test)
  EXPECT_NE(objects.ErrorOf(Request(pull, 23)), std::nullopt);

  // Train's checkpoint shards on the node's disk: B reads, copies into and
  // removes none of A's, and no path leads out of B's own.
  const std::string checkpoints = CheckpointDir();
  ASSERT_FALSE(checkpoints.empty());
  const std::string shard = job_ + "/run/a0-s1/rank-0";
  fs::create_directories(checkpoints + "/" + shard);
  std::ofstream(checkpoints + "/" + shard + "/model") << "weights of job A";
  pull = {};
  pull.path = checkpoints + "/" + shard + "/model";
  pull.length = 64;
  EXPECT_EQ(objects.ErrorOf(Request(pull, 24)), StatusCode::kUnauthenticated);
  pull.path = checkpoints + "/" + b->job_id.Hex() + "/../" + shard + "/model";
  EXPECT_EQ(objects.ErrorOf(Request(pull, 25)), StatusCode::kInvalidArgument);
  protocol::ReplicateShardRequest copy;
  copy.shard_dir = shard;
  copy.source = objects_;
  copy.source_dir = checkpoints;
  copy.files = {{"model", 16}};
  EXPECT_EQ(objects.ErrorOf(Request(copy, 26)), StatusCode::kUnauthenticated);
  copy.shard_dir = b->job_id.Hex() + "/../" + shard;
  EXPECT_EQ(objects.ErrorOf(Request(copy, 27)), StatusCode::kInvalidArgument);
  protocol::DeleteShardsRequest remove;
  remove.paths = {job_, shard, b->job_id.Hex() + "/../" + job_};
  objects.Send(Request(remove, 28));
  objects.Send(Request(protocol::ReservePortRequest{}, 29));
  ASSERT_TRUE(objects.Receive(5000ms).has_value());
  EXPECT_TRUE(fs::exists(checkpoints + "/" + shard + "/model"))
      << "another job removed this job's checkpoint shard";
  // Nor does B leave a record (which a later cluster would take back) in A's
  // running checkpoint.
  protocol::KeepCheckpointRecordRequest forge;
  forge.checkpoint_dir = job_ + "/run/a0-s1";
  forge.key = "train/ckpt/" + job_ + "/a0-s1/run";
  forge.record = "forged";
  objects.Send(Request(forge, 30));
  objects.Send(Request(protocol::ReservePortRequest{}, 31));
  ASSERT_TRUE(objects.Receive(5000ms).has_value());
  EXPECT_FALSE(fs::exists(checkpoints + "/" + job_ + "/run/a0-s1/checkpoint.record"))
      << "another job wrote a record into this job's checkpoint";
  fs::remove_all(checkpoints + "/" + job_);

  EXPECT_FALSE(fs::exists(marker)) << "another job's call ran";
  ExpectServing();
}

// Another job's member may call a shared actor, as in Ray: the head gives it
// the actor's key with the handle. The key opens that actor's methods on its
// worker and nothing else: no task or creation there, no other worker, not
// the head, not the object server.
TEST_F(Attacker, AnActorsKeyOpensItsMethodsAndNothingElse) {
  auto b = NewJob();
  ASSERT_TRUE(b.ok()) << b.status();
  Credential job_b = *Credential::Cluster(cluster_->token()).ForJob(b->job_id);
  auto mode = b->wire_security ? WireSecurity::kEncrypted : WireSecurity::kAuthenticated;
  std::string cluster_key = Credential::Cluster(cluster_->token()).CurvePublicKey();
  // Job B looks the actor up at the head, as its tasks do (get_actor).
  Peer head(cluster_->address(), ClientSecurity::Head(job_b, cluster_key));
  protocol::RegisterDriverRequest join_b;
  join_b.rayx_version = kRayxVersion;
  join_b.job_id = b->job_id;
  head.Send(Request(join_b, 1));
  ASSERT_TRUE(head.Receive(5000ms));
  protocol::GetActorRequest get;
  get.name = "victim";
  head.Send(Request(get, 2));
  auto found = head.Receive(5000ms);
  ASSERT_TRUE(found && found->size() == 2);
  auto actor = protocol::Decode<protocol::GetActorReply>((*found)[1]);
  ASSERT_TRUE(actor.ok()) << actor.status();
  ASSERT_FALSE(actor->actor.call_secret.empty()) << "the head gave no key with the handle";
  transport::ActorKey key{actor->actor.actor_id, actor->actor.call_secret,
                          actor->actor.worker_key};
  Credential caller = Credential::ActorCaller(key);
  ClientSecurity with_key{mode, caller, key.worker_key};

  // Calls on one connection to the actor's worker; each call's result.
  Peer worker(worker_, with_key);
  auto push = [&](bool creation, const std::string& function, const std::string& actor_id,
                  const std::string& arg) {
    protocol::Envelope env;
    env.t = static_cast<uint16_t>(protocol::MessageType::kPushTasksRequest);
    env.id = 1;
    std::string body;
    protocol::PushTasksWriter writer;
    writer.BeginRequest(&body, b->job_id.Hex());
    writer.Call(1, creation, function, actor_id, ObjectId::FromRandom().Hex(), arg.empty() ? 0 : 1);
    if (!arg.empty()) writer.InlineArg(arg);
    writer.Finish();
    worker.Send({protocol::Encode(env), body});
    auto reply = worker.Receive(10000ms);
    std::pair<std::string, std::string> out{"no reply", ""};
    if (!reply || reply->size() < 2) return out;
    std::vector<std::string_view> payload(reply->begin() + 2, reply->end());
    std::vector<protocol::TaskResultView> results;
    if (!protocol::ParsePushTasksReply((*reply)[1], payload, &results).ok() ||
        results.size() != 1) {
      return std::pair<std::string, std::string>{"bad reply", ""};
    }
    return std::pair<std::string, std::string>{std::string(results[0].error_type),
                                               std::string(results[0].value.bytes)};
  };
  const std::string actor_hex = key.actor.Hex();
  // Its methods: they run.
  auto added = push(false, "Counter::Add", actor_hex, protocol::Encode(0));
  EXPECT_EQ(added.first, "");
  EXPECT_GT(rayx::detail::Unpack<int>(added.second), 0);
  // A task, a creation, another actor's call: refused, nothing runs.
  std::string marker = Marker("actor-key");
  EXPECT_EQ(push(false, "Touch", "", protocol::Encode(marker)).first, "WrongJob");
  EXPECT_EQ(push(true, "Counter::Create", ActorId::FromRandom().Hex(), "").first, "WrongJob");
  EXPECT_EQ(push(false, "Counter::Add", ActorId::FromRandom().Hex(), protocol::Encode(1)).first,
            "WrongJob");
  EXPECT_FALSE(fs::exists(marker)) << "a task ran with an actor's key";
  // Nowhere else: the Python worker (another actor's), the head, the object server.
  Peer python(python_worker_, with_key);
  python.Send(XlangCall(b->job_id.Hex(), "touch " + marker));
  EXPECT_FALSE(python.Receive(500ms)) << "an actor's key opened another worker";
  Peer head_with_key(cluster_->address(), ClientSecurity::Head(caller, cluster_key));
  head_with_key.Send(Request(protocol::ListStateRequest{}, 3));
  EXPECT_FALSE(head_with_key.Receive(500ms)) << "an actor's key opened the head";
  Peer objects(objects_, ClientSecurity::ObjectServer(mode, caller, cluster_key));
  objects.Send(Request(protocol::ReservePortRequest{}, 4));
  EXPECT_FALSE(objects.Receive(500ms)) << "an actor's key opened the object server";
  EXPECT_FALSE(fs::exists(marker));
  ExpectServing();
}

// A session is bound to the credential its connection proved: another
// principal presenting the same routing id (ZeroMQ hands the id over) is not
// that session.
TEST_F(Attacker, ASessionIsNotTakenOverByAnotherCredential) {
  const std::string id = "rayx-session-under-attack";
  std::string cluster_key = Credential::Cluster(cluster_->token()).CurvePublicKey();
  Peer owner(cluster_->address(), ClientSecurity::ClusterToHead(cluster_->token()), id);
  protocol::RegisterDriverRequest hello;
  hello.rayx_version = kRayxVersion;
  owner.Send(Request(hello, 1));
  auto reply = owner.Receive(5000ms);
  ASSERT_TRUE(reply && reply->size() == 2);
  auto registered = protocol::Decode<protocol::RegisterDriverReply>((*reply)[1]);
  ASSERT_TRUE(registered.ok());
  // Job B's credential, the owner's routing id.
  Credential job_b = *Credential::Cluster(cluster_->token()).ForJob(JobId::FromSecureRandom());
  Peer thief(cluster_->address(), ClientSecurity::Head(job_b, cluster_key), id);
  protocol::RequestLeaseRequest lease;
  lease.job_id = registered->job_id;
  lease.resources = {{"CPU", 1}};
  // An unknown job's credential does not even connect; a known one (below)
  // is not the session.
  thief.Send(Request(lease, 2));
  EXPECT_FALSE(thief.Receive(500ms));
  auto b = NewJob();
  ASSERT_TRUE(b.ok());
  Credential known_b = *Credential::Cluster(cluster_->token()).ForJob(b->job_id);
  Peer known_thief(cluster_->address(), ClientSecurity::Head(known_b, cluster_key), id);
  EXPECT_EQ(known_thief.ErrorOf(Request(lease, 3)), StatusCode::kUnauthenticated);
  ExpectServing();
}

// A flood from another machine (127.0.0.9-11 stand for three here) is shut
// out in the kernel after 20 connections in 10 s: its next TCP handshake never
// completes, while other addresses, the cluster's own machine among them,
// still connect and the real job is served.
TEST_F(Attacker, AFloodFromAnotherAddressIsShutOutInTheKernel) {
  const std::string cluster_key = Credential::Cluster(cluster_->token()).CurvePublicKey();
  const auto wrong = Credential::Cluster("not-this-clusters-token");
  struct Target {
    std::string endpoint, source;
    ClientSecurity security;
  };
  const std::vector<Target> targets = {
      {cluster_->address(), "127.0.0.9", ClientSecurity::Head(wrong, cluster_key)},
      {objects_, "127.0.0.10", ClientSecurity{WireSecurity::kAuthenticated, wrong, ""}},
      {worker_, "127.0.0.11", ClientSecurity{WireSecurity::kAuthenticated, wrong, ""}},
  };
  for (const Target& t : targets) {
    SCOPED_TRACE(t.endpoint + " flooded from " + t.source);
    std::string host_port = t.endpoint.rfind("tcp://", 0) == 0 ? t.endpoint.substr(6) : t.endpoint;
    const std::string host = host_port.substr(0, host_port.rfind(':'));
    const int port = std::stoi(host_port.substr(host_port.rfind(':') + 1));
    ASSERT_TRUE(TcpConnectsFrom(t.source, host, port, 5000ms)) << "shut out before the flood";
    {
      std::vector<std::unique_ptr<Peer>> flood;
      for (int i = 0; i < 25; ++i) {
        flood.push_back(std::make_unique<Peer>(t.endpoint, t.security, "", t.source));
      }
      EXPECT_TRUE(WaitUntil([&] { return !TcpConnectsFrom(t.source, host, port, 200ms); }, 20000))
          << "the flooding address still connects";
    }
    EXPECT_TRUE(TcpConnectsFrom("127.0.0.12", host, port, 5000ms)) << "another address is shut out";
    EXPECT_TRUE(TcpConnectsFrom("127.0.0.1", host, port, 5000ms)) << "the machine is shut out";
  }
  ExpectServing();
  // The servers said whom they shut out, and for how long.
  auto read = [](const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  const fs::path logs = fs::path(cluster_->head_log_path()).parent_path();
  EXPECT_TRUE(Contains(read(cluster_->head_log_path()), "head: shut out 127.0.0.9 for 60 s"));
  EXPECT_TRUE(Contains(read(logs / "agent.log"), ": shut out 127.0.0.10 for 60 s"));
}

// Attacks from many threads while the real job calls its actor: every call
// answers right.
TEST_F(Attacker, TheClusterServesARealJobDuringAFlood) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> attackers;
  std::atomic<int> attempts{0};
  for (int t = 0; t < 3; ++t) {
    attackers.emplace_back([&, t] {
      while (!stop.load()) {
        Peer p(t == 0 ? cluster_->address() : t == 1 ? objects_ : worker_,
               ClientSecurity::ClusterToHead("wrong-token"));
        p.Send({"garbage", std::string(1000, 'x')});
        (void)p.Receive(20ms);
        ++attempts;
      }
    });
  }
  int expected = *counter_->Task(&Counter::Add).Remote(0).Get(60000);
  auto deadline = std::chrono::steady_clock::now() + 60s;
  int calls = 0;
  // At least 200 calls, and for as long as the flood needs to make 100 tries.
  while ((calls < 200 || attempts.load() < 100) && std::chrono::steady_clock::now() < deadline) {
    expected += 1;
    ++calls;
    ASSERT_EQ(*counter_->Task(&Counter::Add).Remote(1).Get(60000), expected);
  }
  stop = true;
  for (auto& t : attackers) t.join();
  EXPECT_GE(attempts.load(), 100);
  ExpectServing();
}

}  // namespace
}  // namespace rayx::testing

int main(int argc, char** argv) {
  if (std::getenv("RAYX_WORKER_MODE")) rayx::Init(argc, argv);  // serves tasks, never returns
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
