// Worker process management on a node.
#include "agent/worker_pool.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read_until.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "common/process_spawn.h"
#include "common/ready_pipe.h"
#include "protocol/codec.h"
#include "rayx/cluster_status.h"
#include "worker/worker_env.h"
#include "transport/security.h"

namespace rayx::worker {

namespace {

// Where a worker finds its counter page (WorkerEnv::counters_fd); 3 is its
// start-up pipe.
constexpr int kCountersFd = 4;

}  // namespace

WorkerPool::WorkerPool(boost::asio::io_context& io, Options options)
    : io_(io), options_(std::move(options)) {}

WorkerPool::~WorkerPool() {
  stopping_ = true;  // no queued start may run after this
  KillAll();
}

size_t WorkerPool::MaxStarting() const {
  if (options_.max_starting > 0) return options_.max_starting;
  return std::max<size_t>(2, std::thread::hardware_concurrency());
}

void WorkerPool::Start(const protocol::StartWorkerRequest& request, StartCallback done) {
  bool queued = std::any_of(queued_.begin(), queued_.end(), [&](const Queued& q) {
    return q.request.lease_id == request.lease_id;
  });
  if (workers_.count(request.lease_id) || queued) {
    done(Status::AlreadyExists("lease " + request.lease_id.Hex() + " already has a worker"));
    return;
  }
  if (starting_ >= MaxStarting()) {
    queued_.push_back(Queued{request, std::move(done)});
    return;
  }
  StartNow(request, std::move(done));
}

void WorkerPool::StartEnded() {
  if (starting_ > 0) --starting_;
  if (stopping_ || queued_.empty()) return;
  // Not from inside the caller's handler: the next start runs on its own turn.
  boost::asio::post(io_, [this, guard = std::weak_ptr<int>(alive_)] {
    if (guard.expired()) return;  // the pool is gone
    while (starting_ < MaxStarting() && !queued_.empty()) {
      Queued next = std::move(queued_.front());
      queued_.pop_front();
      StartNow(next.request, std::move(next.done));
    }
  });
}

void WorkerPool::StartNow(const protocol::StartWorkerRequest& request, StartCallback done) {
  if (request.executable.empty() || ::access(request.executable.c_str(), X_OK) != 0) {
    const char* why = request.executable.empty() ? "no executable given" : std::strerror(errno);
    done(Status::NotFound("cannot run '" + request.executable + "' on node " + options_.node_ip +
                          ": " + why +
                          ". Workers run the driver's own executable, which must exist at the "
                          "same path on every node"));
    return;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    done(Status::Internal(std::string("pipe2: ") + std::strerror(errno)));
    return;
  }
  std::string log_path =
      options_.log_dir + "/worker-" + request.lease_id.Hex().substr(0, 12) + ".log";
  int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  WorkerEnv worker_env;
  worker_env.ready_fd = 3;
  worker_env.node_ip = options_.node_ip;
  worker_env.head_address = request.head_address;
  worker_env.job_id = request.job_id;
  worker_env.lease_id = request.lease_id;
  if (!options_.token.empty()) {
    worker_env.job_secret = transport::Credential::JobSecret(options_.token, request.job_id);
    worker_env.cluster_key = transport::Credential::Cluster(options_.token).CurvePublicKey();
  }
  worker_env.wire_security = options_.wire_security;
  worker_env.store_dir = options_.store_dir;
  worker_env.checkpoint_dir = options_.checkpoint_dir;
  worker_env.object_address = object_address_;
  worker_env.gpu_ids = GpuDevicesOf(request.gpu_ids, options_.gpu_devices);
  if (!request.visible_gpu_ids.empty()) {
    worker_env.visible_gpu_ids = GpuDevicesOf(request.visible_gpu_ids, options_.gpu_devices);
    worker_env.local_rank = request.local_rank;
  }
  worker_env.package_hash = request.package_hash;
  worker_env.package_dir = request.package_dir;
  worker_env.report_construction = request.report_construction;
  // The page the worker counts its work into (fd 4 in the worker).
  std::unique_ptr<WorkCounters> counters;
  if (auto page = WorkCounters::CreateShared(); page.ok()) {
    counters = std::move(*page);
    worker_env.counters_fd = kCountersFd;
  } else if (!pages_refused_) {
    pages_refused_ = true;
    RAYX_LOG(Warning) << "this node's workers' tasks and collective operations go uncounted "
                      << "in the cluster's metrics: " << page.status();
  }
  if (!request.init.function.empty()) {
    // The actor to construct before the worker is ready: in a file (the
    // arguments are bytes), which the worker reads and removes.
    std::string init_path =
        options_.log_dir + "/worker-" + request.lease_id.Hex().substr(0, 12) + ".actor-init";
    std::ofstream out(init_path, std::ios::binary | std::ios::trunc);
    std::string bytes = protocol::Encode(request.init);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      if (log_fd >= 0) ::close(log_fd);
      ::close(fds[0]);
      ::close(fds[1]);
      done(Status::Internal("cannot write " + init_path + " for the actor's restart"));
      return;
    }
    worker_env.actor_init = init_path;
  }
  std::vector<std::string> env;
  // The caller's variables first, so the agent's own (RAYX_*, CUDA_VISIBLE_DEVICES,
  // CUDA_DEVICE_ORDER) win.
  for (const auto& [name, value] : request.worker_env) {
    if (name.empty() || name.find('=') != std::string::npos || name.rfind("RAYX_", 0) == 0 ||
        name == WorkerEnv::kCudaVisibleDevices || name == WorkerEnv::kCudaDeviceOrder) {
      continue;
    }
    env.push_back(name + "=" + value);
  }
  for (const char* name : WorkerEnv::kSocketInterfaceVariables) {
    if (options_.socket_interface.empty() || request.worker_env.count(name) || std::getenv(name)) {
      continue;
    }
    env.push_back(std::string(name) + "=" + options_.socket_interface);
  }
  for (const auto& [name, value] : worker_env.Encode()) env.push_back(name + "=" + value);
  if (options_.memory_usage_threshold > 0 && options_.memory_usage_threshold < 1) {
    env.push_back("RAYX_MEMORY_USAGE_THRESHOLD=" +
                  std::to_string(options_.memory_usage_threshold));
  }
  detail::SpawnOptions launch;
  launch.argv.push_back(request.executable);
  launch.argv.insert(launch.argv.end(), request.worker_args.begin(), request.worker_args.end());
  launch.set_env = std::move(env);
  // Only a rank that sees its group's devices is told its position (Encode);
  // one inherited from the agent's own environment would point NCCL at
  // another worker's GPU. A worker acts for its job: no cluster token.
  launch.unset_env.push_back(WorkerEnv::kLocalRank);
  for (const char* name : WorkerEnv::kClusterTokenVariables) launch.unset_env.push_back(name);
  launch.cwd = request.working_dir;
  launch.group = detail::SpawnOptions::Group::kNewSession;
  launch.die_with_parent = true;
  launch.stdin_fd = detail::SpawnOptions::kDevNull;
  if (log_fd >= 0) {
    launch.stdout_fd = log_fd;
    launch.stderr_fd = log_fd;
  }
  launch.pass_fds = {{fds[1], 3}};  // the start pipe
  if (counters) launch.pass_fds.emplace_back(counters->fd(), kCountersFd);
  launch.error_fd = fds[1];
  launch.error_prefix = "ERROR ";
  Result<pid_t> spawned = detail::Spawn(launch);
  ::close(fds[1]);
  if (log_fd >= 0) ::close(log_fd);
  if (!spawned.ok()) {
    ::close(fds[0]);
    done(spawned.status());
    return;
  }
  const pid_t pid = *spawned;

