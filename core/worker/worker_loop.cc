// The worker process's task loop.
#include "worker/worker_loop.h"

#include <cxxabi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <typeinfo>

#include <boost/asio/post.hpp>

#include "common/logging.h"
#include "protocol/codec.h"
#include "protocol/holding_value.h"
#include "rayx/detail/registry.h"
#include "rayx/detail/runtime_api.h"
#include "transport/message.h"

namespace rayx::detail {

namespace {
std::string Demangle(const char* name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string result = status == 0 && out ? out : name;
  std::free(out);
  return result;
}

// The error outcome of the exception being handled (call inside a catch):
// an argument that does not decode is rayx's ArgumentTypeError (`type` its
// name), anything else the exception (kException, `type` its type).
void SetErrorFromCurrentException(bool* ok, protocol::TaskErrorKind* kind, std::string* type,
                                  std::string* message) {
  *ok = false;
  *kind = protocol::TaskErrorKind::kException;
  try {
    throw;
  } catch (const msgpack::type_error& e) {
    *kind = protocol::TaskErrorKind::kArgumentTypeError;
    *type = protocol::Name(*kind);
    *message = "an argument does not have the parameter's type (" + std::string(e.what()) + ")";
  } catch (const std::exception& e) {
    *type = Demangle(typeid(e).name());
    *message = e.what();
  } catch (...) {
    *type = "unknown";
    *message = "a non-standard exception was thrown";
  }
}

std::string ExecutableName() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "this program";
}

// A result is sent at once unless the next call of the batch is known to be
// quick (its function averaged below this here); a quick next call delays it
// by at most its own run time, and so do the batched results of the caller's
// pipelined calls.
constexpr double kQuickCallUs = 50;
// Results are sent at the latest after this many, or this many body bytes.
constexpr uint32_t kMaxResultsPerReply = 256;
constexpr size_t kMaxReplyBodyBytes = 256 * 1024;
// How long a worker waits for the head's list of object servers.
constexpr int64_t kServerListTimeoutMs = 5000;

}  // namespace

WorkerLoop::WorkerLoop(zmq::context_t& context, const WorkerEnv& env, SendFn send,
                       std::shared_ptr<ObjectServerDirectory> servers, PullOptions pull_options)
    : context_(context),
      send_(std::move(send)),
      node_ip_(env.node_ip),
      job_(env.job_id.Hex()),
      store_(env.store_dir),
      servers_(std::move(servers)),
      pull_options_(pull_options),
      object_address_(env.object_address),
      object_security_(env.ObjectServerSecurity()) {
  if (!servers_) {
    static const SystemClock* clock = new SystemClock();  // never destroyed: outlives every loop
    servers_ = std::make_shared<ObjectServerDirectory>(
        FetchObjectServersFromHead(env.head_address, env.HeadSecurity(), kServerListTimeoutMs),
        *clock, ObjectServerDirectory::Options{}, std::vector<std::string>{env.object_address});
  }
  if (!env.store_dir.empty()) {
    if (auto ledger = StoreLedger::Open(env.store_dir); ledger.ok()) {
      ledger_ = *ledger;
      store_ = SharedMemoryStore(env.store_dir, ledger_->spill_dir());
    }
  }
}

Status WorkerLoop::ReserveResult(size_t size) {
  if (!ledger_ || ledger_->TryReserve(size)) return Status::OK();
  constexpr int64_t kMakeRoomTimeoutMs = 120000;  // spilling gigabytes to disk
  auto made = MakeRoom(context_, object_security_, *servers_, object_address_, size,
                       kMakeRoomTimeoutMs);
  return made.ok() ? Status::OK() : made.status();
}

