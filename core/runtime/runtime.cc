// The client runtime: a facade that wires the object table, the head client
// and the task and actor submitters together on one I/O thread.
#include "runtime/runtime.h"

#include <unistd.h>

#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <mutex>

#include "common/logging.h"
#include "object_store/object_pull.h"
#include "object_store/shared_memory_store.h"
#include "rayx/ids.h"
#include "rayx/version.h"
#include "runtime/actor_submitter.h"
#include "runtime/argument_resolver.h"
#include "protocol/push_tasks.h"
#include "runtime/blocked_calls.h"
#include "runtime/group_watch_client.h"
#include "runtime/head_client.h"
#include "runtime/task_submitter.h"
#include "runtime/worker_send_queue.h"
#include "runtime/runtime_sockets.h"
#include "runtime/zmq_worker_connector.h"
#include "transport/message.h"

namespace rayx::detail {


namespace {
constexpr int64_t kTickMs = 100;
// A pull from another node with no answer for this long: the node is gone.
constexpr int64_t kPullIdleTimeoutMs = 10000;
// How long Get spins for a pending result before it sleeps (ObjectTable::Get).
constexpr int64_t kGetSpinUs = 200;

// RAYX_GET_SPIN_US overrides kGetSpinUs (0: never spin, e.g. on a machine
// whose cores are all busy); a value that is not a number 0..100000 is
// ignored with a warning.
int64_t GetSpinUs() {
  const char* text = std::getenv("RAYX_GET_SPIN_US");
  if (text == nullptr || *text == '\0') return kGetSpinUs;
  char* end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (*end != '\0' || value < 0 || value > 100000) {
    RAYX_LOG(Warning) << "RAYX_GET_SPIN_US=" << text << " is not a number of microseconds "
                      << "from 0 to 100000: using " << kGetSpinUs;
    return kGetSpinUs;
  }
  return value;
}

// This program's own executable (workers run it again by default).
void SetOwnExecutable(protocol::RequestLeaseRequest* req) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  req->executable = n > 0 ? std::string(exe, static_cast<size_t>(n)) : "";
  // Rebuilt while running: the program at that path is the one to start.
  const std::string deleted = " (deleted)";
  if (req->executable.size() > deleted.size() &&
      req->executable.compare(req->executable.size() - deleted.size(), deleted.size(),
                              deleted) == 0) {
    req->executable.resize(req->executable.size() - deleted.size());
  }
}

// The program workers run instead of this one (SetWorkerCommand), if any.
struct WorkerCommand {
  std::mutex mu;
  std::string executable;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
};
WorkerCommand& TheWorkerCommand() {
  static WorkerCommand* command = new WorkerCommand();  // outlives static destructors
  return *command;
}

// Workers run this very program (or the one SetWorkerCommand named), started
// in this process's directory.
void SetWorkerProgram(protocol::RequestLeaseRequest* req) {
  {
    WorkerCommand& command = TheWorkerCommand();
    std::lock_guard<std::mutex> lock(command.mu);
    req->worker_args = command.args;
    req->worker_env = command.env;
    req->executable = command.executable;
  }
  if (req->executable.empty()) SetOwnExecutable(req);
  char cwd[4096];
  req->working_dir = getcwd(cwd, sizeof cwd) ? cwd : "";
  // A submitted job's program lives in its working directory package, which
  // each node fetches for itself (rayx job submit --working-dir).
  const char* hash = std::getenv("RAYX_PACKAGE_HASH");
  const char* dir = std::getenv("RAYX_PACKAGE_DIR");
  if (hash && dir && *hash && *dir) {
    req->package_hash = hash;
    req->package_dir = dir;
  }
}
}  // namespace

void SetWorkerCommand(const std::string& executable, std::vector<std::string> args,
                      std::map<std::string, std::string> env) {
  WorkerCommand& command = TheWorkerCommand();
  std::lock_guard<std::mutex> lock(command.mu);
  command.executable = executable;
  command.args = std::move(args);
  command.env = std::move(env);
}


ObjectCore::~ObjectCore() {
  if (Runtime* runtime = CurrentRuntime()) runtime->Release(id);
}