  ++starting_;
  Worker& worker = workers_[request.lease_id];
  worker.pid = pid;
  worker.for_actor = request.for_actor;
  worker.started = ++starts_;
  worker.lease_id = request.lease_id;
  worker.reports_construction = request.report_construction;
  worker.log_path = log_path;
  worker.job_id = request.job_id;
  worker.on_start = std::move(done);
  worker.counters = std::move(counters);
  worker.start = std::make_shared<StartPipe>(io_, fds[0]);
  worker.timer = std::make_unique<boost::asio::steady_timer>(io_);
  LeaseId lease_id = request.lease_id;
  worker.timer->expires_after(std::chrono::milliseconds(options_.start_timeout_ms));
  worker.timer->async_wait([this, lease_id, guard = std::weak_ptr<int>(alive_)](
                               const boost::system::error_code& ec) {
    if (ec || guard.expired()) return;  // cancelled, or the pool is gone
    const int64_t ms = options_.start_timeout_ms;
    std::string limit = ms % 1000 == 0 ? std::to_string(ms / 1000) + " s"
                                       : std::to_string(ms) + " ms";
    FinishStart(lease_id, Status::TimedOut("the worker did not start within " + limit +
                                           ": did its main() call rayx::Init(argc, argv) first?"));
  });
  ReadStartLine(lease_id);
}

