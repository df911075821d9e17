// Containment and bounds against an authenticated peer on a real cluster: a
// driver of its own job (tests/util/authenticated_peer.h) that sends what a
// runtime never would, to its own leased worker, the head and the agent.
// This test binary is also the workers' program (RAYX_WORKER_MODE).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/content_hash.h"
#include "common/directory_archive.h"
#include "rayx/rayx.h"
#include "util/authenticated_peer.h"
#include "util/local_cluster.h"
#include "util/test_helpers.h"

namespace {
std::string Echo(std::string s) { return s; }
std::string Big(int size) { return std::string(static_cast<size_t>(size), 'b'); }
}  // namespace

RAYX_REMOTE(Echo, Big);

namespace rayx::testing {
namespace {

namespace fs = std::filesystem;
constexpr int kBig = 200 * 1024;  // stored, not inline (>= 100 KiB)

std::string SelfExe() { return fs::read_symlink("/proc/self/exe").string(); }

// The peak resident memory of process `pid` in KiB (VmHWM), or -1.
long PeakRssKib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// One cluster for the suite; each test is a new job with its own worker.
class Containment : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    LocalCluster::Options options;
    options.head_node.num_cpus = 2;
    auto started = LocalCluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = started->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(cluster_, nullptr);
    auto peer = AuthenticatedPeer::Connect(cluster_->address(), cluster_->token());
    ASSERT_TRUE(peer.ok()) << peer.status();
    peer_ = std::move(*peer);
    auto status = cluster_->GetStatus();
    ASSERT_TRUE(status.ok()) << status.status();
    node_ = status->nodes.at(0);
    ASSERT_FALSE(node_.store_dir.empty());
  }
  void TearDown() override {
    if (peer_) {
      EXPECT_TRUE(peer_->FinishJob().ok());  // frees the worker's CPU
    }
  }

  // A worker of this test's job.
  protocol::RequestLeaseReply Worker() {
    auto lease = peer_->LeaseWorker(SelfExe());
    EXPECT_TRUE(lease.ok()) << lease.status();
    return lease.ok() ? *lease : protocol::RequestLeaseReply{};
  }

  // Runs one call on `worker` (as job `job`, this test's own when empty).
  PushedResult RunOne(const protocol::RequestLeaseReply& worker, PushedCall call,
                      const std::string& job = "") {
    auto results = peer_->Push(worker.worker_address, {std::move(call)}, job);
    EXPECT_TRUE(results.ok()) << results.status();
    if (!results.ok() || results->size() != 1) return PushedResult{};
    return (*results)[0];
  }
  static PushedCall Call(const std::string& function, std::vector<PushedCall::Arg> args) {
    PushedCall call;
    call.function = function;
    call.args = std::move(args);
    return call;
  }
  static PushedCall::Arg Inline(std::string bytes) { return {std::move(bytes), std::nullopt}; }
  static PushedCall::Arg Stored(const protocol::ObjectLocation& location) {
    return {"", location};
  }

  // A result stored by `worker` in its node's store (Big).
  protocol::ObjectLocation StoredResult(const protocol::RequestLeaseReply& worker) {
    auto result = RunOne(worker, Call("Big", {Inline(rayx::detail::Pack(kBig))}));
    EXPECT_EQ(result.kind, protocol::WireValue::kStored) << result.error_message;
    return result.stored;
  }

  // The error a call with the stored argument `location` gets; checks that it
  // is a refusal and that `secret` did not come back.
  std::string Refusal(const protocol::RequestLeaseReply& worker,
                      const protocol::ObjectLocation& location) {
    auto result = RunOne(worker, Call("Echo", {Stored(location)}));
    EXPECT_EQ(result.kind, protocol::WireValue::kError) << location.path;
    EXPECT_EQ(result.error_type, "InvalidArgument") << location.path << ": " << result.error_message;
    EXPECT_FALSE(Contains(result.bytes, "the secret")) << location.path;
    return result.error_message;
  }

  // The worker still runs calls.
  void ExpectServing(const protocol::RequestLeaseReply& worker) {
    auto result = RunOne(worker, Call("Echo", {Inline(rayx::detail::Pack(std::string("ok")))}));
    EXPECT_EQ(result.kind, protocol::WireValue::kInline) << result.error_message;
    EXPECT_TRUE(result.bytes == rayx::detail::Pack(std::string("ok")));
  }

  static LocalCluster* cluster_;
  std::unique_ptr<AuthenticatedPeer> peer_;
  NodeInfo node_;
};
LocalCluster* Containment::cluster_ = nullptr;

