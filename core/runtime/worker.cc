// The worker process's task loop.
#include <cxxabi.h>
#include <unistd.h>

#include <cstdlib>
#include <typeinfo>
#include <zmq.hpp>

#include "common/logging.h"
#include "common/ready_pipe.h"
#include "object_store/object_pull.h"
#include "object_store/shared_memory_store.h"
#include "protocol/codec.h"
#include "rayx/detail/registry.h"
#include "runtime/runtime.h"
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

std::string ExecutableName() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "this program";
}
}  // namespace

// Design: one thread, one ROUTER socket, calls run one at a time in arrival
// order (so an actor's calls from one caller run in submission order). The
// result travels in the reply's third frame. Exceptions become error data; a
// crash ends the process, which the caller notices as a lost connection.
void RunWorker() {
  detail::SetLogProgramName("rayx-worker");
  const char* fd_text = std::getenv("RAYX_WORKER_READY_FD");
  ReadyPipe ready(fd_text ? std::atoi(fd_text) : -1);
  const char* ip_env = std::getenv("RAYX_NODE_IP");
  std::string node_ip = ip_env && *ip_env ? ip_env : "127.0.0.1";

  zmq::context_t context(1);
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::sndhwm, 0);
  router.set(zmq::sockopt::rcvhwm, 0);
  router.set(zmq::sockopt::maxmsgsize, int64_t{1} << 31);
  try {
    router.bind("tcp://" + node_ip + ":*");
  } catch (const zmq::error_t& e) {
    ready.Fail("worker cannot listen on " + node_ip + ": " + e.what());
    std::_Exit(1);
  }
  ready.Ready({{"address", router.get(zmq::sockopt::last_endpoint)}});

  const char* store_env = std::getenv("RAYX_STORE_DIR");
  const char* object_env = std::getenv("RAYX_OBJECT_ADDRESS");
  SharedMemoryStore store(store_env ? store_env : "");
  std::string object_address = object_env ? object_env : "";

  std::shared_ptr<void> actor;
  std::string actor_class;
  std::string actor_error;  // why the actor could not be created
  while (true) {
    transport::Frames frames;
    try {
      frames = transport::ReceiveMessage(router);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      RAYX_LOG(Error) << "receive failed: " << e.what();
      std::_Exit(1);
    }
    if (frames.size() < 3) continue;  // [routing][envelope][body][args...]
    auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(frames[1]));
    if (!env.ok() || env->t != static_cast<uint16_t>(protocol::MessageType::kPushTaskRequest)) {
      continue;
    }
    auto req = protocol::Decode<protocol::PushTaskRequest>(transport::FrameView(frames[2]));
    protocol::PushTaskReply reply;
    reply.node_address = node_ip;
    reply.worker_pid = getpid();
    std::string result;
    try {
      if (!req.ok()) throw std::invalid_argument(req.status().message());
      if (frames.size() != 3 + req->num_args) {
        throw std::invalid_argument("the call carries " + std::to_string(frames.size() - 3) +
                                    " argument frames, expected " + std::to_string(req->num_args));
      }
      // Stored arguments: mapped in place on this node, pulled from another.
      std::vector<std::shared_ptr<MappedObject>> mappings;
      std::vector<std::string> pulled;
      pulled.reserve(req->stored_args.size());
      ArgViews args;
      for (size_t i = 3; i < frames.size(); ++i) args.push_back(transport::FrameView(frames[i]));
      for (const auto& [index, location] : req->stored_args) {
        if (index >= args.size()) throw std::invalid_argument("stored argument out of range");
        if (location.node_address == node_ip) {
          auto mapped = MappedObject::Open(location.path);
          if (mapped.ok()) {
            mappings.push_back(*mapped);
            args[index] = (*mapped)->view();
            continue;
          }
        }
        auto bytes = PullObject(context, location);
        if (!bytes.ok()) {
          throw std::runtime_error("argument " + std::to_string(index) +
                                   " could not be fetched: " + bytes.status().message());
        }
        pulled.push_back(std::move(*bytes));
        args[index] = pulled.back();
      }
      const RemoteFunction* fn = FunctionRegistry::Instance().FindByName(req->function);
      if (fn == nullptr) {
        reply.ok = false;
        reply.error_type = "FunctionNotFound";
        reply.error_message = "'" + req->function + "' is not registered in " + ExecutableName() +
                              ": add it to RAYX_REMOTE(...)";
      } else if (req->actor_creation) {
        if (!fn->create) throw std::invalid_argument(req->function + " is not an actor factory");
        try {
          actor = fn->create(args);
        } catch (const std::exception& e) {
          actor_error = req->function + " threw " + Demangle(typeid(e).name()) + ": " + e.what();
          throw;
        }
        actor_class = req->function;
        result = Pack(msgpack::type::nil_t());
      } else if (!req->actor_id.empty()) {
        if (!actor && !actor_error.empty()) {
          reply.ok = false;
          reply.error_type = "ActorDied";
          reply.error_message = "the actor's constructor failed: " + actor_error;
        } else if (!actor) {
          throw std::logic_error("this worker hosts no actor");
        } else {
          if (!fn->invoke) throw std::invalid_argument(req->function + " cannot be called");
          result = fn->invoke(actor.get(), args);
        }
      } else {
        if (!fn->invoke) throw std::invalid_argument(req->function + " is an actor factory: use rayx::Actor");
        result = fn->invoke(nullptr, args);
      }
    } catch (const msgpack::type_error& e) {
      reply.ok = false;
      reply.error_type = "ArgumentTypeError";
      reply.error_message = "an argument does not have the parameter's type (" +
                            std::string(e.what()) + ")";
    } catch (const std::exception& e) {
      reply.ok = false;
      reply.error_type = Demangle(typeid(e).name());
      reply.error_message = e.what();
    } catch (...) {
      reply.ok = false;
      reply.error_type = "unknown";
      reply.error_message = "a non-standard exception was thrown";
    }
    // A large result goes to this node's store; the reply says where.
    if (reply.ok && result.size() >= kInlineObjectLimit && !store.dir().empty() && req.ok() &&
        !req->return_id.empty()) {
      auto path = store.Write(req->job_id + "-" + req->return_id, result);
      if (path.ok()) {
        reply.stored.node_address = node_ip;
        reply.stored.object_address = object_address;
        reply.stored.path = *path;
        reply.stored.size = result.size();
        result.clear();
      } else {
        RAYX_LOG(Warning) << "result sent inline: " << path.status();
      }
    }
    protocol::Envelope out_env;
    out_env.t = static_cast<uint16_t>(protocol::MessageType::kPushTaskReply);
    out_env.id = env->id;
    transport::Frames out;
    out.push_back(std::move(frames[0]));
    out.push_back(transport::MakeFrame(protocol::Encode(out_env)));
    out.push_back(transport::MakeFrame(protocol::Encode(reply)));
    if (reply.ok && reply.stored.path.empty()) {
      out.push_back(zmq::message_t(result.data(), result.size()));
    }
    try {
      for (size_t i = 0; i < out.size(); ++i) {
        router.send(out[i], i + 1 < out.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
      }
    } catch (const zmq::error_t& e) {
      RAYX_LOG(Warning) << "reply failed: " << e.what();
    }
  }
}

}  // namespace rayx::detail