std::string WorkerLoop::Refusal(const protocol::TaskCallView& call,
                                const transport::Principal& peer) const {
  if (peer.is_actor_caller()) {
    // Its key opens this worker's actor's methods, nothing else.
    if (!call.actor_creation && !hosted_actor_.empty() && call.actor_id == hosted_actor_ &&
        peer.actor.Hex() == hosted_actor_) {
      return "";
    }
    return std::string(peer.ToString()) + " may call that actor's methods only, and this call " +
           (call.actor_creation ? "creates an actor"
            : call.actor_id.empty()
                ? "is a task"
                : "is for actor " + std::string(call.actor_id).substr(0, 64));
  }
  if (batch_.job_id == job_) return "";
  // A named actor is shared: its calls may come from other jobs.
  if (!call.actor_id.empty() && !call.actor_creation) return "";
  return "this worker belongs to job " + job_ + ", and the call came from job " +
         std::string(batch_.job_id).substr(0, 64) +
         ": a worker runs the tasks and creates the actors of its own job only";
}

void WorkerLoop::Handle(transport::Frames& frames) {
  if (frames.size() < 3) return;  // [routing][envelope][body][payload...]
  auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(frames[1]));
  if (!env.ok()) return;
  Status refused = protocol::CheckProtocolVersion(*env, "this worker");
  if (refused.ok() && env->t != static_cast<uint16_t>(protocol::MessageType::kPushTasksRequest)) {
    return;  // nothing else is sent to a worker
  }
  payload_.clear();
  for (size_t i = 3; i < frames.size(); ++i) payload_.push_back(transport::FrameView(frames[i]));
  if (refused.ok()) {
    refused = protocol::ParsePushTasksRequest(transport::FrameView(frames[2]), payload_, &batch_);
  }
  if (!refused.ok()) {
    // The caller fails the calls on this connection with the reason.
    transport::Frames out = transport::MakeErrorMessage(
        refused, "worker " + node_ip_ + " pid " + std::to_string(getpid()), env->id);
    out.insert(out.begin(), std::move(frames[0]));
    send_(out);
    return;
  }
  const transport::Principal peer = transport::PeerPrincipal(frames[1]);
  routing_ = std::move(frames[0]);
  writer_.BeginReply(&body_);
  released_from_ = std::string::npos;
  for (size_t i = 0; i < batch_.calls.size() && i < released_from_; ++i) {
    const protocol::TaskCallView& call = batch_.calls[i];
    KnownFunction& known = Lookup(call.function);
    // A call that may take long must not hold back results already made.
    if (writer_.count() > 0 && !(known.average_us >= 0 && known.average_us < kQuickCallUs)) {
      Flush();
    }
    auto start = std::chrono::steady_clock::now();
    ConstructionObserver observer;
    if (call.actor_creation && construction_observer_) {
      observer = std::move(construction_observer_);  // told once
      construction_observer_ = nullptr;
      observer(/*began=*/true, "");
    }
    CallOutcome outcome;
    if (std::string refusal = Refusal(call, peer); !refusal.empty()) {
      outcome.ok = false;
      outcome.error_kind = protocol::TaskErrorKind::kWrongJob;
      outcome.error_message = std::move(refusal);
    } else {
      running_ = i;
      AnnounceName(known);
      outcome = Run(call, known.fn);
      running_ = std::string::npos;
    }
    if (observer) {
      observer(/*began=*/false,
               outcome.ok ? std::string()
                          : (outcome.error_kind == protocol::TaskErrorKind::kException
                                 ? outcome.error_type
                                 : std::string(protocol::Name(outcome.error_kind))) +
                                ": " + outcome.error_message);
    }
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    known.average_us = known.average_us < 0 ? us : 0.8 * known.average_us + 0.2 * us;
    if (outcome.deferred) continue;  // answered later: CompleteDeferred
    AddResult(call.call_id, call.return_id, batch_.job_id, std::move(outcome));
    if (writer_.count() >= kMaxResultsPerReply || body_.size() >= kMaxReplyBodyBytes) Flush();
  }
  Flush();
}

void WorkerLoop::WriteRequeued(uint64_t call_id) {
  writer_.ErrorResult(call_id, protocol::TaskErrorKind::kRequeued,
                      "handed back unstarted: the call ahead of it on this worker waits in a "
                      "get or wait",
                      node_ip_);
}