// A call's stored argument names only an object of the node's store: not a
// file elsewhere, not a path that climbs out, not a link planted in the store.
TEST_F(Containment, AStoredArgumentNamesOnlyAnObjectOfTheNodesStore) {
  auto worker = Worker();
  // A real object still works, mapped in place.
  protocol::ObjectLocation object = StoredResult(worker);
  ASSERT_EQ(fs::path(object.path).parent_path(), node_.store_dir);
  auto echoed = RunOne(worker, Call("Echo", {Stored(object)}));
  EXPECT_EQ(echoed.kind, protocol::WireValue::kStored) << echoed.error_message;
  EXPECT_EQ(echoed.stored.size, object.size);

  const std::string secret = cluster_->temp_dir() + "/secret";
  std::ofstream(secret, std::ios::binary) << rayx::detail::Pack(std::string("the secret"));
  protocol::ObjectLocation hostile = object;
  hostile.size = fs::file_size(secret);
  hostile.path = secret;
  EXPECT_TRUE(Contains(Refusal(worker, hostile), "is not an object of the store"));
  hostile.path = node_.store_dir + "/../.." + secret;
  EXPECT_TRUE(Contains(Refusal(worker, hostile), "is not an object of the store"));
  // A link planted in the store under an object's name is not followed.
  const std::string link =
      node_.store_dir + "/" + peer_->job_id().Hex() + "-" + std::string(32, 'e');
  fs::create_symlink(secret, link);
  hostile.path = link;
  EXPECT_TRUE(Contains(Refusal(worker, hostile), "symbolic link"));
  // The same, as pulls from the node's object server (another node's view).
  hostile.node_address = "127.0.0.9";
  hostile.path = secret;
  EXPECT_TRUE(Contains(Refusal(worker, hostile), "not an object of this node's store"));
  hostile.path = link;
  auto pulled = RunOne(worker, Call("Echo", {Stored(hostile)}));
  EXPECT_EQ(pulled.kind, protocol::WireValue::kError);
  EXPECT_FALSE(Contains(pulled.bytes, "the secret"));
  fs::remove(link);
  ExpectServing(worker);
}

// A declared size sizes nothing: checked against a bound first, and against
// the object server's own size before any buffer is allocated.
TEST_F(Containment, ADeclaredSizeIsCheckedBeforeAnythingIsAllocated) {
  auto worker = Worker();
  protocol::ObjectLocation object = StoredResult(worker);
  const long before = PeakRssKib(worker.worker_pid);
  ASSERT_GT(before, 0);
  protocol::ObjectLocation lie = object;
  lie.node_address = "127.0.0.9";  // pulled, not mapped
  lie.size = uint64_t{2} << 30;
  std::string why = Refusal(worker, lie);
  EXPECT_TRUE(Contains(why, "but its location declares 2147483648")) << why;
  lie.size = uint64_t{1} << 40;
  why = Refusal(worker, lie);
  EXPECT_TRUE(Contains(why, "over the limit of")) << why;
  lie.node_address = object.node_address;  // mapped: the file's size must match too
  lie.size = object.size + 1;
  why = Refusal(worker, lie);
  EXPECT_TRUE(Contains(why, "declares " + std::to_string(object.size + 1))) << why;
  const long after = PeakRssKib(worker.worker_pid);
  EXPECT_LT(after - before, 256 * 1024) << "the worker's peak memory grew by " << after - before
                                        << " KiB";
  // An honest pull from the same server works.
  protocol::ObjectLocation honest = object;
  honest.node_address = "127.0.0.9";
  auto echoed = RunOne(worker, Call("Echo", {Stored(honest)}));
  EXPECT_EQ(echoed.kind, protocol::WireValue::kStored) << echoed.error_message;
  EXPECT_EQ(echoed.stored.size, object.size);
}

// A pull connects only to an object server of the cluster: a worker cannot be
// made to scan ports, nor held by an address that answers nothing.
TEST_F(Containment, APullConnectsOnlyToTheClustersObjectServers) {
  auto worker = Worker();
  protocol::ObjectLocation object = StoredResult(worker);
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 16), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  protocol::ObjectLocation scan = object;
  scan.node_address = "127.0.0.9";
  scan.object_address = "tcp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) {
    std::string why = Refusal(worker, scan);
    EXPECT_TRUE(Contains(why, "not the object server of any alive node")) << why;
  }
  EXPECT_LT(MsSince(start), 10000);
  EXPECT_LT(::accept(listener, nullptr, nullptr), 0) << "the worker connected to the listener";
  ::close(listener);
  ExpectServing(worker);
}

// A worker serves its own job: an invented job id gets an error naming both
// ids and leaves no file; the job's own results go when the job ends.
TEST_F(Containment, AWorkerWritesResultsOnlyUnderItsOwnLiveJob) {
  auto worker = Worker();
  const std::string invented = "0badc0de0badc0de";
  auto result = RunOne(worker, Call("Big", {Inline(rayx::detail::Pack(kBig))}), invented);
  EXPECT_EQ(result.error_type, "WrongJob");
  EXPECT_TRUE(Contains(result.error_message, invented)) << result.error_message;
  EXPECT_TRUE(Contains(result.error_message, peer_->job_id().Hex())) << result.error_message;
  for (const auto& entry : fs::directory_iterator(node_.store_dir)) {
    EXPECT_NE(entry.path().filename().string().rfind(invented, 0), 0u) << entry.path();
  }
  protocol::ObjectLocation own = StoredResult(worker);
  ASSERT_TRUE(fs::exists(own.path));
  EXPECT_EQ(fs::path(own.path).filename().string().rfind(peer_->job_id().Hex(), 0), 0u);
  ASSERT_TRUE(peer_->FinishJob().ok());
  EXPECT_TRUE(WaitUntil([&] { return !fs::exists(own.path); }, 10000))
      << own.path << " outlived its job";
  peer_.reset();
}

