// LaunchSupervisor: starts, watches and restarts the ranks of `rayx launch`.
#include "launch_supervisor.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "command_error.h"
#include "platform_env.h"
#include "protocol/process_messages.h"

namespace rayx::cli {
namespace {

using protocol::MessageType;
using transport::FrameView;

volatile std::sig_atomic_t g_stop_signal = 0;
void OnStopSignal(int signo) { g_stop_signal = signo; }

std::string DescribeExit(const LaunchRank& r) {
  if (!r.lost.empty()) return "was lost: " + r.lost;
  if (r.signal) {
    return "was killed by signal " + std::to_string(r.signal) + " (" + strsignal(r.signal) + ")";
  }
  return "exited with status " + std::to_string(r.exit_code);
}

}  // namespace

std::vector<size_t> NodeOrderByRankLabel(const std::vector<protocol::BundleLocation>& locations,
                                         const std::map<std::string, LabelMap>& labels_of) {
  std::vector<std::pair<long long, size_t>> ranked;  // (label, bundle)
  std::set<long long> seen;
  for (size_t b = 0; b < locations.size(); ++b) {
    auto node = labels_of.find(locations[b].node_id);
    if (node == labels_of.end()) return {};
    auto label = node->second.find(kNodeRankLabel);
    if (label == node->second.end()) return {};
    char* end = nullptr;
    errno = 0;
    long long rank = std::strtoll(label->second.c_str(), &end, 10);
    if (label->second.empty() || *end != '\0' || errno != 0 || !seen.insert(rank).second) {
      return {};  // not a number, or two nodes claim one rank: placement order
    }
    ranked.emplace_back(rank, b);
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<size_t> order;
  for (const auto& [rank, b] : ranked) order.push_back(b);
  return order;
}

std::vector<LaunchRank> PlanRanks(const LaunchPlan& plan) {
  std::vector<LaunchRank> ranks;
  for (int b = 0; b < plan.nnodes; ++b) {
    const auto& loc = plan.NodeLocation(b);
    for (int l = 0; l < plan.nproc_per_node; ++l) {
      LaunchRank r;
      r.rank = b * plan.nproc_per_node + l;
      r.local_rank = l;
      r.node_rank = b;
      r.node_address = loc.node_address;
      r.object_address = loc.object_address;
      r.node_id = loc.node_id;
      r.index = static_cast<uint32_t>(l);
      ranks.push_back(r);
    }
  }
  return ranks;
}

Result<uint32_t> ReserveMasterPort(ClusterClient& client, const LaunchPlan& plan) {
  if (plan.master_port > 0) return static_cast<uint32_t>(plan.master_port);
  auto reply =
      client.CallAgent(plan.NodeLocation(0).object_address, protocol::ReservePortRequest{}, 5000);
  if (!reply.ok()) return reply.status();
  auto port = protocol::Decode<protocol::ReservePortReply>(FrameView((*reply)[1]));
  if (!port.ok()) return port.status();
  return port->port;
}

bool LaunchSupervisor::StopRequested() { return g_stop_signal != 0; }

void LaunchSupervisor::CatchStopSignals() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

LaunchSupervisor::LaunchSupervisor(ClusterClient& client, LaunchPlan plan)
    : client_(client),
      plan_(std::move(plan)),
      world_(plan_.nnodes * plan_.nproc_per_node),
      ranks_(PlanRanks(plan_)) {}

protocol::RequestLeaseRequest LaunchSupervisor::LeaseRequest(int b, int attempt,
                                                             uint32_t master_port) const {
  const int nproc = plan_.nproc_per_node;
  const auto& user_env = plan_.user_env;
  protocol::RequestLeaseRequest req;
  req.job_id = client_.job_id();
  req.resources = plan_.per_node;
  req.placement_group_id = plan_.group.placement_group_id;
  req.bundle_index = static_cast<int32_t>(plan_.BundleOf(b));
  for (int l = 0; l < nproc; ++l) {
    const LaunchRank& r = ranks_[static_cast<size_t>(b * nproc + l)];
    protocol::ProcessSpec spec;
    spec.argv = plan_.command;
    spec.cwd = plan_.cwd;
    spec.log_name = "launch-" + client_.job_id().Hex() + "-rank" + std::to_string(r.rank) +
                    (attempt ? "-restart" + std::to_string(attempt) : "");
    spec.env = user_env;
    spec.env["RANK"] = std::to_string(r.rank);
    spec.env["LOCAL_RANK"] = std::to_string(r.local_rank);
    spec.env["WORLD_SIZE"] = std::to_string(world_);
    spec.env["LOCAL_WORLD_SIZE"] = std::to_string(nproc);
    spec.env["GROUP_RANK"] = std::to_string(r.node_rank);
    spec.env["NODE_RANK"] = std::to_string(r.node_rank);
    spec.env["GROUP_WORLD_SIZE"] = std::to_string(plan_.nnodes);
    spec.env["ROLE_RANK"] = std::to_string(r.rank);
    spec.env["ROLE_WORLD_SIZE"] = std::to_string(world_);
    spec.env["ROLE_NAME"] = "default";
    spec.env["MASTER_ADDR"] = plan_.NodeLocation(0).node_address;
    spec.env["MASTER_PORT"] = std::to_string(master_port);
    spec.env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(attempt);
    spec.env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(plan_.max_restarts);
    spec.env["TORCHELASTIC_RUN_ID"] = client_.job_id().Hex();
    if (!user_env.count("PYTHONUNBUFFERED")) spec.env["PYTHONUNBUFFERED"] = "1";
    // torchrun's default: one OpenMP thread per process when several share a node.
    if (nproc > 1 && !user_env.count("OMP_NUM_THREADS")) spec.env["OMP_NUM_THREADS"] = "1";
    req.processes.push_back(std::move(spec));
  }
  return req;
}

std::string LaunchSupervisor::StartRanks(int attempt, uint32_t master_port) {
  const int nproc = plan_.nproc_per_node;
  std::map<uint64_t, int> requests;  // request id -> node rank
  leases_.assign(static_cast<size_t>(plan_.nnodes), LeaseId());
  early_.clear();
  for (int b = 0; b < plan_.nnodes; ++b) {
    requests[client_.Send(LeaseRequest(b, attempt, master_port))] = b;
  }

  auto start_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::string start_error;
  while (!requests.empty() && start_error.empty()) {
    if (g_stop_signal) break;
    if (std::chrono::steady_clock::now() > start_deadline) {
      start_error = "the processes did not start within 120 s";
      break;
    }
    auto frames = client_.Next(200);
    if (!frames) continue;
    auto it = requests.find(ClusterClient::IdOf(*frames));
    if (it == requests.end()) {
      if (ClusterClient::TypeOf(*frames) ==
          static_cast<uint16_t>(MessageType::kProcessExitedNotice)) {
        early_.push_back(std::move(*frames));
      }
      continue;
    }
    int b = it->second;
    requests.erase(it);
    if (Status s = ClusterClient::AsError(*frames); !s.ok()) {
      start_error = "node " + plan_.NodeLocation(b).node_address + ": " + s.message();
      continue;
    }
    auto grant = protocol::Decode<protocol::RequestLeaseReply>(FrameView((*frames)[1]));
    if (!grant.ok()) {
      start_error = grant.status().message();
      continue;
    }
    leases_[static_cast<size_t>(b)] = grant->lease_id;
    for (int l = 0; l < nproc; ++l) {
      LaunchRank& r = ranks_[static_cast<size_t>(b * nproc + l)];
      r = LaunchRank{r.rank, r.local_rank, r.node_rank, r.node_address, r.object_address,
                     r.node_id};
      r.lease_id = grant->lease_id;
      r.index = static_cast<uint32_t>(l);
    }
  }
  return start_error;
}

const LaunchRank* LaunchSupervisor::Supervise() {
  const LaunchRank* failed = nullptr;
  exited_ok_ = 0;
  auto last_pump = std::chrono::steady_clock::now();
  while (!g_stop_signal && failed == nullptr && exited_ok_ < ranks_.size()) {
    std::optional<transport::Frames> frames;
    if (!early_.empty()) {
      frames = std::move(early_.front());
      early_.pop_front();
    } else {
      frames = client_.Next(100);
    }
    if (frames && ClusterClient::TypeOf(*frames) ==
                      static_cast<uint16_t>(MessageType::kProcessExitedNotice)) {
      auto notice = protocol::Decode<protocol::ProcessExitedNotice>(FrameView((*frames)[1]));
      if (notice.ok()) {
        for (LaunchRank& r : ranks_) {
          if (r.lease_id != notice->lease_id || r.index != notice->index || r.exited) continue;
          r.exited = true;
          r.exit_code = notice->exit_code;
          r.signal = notice->signal;
          r.tail = notice->log_tail;
          if (r.exit_code == 0 && r.signal == 0) {
            ++exited_ok_;
          } else if (failed == nullptr) {
            failed = &r;
          }
        }
      }
    }
    if (frames && ClusterClient::TypeOf(*frames) ==
                      static_cast<uint16_t>(MessageType::kLeasesLostNotice)) {
      // The head declared a node of the group dead: its ranks are gone (no
      // exit will be reported for them), so the group fails now.
      auto notice = protocol::Decode<protocol::LeasesLostNotice>(FrameView((*frames)[1]));
      if (notice.ok()) {
        for (LaunchRank& r : ranks_) {
          if (r.exited || std::find(notice->lease_ids.begin(), notice->lease_ids.end(),
                                    r.lease_id) == notice->lease_ids.end()) {
            continue;
          }
          r.exited = true;
          r.drained = true;  // its agent is gone with its output
          r.lost = notice->reason;
          if (failed == nullptr) failed = &r;
        }
      }
    }
    if (!client_.job_alive()) break;
    auto now = std::chrono::steady_clock::now();
    if (now - last_pump >= std::chrono::milliseconds(100)) {
      PumpOutput(false);
      last_pump = now;
    }
  }
  return failed;
}

void LaunchSupervisor::StopAll() {
  for (const auto& lease : leases_) {
    if (lease.IsNil()) continue;
    protocol::ReturnLeaseRequest ret;
    ret.lease_id = lease;
    (void)client_.Call<protocol::ReturnLeaseReply>(ret, 5000);
  }
}

void LaunchSupervisor::PumpOutput(bool final_pass) {
  // An agent that did not answer is skipped for the rest of this pass: a
  // stopped node costs one timeout per pass, not one per rank on it.
  std::set<std::string> silent;
  for (LaunchRank& r : ranks_) {
    if (r.drained || r.lease_id.IsNil()) continue;
    if (silent.count(r.object_address)) {
      if (final_pass) {
        r.drained = true;
        r.output_lost = "its node's object server " + r.object_address + " did not answer";
      }
      continue;
    }
    for (int round = 0; round < 64; ++round) {  // at most 64 MiB per rank per pass
      protocol::ReadLogRequest req;
      req.lease_id = r.lease_id;
      req.index = r.index;
      req.offset = r.offset;
      auto reply = client_.CallAgent(r.object_address, req, 5000);
      if (!reply.ok()) {
        if (final_pass) {
          r.drained = true;
          r.output_lost = reply.status().message();
        }
        if (reply.status().code() == StatusCode::kUnavailable) silent.insert(r.object_address);
        break;
      }
      auto body = protocol::Decode<protocol::ReadLogReply>(FrameView((*reply)[1]));
      if (!body.ok()) break;
      r.log_path = body->path;
      std::string_view chunk = reply->size() > 2 ? FrameView((*reply)[2]) : std::string_view();
      r.offset += chunk.size();
      r.partial.append(chunk);
      size_t start = 0, nl;
      std::string out;
      while ((nl = r.partial.find('\n', start)) != std::string::npos) {
        out += "[rank " + std::to_string(r.rank) + " " + r.node_address + "] " +
               r.partial.substr(start, nl - start + 1);
        start = nl + 1;
      }
      r.partial.erase(0, start);
      if (!out.empty()) std::cout << out << std::flush;
      bool at_end = r.offset >= body->size;
      if (at_end && body->exited) {
        if (!r.partial.empty()) {
          std::cout << "[rank " << r.rank << " " << r.node_address << "] " << r.partial << "\n";
          r.partial.clear();
        }
        r.drained = true;
      }
      if (at_end || chunk.empty()) break;
    }
  }
  if (!final_pass) return;
  // Say whose output is missing: the ranks' own success says nothing of it.
  for (LaunchRank& r : ranks_) {
    if (r.output_lost.empty()) continue;
    std::cerr << "rayx launch: the output of rank " << r.rank << " (node " << r.node_address
              << ") after its first " << r.offset << " bytes could not be read: "
              << r.output_lost << "; all of it is in "
              << (r.log_path.empty() ? "logs/launch-" + client_.job_id().Hex() + "-rank" +
                                             std::to_string(r.rank) + "*.log of its node's session"
                                       : r.log_path)
              << " on "
              << r.node_address << "\n";
    r.output_lost.clear();
  }
}

int LaunchSupervisor::ReportFailure(const LaunchRank& failed) {
  std::cerr << "rayx launch: rank " << failed.rank << " (local rank " << failed.local_rank
            << " on node " << failed.node_rank << ", " << failed.node_address << ") "
            << DescribeExit(failed) << ".\n";
  if (!failed.tail.empty()) {
    std::cerr << "rayx launch: its last lines:\n";
    std::istringstream lines(failed.tail);
    for (std::string line; std::getline(lines, line);) std::cerr << "  | " << line << "\n";
  }
  if (!failed.log_path.empty()) {
    std::cerr << "rayx launch: its full output: " << failed.log_path << " on "
              << failed.node_address << "\n";
  }
  if (failed.signal) return 128 + failed.signal;
  return failed.exit_code > 0 && failed.exit_code < 126 ? failed.exit_code : 1;
}

int LaunchSupervisor::Run(uint32_t master_port) {
  for (int attempt = 0;; ++attempt) {
    std::string start_error = StartRanks(attempt, master_port);
    if (!start_error.empty() || g_stop_signal) {
      StopAll();
      (void)client_.FinishJob();
      if (g_stop_signal) return 128 + g_stop_signal;
      return Fail("launch", "could not start the ranks: " + start_error);
    }
    if (attempt == 0) {
      std::cout << "rayx launch: job " << client_.job_id() << ": " << world_ << " ranks on "
                << plan_.nnodes << " node(s), MASTER_ADDR=" << plan_.NodeLocation(0).node_address
                << " MASTER_PORT=" << master_port << "\n"
                << std::flush;
    }

    const LaunchRank* failed = Supervise();
    if (exited_ok_ == ranks_.size()) {
      PumpOutput(true);
      std::cout << "rayx launch: all " << world_ << " ranks exited with status 0\n";
      (void)client_.FinishJob();
      return 0;
    }
    if (g_stop_signal || !client_.job_alive()) {
      StopAll();
      PumpOutput(true);
      (void)client_.FinishJob();
      if (!client_.job_alive() && !g_stop_signal) {
        return Fail("launch", "the cluster ended this job (the head restarted or lost this "
                              "client); every rank was stopped");
      }
      std::cerr << "rayx launch: stopped by " << strsignal(g_stop_signal) << "; stopped all "
                << world_ << " ranks\n";
      return 128 + g_stop_signal;
    }
    // A rank failed: stop the rest everywhere.
    LaunchRank failed_copy = *failed;
    StopAll();
    PumpOutput(true);
    int exit_code = ReportFailure(failed_copy);
    if (attempt < plan_.max_restarts) {
      std::cerr << "rayx launch: stopped every rank; restarting the group (restart "
                << attempt + 1 << " of " << plan_.max_restarts << ")\n";
      if (plan_.master_port == 0) {
        auto again = ReserveMasterPort(client_, plan_);
        if (again.ok()) master_port = *again;
      }
      continue;
    }
    std::cerr << "rayx launch: stopped the other ranks on every node"
              << (plan_.max_restarts ? " (no restarts left)" : "") << ".\n";
    (void)client_.FinishJob();
    return exit_code;
  }
}

}  // namespace rayx::cli
