// The runtime's actors: creation, names, method calls, kills, and handles
// passed between processes. Part of Runtime (runtime.h).
#include <future>
#include <string>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "rayx/ids.h"
#include "runtime/actor_submitter.h"
#include "runtime/head_client.h"
#include "runtime/runtime.h"
#include "runtime/task_submitter.h"
#include "transport/message.h"

namespace rayx::detail {

namespace {
// How long a call the user's thread makes to the head waits for its answer.
constexpr int64_t kHeadCallTimeoutMs = 10000;
}  // namespace

// ---- Actors --------------------------------------------------------------------

ActorPtr Runtime::CreateActor(const std::string& factory, std::vector<Arg> args,
                              const ActorOptions& options) {
  auto core = std::make_shared<ActorCore>();
  core->actor_id = ActorId::FromSecureRandom();  // whoever knows it may call or kill the actor
  core->name = options.name;
  core->metadata = options.metadata;
  if (!options.name.empty()) ReserveActorName(*core, factory, options);
  ObjectHandle creation = NewPendingObject();
  Task task;
  task.function = factory;
  task.display = factory;
  task.args = std::move(args);
  task.object_id = creation->id;
  task.actor_creation = true;
  task.actor_id = core->actor_id;
  PostOrdered([this, options, creation, task = std::move(task)]() mutable {
    actors_->Create(std::move(task), options, creation);
  });
  return core;
}

void Runtime::ReserveActorName(const ActorCore& core, const std::string& factory,
                               const ActorOptions& options) {
  // As in Ray, the name is taken when the actor is created: a second creation
  // fails here, and GetActor finds the actor while its constructor runs.
  protocol::RegisterActorRequest reserve;
  reserve.actor.actor_id = core.actor_id;
  reserve.actor.name = options.name;
  reserve.actor.job_id = config_.job_id;
  reserve.actor.class_name = factory;
  reserve.actor.detached = options.detached;
  reserve.actor.max_restarts = options.max_restarts;
  reserve.actor.starting = true;
  reserve.actor.metadata = options.metadata;
  auto reply = head_->CallSync<protocol::RegisterActorReply>(reserve, kHeadCallTimeoutMs);
  if (reply.ok()) return;
  if (reply.status().code() == StatusCode::kAlreadyExists) {
    throw std::invalid_argument(reply.status().message() + " (or GetActor it)");
  }
  if (reply.status().code() == StatusCode::kInvalidArgument) {
    throw std::invalid_argument("actor '" + options.name + "': " + reply.status().message());
  }
  // No answer in time: a reservation the head made after all is dropped.
  PostOrdered([this, name = options.name, id = core.actor_id] {
    head_->DropActorName(name, id);
  });
  throw std::runtime_error("could not reserve the actor name '" + options.name +
                           "': " + reply.status().message());
}

ObjectHandle Runtime::SubmitActorTask(const ActorPtr& actor, const std::string& method,
                                      std::vector<Arg> args) {
  if (!actor) throw std::invalid_argument("call on an empty ActorHandle");
  Submission submission;
  submission.kind = Submission::Kind::kActorCall;
  submission.task.function = method;
  submission.task.args = std::move(args);
  submission.task.actor_id = actor->actor_id;
  return Submit(std::move(submission));
}

void Runtime::KillActor(const ActorPtr& actor) {
  if (!actor) return;
  PostOrdered([this, actor_id = actor->actor_id] { actors_->Kill(actor_id); });
}

void Runtime::ReleaseActor(const ActorPtr& actor) {
  if (!actor) return;
  PostOrdered([this, actor_id = actor->actor_id] { actors_->Release(actor_id); });
}

ActorPtr Runtime::GetNamedActor(const std::string& name) {
  protocol::GetActorRequest req;
  req.name = name;
  auto reply = head_->CallSync<protocol::GetActorReply>(req, kHeadCallTimeoutMs);
  if (!reply.ok()) throw std::runtime_error(reply.status().message());
  return DeserializeActor(protocol::Encode(reply->actor));
}

std::string Runtime::SerializeActor(const ActorPtr& actor) {
  auto reply = std::make_shared<std::promise<protocol::ActorInfo>>();
  auto future = reply->get_future();
  PostOrdered([this, actor, reply] { reply->set_value(actors_->Describe(actor->actor_id)); });
  protocol::ActorInfo info = future.get();
  if (info.call_secret.empty() && !info.job_id.IsNil()) {
    // Whoever gets the handle (a task of another job, say) may call the actor.
    if (auto key = config_.credential.KeyFor(info.job_id, info.actor_id); key.ok()) {
      info.call_secret = std::move(key->secret);
      info.worker_key = std::move(key->worker_key);
    }
  }
  if (info.worker_address.empty() && !info.starting) {
    throw std::runtime_error(info.name.empty()
                                 ? "the actor is not running yet or has died; wait for a call "
                                   "to return before passing its handle (or name it)"
                                 : "the actor has died");
  }
  return protocol::Encode(info);
}

bool Runtime::ActorPlaced(const ActorPtr& actor) {
  auto reply = std::make_shared<std::promise<bool>>();
  auto future = reply->get_future();
  PostOrdered([this, actor, reply] { reply->set_value(!actors_->WaitingForWorker(actor->actor_id)); });
  return future.get();
}

ActorPtr Runtime::DeserializeActor(const std::string& bytes) {
  auto info = protocol::Decode<protocol::ActorInfo>(bytes);
  if (!info.ok()) throw std::runtime_error("malformed actor handle: " + info.status().message());
  auto core = std::make_shared<ActorCore>();
  core->actor_id = info->actor_id;
  core->name = info->name;
  core->metadata = info->metadata;
  auto promise = std::make_shared<std::promise<void>>();
  auto done = promise->get_future();
  PostOrdered([this, info = *info, promise] {
    actors_->Attach(info);
    promise->set_value();
  });
  done.wait();
  return core;
}

}  // namespace rayx::detail
