// The worker process's ZeroMQ edge: one ROUTER socket feeding a WorkerLoop.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <iostream>
#include <memory>
#include <thread>

#include <zmq.hpp>

#include "common/logging.h"
#include "common/ready_pipe.h"
#include "protocol/messages.h"
#include "rayx/detail/runtime_api.h"
#include "transport/security.h"
#include "transport/zap_server.h"
#include "transport/zmq_frame.h"
#include "worker/worker_loop.h"

namespace rayx::detail {

namespace {

// How long an exiting worker waits for its replies to leave.
constexpr std::chrono::milliseconds kExitFlushLimit{2000};

// Set while RunWorker serves: what ExitWorker does on its thread.
std::function<void(int)>* g_exit_after_replies = nullptr;
std::thread::id g_loop_thread;

}  // namespace

[[noreturn]] void ExitWorker(int status) {
  std::cout.flush();
  std::fflush(nullptr);
  if (g_exit_after_replies != nullptr && std::this_thread::get_id() == g_loop_thread) {
    (*g_exit_after_replies)(status);
  }
  std::_Exit(status);
}

// One thread, one ROUTER socket: a blocking receive feeds the loop, replies
// go out on the same socket. While calls are deferred (answered on other
// threads), the thread polls the loop's completion fd beside the socket and
// sends their answers itself; with none deferred it blocks in receive as
// before, so a worker that never defers pays nothing for it.
void RunWorker(const WorkerEnv& env) {
  // The node's memory monitor asks a worker to give up its call with
  // SIGUSR1 (then kills it if memory stays short): a C++ worker cannot give
  // up a running call, so the request does nothing here (a handler rather
  // than SIG_IGN: processes the call starts get the default back). A Python
  // worker installed its own handler already: it stays.
  struct sigaction current {};
  if (::sigaction(SIGUSR1, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    struct sigaction ignore {};
    ignore.sa_handler = [](int) {};
    sigemptyset(&ignore.sa_mask);
    ignore.sa_flags = SA_RESTART;
    ::sigaction(SIGUSR1, &ignore, nullptr);
  }
  // Line by line into the output file the agent follows (log_to_driver), not
  // in blocks at exit.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  // Before any user code: a rayx program a task starts is a driver.
  WorkerEnv::ClearWorkerOnlyVariables();
  detail::SetLogProgramName("rayx-worker");
  ReadyPipe ready(env.ready_fd);
  const std::string& node_ip = env.node_ip;

  zmq::context_t context(1);
  if (env.job_secret.empty() || env.job_id.IsNil()) {
    ready.Fail("worker started without its job's credential (RAYX_JOB_SECRET, RAYX_JOB_ID): "
               "only a node agent starts workers");
    std::_Exit(1);
  }
  const transport::Credential credential = transport::Credential::Job(env.job_id, env.job_secret);
  // Only members of this worker's job reach it (its workers, and drivers that
  // derive the job's credential from the cluster token); nobody else's
  // connection ever delivers a message.
  // Once it hosts an actor, that actor's callers of other jobs (who hold its
  // key, from the head) reach it too, for that actor's methods only.
  auto verifier = std::make_shared<transport::JobVerifier>(credential);
  auto zap = std::make_unique<transport::ZapServer>(context, verifier,
                                                    "worker of job " + env.job_id.Hex());
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  // Bounded queues: a caller that floods is held back by its own socket.
  router.set(zmq::sockopt::sndhwm, 1000000);
  router.set(zmq::sockopt::rcvhwm, 100000);
  router.set(zmq::sockopt::maxmsgsize, int64_t{1} << 31);
  transport::MakeServer(router, env.Mechanism(), credential);
  zap->Guard(router);  // declared after `zap`: closed before it
  try {
    router.bind("tcp://" + node_ip + ":*");
  } catch (const zmq::error_t& e) {
    ready.Fail("worker cannot listen on " + node_ip + ": " + e.what());
    std::_Exit(1);
  }
  WorkerLoop loop(context, env, [&router](transport::Frames& out) {
    try {
      transport::SendFrames(router, out);
    } catch (const zmq::error_t& e) {
      RAYX_LOG(Warning) << "reply failed: " << e.what();
    }
  });
  // The replies this thread handed to ZeroMQ leave before the process ends
  // (an exit straight after a send loses them nearly always): the router
  // closes with a linger and the context's termination waits for its I/O
  // thread to send them. Its monitor stops first (the zap server reads it;
  // libzmq sends monitor events blocking), then the zap server's sockets
  // close; the loop's pulls closed theirs when they returned. Bounded:
  // whatever still holds the context, the process ends within kExitFlushLimit.
  std::function<void(int)> exit_after_replies = [&](int status) {
    auto flushed = std::make_shared<std::promise<void>>();
    std::future<void> done = flushed->get_future();
    std::thread([&router, &zap, &context, flushed] {
      try {
        zmq_socket_monitor(router.handle(), nullptr, 0);
        router.set(zmq::sockopt::linger, static_cast<int>(kExitFlushLimit.count()));
        router.close();
        zap.reset();
        context.close();
      } catch (const zmq::error_t&) {
      }
      flushed->set_value();
    }).detach();
    done.wait_for(kExitFlushLimit + std::chrono::milliseconds(200));
    std::_Exit(status);
  };
  g_exit_after_replies = &exit_after_replies;
  g_loop_thread = std::this_thread::get_id();
  loop.SetHostObserver([verifier](const ActorId& actor) { verifier->AllowActorCallers(actor); });
  // A result holding ObjectRefs: this process's runtime took the holds (the
  // refs' ExportRef), so it exists; its agent is told what the result holds.
  loop.SetHoldContents([](const std::string& container, std::vector<std::string> contents) {
    HoldResultContents(container, std::move(contents));
  });
  if (!env.actor_init.empty()) {
    // A detached actor the head creates (a restart, or one its driver handed
    // over): constructed before this worker is ready, so a failed constructor
    // fails the start (the head counts it). The agent's start limit ends here:
    // a constructor may take as long as it takes (a model to load).
    ready.Constructing();
    Status constructed = loop.ConstructFromFile(env.actor_init);
    if (!constructed.ok()) {
      ready.Fail(constructed.message());
      std::_Exit(1);
    }
  }
  if (env.report_construction) {
    // A detached actor's worker: its agent relays these lines to the head,
    // which takes the actor over from a creator that is gone before its
    // constructor ended, instead of constructing it again.
    loop.SetConstructionObserver([&ready](bool began, const std::string& error) {
      ready.Report(began ? kConstructorBeganLine
                   : error.empty()
                       ? kConstructorSucceededLine
                       : kConstructorFailedPrefix +
                             error.substr(0, protocol::ActorConstructionNotice::kMaxErrorBytes));
    });
  }
  // A task that blocks in a get or wait hands back what is queued behind it
  // (WorkerLoop::ReleaseQueued): the rest of its batch and the messages
  // waiting here, read without blocking (this thread owns the socket; the
  // hook runs on it only, never on a pool thread of a threaded actor).
  loop.SetDrain([&router](const std::function<void(transport::Frames&)>& take) {
    while (true) {
      zmq::message_t part;
      try {
        if (!router.recv(part, zmq::recv_flags::dontwait)) return;  // nothing waits
      } catch (const zmq::error_t&) {
        return;
      }
      transport::Frames frames;
      bool more = part.more();
      frames.push_back(transport::ToFrame(std::move(part)));
      while (more) {  // the rest of a message is there once its first part is
        zmq::message_t next;
        if (!router.recv(next)) break;
        more = next.more();
        frames.push_back(transport::ToFrame(std::move(next)));
      }
      take(frames);
    }
  });
  const std::thread::id loop_thread = std::this_thread::get_id();
  SetCallBlockingHook([&loop, loop_thread] {
    if (std::this_thread::get_id() == loop_thread) loop.ReleaseQueued();
  });
  ready.Ready({{"address", router.get(zmq::sockopt::last_endpoint)}}, env.report_construction);
  while (true) {
    if (loop.deferred_count() > 0) {
      zmq::pollitem_t items[] = {{router.handle(), 0, ZMQ_POLLIN, 0},
                                 {nullptr, loop.completion_fd(), ZMQ_POLLIN, 0}};
      try {
        zmq::poll(items, 2, std::chrono::milliseconds(-1));
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) continue;
        RAYX_LOG(Error) << "poll failed: " << e.what();
        std::_Exit(1);
      }
      if (items[1].revents & ZMQ_POLLIN) loop.CompleteDeferred();
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
    }
    transport::Frames frames;
    try {
      frames = transport::ReceiveFrames(router);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      RAYX_LOG(Error) << "receive failed: " << e.what();
      std::_Exit(1);
    }
    loop.Handle(frames);
  }
}

}  // namespace rayx::detail