// A working directory must be a plain tar archive that stays inside its
// directory: a gzip bomb or a link out fails the job with the reason, nothing
// is unpacked, and the agent keeps serving.
TEST_F(Containment, AHostilePackageFailsItsJobAndTheAgentKeepsServing) {
  const std::string dir = cluster_->temp_dir() + "/packages-src";
  fs::create_directories(dir + "/evil");
  const std::string make_bomb = "cd '" + dir +
                                "' && head -c 52428800 /dev/zero > zeros && "
                                "tar -czf bomb.tgz zeros && rm zeros";
  ASSERT_EQ(std::system(make_bomb.c_str()), 0);
  fs::create_symlink("/etc", dir + "/evil/etc");
  const std::string make_links = "tar -cf '" + dir + "/links.tar' -C '" + dir + "/evil' .";
  ASSERT_EQ(std::system(make_links.c_str()), 0);

  struct Case {
    std::string file, reason;
  };
  for (const Case& c : {Case{"bomb.tgz", "gzip-compressed"}, Case{"links.tar", "absolute"}}) {
    std::ifstream in(dir + "/" + c.file, std::ios::binary);
    std::string archive((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto hash = UploadPackage(peer_->head(), peer_->token(), archive, 30000);
    ASSERT_TRUE(hash.ok()) << hash.status();
    protocol::SubmitJobRequest submit;
    submit.token = peer_->token();
    submit.entrypoint = {"true"};
    submit.package_hash = *hash;
    auto job = peer_->Call<protocol::SubmitJobReply>(submit);
    ASSERT_TRUE(job.ok()) << job.status();
    protocol::JobInfo info;
    ASSERT_TRUE(WaitUntil(
        [&] {
          protocol::GetJobRequest get;
          get.token = peer_->token();
          get.submission_id = job->job.submission_id;
          auto got = peer_->Call<protocol::GetJobReply>(get);
          if (got.ok()) info = got->job;
          return got.ok() && protocol::Ended(info.state);
        },
        30000))
        << c.file << ": the job is still " << protocol::Name(info.state);
    EXPECT_EQ(protocol::Name(info.state), "FAILED") << c.file;
    EXPECT_TRUE(Contains(info.message, c.reason)) << c.file << ": " << info.message;
    // Unpacked nowhere (the head keeps the uploaded file itself).
    for (auto it = fs::recursive_directory_iterator(cluster_->temp_dir());
         it != fs::recursive_directory_iterator(); ++it) {
      if (!it->is_directory()) continue;
      EXPECT_NE(it->path().filename().string().rfind(*hash, 0), 0u)
          << c.file << " left " << it->path();
    }
  }
  auto status = cluster_->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->AliveNodeCount(), 1u);
  ExpectServing(Worker());
}

// The KV bounds what one job holds, and exported code keys are content-
// addressed: another job cannot replace a detached actor's class.
TEST_F(Containment, TheKvBoundsAJobAndKeepsCodeKeysToTheirHash) {
  const std::string value(1 << 20, 'v');  // the largest value
  int stored = 0;
  Status refused;
  for (int i = 0; i < 100 && refused.ok(); ++i) {
    auto put = peer_->KvPut("containment", "k" + std::to_string(i), value, /*job_scoped=*/true);
    if (put.ok()) {
      ++stored;
    } else {
      refused = put.status();
    }
  }
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused;
  EXPECT_TRUE(Contains(refused.message(), "job " + peer_->job_id().Hex() + " holds"))
      << refused;
  EXPECT_TRUE(Contains(refused.message(), "limit of 67108864 bytes")) << refused;
  EXPECT_EQ(stored, 63);  // 63 of 1 MiB + their keys fit in 64 MiB; the 64th does not

  // Code a detached actor's class: put by one job, unchanged by another's.
  const std::string code = "the class";
  const std::string key = "detached/" + Sha256Hex(code).substr(0, 40);
  ASSERT_TRUE(peer_->KvPut("rayx.py.fn", key, code, /*job_scoped=*/false).ok());
  auto other = AuthenticatedPeer::Connect(cluster_->address(), cluster_->token());
  ASSERT_TRUE(other.ok()) << other.status();
  auto forged = (*other)->KvPut("rayx.py.fn", key, "import os; os.system('...')", false);
  EXPECT_EQ(forged.status().code(), StatusCode::kAlreadyExists) << forged.status();
  protocol::KvGetRequest get;
  get.ns = "rayx.py.fn";
  get.key = key;
  auto got = (*other)->Call<protocol::KvGetReply>(get);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->value, code);
  EXPECT_TRUE((*other)->FinishJob().ok());
}

}  // namespace
}  // namespace rayx::testing

int main(int argc, char** argv) {
  if (std::getenv("RAYX_WORKER_MODE")) rayx::Init(argc, argv);  // serves tasks, never returns
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