Runtime::Runtime(Config config)
    : config_(std::move(config)),
      objects_(ObjectTable::Options{
          config_.node_ip,
          [this](const protocol::ObjectLocation& location)
              -> Result<std::shared_ptr<MappedObject>> {
            // Only an object of this node's own store is mapped in place.
            if (local_store_.dir().empty()) return Status::NotFound("no object store on this node");
            return local_store_.Open(location.path);
          },
          [this](const protocol::ObjectLocation& location) {
            // Silence this long means the node is gone: lineage may compute
            // the object again (ObjectTable::Get).
            PullOptions options;
            options.idle_timeout_ms = kPullIdleTimeoutMs;
            return PullObject(sockets_->context.get(), data_security_, location,
                              *object_servers_, options);
          },
          [this](const protocol::ObjectLocation& location) { DeleteStored(location); },
          GetSpinUs(), config_.counters ? config_.counters : &WorkCounters::Process()}),
      // Object ids (this prefix, then a counter) name objects to other jobs: a
      // job reads another's object only when handed its id, so the prefix is
      // drawn from the OS's entropy source, not guessable.
      id_prefix_(rayx::detail::SecureRandomHex(8)),
      sockets_(std::make_unique<Sockets>()),
      work_(boost::asio::make_work_guard(io_)),
      head_(std::make_unique<HeadClient>(io_, sockets_->context.get(), config_.head, HeadSecurity(),
                                         HeadClient::Options{config_.head_timeout_ms})),
      tick_timer_(io_),
      blocked_timer_(io_),
      connector_(std::make_unique<ZmqWorkerConnector>(
          io_, sockets_->context.get(),
          [this](const JobId& job, const std::optional<transport::ActorKey>& actor_key) {
            return WorkerSecurity(job.IsNil() ? config_.job_id : job, actor_key);
          })),
      object_servers_(std::make_unique<ObjectServerDirectory>(
          FetchObjectServersFromHead(config_.head.ToString(), HeadSecurity(), 5000), clock_,
          ObjectServerDirectory::Options{})) {}

Result<transport::ClientSecurity> Runtime::WorkerSecurity(
    const JobId& job, const std::optional<transport::ActorKey>& actor_key) const {
  auto credential = config_.credential.ForJob(job);
  if (!credential.ok() && actor_key && !actor_key->secret.empty()) {
    transport::ClientSecurity security;
    security.mode = data_security_.mode;
    security.credential = transport::Credential::ActorCaller(*actor_key);
    security.server_key = actor_key->worker_key;
    return security;
  }
  if (!credential.ok()) return credential.status();
  transport::ClientSecurity security;
  security.mode = data_security_.mode;
  security.server_key = credential->CurvePublicKey();  // a worker presents its job's key
  security.credential = std::move(*credential);
  return security;
}

Result<std::unique_ptr<Runtime>> Runtime::Start(const Config& config) {
  std::unique_ptr<Runtime> runtime(new Runtime(config));
  // A worker's calls that block lend its lease's CPU; a driver holds none.
  if (config.is_worker && !config.host_lease_id.IsNil()) {
    Runtime* self = runtime.get();
    BlockedCalls::Deps deps;
    deps.post = [self](std::function<void()> fn) { boost::asio::post(self->io_, std::move(fn)); };
    deps.after = [self](int64_t delay_ms, std::function<void()> fn) {
      self->blocked_timer_.expires_after(std::chrono::milliseconds(delay_ms));
      self->blocked_timer_.async_wait([fn = std::move(fn)](const boost::system::error_code& ec) {
        if (!ec) fn();
      });
    };
    deps.notify = [self](bool blocked) {
      protocol::LeaseBlockedNotice notice;
      notice.lease_id = self->config_.host_lease_id;
      notice.blocked = blocked;
      if (!self->head_->Notify(notice)) {
        RAYX_LOG(Warning) << "could not tell the head that lease " << notice.lease_id.Short()
                          << (blocked ? " is blocked" : " resumed");
      }
    };
    runtime->blocked_calls_ = std::make_shared<BlockedCalls>(std::move(deps));
  }
  RAYX_RETURN_IF_ERROR(runtime->Connect());
  return runtime;
}

