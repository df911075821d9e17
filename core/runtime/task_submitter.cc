// Normal tasks: shape pools, lease requests, pumping, idle lease returns.
#include "runtime/task_submitter.h"

#include <algorithm>

#include <boost/asio/post.hpp>

#include "common/logging.h"
#include "runtime/api_enums.h"

namespace rayx::detail {

namespace {
std::string ShapeKey(const ResourceMap& resources) {
  std::string key;
  for (const auto& [name, amount] : resources) key += name + "=" + FormatAmount(amount) + ";";
  return key;
}
}  // namespace

void ApplyPlacement(const Placement& p, protocol::RequestLeaseRequest* req) {
  req->placement_group_id = PlacementGroupId::FromWire(p.placement_group_id);
  req->bundle_index = p.bundle_index;
  req->group_visible_devices = p.group_visible_devices;
  req->strategy = ToWire(p.strategy);
  req->affinity_node_id = p.affinity_node_id;
  req->affinity_soft = p.affinity_soft;
  req->label_selector = p.label_selector;
}

// One resource shape's queue and pool of leased workers.
struct TaskSubmitter::Shape final : WorkerConnection::Owner {
  TaskSubmitter* submitter = nullptr;
  ResourceMap resources;
  Placement placement;
  std::deque<Task> queue;
  std::vector<std::shared_ptr<WorkerConnection>> workers;
  int lease_requests = 0;
  int64_t lease_requested_at = 0;

  // True once a lease request has waited longer than a worker takes to start
  // (`after_ms`): the cluster has no free slot for this shape, so queue deeper
  // on the workers we have. Until then each worker gets one task at a time and
  // waiting work asks for more workers (spreading slow tasks over the cluster).
  bool Saturated(int64_t now, int64_t after_ms) const {
    return lease_requests > 0 && now - lease_requested_at > after_ms;
  }

