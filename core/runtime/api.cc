// rayx::Init and friends: finding or starting a cluster, and the runtime entry points.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>

#include "common/address.h"
#include "common/logging.h"
#include "common/process_control.h"
#include "common/process_spawn.h"
#include "common/session_dir.h"
#include "common/work_counters.h"
#include "rayx/rayx.h"
#include "collective/collective_driver.h"
#include "runtime/blocked_calls.h"
#include "runtime/runtime.h"
#include "worker/worker_env.h"
#include "worker/worker_loop.h"

namespace rayx {

namespace {

struct Global {
  std::mutex mu;
  std::unique_ptr<detail::Runtime> runtime;
  // The runtime for lock-free readers (ObjectRef destructors on any thread).
  std::atomic<detail::Runtime*> current{nullptr};
  std::string private_temp_dir;  // the embedded cluster's, when we started one
  std::string rayx_cli;
  // Set in a worker process before it serves tasks (the variables it came
  // from are gone from the environment then).
  std::optional<WorkerEnv> worker_env;
};

Global& G() {
  static Global* g = new Global();  // outlives static destructors
  return *g;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The rayx CLI: $RAYX_BIN_DIR/rayx, else beside librayx (<prefix>/lib/librayx.so
// or <prefix>/lib/<multiarch>/librayx.so -> <prefix>/bin/rayx), else on PATH.
std::string FindCli() {
  std::vector<std::filesystem::path> candidates;
  if (!Env("RAYX_BIN_DIR").empty()) candidates.push_back(Env("RAYX_BIN_DIR"));
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&FindCli), &info) != 0 && info.dli_fname) {
    std::error_code ec;
    std::filesystem::path lib = std::filesystem::canonical(info.dli_fname, ec);
    if (!ec) {
      candidates.push_back(lib.parent_path().parent_path() / "bin");
      candidates.push_back(lib.parent_path().parent_path().parent_path() / "bin");
    }
  }
  std::string path = Env("PATH");
  for (size_t start = 0; start <= path.size();) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) candidates.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  for (const auto& dir : candidates) {
    std::filesystem::path cli = dir / "rayx";
    if (::access(cli.c_str(), X_OK) == 0) return cli.string();
  }
  throw std::runtime_error(
      "rayx::Init: no cluster is running and the rayx CLI, needed to start a private one, was "
      "not found beside librayx or on PATH: install rayx (cmake --install) or set RAYX_BIN_DIR");
}

// Runs the CLI and waits; returns its exit code and what it printed.
int RunCli(const std::vector<std::string>& args, std::string* output) {
  std::string log = std::filesystem::temp_directory_path() /
                    ("rayx-init-" + std::to_string(getpid()) + ".log");
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    *output = "cannot create " + log + ": " + std::strerror(errno);
    return -1;
  }
  detail::SpawnOptions spawn;
  spawn.argv = args;
  spawn.stdout_fd = fd;
  spawn.stderr_fd = fd;
  Result<pid_t> pid = detail::Spawn(spawn);
  ::close(fd);
  if (!pid.ok()) {
    *output = pid.status().message();
    ::unlink(log.c_str());
    return -1;
  }
  int status = 0;
  waitpid(*pid, &status, 0);
  *output = detail::TailFile(log, 20);
  ::unlink(log.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void StartPrivateCluster(const Options& options, std::string* address, std::string* token) {
  Global& g = G();
  g.rayx_cli = FindCli();
  std::string pattern = (std::filesystem::temp_directory_path() / "rayx-private-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("rayx::Init: mkdtemp failed");
  std::vector<std::string> args = {g.rayx_cli, "start", "--head", "--port", "0",
                                   "--node-ip-address", "127.0.0.1", "--temp-dir", pattern};
  if (options.num_cpus > 0) {
    args.insert(args.end(), {"--num-cpus", std::to_string(options.num_cpus)});
  }
  if (options.num_gpus >= 0) {
    args.insert(args.end(), {"--num-gpus", std::to_string(options.num_gpus)});
  }
  if (!options.resources.empty()) {
    std::string json = "{";
    for (const auto& [name, amount] : options.resources) {
      if (json.size() > 1) json += ",";
      json += "\"" + name + "\":" + std::to_string(amount);
    }
    args.insert(args.end(), {"--resources", json + "}"});
  }
  args.insert(args.end(), options.private_cluster_flags.begin(),
              options.private_cluster_flags.end());
  // The private cluster ends with this process, even when it is killed.
  setenv("RAYX_EXIT_WITH_PID", std::to_string(getpid()).c_str(), 1);
  std::string output;
  int rc = RunCli(args, &output);
  unsetenv("RAYX_EXIT_WITH_PID");
  if (rc != 0) {
    std::filesystem::remove_all(pattern);
    throw std::runtime_error("rayx::Init: no cluster to connect to (no address given, none "
                             "started on this machine) and starting a private one with " +
                             g.rayx_cli + " failed: " + output);
  }
  g.private_temp_dir = pattern;
  auto local = detail::FindLocalCluster(pattern);
  if (!local.ok()) throw std::runtime_error("rayx::Init: " + local.status().message());
  *address = local->address;
  *token = local->token;
}

void StopPrivateCluster() {
  Global& g = G();
  if (g.private_temp_dir.empty()) return;
  std::string output;
  RunCli({g.rayx_cli, "stop", "--temp-dir", g.private_temp_dir, "--grace-period", "5"}, &output);
  std::error_code ec;
  std::filesystem::remove_all(g.private_temp_dir, ec);
  g.private_temp_dir.clear();
}

// Serves tasks when this process was started as a worker; never returns then.
void ServeIfWorker() {
  if (!WorkerEnv::InWorkerMode()) return;
  auto env = WorkerEnv::FromEnvironment();
  if (!env.ok()) {
    RAYX_LOG(Error) << "cannot start as a worker: " << env.status().message();
    std::_Exit(1);
  }
  G().worker_env = *env;
  if (env->counters_fd >= 0) {
    // What this worker does is counted where its agent reads it; without
    // the page it goes uncounted, nothing else changes.
    Status page = WorkCounters::UseSharedPage(env->counters_fd);
    if (!page.ok()) RAYX_LOG(Warning) << "this worker's work is not counted: " << page;
  }
  collective::detail::InstallRuntimeEnvironment(env->node_ip);
  detail::RunWorker(*env);
}

}  // namespace

void Init() { Init(Options()); }

void Init(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--rayx-address=", 0) == 0) options.address = a.substr(15);
  }
  Init(options);
}