void WorkerLoop::ReleaseQueued() {
  // Only a task worker's own batch, from inside one of its calls.
  if (running_ == std::string::npos || actor_ || !hosted_actor_.empty()) return;
  if (released_from_ == std::string::npos) {
    for (size_t i = running_ + 1; i < batch_.calls.size(); ++i) {
      if (!batch_.calls[i].actor_id.empty()) return;  // not a task: keep the order
    }
    released_from_ = running_ + 1;
    for (size_t i = released_from_; i < batch_.calls.size(); ++i) {
      WriteRequeued(batch_.calls[i].call_id);
    }
    Flush();
  }
  if (drain_) {
    transport::Frame routing = routing_.Copy();  // the running call's caller
    drain_([this](transport::Frames& frames) { RequeueMessage(frames); });
    routing_ = std::move(routing);
    writer_.BeginReply(&body_);
  }
}

void WorkerLoop::RequeueMessage(transport::Frames& frames) {
  if (frames.size() < 3) return;  // as Handle: ignored
  auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(frames[1]));
  if (!env.ok()) return;
  Status refused = protocol::CheckProtocolVersion(*env, "this worker");
  if (refused.ok() && env->t != static_cast<uint16_t>(protocol::MessageType::kPushTasksRequest)) {
    return;
  }
  std::vector<std::string_view> payload;
  for (size_t i = 3; i < frames.size(); ++i) payload.push_back(transport::FrameView(frames[i]));
  protocol::PushTasksView calls;
  if (refused.ok()) {
    refused = protocol::ParsePushTasksRequest(transport::FrameView(frames[2]), payload, &calls);
  }
  if (!refused.ok()) {  // answered as Handle answers it
    transport::Frames out = transport::MakeErrorMessage(
        refused, "worker " + node_ip_ + " pid " + std::to_string(getpid()), env->id);
    out.insert(out.begin(), std::move(frames[0]));
    send_(out);
    return;
  }
  routing_ = std::move(frames[0]);
  writer_.BeginReply(&body_);
  for (const protocol::TaskCallView& call : calls.calls) WriteRequeued(call.call_id);
  Flush();
}

void WorkerLoop::CompleteDeferred() {
  std::vector<DeferredCalls::Answer> answers = deferred_.Take();
  if (answers.empty()) return;
  writer_.BeginReply(&body_);
  for (DeferredCalls::Answer& answer : answers) {
    auto it = pending_.find(answer.token);
    if (it == pending_.end()) continue;  // its call failed when it ran, or answered already
    // One reply per caller: a different caller's result sends what is written.
    if (writer_.count() > 0 &&
        transport::FrameView(routing_) != transport::FrameView(it->second.routing)) {
      Flush();
    }
    if (answer.item) {
      PendingCall& call = it->second;
      routing_ = call.routing.Copy();
      CallOutcome outcome;
      uint32_t index = call.items;
      if (index > protocol::kMaxGeneratorItems) {
        // Past the limit: the call fails with it, and yields no more.
        outcome.ok = false;
        outcome.error_kind = protocol::TaskErrorKind::kGeneratorTooLong;
        outcome.error_message = "a generator call yielded more than " +
                                std::to_string(protocol::kMaxGeneratorItems) + " items";
        PendingCall ended = std::move(call);
        pending_.erase(it);
        AddResult(ended.call_id, ended.return_id, ended.job, std::move(outcome));
        continue;
      }
      ++call.items;
      outcome.value = std::move(answer.value);
      AddResult(call.call_id, call.return_id, call.job, std::move(outcome), &index);
      if (writer_.count() >= kMaxResultsPerReply || body_.size() >= kMaxReplyBodyBytes) Flush();
      continue;
    }
    if (!answer.ok && answer.error_type == kWorkerExitAnswer) {
      // The answers before it go first; then the process ends.
      Flush();
      int status = std::atoi(answer.value.c_str());
      if (exit_) return exit_(status);
      ExitWorker(status);
    }
    PendingCall call = std::move(it->second);
    pending_.erase(it);
    routing_ = std::move(call.routing);
    CallOutcome outcome;
    outcome.ok = answer.ok;
    if (answer.ok) {
      outcome.value = std::move(answer.value);
    } else {
      // A deferred answer names its error by type: an exception's, or one
      // of rayx's kinds (an actor pool's ArgumentTypeError).
      auto kind = protocol::Parse<protocol::TaskErrorKind>(answer.error_type);
      if (kind.ok()) outcome.error_kind = *kind;
      outcome.error_type = std::move(answer.error_type);
      outcome.error_message = std::move(answer.value);
    }
    AddResult(call.call_id, call.return_id, call.job, std::move(outcome));
    if (writer_.count() >= kMaxResultsPerReply || body_.size() >= kMaxReplyBodyBytes) Flush();
  }
  Flush();
}