  void OnReplies(WorkerConnection&) override { submitter->Pump(*this); }
  void OnCreationFailed(WorkerConnection&, const std::string&) override {}
  void OnLost(WorkerConnection& conn) override { submitter->OnWorkerLost(*this, conn); }
  // After the tasks already waiting (it raised: running it at once again
  // would likely raise again).
  void OnRetry(WorkerConnection&, Task task) override { queue.push_back(std::move(task)); }
  std::function<void()> Recompute(Task task) override {
    return submitter->RecomputeLater(this, std::move(task));
  }
  std::optional<std::string> OnArgumentLost(WorkerConnection&, Task& task,
                                            const protocol::ObjectLocation& lost) override {
    return submitter->RecoverArguments(*this, task, lost);
  }
};

TaskSubmitter::TaskSubmitter(Deps deps, Options options)
    : deps_(deps), options_(std::move(options)) {}

TaskSubmitter::~TaskSubmitter() = default;

void TaskSubmitter::Submit(Task& task, const std::optional<ResourceMap>& resources,
                           const Placement& placement) {
  Shape* shape = ShapeFor(resources, placement);
  deps_.resolver.ResolveThen(task, [this, shape](Task ready) {
    shape->queue.push_back(std::move(ready));
    Pump(*shape);
  });
}

TaskSubmitter::Shape* TaskSubmitter::ShapeFor(const std::optional<ResourceMap>& resources,
                                              const Placement& placement) {
  bool plain = placement.empty();
  if (!resources && plain && default_shape_) return default_shape_;
  ResourceMap wanted = resources ? *resources : ResourceMap{{kCpu, 1}};
  auto& shape = shapes_[ShapeKey(wanted) + (plain ? "" : placement.Key())];
  if (!shape) {
    shape = std::make_unique<Shape>();
    shape->submitter = this;
    shape->resources = std::move(wanted);
    shape->placement = placement;
  }
  if (!resources && plain) default_shape_ = shape.get();
  return shape.get();
}

void TaskSubmitter::Pump(Shape& shape) {
  // Least-loaded worker first, until every worker is full.
  size_t depth = shape.Saturated(deps_.clock.NowMs(), SaturatedAfterMs()) ? kMaxInFlight : 1;
  while (!shape.queue.empty()) {
    WorkerConnection* best = nullptr;
    for (auto& w : shape.workers) {
      if (w->lost() || w->blocked() || w->in_flight() >= depth) continue;
      if (!best || w->in_flight() < best->in_flight()) best = w.get();
    }
    if (!best) break;
    Task task = std::move(shape.queue.front());
    shape.queue.pop_front();
    best->Queue(std::move(task));
  }
  // More workers while work waits; one lease request at a time per shape keeps
  // the head's load per burst small.
  if (!shape.queue.empty() && shape.lease_requests == 0) RequestLease(shape);
}

void TaskSubmitter::RequestLease(Shape& shape) {
  ++shape.lease_requests;
  shape.lease_requested_at = deps_.clock.NowMs();
  protocol::RequestLeaseRequest req;
  req.job_id = options_.job_id;
  req.resources = shape.resources;
  ApplyPlacement(shape.placement, &req);
  if (options_.describe_program) options_.describe_program(&req);
  if (!shape.placement.worker_executable.empty()) {  // a call into another language
    req.executable = shape.placement.worker_executable;
    req.worker_args = shape.placement.worker_args;
    req.worker_env = shape.placement.worker_env;
  }
  Shape* s = &shape;
  deps_.head.RequestLease(req, [this, s](Result<protocol::RequestLeaseReply> r) {
    --s->lease_requests;
    if (r.ok()) {
      int64_t took = deps_.clock.NowMs() - s->lease_requested_at;
      if (fastest_grant_ms_ < 0 || took < fastest_grant_ms_) fastest_grant_ms_ = took;
    }
    if (!r.ok()) {
      // Infeasible, asked wrongly (a GPU amount the head refuses), or the
      // worker could not start: every queued task fails.
      const protocol::TaskErrorKind kind =
          r.status().code() == StatusCode::kInfeasible ? protocol::TaskErrorKind::kInfeasible
          : r.status().code() == StatusCode::kInvalidArgument
              ? protocol::TaskErrorKind::kInvalidArgument
              : protocol::TaskErrorKind::kWorkerStartFailed;
      while (!s->queue.empty()) {
        FailTask(deps_.objects, s->queue.front(), kind, r.status().message(), "");
        s->queue.pop_front();
      }
      return;
    }
    auto conn = std::make_shared<WorkerConnection>(
        WorkerConnection::Info{r->lease_id, r->worker_address, r->node_address, r->worker_pid}, s,
        deps_.objects, deps_.send_queue, deps_.clock);
    conn->Open(deps_.connector);
    s->workers.push_back(conn);
    Pump(*s);
  });
}

int64_t TaskSubmitter::SaturatedAfterMs() const {
  return std::max(kSaturatedAfterMs, 2 * fastest_grant_ms_);
}

void TaskSubmitter::OnWorkerLost(Shape& shape, WorkerConnection& conn) {
  // Never sent: another worker runs them, in their order.
  std::vector<Task> unsent = conn.TakeUnsent();
  for (auto it = unsent.rbegin(); it != unsent.rend(); ++it) shape.queue.push_front(std::move(*it));
  const WorkerConnection::Info& info = conn.info();
  std::string lost = conn.DescribeLoss();
  // The calls it was running: again on another worker while they have retries
  // left (Ray's max_retries), in their order ahead of the waiting ones.
  std::vector<Task> running = conn.TakeInFlight();
  std::vector<Task> again;
  std::vector<Task> failing;
  for (Task& task : running) {
    if (task.retries_left > 0) {
      --task.retries_left;
      ++task.retries_done;
      deps_.objects.CountRetry();
      again.push_back(std::move(task));
      continue;
    }
    failing.push_back(std::move(task));
  }
  Unexplained u{std::move(failing), info.node, lost, !conn.loss_reason().empty(), info.lease_id,
                nullptr};
  if (!u.tasks.empty() && !u.told && !info.lease_id.IsNil() &&
      options_.loss_reason_wait_ms > 0) {
    // The connection dropped before the head said why the worker ended: its
    // notice (LoseLease) follows once the agent reaped the worker (a worker
    // that held much memory takes a while to go), naming the cause (the
    // memory monitor's kill: OutOfMemoryError, not a crash). The lease stays
    // ours meanwhile: given back now, the head would end it and tell nobody.
    const std::string key = info.lease_id.Hex();
    u.timer = std::make_shared<boost::asio::steady_timer>(
        deps_.io, std::chrono::milliseconds(options_.loss_reason_wait_ms));
    u.timer->async_wait([this, key, alive = std::weak_ptr<char>(alive_)](
                            const boost::system::error_code& ec) {
      if (ec || alive.expired()) return;
      auto it = unexplained_.find(key);
      if (it == unexplained_.end()) return;
      Unexplained expired = std::move(it->second);
      unexplained_.erase(it);
      deps_.head.ReturnLease(expired.lease);
      FailUnexplained(expired, "", protocol::TaskErrorKind::kWorkerCrashed);
    });
    auto [it, added] = unexplained_.try_emplace(key, std::move(u));
    if (!added) FailUnexplained(u, "", protocol::TaskErrorKind::kWorkerCrashed);  // a lease lost twice: not waited for again
  } else {
    FailUnexplained(u, "", conn.loss_cause());
    // Give the lease back so its resources are freed.
    deps_.head.ReturnLease(info.lease_id);
  }
  for (auto it = again.rbegin(); it != again.rend(); ++it) shape.queue.push_front(std::move(*it));
  // Dropped later: we may be inside the connection's own handler.
  boost::asio::post(deps_.io, [this, s = &shape, raw = &conn] {
    std::erase_if(s->workers, [raw](const auto& w) { return w.get() == raw; });
    Pump(*s);
  });
}

std::function<void()> TaskSubmitter::RecomputeLater(Shape* shape, Task task) {
  auto kept = std::make_shared<const Task>(std::move(task));
  std::weak_ptr<char> alive = alive_;
  boost::asio::io_context* io = &deps_.io;
  return [this, shape, kept, alive, io] {
    boost::asio::post(*io, [this, shape, kept, alive] {
      if (alive.expired()) return;
      Task again = *kept;
      --again.retries_left;
      ++again.retries_done;
      deps_.objects.CountRetry();
      RAYX_LOG(Warning) << "object " << again.object_id.Hex().substr(0, 16) << " of "
                        << again.DisplayName()
                        << " was lost with its node; running the task again (lineage)";
      shape->queue.push_back(std::move(again));
      Pump(*shape);
    });
  };
}

std::optional<std::string> TaskSubmitter::RecoverArguments(
    Shape& shape, Task& task, const protocol::ObjectLocation& lost) {
  const std::string& node = lost.node_address;
  if (task.argument_recoveries >= kMaxArgumentRecoveries) {
    return "its arguments were lost " + std::to_string(task.argument_recoveries) +
           " times already";
  }
  // Every argument stored by that agent (its object server) is gone with it;
  // the first one decides where resolving starts again.
  size_t first = task.args.size();
  std::optional<std::string> why_not;
  std::vector<std::function<void()>> recomputes;
  for (const auto& [index, location] : task.stored) {
    if (location.object_address != lost.object_address || index >= task.args.size() ||
        !task.args[index].ref) {
      continue;
    }
    const ObjectId& id = task.args[index].ref->id;
    std::function<void()> recompute;
    if (deps_.objects.OnStoredCopyLost(id, location.path, &recompute) ==
        ObjectTable::CopyLost::kLost) {
      why_not = "argument " + std::to_string(index) + " (object " + id.Hex() +
                ") cannot be computed again: it was made by Put, or the task that made it has "
                "no retries left (give that task retries, SetMaxRetries / max_retries, to have "
                "it computed again)";
      break;
    }
    if (recompute) recomputes.push_back(std::move(recompute));
    first = std::min<size_t>(first, index);
  }
  // Entries made pending above wait for their task, also when this call fails.
  for (auto& recompute : recomputes) recompute();
  if (why_not) return why_not;
  if (first == task.args.size()) return "no argument of the call was stored on node " + node;
  RAYX_LOG(Warning) << task.DisplayName() << ": an argument stored on node " << node
                    << " was lost with it; waiting for it to be computed again (lineage)";
  std::erase_if(task.stored, [first](const auto& entry) { return entry.first >= first; });
  task.args_resolved = first;
  ++task.argument_recoveries;
  // Ahead of the waiting tasks: it was sent before them.
  deps_.resolver.ResolveThen(task, [this, s = &shape](Task ready) {
    s->queue.push_front(std::move(ready));
    Pump(*s);
  });
  return std::nullopt;
}

void TaskSubmitter::Tick() {
  int64_t now = deps_.clock.NowMs();
  for (auto& [key, shape] : shapes_) {
    std::vector<std::shared_ptr<WorkerConnection>> keep;
    for (auto& w : shape->workers) {
      if (!w->lost() && w->in_flight() == 0 && shape->queue.empty() &&
          now - w->idle_since() > kIdleLeaseMs) {
        deps_.head.ReturnLease(w->info().lease_id);
        continue;
      }
      keep.push_back(w);
    }
    shape->workers.swap(keep);
    if (!shape->queue.empty()) Pump(*shape);  // saturation may allow deeper queues now
  }
}

bool TaskSubmitter::LoseLease(const LeaseId& lease_id, const std::string& why,
                             protocol::TaskErrorKind cause) {
  if (auto it = unexplained_.find(lease_id.Hex()); it != unexplained_.end()) {
    // The head ended the lease itself (that is why it told us).
    Unexplained u = std::move(it->second);
    unexplained_.erase(it);
    if (u.timer) u.timer->cancel();
    FailUnexplained(u, why, cause);
    return true;
  }
  for (auto& [key, shape] : shapes_) {
    for (auto& w : shape->workers) {
      if (w->info().lease_id == lease_id) {
        std::shared_ptr<WorkerConnection> keep = w;  // OnWorkerLost drops it later
        keep->LoseReported(why, cause);
        return true;
      }
    }
  }
  return false;
}

void TaskSubmitter::FailUnexplained(Unexplained& u, const std::string& why,
                                    protocol::TaskErrorKind cause) {
  const std::string lost = why.empty() ? u.lost : u.lost + ": " + why;
  const bool said = u.told || !why.empty();
  for (Task& task : u.tasks) {
    std::string tries = task.retries_done > 0
                            ? " (the last of " + std::to_string(task.retries_done + 1) + " tries)"
                            : "";
    FailTask(deps_.objects, task, cause,
             lost + " while running this call" + tries +
                 (said ? "" : " (it crashed or was killed; its log is in that node's session logs)"),
             u.node);
  }
  u.tasks.clear();
}

void TaskSubmitter::Clear() {
  for (auto& [key, u] : unexplained_) {
    if (u.timer) u.timer->cancel();
    deps_.head.ReturnLease(u.lease);
  }
  unexplained_.clear();  // their objects fail with everything pending (shutdown)
  for (auto& [key, shape] : shapes_) shape->workers.clear();
}

size_t TaskSubmitter::TEST_default_workers() {
  return default_shape_ ? default_shape_->workers.size() : 0;
}

}  // namespace rayx::detail