void WorkerPool::ReadStartLine(const LeaseId& lease_id) {
  std::shared_ptr<StartPipe> start = workers_.at(lease_id).start;
  boost::asio::async_read_until(
      start->pipe, start->buffer, '\n',
      [this, lease_id, start, guard = std::weak_ptr<int>(alive_)](
          const boost::system::error_code& ec, size_t) {
        if (guard.expired()) return;  // ended by the pool's destruction
        auto it = workers_.find(lease_id);
        if (it == workers_.end() || it->second.ready || !it->second.on_start) return;
        std::string line;
        if (!ec) {
          std::istream in(&start->buffer);
          std::getline(in, line);
        }
        if (!ec && line == kConstructingLine && !it->second.constructing) {
          // Up, and running its actor's constructor (a detached actor the head
          // creates): that takes what it takes, like any constructor. No start
          // limit from here on; its exit still ends the start.
          Worker& w = it->second;
          w.constructing = true;
          w.timer->cancel();
          StartEnded();  // its interpreter is up: the next start may go
          RAYX_LOG(Info) << "worker pid " << w.pid << " for lease " << lease_id.Short()
                         << " runs its actor's constructor";
          ReadStartLine(lease_id);
          return;
        }
        std::map<std::string, std::string> fields;
        if (ParseReadyLine(line, &fields) && fields.count("address")) {
          protocol::StartWorkerReply reply;
          reply.lease_id = lease_id;
          reply.worker_address = fields["address"];
          reply.worker_pid = it->second.pid;
          FinishStart(lease_id, reply);
          return;
        }
        std::string why = line.rfind("ERROR ", 0) == 0
                              ? line.substr(6)
                              : "the worker exited during start-up (did its main() call "
                                "rayx::Init(argc, argv)?); see " + it->second.log_path;
        FinishStart(lease_id, Status::Unavailable(why));
      });
}

void WorkerPool::ReadConstructionLine(const LeaseId& lease_id) {
  std::shared_ptr<StartPipe> start = workers_.at(lease_id).start;
  boost::asio::async_read_until(
      start->pipe, start->buffer, '\n',
      [this, lease_id, start, guard = std::weak_ptr<int>(alive_)](
          const boost::system::error_code& ec, size_t) {
        if (guard.expired() || ec == boost::asio::error::operation_aborted) return;
        auto it = workers_.find(lease_id);
        if (it == workers_.end() || !it->second.ready || !start->pipe.is_open()) return;
        Worker& worker = it->second;
        if (ec == boost::asio::error::eof) {
          // The worker exits (its exit notice follows), or its program closed
          // the pipe: if it still runs a while later, nobody follows it.
          pid_t pid = worker.pid;
          worker.timer->expires_after(std::chrono::milliseconds(kUnfollowedAfterEofMs));
          worker.timer->async_wait([this, lease_id, pid, guard = std::weak_ptr<int>(alive_)](
                                       const boost::system::error_code& waited) {
            if (waited || guard.expired()) return;
            auto w = workers_.find(lease_id);
            if (w == workers_.end() || w->second.pid != pid) return;  // it exited
            StopFollowing(lease_id, "closed its start-up pipe");
          });
          return;
        }
        if (ec) {
          StopFollowing(lease_id, "wrote an overlong line on its start-up pipe");
          return;
        }
        std::string line;
        std::istream in(&start->buffer);
        std::getline(in, line);
        protocol::ActorConstructionNotice notice;
        notice.lease_id = lease_id;
        if (line == kConstructorBeganLine) {
          notice.stage = protocol::ActorConstructionNotice::kBegan;
        } else if (line == kConstructorSucceededLine) {
          notice.stage = protocol::ActorConstructionNotice::kSucceeded;
        } else if (line.rfind(kConstructorFailedPrefix, 0) == 0) {
          notice.stage = protocol::ActorConstructionNotice::kFailed;
          notice.error = line.substr(std::strlen(kConstructorFailedPrefix));
        } else {
          StopFollowing(lease_id, "wrote an unknown line on its start-up pipe");
          return;
        }
        if (on_construction_) on_construction_(notice);
        if (notice.stage == protocol::ActorConstructionNotice::kBegan) {
          ReadConstructionLine(lease_id);
        } else {
          boost::system::error_code ignored;
          start->pipe.close(ignored);  // said all it will say
        }
      });
}

void WorkerPool::StopFollowing(const LeaseId& lease_id, const std::string& why) {
  auto it = workers_.find(lease_id);
  if (it == workers_.end()) return;
  RAYX_LOG(Warning) << "worker pid " << it->second.pid << " of lease " << lease_id.Short() << " "
                    << why << "; its constructor is no longer followed";
  boost::system::error_code ignored;
  it->second.start->pipe.close(ignored);
  protocol::ActorConstructionNotice notice;
  notice.lease_id = lease_id;
  notice.stage = protocol::ActorConstructionNotice::kUnfollowed;
  if (on_construction_) on_construction_(notice);
}