Status WorkerLoop::ConstructFromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bool read = static_cast<bool>(in) || in.eof();
  in.close();
  ::unlink(path.c_str());
  if (!read || bytes.empty()) return Status::Internal("cannot read the actor to restart from " + path);
  protocol::DecodeLimits limits;
  limits.max_str = protocol::kMaxControlFrameBytes;
  auto init = protocol::Decode<protocol::ActorInit>(bytes, limits);
  if (!init.ok()) return Status::Internal("the actor to restart in " + path + ": " + init.status().message());
  const RemoteFunction* fn = FunctionRegistry::Instance().FindByName(init->function);
  if (fn == nullptr || !fn->create) {
    return Status::NotFound("the actor factory '" + init->function + "' is not registered in " +
                            ExecutableName());
  }
  ArgViews args(init->args.begin(), init->args.end());
  try {
    actor_ = fn->create(args);
  } catch (const std::exception& e) {
    return Status::Internal("the actor's constructor " + init->function + " threw " +
                            Demangle(typeid(e).name()) + ": " + e.what());
  }
  Hosting(init->actor_id.Hex());
  StartActorPool(*fn);
  return Status::OK();
}

void WorkerLoop::Hosting(std::string_view actor) {
  hosted_actor_ = std::string(actor);
  if (!host_observer_) return;
  auto id = ActorId::FromHex(hosted_actor_);
  if (id.ok() && !id->IsNil()) host_observer_(*id);
}

void WorkerLoop::StartActorPool(const RemoteFunction& factory) {
  if (factory.max_concurrency > 1 && !actor_pool_) {
    actor_pool_ = std::make_unique<boost::asio::thread_pool>(factory.max_concurrency);
  }
}

// The call's arguments that point into the message are copied; mapped and
// pulled ones are kept with the call (moving the vectors keeps their
// elements where the views point).
void WorkerLoop::RunOnPool(const protocol::TaskCallView& call, const RemoteFunction* fn,
                           const ArgViews& args,
                           std::vector<std::shared_ptr<const void>> mappings,
                           std::vector<std::string> pulled, CallControl& control) {
  struct Owned {
    std::vector<std::shared_ptr<const void>> mappings;
    std::vector<std::string> pulled, copies;
    ArgViews args;
  };
  auto owned = std::make_shared<Owned>();
  owned->mappings = std::move(mappings);
  owned->pulled = std::move(pulled);
  owned->copies.reserve(args.size());
  for (size_t a = 0; a < args.size(); ++a) {
    if (batch_.args[call.first_arg + a].kind == protocol::WireValue::kStored) {
      owned->args.push_back(args[a]);
    } else {
      owned->args.push_back(owned->copies.emplace_back(args[a]));
    }
  }
  boost::asio::post(*actor_pool_, [fn, actor = actor_, owned, done = control.Defer()] {
    bool ok = true;
    protocol::TaskErrorKind kind;  // the answer names it by `type`
    std::string value, type;
    try {
      value = fn->invoke(actor.get(), owned->args);
    } catch (...) {
      SetErrorFromCurrentException(&ok, &kind, &type, &value);
    }
    if (ok) {
      done.Succeed(std::move(value));
    } else {
      done.Fail(std::move(type), std::move(value));
    }
  });
}

