// rayx-head-scale: a real head (`rayx start --head`) against N simulated node
// agents that speak the real protocol over real ZeroMQ connections (CURVE,
// the cluster token): each registers, heartbeats at the head's period,
// answers the head's worker starts at once and ignores the rest. For each N it
// measures the head's CPU (from /proc: its own user + system time) and memory
// (VmRSS) while the nodes only heartbeat, then lease grants through one
// driver (RegisterDriver, RequestLease with K in flight, ReturnLease each
// grant): grants per second, the head's CPU per grant, and their latency, p50
// and p99; placement groups of 64 one-CPU bundles, STRICT_SPREAD, created one
// after another (create, wait until CREATED, remove); the head killed
// (SIGKILL) and started again (`rayx start --head` on its session) with every
// node rejoining; and 100 nodes falling silent at once, until the head's
// status shows them dead.
//
// The simulated agents run in this one process over one epoll loop (each
// socket's ZMQ_FD: a pass costs what is ready, not a look at every node), so
// on a small machine they share its CPUs with the head: the head's own CPU is
// read from /proc and is the figure that matters; the grant rate is a floor.
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/flags.h"
#include "common/session_dir.h"
#include "protocol/messages.h"
#include "protocol/placement_messages.h"
#include "rayx/version.h"
#include "transport/message.h"
#include "transport/security.h"
#include "transport/zmq_frame.h"

namespace {

using Clock = std::chrono::steady_clock;
using rayx::protocol::MessageType;
namespace fs = std::filesystem;
namespace protocol = rayx::protocol;
namespace transport = rayx::transport;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
      .count();
}

int Run(const std::vector<std::string>& argv) {
  std::string joined;
  for (const auto& a : argv) joined += (joined.empty() ? "" : " ") + a;
  return std::system(joined.c_str());
}

// The cluster being measured, stopped (`rayx stop`: the pids it recorded) and
// removed whatever way this program ends.
std::string g_rayx, g_temp_dir;
void StopCluster() {
  if (g_temp_dir.empty()) return;
  Run({g_rayx, "stop", "--temp-dir", g_temp_dir, ">/dev/null", "2>&1"});
  fs::remove_all(g_temp_dir);
  g_temp_dir.clear();
}

[[noreturn]] void Die(const std::string& why) {
  std::cerr << "rayx-head-scale: " << why << "\n";
  StopCluster();
  std::exit(1);
}

// The head process's CPU seconds so far and its resident memory in MiB.
std::pair<double, double> HeadUsage(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::istringstream rest(text.substr(text.rfind(')') + 2));
  std::vector<std::string> fields;
  for (std::string f; rest >> f;) fields.push_back(f);
  double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  double cpu = fields.size() > 13 ? (std::stod(fields[11]) + std::stod(fields[12])) / ticks : 0;
  double rss_mib = 0;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) rss_mib = std::stod(line.substr(6)) / 1024;
  }
  return {cpu, rss_mib};
}

struct SimNode {
  zmq::socket_t socket;
  rayx::NodeId id;
  uint64_t epoch = 0;
  uint64_t seq = 0;
  int64_t next_beat_ms = 0;
  bool registered = false;
  bool rejoining = false;  // asked the restarted head for its id back
  bool silent = false;     // "died": sends nothing more
  std::string address;
};

struct Figures {
  int nodes = 0;
  double register_s = 0;
  double idle_cpu_pct = 0;
  double rss_mib = 0;
  double grants_per_s = 0;
  double grant_cpu_us = 0;  // the head's CPU per grant, its idle (heartbeat) rate taken out
  double p50_ms = 0, p99_ms = 0;
  double group_p50_ms = 0, groups_per_s = 0;  // 0: not measured (under 64 nodes)
  double restart_s = 0, rejoin_s = 0;          // `rayx start` itself; until all rejoined
  double death_s = 0;                          // 100 silent nodes until shown dead
};

