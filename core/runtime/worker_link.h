// The byte pipe to one worker, behind an interface so tests can fake workers.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "rayx/ids.h"
#include "transport/frame.h"
#include "transport/security.h"

namespace rayx::detail {

// One connection's transport: sends whole messages to the worker, and reports
// its replies and its loss through the handlers given to WorkerConnector.
// Owned by its WorkerConnection; used on the I/O thread only.
class WorkerLink {
 public:
  virtual ~WorkerLink() = default;
  // Sends all frames without blocking. False when the worker is gone (then
  // nothing more is sent).
  virtual bool Send(transport::Frames& frames) = 0;
  // Hands the replies that arrived and were not read yet to the message
  // handler now (before a loss reported elsewhere is acted on).
  virtual void ReceiveWaiting() {}
  // The worker is reported gone by someone else (its node's agent, through
  // the head): its replies may still be on their way, and its own
  // disconnect comes after them. Calls `lost` (on the I/O thread, while the
  // link lives) if that disconnect has not come within `wait_ms`; the
  // link's loss handler is called as usual if it comes first. False: this
  // link cannot wait (nothing is called; act on the report now).
  virtual bool AwaitDisconnect(int64_t wait_ms, std::function<void()> lost) {
    (void)wait_ms;
    (void)lost;
    return false;
  }
};

// Opens links to workers (ZmqWorkerConnector is the real one).
class WorkerConnector {
 public:
  using MessageHandler = std::function<void(transport::Frames& frames)>;
  using LostHandler = std::function<void()>;
  virtual ~WorkerConnector() = default;
  // Connects to the worker at `address`, a worker of `job` (nil: this
  // process's own job); `actor_key`, when set, is the key of the actor it
  // hosts, for a job this process holds no credential of. `on_message` receives each reply and `on_lost` the
  // worker's loss (disconnected, never reachable, or not ours to reach), on the
  // I/O thread, while the link lives; every reply the worker sent before it
  // went reaches `on_message` before `on_lost` is called.
  virtual std::unique_ptr<WorkerLink> Connect(const std::string& address, const JobId& job,
                                              const std::optional<transport::ActorKey>& actor_key,
                                              MessageHandler on_message,
                                              LostHandler on_lost) = 0;
};

}  // namespace rayx::detail