void Init(const Options& options) {
  ServeIfWorker();
  Global& g = G();
  // A task calling Init: its worker joins the job on first use already.
  if (g.worker_env) return;
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.runtime) throw std::logic_error("rayx::Init was called twice without Shutdown");
  std::string temp_dir = !options.temp_dir.empty() ? options.temp_dir : detail::DefaultTempDir();
  std::string address = !options.address.empty() ? options.address : Env("RAYX_ADDRESS");
  std::string token = !options.token.empty() ? options.token : Env("RAYX_TOKEN");
  if (address.empty()) {
    auto local = detail::FindLocalCluster(temp_dir);
    if (local.ok()) {
      address = local->address;
      if (token.empty()) token = local->token;
    } else {
      StartPrivateCluster(options, &address, &token);
    }
  }
  // A program a node agent started for a job (`rayx job submit`'s driver)
  // holds that job's credential instead of the token: it acts for its job only.
  const std::string job_secret = Env(WorkerEnv::kJobSecret);
  const bool job_program = token.empty() && !job_secret.empty() && !Env("RAYX_JOB_ID").empty();
  if (token.empty() && !job_program) {
    if (auto t = detail::FindTokenFor(temp_dir, address)) token = *t;
  }
  auto head = ParseHostPort(address, kDefaultHeadPort);
  if (!head.ok()) throw std::invalid_argument("rayx::Init: " + head.status().message());
  auto ip = ResolveIpv4(head->host);
  if (!ip.ok()) throw std::invalid_argument("rayx::Init: " + ip.status().message());
  head->host = *ip;
  detail::Runtime::Config config;
  config.head = *head;
  if (!token.empty()) {
    config.credential = transport::Credential::Cluster(token);
    config.cluster_key = config.credential.CurvePublicKey();
    // A program started by `rayx job submit` joins its submitted job.
    if (!Env("RAYX_SUBMISSION_ID").empty()) config.job_id = JobId::FromWire(Env("RAYX_JOB_ID"));
  } else if (job_program) {
    config.job_id = JobId::FromWire(Env("RAYX_JOB_ID"));
    config.credential = transport::Credential::Job(config.job_id, job_secret);
    config.cluster_key = Env(WorkerEnv::kClusterKey);
  } else {
    throw std::invalid_argument(
        "rayx::Init: no cluster token for " + head->ToString() +
        ": set RAYX_TOKEN, or run on a machine of the cluster (its session holds the token)");
  }
  auto local_ip = LocalAddressToward(*ip);
  config.node_ip = local_ip.ok() ? *local_ip : "127.0.0.1";
  if (std::string t = Env("RAYX_HEAD_TIMEOUT_MS"); !t.empty()) {
    config.head_timeout_ms = std::max<int64_t>(100, std::atoll(t.c_str()));
  }
  config.log_to_driver = options.log_to_driver && Env("RAYX_LOG_TO_DRIVER") != "0";
  collective::detail::InstallRuntimeEnvironment(config.node_ip);
  auto runtime = detail::Runtime::Start(config);
  if (!runtime.ok()) {
    StopPrivateCluster();
    throw std::runtime_error("rayx::Init: cannot join the cluster at " + head->ToString() + ": " +
                             runtime.status().message());
  }
  g.runtime = std::move(*runtime);
  g.current.store(g.runtime.get(), std::memory_order_release);
}

