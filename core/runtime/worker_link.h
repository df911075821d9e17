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
  // I/O thread, while the link lives.
  virtual std::unique_ptr<WorkerLink> Connect(const std::string& address, const JobId& job,
                                              const std::optional<transport::ActorKey>& actor_key,
                                              MessageHandler on_message,
                                              LostHandler on_lost) = 0;
};

}  // namespace rayx::detail