Status Runtime::Connect() {
  head_->Start();
  thread_ = std::thread([this] { io_.run(); });

  protocol::RegisterDriverRequest req;
  req.rayx_version = kRayxVersion;
  req.job_id = config_.job_id;
  req.node_ip = config_.node_ip;
  req.pid = getpid();
  req.host_lease_id = config_.host_lease_id;
  req.log_to_driver = config_.log_to_driver && !config_.is_worker;
  auto reply = head_->CallSync<protocol::RegisterDriverReply>(req, 15000);
  if (!reply.ok()) return reply.status();
  if (req.log_to_driver) printer_ = std::make_unique<OutputPrinter>(STDOUT_FILENO);
  config_.job_id = reply->job_id;
  int64_t heartbeat_period_ms = reply->heartbeat_period_ms;
  data_security_ = transport::ClientSecurity::ObjectServer(
      reply->wire_security ? transport::WireSecurity::kEncrypted
                           : transport::WireSecurity::kAuthenticated,
      config_.credential,
      config_.cluster_key);
  sockets_->deleter.SetSecurity(data_security_);
  // A node of the cluster on this machine lends its object store to large Puts.
  auto status = head_->CallSync<protocol::GetClusterStatusReply>(protocol::GetClusterStatusRequest{},
                                                                 5000);
  if (status.ok()) {
    object_servers_->Set(AliveObjectServers(status->status));  // where pulls may go
    for (const auto& node : status->status.nodes) {
      const bool own = config_.object_address.empty() ? node.address == config_.node_ip
                                                      : node.object_address == config_.object_address;
      if (node.alive && own && !node.store_dir.empty()) {
        local_object_address_ = node.object_address;
        // Its capacity and spill directory (none in an older agent's store).
        std::string spill_dir;
        if (auto ledger = StoreLedger::Open(node.store_dir); ledger.ok()) {
          ledger_ = *ledger;
          spill_dir = ledger_->spill_dir();
          seen_spill_epoch_ = ledger_->spill_epoch();
        }
        local_store_ = SharedMemoryStore(node.store_dir, spill_dir);
        StoreWriter::Options writer;
        writer.spill_dir = spill_dir;
        store_writer_ = std::make_unique<StoreWriter>(node.store_dir, writer);
        break;
      }
    }
  }
  // The submitters, wired on the I/O thread (which owns them from now on).
  // A restarted head is registered with again under the same job.
  req.job_id = config_.job_id;
  boost::asio::post(io_, [this, heartbeat_period_ms, req] {
    head_->SetRegistration(req);
    send_queue_ = std::make_unique<WorkerSendQueue>(io_, config_.job_id.Hex());
    resolver_ = std::make_unique<ArgumentResolver>(objects_, io_, local_object_address_);
    tasks_ = std::make_unique<TaskSubmitter>(
        TaskSubmitter::Deps{objects_, *head_, *connector_, *send_queue_, *resolver_, clock_, io_},
        TaskSubmitter::Options{config_.job_id, SetWorkerProgram, /*reaches_other_jobs=*/true,
                               TaskSubmitter::kLossReasonWaitMs});
    actors_ = std::make_unique<ActorSubmitter>(
        ActorSubmitter::Deps{objects_, *head_, *connector_, *send_queue_, *resolver_, clock_, io_},
        ActorSubmitter::Options{config_.job_id, SetWorkerProgram,
                                config_.credential.principal().is_cluster(), 0,
                                [this](std::string_view name) {
                                  return config_.credential.GrantRead(name);
                                }});
    if (printer_) {
      head_->OnWorkerOutput(
          [this](const protocol::WorkerOutputNotice& notice) { printer_->Print(notice); });
    }
    // A node declared dead: its workers are lost to us even where their
    // connections still stand (a stopped node); retries and restarts begin.
    head_->OnLeasesLost([this](const protocol::LeasesLostNotice& notice) {
      for (const auto& lease_id : notice.lease_ids) {
        if (!tasks_->LoseLease(lease_id, notice.reason, notice.cause)) {
          actors_->LoseLease(lease_id, notice.reason);
        }
      }
    });
    // A restarted head keeps no name reservations: ours are made again.
    head_->OnReregistered([this] { actors_->ReReserveNames(); });
    // Nor does it know this worker's calls are blocked; a notice may also be
    // lost with a dropped connection.
    if (blocked_calls_) head_->OnRestored([this] { blocked_calls_->Resync(); });
    // A rank of a collective group this process watches died.
    head_->OnGroupMemberDied(
        [](const protocol::GroupMemberDiedNotice& notice) { DispatchGroupMemberDied(notice); });
    // Only a driver keeps its job alive; a worker's runtime must not.
    if (!config_.is_worker) {
      head_->StartHeartbeats(config_.job_id, heartbeat_period_ms,
                             [this] { return objects_.counters().Read(); });
    }
    Tick();
  });
  return Status::OK();
}