void Shutdown() {
  Global& g = G();
  std::unique_ptr<detail::Runtime> runtime;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    runtime = std::move(g.runtime);
  }
  // Stop() runs with `current` still set: references dropped meanwhile are
  // released into a runtime that is alive.
  if (runtime) runtime->Stop();
  g.current.store(nullptr, std::memory_order_release);
  runtime.reset();
  StopPrivateCluster();
}

std::vector<int> GetGpuIds() {
  // Workers and the drivers a node agent starts are told their GPUs.
  auto ids = WorkerEnv::ParseIdList(Env(WorkerEnv::kGpuIds));
  return ids.ok() ? *ids : std::vector<int>();
}

bool IsInitialized() {
  std::lock_guard<std::mutex> lock(G().mu);
  return G().runtime != nullptr;
}

namespace detail {

Runtime* CurrentRuntime() { return G().current.load(std::memory_order_acquire); }

Runtime& RequireRuntime() {
  Global& g = G();
  // Every call passes here: no lock once the runtime runs.
  if (Runtime* runtime = g.current.load(std::memory_order_acquire)) return *runtime;
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.runtime) return *g.runtime;
  if (!g.worker_env) throw std::logic_error("rayx is not initialized: call rayx::Init() first");
  // A worker whose task submits work: join its job (never ending it).
  const WorkerEnv& env = *g.worker_env;
  auto head = ParseHostPort(env.head_address, kDefaultHeadPort);
  if (!head.ok()) throw std::runtime_error("worker: bad RAYX_ADDRESS");
  Runtime::Config config;
  config.head = *head;
  if (env.job_secret.empty() || env.job_id.IsNil()) {
    throw std::runtime_error("worker: started without its job's credential (RAYX_JOB_SECRET)");
  }
  config.credential = transport::Credential::Job(env.job_id, env.job_secret);
  config.cluster_key = env.cluster_key;
  config.job_id = env.job_id;
  config.is_worker = true;
  config.host_lease_id = env.lease_id;
  config.node_ip = env.node_ip;
  config.object_address = env.object_address;
  auto runtime = Runtime::Start(config);
  if (!runtime.ok()) throw std::runtime_error("worker: " + runtime.status().message());
  g.runtime = std::move(*runtime);
  g.current.store(g.runtime.get(), std::memory_order_release);
  return *g.runtime;
}

ObjectHandle SubmitTask(const std::string& function, std::vector<Arg> args,
                        const CallOptions& options) {
  return RequireRuntime().SubmitTask(function, std::move(args), options);
}
ActorPtr CreateActor(const std::string& factory, std::vector<Arg> args,
                     const ActorOptions& options) {
  return RequireRuntime().CreateActor(factory, std::move(args), options);
}
ObjectHandle SubmitActorTask(const ActorPtr& actor, const std::string& method,
                             std::vector<Arg> args) {
  return RequireRuntime().SubmitActorTask(actor, method, std::move(args));
}
void KillActor(const ActorPtr& actor) { RequireRuntime().KillActor(actor); }
void ReleaseActor(const ActorPtr& actor) {
  if (Runtime* runtime = CurrentRuntime()) runtime->ReleaseActor(actor);
}
ActorPtr GetNamedActor(const std::string& name) { return RequireRuntime().GetNamedActor(name); }
std::string SerializeActor(const ActorPtr& actor) { return RequireRuntime().SerializeActor(actor); }
bool ActorPlaced(const ActorPtr& actor) { return RequireRuntime().ActorPlaced(actor); }
const std::string& ActorIdOf(const ActorPtr& actor) { return actor->actor_id.Hex(); }
const std::string& ActorMetadataOf(const ActorPtr& actor) { return actor->metadata; }
ActorPtr DeserializeActor(const std::string& bytes) {
  return RequireRuntime().DeserializeActor(bytes);
}
const std::string& CurrentJobId() { return RequireRuntime().job_id().Hex(); }

