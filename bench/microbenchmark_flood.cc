#include "microbenchmark_flood.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <stdexcept>
#include <zmq.hpp>

#include "transport/security.h"

extern char** environ;

namespace rayx::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kGiveUp = std::chrono::milliseconds(5);
constexpr size_t kMaxOpen = 256;

void WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("the flood process is gone");
    done += static_cast<size_t>(n);
  }
}

}  // namespace

FloodProcess::FloodProcess(double rate, const std::string& server_key, const std::string& from,
                           const std::vector<FloodTarget>& targets) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe failed");
  }
  std::vector<std::string> args = {"rayx-microbenchmark", "--flood-child", std::to_string(rate),
                                   server_key, from};
  for (const auto& t : targets) args.push_back((t.curve ? "curve:" : "plain:") + t.address);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  int rc = posix_spawn(&pid_, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  ::close(out[1]);
  to_child_ = in[1];
  from_child_ = out[0];
  if (rc != 0) {
    pid_ = -1;
    throw std::runtime_error("cannot start the flood process");
  }
}

FloodProcess::~FloodProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (to_child_ >= 0) ::close(to_child_);
  if (from_child_ >= 0) ::close(from_child_);
}

void FloodProcess::Flood(bool on) { WriteAll(to_child_, on ? "1" : "0"); }

FloodProcess::Totals FloodProcess::Finish() {
  ::close(to_child_);  // EOF: the child prints its totals and exits
  to_child_ = -1;
  std::string text;
  char buf[256];
  for (;;) {
    ssize_t n = ::read(from_child_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  int status = 0;
  rusage usage{};
  pid_t waited = ::wait4(pid_, &status, 0, &usage);
  pid_ = -1;
  Totals totals;
  long long attempts = 0, answered = 0;
  if (waited <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
      std::sscanf(text.c_str(), "%lld %lld", &attempts, &answered) != 2) {
    throw std::runtime_error("the flood process failed: " + text);
  }
  totals.attempts = attempts;
  totals.answered = answered;
  totals.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  return totals;
}

int FloodChildMain(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: --flood-child RATE SERVER_KEY FROM (curve|plain):ADDR...\n");
    return 2;
  }
  const double rate = std::atof(argv[2]);
  if (!(rate > 0)) return 2;
  const std::string server_key = argv[3];
  const std::string from = argv[4];
  std::vector<FloodTarget> targets;
  for (int i = 5; i < argc; ++i) {
    std::string t = argv[i];
    targets.push_back({t.substr(t.find(':') + 1), t.rfind("curve:", 0) == 0});
  }
  // On the machine's last CPU, as far as it goes from the benchmark's own
  // threads: an attacker's CPU is its own machine's, not the cluster's.
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus > 1) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<int>(cpus - 1), &set);
    sched_setaffinity(0, sizeof set, &set);
  }
  zmq::context_t context(1);
  const auto stranger = transport::Credential::Cluster("not-the-cluster-token");
  const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1 / rate));
  struct Open {
    zmq::socket_t socket;
    Clock::time_point since;
  };
  std::deque<Open> open;
  bool on = false;
  Clock::time_point next = Clock::now();
  size_t turn = 0;
  long long attempts = 0, answered = 0;
  auto close_oldest = [&] {
    zmq::message_t reply;
    if (open.front().socket.recv(reply, zmq::recv_flags::dontwait)) ++answered;
    open.pop_front();
  };
  for (;;) {
    auto now = Clock::now();
    while (!open.empty() && now - open.front().since >= kGiveUp) close_oldest();
    if (on) {
      // Behind by more than 100 ms (this process got no CPU): skip those
      // starts rather than burst, so the rate stays the one asked for.
      if (now - next > std::chrono::milliseconds(100)) next = now;
      while (next <= now) {
        if (open.size() >= kMaxOpen) close_oldest();
        const FloodTarget& target = targets[turn++ % targets.size()];
        zmq::socket_t s(context, zmq::socket_type::dealer);
        s.set(zmq::sockopt::linger, 0);
        transport::MakeClient(s, target.curve ? transport::WireSecurity::kEncrypted
                                              : transport::WireSecurity::kAuthenticated,
                              stranger, server_key);
        // tcp://SOURCE:0;HOST:PORT: from one address of its own, or each
        // connection from another (127.77.x.y: 62,500 of them).
        std::string source = from;
        if (from == "many") {
          source = "127.77." + std::to_string(attempts / 250 % 250 + 1) + "." +
                   std::to_string(attempts % 250 + 1);
        }
        const std::string host_port = target.address.substr(target.address.find("//") + 2);
        s.connect("tcp://" + source + ":0;" + host_port);
        s.send(zmq::str_buffer("x"), zmq::send_flags::dontwait);
        open.push_back({std::move(s), now});
        ++attempts;
        next += period;
      }
    }
    // Sleep until the next start, the oldest connection's end, or a command.
    int timeout_ms = -1;
    auto wake = Clock::time_point::max();
    if (on) wake = next;
    if (!open.empty()) wake = std::min(wake, open.front().since + kGiveUp);
    if (wake != Clock::time_point::max()) {
      auto left = std::chrono::duration_cast<std::chrono::microseconds>(wake - Clock::now()).count();
      timeout_ms = left <= 0 ? 0 : static_cast<int>((left + 999) / 1000);
    }
    pollfd command{0, POLLIN, 0};
    int ready = ::poll(&command, 1, timeout_ms);
    if (ready > 0) {
      char c;
      ssize_t n = ::read(0, &c, 1);
      if (n == 0) break;  // the benchmark is done
      if (n == 1) {
        if (c == '1' && !on) next = Clock::now();
        on = c == '1';
      }
    }
  }
  open.clear();
  std::printf("%lld %lld\n", attempts, answered);
  return 0;
}

}  // namespace rayx::bench