Runtime::~Runtime() { Stop(); }

Result<std::string> Runtime::CallHeadEncoded(uint16_t type, std::string body,
                                             uint16_t reply_type, int64_t timeout_ms) {
  if (!head_ || stopped_) return Status::Unavailable("the rayx runtime has stopped");
  return head_->CallSyncEncoded(type, std::move(body), reply_type, timeout_ms);
}

void Runtime::Stop() {
  if (stopped_) return;
  stopped_ = true;
  // Every line the job's workers wrote until now, before the job ends and
  // they go: the agents read their files now and the head answers after
  // passing their lines on (FlushOutputRequest), within kOutputFlushMs (1 s)
  // and its expiry tick; with the head gone this costs 1.5 s.
  if (printer_ && submitted_any_.load(std::memory_order_relaxed) && !config_.job_id.IsNil()) {
    protocol::FlushOutputRequest flush;
    flush.job_id = config_.job_id;
    auto flushed = head_->CallSync<protocol::FlushOutputReply>(flush, 1500);
    if (flushed.ok() && flushed->unanswered > 0) {
      RAYX_LOG(Warning) << flushed->unanswered << " node(s) did not send their workers' last "
                        << "output in time: it is in the worker logs on those nodes";
    }
  }
  if (blocked_calls_) blocked_calls_->Stop();
  head_->StopHeartbeats();
  if (!config_.is_worker && !config_.job_id.IsNil()) {  // empty: never registered
    protocol::FinishJobRequest req;
    req.job_id = config_.job_id;
    // Detached actors still being constructed: the head finishes them.
    auto hand_over = std::make_shared<std::promise<std::vector<protocol::ActorInfo>>>();
    auto taken = hand_over->get_future();
    PostOrdered([this, hand_over] {
      hand_over->set_value(actors_ ? actors_->TakeHandOvers()
                                   : std::vector<protocol::ActorInfo>{});
    });
    if (taken.wait_for(std::chrono::seconds(5)) == std::future_status::ready) {
      req.hand_over = taken.get();
    }
    auto reply = head_->CallSync<protocol::FinishJobReply>(req, 5000);
    if (!reply.ok()) RAYX_LOG(Warning) << "could not end job " << config_.job_id << ": " << reply.status();
  }
  boost::asio::post(io_, [this] {
    tick_timer_.cancel();
    if (tasks_) tasks_->Clear();
    if (actors_) actors_->Clear();
    if (send_queue_) send_queue_->Clear();
    sockets_->deleter.Clear();
    if (store_writer_) store_writer_->Clear();
    head_->Stop();
    work_.reset();
    io_.stop();
  });
  if (thread_.joinable()) thread_.join();
  // Wake anyone still waiting.
  objects_.FailAllPending(ErrorInfo::Of(protocol::TaskErrorKind::kRuntimeStopped,
                                        "rayx::Shutdown() was called before this result arrived"));
}

// ---- Objects -------------------------------------------------------------------

void Runtime::DeleteStored(const protocol::ObjectLocation& location) {
  // This process wrote it (a Put): remove it directly, or its copy the agent
  // spilled.
  if (location.object_address.empty()) {
    local_store_.Remove(location.path);
    return;
  }
  // A deleter's socket keeps reconnecting to its address: only the cluster's
  // object servers get one (the job's end removes anything left elsewhere).
  if (!object_servers_->IsKnown(location.object_address)) return;
  sockets_->deleter.Delete(location.object_address, location.path);
}

namespace {
// How long a hold waits for an agent's answer.
constexpr int64_t kHoldTimeoutMs = 10000;
}  // namespace