void WorkerLoop::AnnounceName(const KnownFunction& known) {
  if (known.output_name.empty() || known.output_name == announced_) return;
  announced_ = known.output_name;
  std::fflush(stderr);
  std::printf("%s%s\n", protocol::kOutputNameMarker, announced_.c_str());
  std::fflush(stdout);
}

WorkerLoop::KnownFunction& WorkerLoop::Lookup(std::string_view name) {
  auto it = functions_.find(name);
  if (it != functions_.end()) return it->second;
  const RemoteFunction* fn = FunctionRegistry::Instance().FindByName(std::string(name));
  if (fn == nullptr) {
    // Not remembered: callers could send any number of unknown names.
    unknown_ = KnownFunction{};
    return unknown_;
  }
  KnownFunction known;
  known.fn = fn;
  if (name.rfind("rayx.py.", 0) != 0) {  // Python names its own calls
    known.output_name.assign(name.substr(0, name.find("::")));  // an actor: its class
  }
  return functions_.emplace(std::string(name), known).first->second;
}

// The CallControl of one call: Defer remembers where its result goes.
class WorkerLoop::Control : public CallControl {
 public:
  Control(WorkerLoop& loop, const protocol::TaskCallView& call) : loop_(loop), call_(call) {}
  DeferredCall Defer() override {
    if (token_ == 0) {
      token_ = loop_.next_token_++;
      loop_.pending_.emplace(token_, PendingCall{loop_.routing_.Copy(), call_.call_id,
                                                 std::string(call_.return_id),
                                                 std::string(loop_.batch_.job_id)});
    }
    return loop_.deferred_.MakeCall(token_);
  }
  void Yield(std::string value) override {
    if (items_ > protocol::kMaxGeneratorItems) {
      throw std::length_error("a generator call yielded more than " +
                              std::to_string(protocol::kMaxGeneratorItems) + " items");
    }
    uint32_t index = items_++;
    CallOutcome item;
    item.value = std::move(value);
    // Sent now, with any results of the batch written before it: the caller
    // may use the item while the call runs on.
    loop_.AddResult(call_.call_id, call_.return_id, loop_.batch_.job_id, std::move(item), &index);
    loop_.Flush();
  }
  uint64_t token() const { return token_; }

 private:
  WorkerLoop& loop_;
  const protocol::TaskCallView& call_;
  uint64_t token_ = 0;  // 0: not deferred
  uint32_t items_ = 0;  // yielded so far
};