void WorkerPool::FinishStart(const LeaseId& lease_id, Result<protocol::StartWorkerReply> result) {
  auto it = workers_.find(lease_id);
  if (it == workers_.end() || !it->second.on_start) return;
  Worker& worker = it->second;
  auto done = std::move(worker.on_start);
  worker.on_start = nullptr;
  if (!worker.constructing) StartEnded();  // else ended when it began constructing
  worker.timer->cancel();
  boost::system::error_code ignored;
  if (!result.ok() || !worker.reports_construction) worker.start->pipe.close(ignored);
  if (result.ok()) {
    worker.ready = true;
    RAYX_LOG(Info) << "worker pid " << worker.pid << " for lease " << lease_id.Short()
                   << " listens on " << result->worker_address;
    if (worker.reports_construction) ReadConstructionLine(lease_id);
  } else {
    RAYX_LOG(Warning) << "worker for lease " << lease_id.Short()
                      << " failed to start: " << result.status().message();
    Kill(lease_id);
  }
  done(std::move(result));
}

pid_t WorkerPool::Kill(const LeaseId& lease_id) {
  auto waiting = std::find_if(queued_.begin(), queued_.end(),
                              [&](const Queued& q) { return q.request.lease_id == lease_id; });
  if (waiting != queued_.end()) {  // never started: nothing to kill
    auto done = std::move(waiting->done);
    queued_.erase(waiting);
    done(Status::Cancelled("the lease ended while its worker waited to start"));
    return 0;
  }
  auto it = workers_.find(lease_id);
  if (it == workers_.end()) return 0;
  pid_t pid = it->second.pid;
  ::kill(-it->second.pid, SIGKILL);
  ::kill(it->second.pid, SIGKILL);
  if (it->second.on_start) {
    auto done = std::move(it->second.on_start);
    it->second.on_start = nullptr;
    if (!it->second.constructing) StartEnded();
    done(Status::Cancelled("the lease ended while its worker was starting"));
  }
  // Reaped (and forgotten) on SIGCHLD; the entry goes now so the lease is free.
  boost::system::error_code ignored;
  if (it->second.start) it->second.start->pipe.close(ignored);
  if (it->second.timer) it->second.timer->cancel();
  Erase(it);
  return pid;
}

std::vector<pid_t> WorkerPool::Pids() const {
  std::vector<pid_t> out;
  out.reserve(workers_.size());
  for (const auto& [lease_id, worker] : workers_) out.push_back(worker.pid);
  return out;
}

std::vector<WorkerPool::Running> WorkerPool::RunningWorkers() const {
  std::vector<Running> out;
  for (const auto& [lease_id, worker] : workers_) {
    if (worker.ready) {
      out.push_back({worker.pid, lease_id, worker.for_actor, worker.started, worker.job_id,
                     worker.log_path});
    }
  }
  return out;
}

std::optional<LeaseId> WorkerPool::LeaseOf(pid_t pid) const {
  for (const auto& [lease_id, worker] : workers_) {
    if (worker.pid == pid) return lease_id;
  }
  return std::nullopt;
}

void WorkerPool::Count(Worker& w) {
  if (!w.counters) return;
  WorkCounts now = w.counters->Read();
  counts_.AddGrowth(now, w.counted);
  w.counted = now;
}

void WorkerPool::Erase(std::map<LeaseId, Worker>::iterator it) {
  Count(it->second);
  workers_.erase(it);
}

WorkCounts WorkerPool::ReadCounters() {
  for (auto& [lease_id, worker] : workers_) Count(worker);
  return counts_;
}

void WorkerPool::KillAll() {
  while (!queued_.empty()) Kill(queued_.front().request.lease_id);
  while (!workers_.empty()) Kill(workers_.begin()->first);
}

WorkerPool::ChildExit WorkerPool::OnChildExit(pid_t pid, int status) {
  for (auto it = workers_.begin(); it != workers_.end(); ++it) {
    if (it->second.pid != pid) continue;
    std::string how = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                          : "exited with status " +
                                                std::to_string(WEXITSTATUS(status));
    RAYX_LOG(Warning) << "worker pid " << pid << " of lease " << it->first.Short() << " " << how;
    ::kill(-pid, SIGKILL);  // what it started goes with it
    if (it->second.on_start) {
      FinishStart(it->first, Status::Unavailable("the worker " + how + " during start-up; see " +
                                                 it->second.log_path));
      return ChildExit::kDuringStart;
    }
    boost::system::error_code ignored;
    if (it->second.start) it->second.start->pipe.close(ignored);
    if (it->second.ready && exited_.size() < kMaxExited) {
      const Worker& w = it->second;
      exited_.push_back({w.pid, it->first, w.for_actor, w.started, w.job_id, w.log_path});
    }
    Erase(it);
    return ChildExit::kRunning;
  }
  return ChildExit::kNotOurs;
}

}  // namespace rayx::worker