Runtime::ExportedRef Runtime::ExportRef(const ObjectHandle& object) {
  if (!object) throw std::invalid_argument("an empty ObjectRef cannot go inside a value");
  if (!store_writer_ || local_object_address_.empty()) {
    throw std::runtime_error(
        "an ObjectRef inside a value needs this machine's object store (run the program on a "
        "node of the cluster, or pass the ref as a task argument)");
  }
  ObjectBytes bytes = Get(object, -1);  // a failed object throws its TaskError
  const std::string& id = object->origin.empty() ? object->id.Hex() : object->origin;
  bool written = false;
  std::shared_ptr<const protocol::ObjectLocation> stored = objects_.PinForExport(object->id, &written);
  // This node's own copy when there is one; else a copy written here, held
  // by this hold only.
  const bool local = stored && (written || stored->object_address == local_object_address_);
  const SharedMemoryStore& store = local_store_;
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::string path;
    bool fresh = !local || attempt > 0;
    if (!fresh) {
      path = stored->path;
    } else {
      if (Status room = ReserveStore(bytes.view.size()); !room.ok()) {
        if (room.code() == StatusCode::kResourceExhausted) throw ObjectStoreFullError(room.message());
      }
      auto copy = store.Write(SharedMemoryStore::ObjectName(config_.job_id.Hex(), id), bytes.view);
      if (!copy.ok()) {
        throw std::runtime_error("an ObjectRef inside a value: cannot store object " + id +
                                 " on this node: " + copy.status().message());
      }
      path = *copy;
    }
    Status held = HoldObjects(sockets_->context.get(), data_security_, *object_servers_,
                              local_object_address_, {path}, fresh, kHoldTimeoutMs);
    if (held.ok()) {
      ExportedRef out;
      out.id = id;
      out.location.node_address = config_.node_ip;
      out.location.object_address = local_object_address_;
      out.location.path = path;
      out.location.size = bytes.view.size();
      return out;
    }
    // The file went between the write and the hold (its last holder let
    // go): once more, with a copy of our own.
    if (held.code() != StatusCode::kNotFound || attempt > 0) {
      throw std::runtime_error("an ObjectRef inside a value: " + held.message());
    }
  }
  throw std::runtime_error("an ObjectRef inside a value: object " + id + " cannot be held");
}

ObjectHandle Runtime::ImportRef(const std::string& id, const protocol::ObjectLocation& location) {
  if (id.empty() || id.size() > 64 || location.path.empty()) {
    throw std::invalid_argument("a malformed ObjectRef inside a value (object '" +
                                id.substr(0, 64) + "')");
  }
  {
    std::lock_guard<std::mutex> lock(borrowed_mu_);
    auto it = borrowed_.find(id);
    if (it != borrowed_.end()) {
      if (ObjectHandle live = it->second.lock()) return live;
    }
  }
  Status checked = object_servers_->Check(location.object_address);
  if (!checked.ok()) throw std::invalid_argument("an ObjectRef inside a value: " + checked.message());
  Status held = HoldObjects(sockets_->context.get(), data_security_, *object_servers_,
                            location.object_address, {location.path}, false, kHoldTimeoutMs);
  ObjectId local = NewObjectId();
  if (held.ok()) {
    objects_.AddBorrowed(local, std::make_shared<protocol::ObjectLocation>(location));
  } else {
    objects_.AddFailed(local, ErrorInfo::Of(protocol::TaskErrorKind::kObjectLost,
                                            "object " + id + " is gone: " + held.message(), "",
                                            location.node_address));
  }
  ObjectHandle handle = NewEntry(std::move(local));
  handle->origin = id;
  std::lock_guard<std::mutex> lock(borrowed_mu_);
  auto [it, inserted] = borrowed_.try_emplace(id, handle);
  if (!inserted) {
    if (ObjectHandle live = it->second.lock()) return live;  // another thread's, first: ours goes
    it->second = handle;
  }
  if (borrowed_.size() >= borrowed_sweep_at_) {
    for (auto e = borrowed_.begin(); e != borrowed_.end();) {
      e = e->second.expired() ? borrowed_.erase(e) : std::next(e);
    }
    borrowed_sweep_at_ = std::max<size_t>(64, borrowed_.size() * 2);
  }
  return handle;
}