Placement PythonWorkerPlacement() {
  std::string python = Env("RAYX_PYTHON");
  if (python.empty()) {
    std::string path = Env("PATH");
    for (size_t start = 0; start <= path.size();) {
      size_t end = path.find(':', start);
      if (end == std::string::npos) end = path.size();
      std::string candidate = path.substr(start, end - start) + "/python3";
      if (end > start && ::access(candidate.c_str(), X_OK) == 0) {
        python = candidate;
        break;
      }
      start = end + 1;
    }
  }
  if (python.empty()) {
    throw std::runtime_error("rayx::PyFunction: no Python interpreter: set RAYX_PYTHON to the "
                             "python3 that has rayx installed");
  }
  Placement p;
  p.worker_executable = python;
  p.worker_args = {"-m", "rayx._worker"};
  if (!Env("PYTHONPATH").empty()) p.worker_env["PYTHONPATH"] = Env("PYTHONPATH");
  return p;
}
ObjectHandle PutBytes(std::string bytes) { return RequireRuntime().Put(std::move(bytes)); }
ObjectHandle PutEncoded(size_t size, const std::function<void(char* out)>& fill) {
  return RequireRuntime().PutEncoded(size, fill);
}
namespace {
thread_local const std::function<void()>* tl_interrupt_check = nullptr;
}  // namespace

InterruptScope::InterruptScope(std::function<void()> check)
    : check_(std::move(check)), previous_(tl_interrupt_check) {
  tl_interrupt_check = &check_;
}
InterruptScope::~InterruptScope() { tl_interrupt_check = previous_; }

void CheckInterrupt() {
  if (tl_interrupt_check != nullptr) (*tl_interrupt_check)();
}
bool HasInterruptCheck() { return tl_interrupt_check != nullptr; }

namespace {
thread_local BlockedScope* tl_blocked_scope = nullptr;
}  // namespace

BlockedScope::BlockedScope(bool counts) : outer_(tl_blocked_scope), counts_(counts) {
  tl_blocked_scope = this;
}

BlockedScope::~BlockedScope() {
  if (calls_) calls_->Leave();
  tl_blocked_scope = outer_;
}

namespace {
std::function<void()>* g_call_blocking_hook = nullptr;  // set once, never freed
}  // namespace

void SetCallBlockingHook(std::function<void()> hook) {
  g_call_blocking_hook = new std::function<void()>(std::move(hook));
}

void BlockedScope::Blocking(const std::shared_ptr<BlockedCalls>& calls) {
  if (outer_ != nullptr) return outer_->Blocking(calls);
  if (!counts_ || !calls) return;
  if (!calls_) {
    calls_ = calls;
    calls_->Enter();
  }
  // Every slice of the wait: calls that reached the worker meanwhile go back too.
  if (g_call_blocking_hook != nullptr) (*g_call_blocking_hook)();
}

ObjectBytes GetBytes(const ObjectHandle& object, int64_t timeout_ms) {
  Runtime& runtime = RequireRuntime();
  if (tl_interrupt_check == nullptr) return runtime.Get(object, timeout_ms);
  BlockedScope blocked;  // the slices are one wait
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    int64_t slice = kInterruptSliceMs;
    if (timeout_ms >= 0) {
      int64_t waited = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      slice = std::clamp<int64_t>(timeout_ms - waited, 0, kInterruptSliceMs);
    }
    try {
      return runtime.Get(object, slice);
    } catch (const GetTimeoutError&) {
      if (timeout_ms >= 0 && std::chrono::steady_clock::now() - start >=
                                 std::chrono::milliseconds(timeout_ms)) {
        throw GetTimeoutError("object " + ObjectIdOf(object) + " was not ready within " +
                              std::to_string(timeout_ms) + " ms");
      }
    }
    CheckInterrupt();
  }
}
std::vector<bool> WaitObjects(const std::vector<ObjectHandle>& objects, size_t num_returns,
                              int64_t timeout_ms) {
  return RequireRuntime().Wait(objects, num_returns, timeout_ms);
}
void HoldResultContents(const std::string& container, std::vector<std::string> contents) {
  if (Runtime* runtime = CurrentRuntime()) runtime->HoldContents(container, std::move(contents));
}

const std::string& ObjectIdOf(const ObjectHandle& object) {
  static const std::string kEmpty;
  if (!object) return kEmpty;
  return object->origin.empty() ? object->id.Hex() : object->origin;
}

ObjectHandle GeneratorItem(const ObjectHandle& generator, uint32_t index) {
  return RequireRuntime().GeneratorItem(generator, index);
}

size_t ObjectCount() { return RequireRuntime().ObjectCount(); }

}  // namespace detail
}  // namespace rayx