class Harness {
 public:
  Harness(std::string bin_dir, int64_t idle_ms, int leases, int inflight)
      : bin_dir_(std::move(bin_dir)), idle_ms_(idle_ms), leases_(leases), inflight_(inflight) {
    context_.set(zmq::ctxopt::max_sockets, 70000);  // a socket per simulated node
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_ < 0) Die("epoll_create1 failed");
  }

  Figures Measure(int n) {
    Figures f;
    f.nodes = n;
    std::string temp = (fs::temp_directory_path() / ("rayx-head-scale-" + std::to_string(getpid()) +
                                                     "-" + std::to_string(n)))
                           .string();
    fs::create_directories(temp);
    g_rayx = bin_dir_ + "/rayx";
    g_temp_dir = temp;
    if (Run({bin_dir_ + "/rayx", "start", "--head", "--port", "0", "--num-cpus", "0",
             "--num-gpus", "0", "--node-ip-address", "127.0.0.1", "--temp-dir", temp,
             ">/dev/null"}) != 0) {
      Die("rayx start --head failed (temp dir " + temp + ")");
    }
    auto cluster = rayx::detail::FindLocalCluster(temp);
    if (!cluster.ok()) Die(cluster.status().message());
    pid_t head = HeadPid(temp);
    if (head == 0) Die("no head pid recorded under " + temp);
    address_ = "tcp://" + cluster->address;
    security_ = transport::ClientSecurity::ClusterToHead(cluster->token);
    token_ = cluster->token;

    int64_t t0 = NowMs();
    nodes_.clear();
    dirty_.clear();
    registered_ = 0;
    nodes_.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) AddNode(i);
    PumpUntil([&] { return registered_ == n; }, 120000, "every simulated node to register");
    f.register_s = static_cast<double>(NowMs() - t0) / 1000;

    // Idle: heartbeats only.
    PumpFor(2000);  // settle
    double cpu0 = HeadUsage(head).first;
    int64_t start = NowMs();
    PumpFor(idle_ms_);
    auto [cpu1, rss1] = HeadUsage(head);
    f.idle_cpu_pct = 100 * (cpu1 - cpu0) / (static_cast<double>(NowMs() - start) / 1000);
    f.rss_mib = rss1;

    MeasureLeases(f, head);
    if (n >= 64) MeasureGroups(f);
    FinishJob();
    MeasureRestart(f, cluster->address, temp);
    if (n >= 200) MeasureDeaths(f, 100);
    driver_.reset();
    nodes_.clear();
    StopCluster();
    return f;
  }

 private:
  void AddNode(int i) {
    SimNode node{zmq::socket_t(context_, zmq::socket_type::dealer)};
    node.socket.set(zmq::sockopt::linger, 0);
    node.socket.set(zmq::sockopt::routing_id, "sim-node-" + std::to_string(i));
    transport::MakeClient(node.socket, security_);
    node.socket.connect(address_);
    node.address = "10." + std::to_string((i >> 16) & 255) + "." + std::to_string((i >> 8) & 255) +
                   "." + std::to_string(i & 255);
    Send(node, Registration(node), 1);
    nodes_.push_back(std::move(node));
    Watch(nodes_.back().socket, static_cast<uint64_t>(i));
    dirty_.push_back(static_cast<size_t>(i));
  }
  // ZMQ_FD signals that the socket may have something to read; a socket is
  // drained until it has nothing (which also clears the signal).
  void Watch(zmq::socket_t& socket, uint64_t key) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = key;
    if (epoll_ctl(epoll_, EPOLL_CTL_ADD, socket.get(zmq::sockopt::fd), &event) != 0) {
      Die("epoll_ctl failed");
    }
  }
  protocol::RegisterNodeRequest Registration(const SimNode& node) const {
    protocol::RegisterNodeRequest req;
    req.token = token_;
    req.rayx_version = rayx::kRayxVersion;
    req.address = node.address;
    req.hostname = "sim-" + node.address;
    req.agent_pid = 100000 + static_cast<int>(&node - nodes_.data());
    req.resources = {{"CPU", 8}, {"GPU", 0}, {"memory", 32e9}};
    req.object_address = "tcp://" + node.address + ":1";
    req.store_dir = "/dev/shm/sim";
    return req;
  }

  template <typename T>
  void Send(SimNode& node, const T& body, uint64_t id) {
    transport::Frames frames = transport::MakeMessage(body, id);
    transport::SendFrames(node.socket, frames, zmq::send_flags::dontwait);
    // A send can take in what arrived meanwhile without ZMQ_FD saying so
    // again: the socket is read on the next pass.
    if (&node >= nodes_.data() && &node < nodes_.data() + nodes_.size()) {
      dirty_.push_back(static_cast<size_t>(&node - nodes_.data()));
    }
  }

  void OnNodeMessage(SimNode& node, transport::Frames& frames) {
    if (frames.size() < 2) return;
    auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(frames[0]));
    if (!env.ok()) return;
    std::string_view body = transport::FrameView(frames[1]);
    switch (static_cast<MessageType>(env->t)) {
      case MessageType::kRegisterNodeReply: {
        auto reply = protocol::Decode<protocol::RegisterNodeReply>(body);
        if (!reply.ok()) Die("bad RegisterNodeReply");
        node.id = reply->node_id;
        node.epoch = reply->epoch;
        period_ms_ = reply->heartbeat_period_ms;
        if (node.rejoining) {
          node.rejoining = false;
          node.registered = true;
          ++rejoined_;
          return;
        }
        // Spread over a period, as agents started at different times are.
        node.next_beat_ms = NowMs() + (static_cast<int64_t>(registered_) * 7919) % period_ms_;
        node.registered = true;
        ++registered_;
        return;
      }
      case MessageType::kStartWorkerRequest: {
        auto req = protocol::Decode<protocol::StartWorkerRequest>(body);
        if (!req.ok()) return;
        protocol::StartWorkerReply started;
        started.lease_id = req->lease_id;
        started.worker_address = "tcp://" + node.address + ":2";
        started.worker_pid = 4242;
        started.epoch = node.epoch;
        Send(node, started, env->id);
        return;
      }
      case MessageType::kErrorReply: {
        auto error = protocol::Decode<protocol::ErrorReply>(body);
        if (error.ok()) Die("the head refused a simulated node: " + error->message);
        return;
      }
      case MessageType::kHeartbeatReply: {
        auto reply = protocol::Decode<protocol::HeartbeatReply>(body);
        if (!reply.ok() || reply->known || node.rejoining) return;
        if (!reply->rejoin) Die("the head forgot simulated node " + node.address);
        // A restarted head: ask for the same id back, running nothing.
        protocol::RegisterNodeRequest req = Registration(node);
        req.rejoin = true;
        req.previous_node_id = node.id;
        req.previous_epoch = node.epoch;
        node.rejoining = true;
        node.registered = false;  // no heartbeat until the reply
        Send(node, req, 1);
        return;
      }
      default:
        return;  // kills, job ends: nothing to do
    }
  }

  void Beat(int64_t now) {
    for (auto& node : nodes_) {
      if (!node.registered || node.silent || node.next_beat_ms > now) continue;
      node.next_beat_ms += period_ms_;
      protocol::HeartbeatRequest beat;
      beat.node_id = node.id;
      beat.seq = ++node.seq;
      beat.epoch = node.epoch;
      // As NodeAgent: a reply about once a second.
      beat.want_reply = node.seq % static_cast<uint64_t>(std::max<int64_t>(1, 1000 / period_ms_)) == 0;
      Send(node, beat, 2);
    }
  }

  // One pass: every socket with something to read is drained.
  void PumpOnce(int timeout_ms) {
    epoll_event events[512];
    int ready = epoll_wait(epoll_, events, 512, dirty_.empty() && !driver_dirty_ ? timeout_ms : 0);
    for (int e = 0; e < ready; ++e) {
      if (events[e].data.u64 == kDriverKey) {
        driver_dirty_ = true;
      } else {
        dirty_.push_back(static_cast<size_t>(events[e].data.u64));
      }
    }
    std::vector<size_t> work;
    work.swap(dirty_);
    for (size_t i : work) {
      if (i < nodes_.size()) DrainNode(nodes_[i]);
    }
    if (driver_ && driver_dirty_) {
      driver_dirty_ = false;
      DrainDriver();
    }
    Beat(NowMs());
  }
  void DrainNode(SimNode& node) {
    for (;;) {
      transport::Frames frames;
      bool more = true, got = false;
      while (more) {
        zmq::message_t part;
        if (!node.socket.recv(part, zmq::recv_flags::dontwait)) break;
        got = true;
        more = part.more();
        frames.push_back(transport::ToFrame(std::move(part)));
      }
      if (!got) return;
      if (!node.silent) OnNodeMessage(node, frames);  // a "dead" node reads and ignores
    }
  }

  template <typename Pred>
  void PumpUntil(Pred done, int64_t timeout_ms, const std::string& what) {
    int64_t deadline = NowMs() + timeout_ms;
    while (!done()) {
      if (NowMs() > deadline) Die("timed out waiting for " + what);
      PumpOnce(5);
    }
  }
  void PumpFor(int64_t ms) {
    int64_t end = NowMs() + ms;
    while (NowMs() < end) PumpOnce(5);
  }

  // ---- The driver ----
  void SendDriver(const auto& body, uint64_t id) {
    transport::Frames frames = transport::MakeMessage(body, id);
    transport::SendFrames(*driver_, frames);
    driver_dirty_ = true;
  }
  void RequestLease() {
    protocol::RequestLeaseRequest req;
    req.job_id = job_;
    req.resources = {{"CPU", 1}};
    req.executable = "/bin/true";
    uint64_t id = ++next_request_;
    sent_at_[id] = Clock::now();
    SendDriver(req, id);
  }
  void DrainDriver() {
    for (;;) {
      transport::Frames frames;
      bool more = true, got = false;
      while (more) {
        zmq::message_t part;
        if (!driver_->recv(part, zmq::recv_flags::dontwait)) break;
        got = true;
        more = part.more();
        frames.push_back(transport::ToFrame(std::move(part)));
      }
      if (!got || frames.size() < 2) return;
      auto env = protocol::Decode<protocol::Envelope>(transport::FrameView(frames[0]));
      if (!env.ok()) continue;
      std::string_view body = transport::FrameView(frames[1]);
      if (env->t == static_cast<uint16_t>(MessageType::kRegisterDriverReply)) {
        auto reply = protocol::Decode<protocol::RegisterDriverReply>(body);
        if (reply.ok()) job_ = reply->job_id;
      } else if (env->t == static_cast<uint16_t>(MessageType::kRequestLeaseReply)) {
        auto grant = protocol::Decode<protocol::RequestLeaseReply>(body);
        auto sent = sent_at_.find(env->id);
        if (!grant.ok() || sent == sent_at_.end()) continue;
        latencies_ms_.push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - sent->second).count());
        sent_at_.erase(sent);
        protocol::ReturnLeaseRequest back;
        back.lease_id = grant->lease_id;
        SendDriver(back, ++next_request_);
        ++granted_;
      } else if (env->t == static_cast<uint16_t>(MessageType::kCreatePlacementGroupReply)) {
        auto reply = protocol::Decode<protocol::CreatePlacementGroupReply>(body);
        if (!reply.ok()) Die("bad CreatePlacementGroupReply");
        protocol::WaitPlacementGroupRequest wait;
        wait.placement_group_id = reply->group.placement_group_id;
        wait.timeout_ms = 30000;
        SendDriver(wait, ++next_request_);
      } else if (env->t == static_cast<uint16_t>(MessageType::kWaitPlacementGroupReply)) {
        auto reply = protocol::Decode<protocol::WaitPlacementGroupReply>(body);
        if (!reply.ok() || reply->group.state != protocol::PlacementGroupState::kCreated) {
          Die("a placement group was not created: " + (reply.ok() ? reply->group.reason : "?"));
        }
        group_ms_.push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - group_sent_).count());
        protocol::RemovePlacementGroupRequest remove;
        remove.placement_group_id = reply->group.placement_group_id;
        SendDriver(remove, ++next_request_);
      } else if (env->t == static_cast<uint16_t>(MessageType::kRemovePlacementGroupReply)) {
        ++groups_done_;
      } else if (env->t == static_cast<uint16_t>(MessageType::kGetClusterStatusReply)) {
        auto reply = protocol::Decode<protocol::GetClusterStatusReply>(body);
        if (!reply.ok()) continue;
        alive_ = static_cast<int>(std::count_if(reply->status.nodes.begin(), reply->status.nodes.end(),
                                                [](const auto& n) { return n.alive; }));
        status_pending_ = false;
      } else if (env->t == static_cast<uint16_t>(MessageType::kErrorReply)) {
        auto error = protocol::Decode<protocol::ErrorReply>(body);
        Die("the head refused the driver: " + (error.ok() ? error->message : "?"));
      }
    }
  }

  void MeasureLeases(Figures& f, pid_t head) {
    driver_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
    Watch(*driver_, kDriverKey);
    driver_->set(zmq::sockopt::linger, 0);
    driver_->set(zmq::sockopt::routing_id, "sim-driver");
    transport::MakeClient(*driver_, security_);
    driver_->connect(address_);
    job_ = rayx::JobId();
    protocol::RegisterDriverRequest reg;
    reg.rayx_version = rayx::kRayxVersion;
    reg.log_to_driver = false;
    SendDriver(reg, ++next_request_);
    PumpUntil([&] { return !job_.IsNil(); }, 30000, "the driver's registration");
    granted_ = 0;
    latencies_ms_.clear();
    sent_at_.clear();
    for (int i = 0; i < inflight_; ++i) RequestLease();
    auto start = Clock::now();
    const double cpu0 = HeadUsage(head).first;
    int64_t next_beat = NowMs() + 1000;
    PumpUntil(
        [&] {
          while (static_cast<int>(sent_at_.size()) < inflight_ &&
                 granted_ + static_cast<int>(sent_at_.size()) < leases_) {
            RequestLease();
          }
          if (NowMs() > next_beat) {
            protocol::DriverHeartbeatRequest beat;
            beat.job_id = job_;
            SendDriver(beat, ++next_request_);
            next_beat += 1000;
          }
          return granted_ >= leases_;
        },
        300000, "the lease grants");
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    f.grants_per_s = granted_ / seconds;
    const double busy = HeadUsage(head).first - cpu0 - f.idle_cpu_pct / 100 * seconds;
    f.grant_cpu_us = 1e6 * std::max(0.0, busy) / granted_;
    std::sort(latencies_ms_.begin(), latencies_ms_.end());
    auto at = [&](double q) {
      return latencies_ms_[std::min(latencies_ms_.size() - 1,
                                    static_cast<size_t>(q * static_cast<double>(latencies_ms_.size())))];
    };
    f.p50_ms = at(0.50);
    f.p99_ms = at(0.99);
  }

  void FinishJob() {
    protocol::FinishJobRequest finish;
    finish.job_id = job_;
    SendDriver(finish, ++next_request_);
    PumpFor(200);
  }

  // Placement groups of 64 one-CPU bundles, STRICT_SPREAD, one at a time:
  // created, waited for, removed.
  void MeasureGroups(Figures& f) {
    constexpr int kGroups = 20;
    group_ms_.clear();
    groups_done_ = 0;
    auto start = Clock::now();
    for (int g = 0; g < kGroups; ++g) {
      protocol::CreatePlacementGroupRequest create;
      create.job_id = job_;
      create.strategy = protocol::PlacementStrategy::kStrictSpread;
      create.bundles.assign(64, {{"CPU", 1.0}});
      group_sent_ = Clock::now();
      SendDriver(create, ++next_request_);
      PumpUntil([&] { return groups_done_ > g; }, 60000, "a placement group");
    }
    f.groups_per_s = kGroups / std::chrono::duration<double>(Clock::now() - start).count();
    std::sort(group_ms_.begin(), group_ms_.end());
    f.group_p50_ms = group_ms_[group_ms_.size() / 2];
  }

  // The cluster's alive nodes, from the head's status (pumping meanwhile).
  int AliveNodes() {
    protocol::GetClusterStatusRequest ask;
    ask.token = token_;
    status_pending_ = true;
    SendDriver(ask, ++next_request_);
    PumpUntil([&] { return !status_pending_; }, 30000, "the cluster's status");
    return alive_;
  }

  // SIGKILL the head, start it again on its session, and time every node's
  // rejoin from the moment `rayx start` was run.
  void MeasureRestart(Figures& f, const std::string& head_address, const std::string& temp) {
    pid_t head = HeadPid(temp);
    if (head == 0 || ::kill(head, SIGKILL) != 0) Die("cannot kill the head");
    PumpUntil([&] { return !Alive(head); }, 30000, "the killed head to go");
    const std::string port = head_address.substr(head_address.rfind(':') + 1);
    rejoined_ = 0;
    auto start = Clock::now();
    if (Run({bin_dir_ + "/rayx", "start", "--head", "--port", port, "--num-cpus", "0",
             "--num-gpus", "0", "--node-ip-address", "127.0.0.1", "--temp-dir", temp,
             ">/dev/null"}) != 0) {
      Die("rayx start --head did not restart the head (temp dir " + temp + ")");
    }
    f.restart_s = std::chrono::duration<double>(Clock::now() - start).count();
    const int n = static_cast<int>(nodes_.size());
    PumpUntil([&] { return rejoined_ == n; }, 120000, "every simulated node to rejoin");
    f.rejoin_s = std::chrono::duration<double>(Clock::now() - start).count();
  }

  // `count` nodes fall silent at once (as when a rack loses power): the time
  // until the head's status shows them dead.
  void MeasureDeaths(Figures& f, int count) {
    const int before = AliveNodes();
    auto start = Clock::now();
    for (int i = 0; i < count; ++i) nodes_[nodes_.size() - 1 - static_cast<size_t>(i)].silent = true;
    int64_t deadline = NowMs() + 60000;
    while (AliveNodes() > before - count) {
      if (NowMs() > deadline) Die("the silent nodes were not declared dead within 60 s");
      PumpFor(20);
    }
    f.death_s = std::chrono::duration<double>(Clock::now() - start).count();
  }

  static pid_t HeadPid(const std::string& temp) {
    for (const auto& s : rayx::detail::Session::List(temp)) {
      auto p = s.Processes();
      if (p.count("head")) return p["head"].pid;
    }
    return 0;
  }
  // Running and not a zombie (the head is not our child: /proc says).
  static bool Alive(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    auto close = text.rfind(')');
    return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
  }

  std::string bin_dir_;
  int64_t idle_ms_;
  int leases_, inflight_;
  zmq::context_t context_{2};
  std::string address_, token_;
  transport::ClientSecurity security_;
  std::vector<SimNode> nodes_;
  static constexpr uint64_t kDriverKey = ~uint64_t{0};
  int epoll_ = -1;
  std::vector<size_t> dirty_;  // nodes to read on the next pass
  bool driver_dirty_ = false;
  int registered_ = 0;
  int64_t period_ms_ = 250;
  std::unique_ptr<zmq::socket_t> driver_;
  rayx::JobId job_;
  uint64_t next_request_ = 0;
  std::map<uint64_t, Clock::time_point> sent_at_;
  std::vector<double> latencies_ms_;
  int granted_ = 0;
  int rejoined_ = 0;
  Clock::time_point group_sent_;
  std::vector<double> group_ms_;
  int groups_done_ = 0;
  int alive_ = 0;
  bool status_pending_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  std::string nodes_list = "10,100,500,1000,2000", bin_dir;
  int64_t idle_ms = 10000, leases = 2000, inflight = 16;
  bool help = false;
  rayx::FlagParser flags("rayx-head-scale");
  flags.AddString("nodes", &nodes_list, "simulated node counts, comma-separated "
                                        "(default 10,100,500,1000,2000)");
  flags.AddInt("idle-ms", &idle_ms, 1000, 600000, "how long the head's idle CPU is measured "
                                                 "at each count (default 10000)");
  flags.AddInt("leases", &leases, 1, 10000000, "lease grants to time at each count (default 2000)");
  flags.AddInt("inflight", &inflight, 1, 10000, "lease requests in flight (default 16)");
  flags.AddString("bin-dir", &bin_dir, "where rayx is (default: beside this program)");
  flags.AddBool("help", &help, "show this help");
  std::vector<std::string> args(argv + 1, argv + argc);
  if (auto st = flags.Parse(args, nullptr); !st.ok()) {
    std::cerr << st.message() << "\n";
    return 2;
  }
  if (help) {
    std::cout << "usage: rayx-head-scale [--nodes N,N...] [--idle-ms MS] [--leases L] "
                 "[--inflight K]\n\n"
              << flags.Usage();
    return 0;
  }
  if (bin_dir.empty()) bin_dir = fs::read_symlink("/proc/self/exe").parent_path().string();
  std::vector<int> counts;
  std::stringstream list(nodes_list);
  for (std::string item; std::getline(list, item, ',');) {
    int n = std::atoi(item.c_str());
    if (n <= 0 || n > 65536) Die("--nodes: '" + item + "' is not a count from 1 to 65536");
    counts.push_back(n);
  }
  signal(SIGPIPE, SIG_IGN);
  // A socket (and a few descriptors) per simulated node.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  Harness harness(bin_dir, idle_ms, static_cast<int>(leases), static_cast<int>(inflight));
  std::printf("%8s %11s %14s %10s %10s %12s %8s %8s %11s %9s %10s %9s %9s\n", "nodes",
              "register s", "idle head CPU", "head RSS", "grants/s", "CPU/grant µs", "p50 ms",
              "p99 ms", "group p50 ms",
              "groups/s", "restart s", "rejoin s", "100 dead s");
  for (int n : counts) {
    Figures f;
    try {
      f = harness.Measure(n);
    } catch (const std::exception& e) {  // zmq::error_t (too many sockets, say)
      Die(std::string("at ") + std::to_string(n) + " nodes: " + e.what());
    }
    std::printf("%8d %11.1f %13.1f%% %6.0f MiB %10.0f %12.0f %8.2f %8.2f %12.1f %9.1f %10.2f %9.2f %9.2f\n",
                f.nodes, f.register_s, f.idle_cpu_pct, f.rss_mib, f.grants_per_s, f.grant_cpu_us, f.p50_ms,
                f.p99_ms, f.group_p50_ms, f.groups_per_s, f.restart_s, f.rejoin_s, f.death_s);
    std::fflush(stdout);
  }
  return 0;
}