ObjectHandle Runtime::PutContainer(size_t size, const std::function<void(char*)>& fill,
                                   std::vector<std::string> contents) {
  Result<ObjectHandle> stored = Status::Unavailable("this machine has no object store");
  try {
    if (!local_object_address_.empty()) stored = PutIntoStore(size, fill);
  } catch (...) {
    ReleaseHolds(contents);
    throw;
  }
  if (!stored.ok()) {
    ReleaseHolds(contents);
    if (stored.status().code() == StatusCode::kResourceExhausted) {
      throw ObjectStoreFullError(stored.status().message());
    }
    throw std::runtime_error("a value holding ObjectRefs must go to this machine's object "
                             "store (run the program on a node of the cluster): " +
                             stored.status().message());
  }
  bool written = false;
  // Released through the agent from now on, never reused.
  auto location = objects_.PinForExport((*stored)->id, &written);
  HoldContents(location->path, std::move(contents));
  return *stored;
}

void Runtime::HoldContents(const std::string& container, std::vector<std::string> contents) {
  if (contents.empty() || stopped_) return;
  boost::asio::post(io_, [this, container, contents = std::move(contents)]() mutable {
    sockets_->deleter.Contain(local_object_address_, container, std::move(contents));
  });
}

void Runtime::ReleaseHolds(const std::vector<std::string>& paths) {
  if (paths.empty() || stopped_) return;
  boost::asio::post(io_, [this, paths] {
    for (const auto& path : paths) sockets_->deleter.Delete(local_object_address_, path);
  });
}

size_t Runtime::ObjectCount() { return objects_.size(); }

ObjectHandle Runtime::GeneratorItem(const ObjectHandle& generator, uint32_t index) {
  if (!generator) throw std::invalid_argument("GeneratorItem of an empty ObjectRef");
  std::string id = protocol::GeneratorItemId(generator->id.Hex(), index);
  if (id.empty()) {
    throw std::out_of_range("generator item " + std::to_string(index) + ": a generator yields " +
                            "at most " + std::to_string(protocol::kMaxGeneratorItems + 1) +
                            " items");
  }
  ObjectId item = ObjectId::FromWire(std::move(id));
  objects_.ClaimStreamItem(generator->id, item);
  return NewEntry(std::move(item));
}

ObjectBytes Runtime::Get(const ObjectHandle& object, int64_t timeout_ms) {
  if (!object) throw std::invalid_argument("Get on an empty ObjectRef");
  if (!blocked_calls_) return objects_.Get(object->id, timeout_ms);
  BlockedScope blocked;  // joins the caller's, if it holds one
  // Runs before the wait sleeps and every ObjectTable::kOnBlockPeriodMs after:
  // calls queued behind this one on its worker are handed back each time.
  const std::function<void()> on_block = [&] { blocked.Blocking(blocked_calls_); };
  return objects_.Get(object->id, timeout_ms, &on_block);
}

std::vector<bool> Runtime::Wait(const std::vector<ObjectHandle>& objects, size_t num_returns,
                                int64_t timeout_ms) {
  if (!blocked_calls_) return objects_.Wait(objects, num_returns, timeout_ms);
  BlockedScope blocked;
  const std::function<void()> on_block = [&] { blocked.Blocking(blocked_calls_); };
  return objects_.Wait(objects, num_returns, timeout_ms, &on_block);
}

ObjectHandle Runtime::SubmitTask(const std::string& function, std::vector<Arg> args,
                                 const CallOptions& options) {
  Submission submission;
  submission.kind = Submission::Kind::kTask;
  submission.task.function = function;
  submission.task.display = options.name;
  submission.task.args = std::move(args);
  submission.task.retries_left = std::max(0, options.max_retries);
  submission.task.retry_exceptions = options.retry_exceptions;
  submission.task.retriable_value_prefix = options.retriable_value_prefix;
  if (options.resources_set) submission.resources = options.resources;
  submission.placement = options.placement;
  return Submit(std::move(submission));
}
void Runtime::Tick() {
  if (store_writer_) store_writer_->Trim(clock_.NowMs());
  if (ledger_ && ledger_->spill_epoch() != seen_spill_epoch_) {
    // The agent spilled objects: mappings of those that left the store go,
    // so that their memory returns.
    seen_spill_epoch_ = ledger_->spill_epoch();
    objects_.DropMappingsOfSpilled(
        [](const std::string& path) { return ::access(path.c_str(), F_OK) == 0; });
  }
  tasks_->Tick();
  tick_timer_.expires_after(std::chrono::milliseconds(kTickMs));
  tick_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) Tick();
  });
}

}  // namespace rayx::detail