WorkerLoop::CallOutcome WorkerLoop::Run(const protocol::TaskCallView& call,
                                        const RemoteFunction* fn) {
  CallOutcome out;
  Control control(*this, call);
  try {
    // Stored arguments: mapped in place on this node, pulled from another.
    std::vector<std::shared_ptr<const void>> mappings;
    std::vector<std::string> pulled;
    pulled.reserve(call.arg_count);  // views into it must stay valid
    ArgViews args;
    args.reserve(call.arg_count);
    for (uint32_t a = 0; a < call.arg_count; ++a) {
      const protocol::WireValueView& arg = batch_.args[call.first_arg + a];
      if (arg.kind != protocol::WireValue::kStored) {
        args.push_back(arg.bytes);
        continue;
      }
      // On this node (this agent's store): mapped in place, if it is one of
      // the store's objects, of the size the call declares.
      if (arg.stored.node_address == node_ip_ &&
          (arg.stored.object_address == object_address_ || store_.Contains(arg.stored.path))) {
        auto mapped = store_.Open(arg.stored.path);
        if (mapped.ok() && (*mapped)->view().size() == arg.stored.size) {
          // Read while the call runs: not spilled meanwhile (ReadClaim).
          mappings.push_back(ClaimForReading(*mapped, (*mapped)->path()));
          args.push_back((*mapped)->view());
          continue;
        }
        if (mapped.ok() || mapped.status().code() != StatusCode::kNotFound) {
          out.ok = false;
          out.error_kind = protocol::TaskErrorKind::kInvalidArgument;
          out.error_message =
              "argument " + std::to_string(a) + " of " + std::string(call.function) + ": " +
              (mapped.ok() ? "the object " + arg.stored.path + " is " +
                                 std::to_string((*mapped)->view().size()) +
                                 " bytes, but the call declares " + std::to_string(arg.stored.size)
                           : mapped.status().message());
          return out;
        }
        // Gone here: its object server says so, or has a copy after all.
      }
      auto bytes = PullObject(context_, object_security_, arg.stored, *servers_, pull_options_);
      if (!bytes.ok() && bytes.status().code() == StatusCode::kInvalidArgument) {
        // Not an object anyone may pull: refused, not lost (no recovery).
        out.ok = false;
        out.error_kind = protocol::TaskErrorKind::kInvalidArgument;
        out.error_message = "argument " + std::to_string(a) + " of " + std::string(call.function) +
                            " cannot be read: " + bytes.status().message();
        return out;
      }
      if (!bytes.ok()) {
        // Typed, with the lost copy's store path in the node field (a path
        // names one copy on one agent, unlike an address several agents of
        // one host share): the caller brings the argument back (lineage) and
        // sends the call again, or fails it naming the node.
        out.ok = false;
        out.error_kind = protocol::TaskErrorKind::kObjectLost;
        out.error_node = arg.stored.path;
        out.error_message = "argument " + std::to_string(a) + " of " +
                            std::string(call.function) + " is stored on node " +
                            arg.stored.node_address +
                            " and could not be read: " + bytes.status().message();
        return out;
      }
      pulled.push_back(std::move(*bytes));
      args.push_back(pulled.back());
    }
    if (fn == nullptr) {
      out.ok = false;
      out.error_kind = protocol::TaskErrorKind::kFunctionNotFound;
      out.error_message = "'" + std::string(call.function) + "' is not registered in " +
                          ExecutableName() + ": add it to RAYX_REMOTE(...)";
    } else if (call.actor_creation) {
      if (!fn->create) {
        throw std::invalid_argument(std::string(call.function) + " is not an actor factory");
      }
      try {
        actor_ = fn->create(args);
      } catch (const std::exception& e) {
        actor_error_ =
            std::string(call.function) + " threw " + Demangle(typeid(e).name()) + ": " + e.what();
        throw;
      }
      Hosting(call.actor_id);
      StartActorPool(*fn);
      out.value = Pack(msgpack::type::nil_t());
    } else if (!call.actor_id.empty()) {
      if (!actor_ && !actor_error_.empty()) {
        out.ok = false;
        out.error_kind = protocol::TaskErrorKind::kActorDied;
        out.error_message = "the actor's constructor failed: " + actor_error_;
      } else if (!actor_) {
        throw std::logic_error("this worker hosts no actor");
      } else if (fn->invoke_deferrable) {
        out.value = fn->invoke_deferrable(actor_.get(), args, control);
        out.deferred = control.token() != 0;
      } else if (actor_pool_ && fn->invoke) {
        RunOnPool(call, fn, args, std::move(mappings), std::move(pulled), control);
        out.deferred = true;
      } else {
        if (!fn->invoke)
          throw std::invalid_argument(std::string(call.function) + " cannot be called");
        out.value = fn->invoke(actor_.get(), args);
      }
    } else if (fn->invoke_deferrable) {
      out.value = fn->invoke_deferrable(nullptr, args, control);
      out.deferred = control.token() != 0;
    } else {
      if (!fn->invoke) {
        throw std::invalid_argument(std::string(call.function) +
                                    " is an actor factory: use rayx::Actor");
      }
      out.value = fn->invoke(nullptr, args);
    }
  } catch (...) {
    out.deferred = false;
    SetErrorFromCurrentException(&out.ok, &out.error_kind, &out.error_type, &out.error_message);
  }
  // Deferred, then threw: the error is the answer; a later one is dropped.
  if (!out.deferred && control.token() != 0) pending_.erase(control.token());
  return out;
}

}  // namespace rayx::detail
