// `rayx microbenchmark`: Ray's microbenchmark metrics for rayx, against a raw
// ZeroMQ request/reply round trip as the floor.
//
//   rayx microbenchmark                      # private 1-machine cluster (or this machine's)
//   RAYX_TOKEN=T rayx microbenchmark --address 10.0.0.1:6380 --runs 5 --duration-ms 1000
//   rayx microbenchmark --only actor         # metrics whose name contains "actor"
//
// Each metric runs once to warm up, then --runs times for about --duration-ms
// each; the table shows the median rate over the runs, and the min and max.
// Every task and actor result is checked, so no work can be skipped.
//
// This program is also its workers' program: started by a node agent (with
// RAYX_WORKER_MODE set), rayx::Init serves tasks and never returns.
#include <rayx/ids.h>
#include <rayx/kv.h>
#include <rayx/rayx.h>
#include <rayx/train.h>
#include <arpa/inet.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <future>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/flags.h"
#include "common/session_dir.h"
#include "protocol/codec.h"
#include "protocol/messages.h"
#include "runtime/kv_client.h"
#include "transport/security.h"
#include "microbenchmark_allreduce.h"
#include "microbenchmark_flood.h"
#include "microbenchmark_nccl.h"

#ifndef RAYX_SOURCE_DIR
#define RAYX_SOURCE_DIR ""
#endif

// ---- Remote functions (outside any namespace, so their names are readable) ----

int64_t BenchSmallValue(int64_t x) { return x + 1; }

class BenchActor {
 public:
  static BenchActor* Create(int64_t id) { return new BenchActor(id); }
  explicit BenchActor(int64_t id) : id_(id) {}
  int64_t Echo(int64_t x) {
    ++calls_;
    return x + 1;
  }
  int64_t Id() const { return id_; }
  int64_t Calls() const { return calls_; }

 private:
  int64_t id_;
  int64_t calls_ = 0;
};

// `bytes` bytes made where the task runs (a node other than the driver's, for
// the transfer metric): the driver's Get pulls them through an object server.
rayx::Bytes BenchBlob(int64_t bytes, int64_t seed) {
  rayx::Bytes out;
  out.data.resize(static_cast<size_t>(bytes));
  for (size_t k = 0; k < out.data.size(); k += 4096) out.data[k] = static_cast<uint8_t>(seed + k);
  return out;
}

RAYX_REMOTE(BenchSmallValue, BenchBlob, BenchActor::Create, &BenchActor::Echo, &BenchActor::Id,
            &BenchActor::Calls);

namespace {

using Clock = std::chrono::steady_clock;

// No single call should ever take this long: a hang becomes an error naming the call
// (and the runtime is restarted before the next metric).
constexpr int64_t kCallTimeoutMs = 30000;
constexpr int kBatch = 1000;          // calls submitted before getting them (Ray uses 1000)
constexpr int kClientThreads = 4;     // multi_client_tasks_async, 1_1_actor_calls_concurrent
constexpr size_t kLargeBytes = 100u << 20;  // single_client_put_gigabytes: 100 MiB per Put
constexpr int kWaitRefs = 1000;       // single_client_wait_1k_refs

struct Config {
  int runs = 5;
  int64_t duration_ms = 1000;
};

[[noreturn]] void Fail(const std::string& what) { throw std::runtime_error(what); }

void Check(bool ok, const std::string& what) {
  if (!ok) Fail("verification failed: " + what);
}

int64_t GetChecked(const rayx::ObjectRef<int64_t>& ref, int64_t want, const char* call) {
  int64_t got = *ref.Get(kCallTimeoutMs);
  if (got != want) {
    Fail(std::string("verification failed: ") + call + " returned " + std::to_string(got) +
         ", expected " + std::to_string(want));
  }
  return got;
}

// ---- Timing ----------------------------------------------------------------------

// Runs `step` (which returns the units of work it did) on `threads` threads
// until `duration_ms` has passed; returns units per second over the whole run.
double TimedRun(int threads, int64_t duration_ms, const std::function<double(int)>& step) {
  std::atomic<bool> go{false};
  std::vector<double> done(static_cast<size_t>(threads), 0.0);
  std::exception_ptr error;
  std::mutex error_mu;
  Clock::time_point start;
  auto body = [&](int t) {
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    try {
      auto deadline = start + std::chrono::milliseconds(duration_ms);
      do {
        done[static_cast<size_t>(t)] += step(t);
      } while (Clock::now() < deadline);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
    }
  };
  if (threads == 1) {
    start = Clock::now();
    go = true;
    body(0);
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(body, t);
    start = Clock::now();
    go.store(true, std::memory_order_release);
    for (auto& th : pool) th.join();
  }
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (error) std::rethrow_exception(error);
  double total = 0;
  for (double d : done) total += d;
  return total / seconds;
}

struct Stats {
  double median = 0, min = 0, max = 0;
  std::vector<double> runs;
  // A baseline measured in the same runs (torch gloo for allreduce), or why
  // it was not.
  std::vector<double> baseline_runs;
  std::string baseline_error;
};

Stats Measure(const Config& config, int threads, const std::function<double(int)>& step,
              double scale = 1.0) {
  // One shorter warm-up run: leases workers, starts actors, fills caches.
  TimedRun(threads, std::max<int64_t>(config.duration_ms / 2, 1), step);
  Stats s;
  for (int r = 0; r < config.runs; ++r) {
    s.runs.push_back(TimedRun(threads, config.duration_ms, step) * scale);
  }
  std::vector<double> sorted = s.runs;
  std::sort(sorted.begin(), sorted.end());
  size_t n = sorted.size();
  s.median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  s.min = sorted.front();
  s.max = sorted.back();
  return s;
}

// ---- The metrics -------------------------------------------------------------------

// A raw ZeroMQ REQ/REP round trip over TCP loopback between two threads: the
// floor for one synchronous call, with no runtime around it.
Stats ZmqReqRep(const Config& config) {
  zmq::context_t context(1);
  zmq::socket_t rep(context, zmq::socket_type::rep);
  rep.set(zmq::sockopt::linger, 0);
  rep.bind("tcp://127.0.0.1:*");
  std::string endpoint = rep.get(zmq::sockopt::last_endpoint);
  std::thread server([&rep] {
    while (true) {
      zmq::message_t msg;
      if (!rep.recv(msg)) continue;
      bool stop = msg.size() == 0;
      rep.send(msg, zmq::send_flags::none);  // echo
      if (stop) return;
    }
  });
  zmq::socket_t req(context, zmq::socket_type::req);
  req.set(zmq::sockopt::linger, 0);
  req.connect(endpoint);
  uint64_t counter = 0;
  auto round_trip = [&](const void* data, size_t size) {
    req.send(zmq::buffer(data, size), zmq::send_flags::none);
    zmq::message_t reply;
    if (!req.recv(reply)) Fail("zmq: no reply");
    return reply;
  };
  Stats stats;
  try {
    stats = Measure(config, 1, [&](int) {
      ++counter;
      zmq::message_t reply = round_trip(&counter, sizeof counter);
      uint64_t echoed = 0;
      Check(reply.size() == sizeof echoed, "zmq reply size");
      std::memcpy(&echoed, reply.data(), sizeof echoed);
      Check(echoed == counter, "zmq echo");
      return 1.0;
    });
  } catch (...) {
    round_trip(nullptr, 0);
    server.join();
    throw;
  }
  round_trip(nullptr, 0);  // stops the server
  server.join();
  return stats;
}

Stats TasksSync(const Config& config) {
  int64_t i = 0;
  return Measure(config, 1, [&](int) {
    ++i;
    GetChecked(rayx::Task(BenchSmallValue).Remote(i), i + 1, "BenchSmallValue");
    return 1.0;
  });
}

// Submits kBatch tasks, then gets them all.
double TaskBatch(int64_t base) {
  std::vector<rayx::ObjectRef<int64_t>> refs;
  refs.reserve(kBatch);
  for (int64_t k = 0; k < kBatch; ++k) refs.push_back(rayx::Task(BenchSmallValue).Remote(base + k));
  for (int64_t k = 0; k < kBatch; ++k) GetChecked(refs[k], base + k + 1, "BenchSmallValue");
  return kBatch;
}

Stats TasksAsync(const Config& config) {
  int64_t round = 0;
  return Measure(config, 1, [&](int) { return TaskBatch(++round * 1000000); });
}

// Several driver threads submitting into the same runtime at once.
Stats MultiClientTasksAsync(const Config& config) {
  std::vector<int64_t> rounds(kClientThreads, 0);
  return Measure(config, kClientThreads, [&](int t) {
    return TaskBatch((int64_t{t + 1} << 40) + ++rounds[static_cast<size_t>(t)] * 1000000);
  });
}

std::vector<rayx::ActorHandle<BenchActor>> StartActors(int n) {
  std::vector<rayx::ActorHandle<BenchActor>> actors;
  for (int i = 0; i < n; ++i) actors.push_back(rayx::Actor(BenchActor::Create).Remote(i));
  for (int i = 0; i < n; ++i) {
    int64_t id = *actors[static_cast<size_t>(i)].Task(&BenchActor::Id).Remote().Get(kCallTimeoutMs);
    Check(id == i, "actor " + std::to_string(i) + " reports id " + std::to_string(id));
  }
  return actors;
}

// Each actor's Echo count must equal the calls made to it.
void CheckCalls(const std::vector<rayx::ActorHandle<BenchActor>>& actors,
                const std::vector<int64_t>& calls) {
  for (size_t i = 0; i < actors.size(); ++i) {
    int64_t n = *actors[i].Task(&BenchActor::Calls).Remote().Get(kCallTimeoutMs);
    Check(n == calls[i], "actor " + std::to_string(i) + " ran " + std::to_string(n) +
                             " calls, " + std::to_string(calls[i]) + " were made");
  }
}

void KillActors(const std::vector<rayx::ActorHandle<BenchActor>>& actors) {
  for (const auto& a : actors) a.Kill();
}

// Submits kBatch calls to `actor`, then gets them all.
double ActorBatch(const rayx::ActorHandle<BenchActor>& actor, int64_t base) {
  std::vector<rayx::ObjectRef<int64_t>> refs;
  refs.reserve(kBatch);
  for (int64_t k = 0; k < kBatch; ++k) refs.push_back(actor.Task(&BenchActor::Echo).Remote(base + k));
  for (int64_t k = 0; k < kBatch; ++k) GetChecked(refs[k], base + k + 1, "BenchActor::Echo");
  return kBatch;
}

// Runs `body` with `n` fresh actors, checks their call counts, then stops them.
Stats WithActors(int n, const std::function<Stats(std::vector<rayx::ActorHandle<BenchActor>>&,
                                                  std::vector<int64_t>&)>& body) {
  auto actors = StartActors(n);
  std::vector<int64_t> calls(static_cast<size_t>(n), 0);
  try {
    Stats s = body(actors, calls);
    CheckCalls(actors, calls);
    KillActors(actors);
    return s;
  } catch (...) {
    KillActors(actors);
    throw;
  }
}

Stats ActorCallsSync(const Config& config) {
  return WithActors(1, [&](auto& actors, auto& calls) {
    return Measure(config, 1, [&](int) {
      ++calls[0];
      GetChecked(actors[0].Task(&BenchActor::Echo).Remote(calls[0]), calls[0] + 1,
                 "BenchActor::Echo");
      return 1.0;
    });
  });
}

Stats ActorCallsAsync(const Config& config) {
  return WithActors(1, [&](auto& actors, auto& calls) {
    return Measure(config, 1, [&](int) {
      calls[0] += kBatch;
      return ActorBatch(actors[0], calls[0]);
    });
  });
}

// Several threads calling one actor.
Stats ActorCallsConcurrent(const Config& config) {
  return WithActors(1, [&](auto& actors, auto& calls) {
    std::atomic<int64_t> made{0};
    Stats s = Measure(config, kClientThreads, [&](int) {
      int64_t base = made.fetch_add(kBatch);  // distinct arguments per batch
      return ActorBatch(actors[0], base);
    });
    calls[0] = made.load();
    return s;
  });
}

// n actors, n threads: thread i calls actor i.
Stats NNActorCallsAsync(const Config& config, int n) {
  return WithActors(n, [&](auto& actors, auto& calls) {
    return Measure(config, n, [&](int t) {
      auto& c = calls[static_cast<size_t>(t)];
      c += kBatch;
      return ActorBatch(actors[static_cast<size_t>(t)], c);
    });
  });
}

Stats PutCalls(const Config& config) {
  int64_t i = 0;
  rayx::ObjectRef<int64_t> last;
  Stats s = Measure(config, 1, [&](int) {
    last = rayx::Put(++i);
    return 1.0;
  });
  GetChecked(last, i, "Get of the last Put");
  return s;
}

Stats GetCalls(const Config& config) {
  auto ref = rayx::Put(int64_t{42});
  int64_t sum = 0, gets = 0;
  Stats s = Measure(config, 1, [&](int) {
    sum += *ref.Get(kCallTimeoutMs);
    ++gets;
    return 1.0;
  });
  Check(sum == 42 * gets, "Get of a small object returned a wrong value");
  return s;
}

Stats PutGigabytes(const Config& config) {
  std::vector<uint8_t> data(kLargeBytes);
  for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<uint8_t>(k * 31 + 7);
  rayx::ObjectRef<std::vector<uint8_t>> last;
  Stats s = Measure(
      config, 1,
      [&](int) {
        last = rayx::Put(data);
        return static_cast<double>(data.size());
      },
      1e-9);
  auto back = last.Get(kCallTimeoutMs);  // not timed
  Check(*back == data, "Get of the last large Put differs from what was put");
  return s;
}

// 100 MiB objects made on the node with the `bench_remote` resource (start
// one: `rayx start --address ... --resources '{"bench_remote": 1}'`), pulled by
// the driver's Get from that node's object server: what the data sockets'
// mechanism (authenticated or encrypted) costs. Only the Get is timed.
constexpr int64_t kTransferBytes = int64_t{100} << 20;
Stats FromSamples(std::vector<double> runs);
Stats TransferGigabytes(const Config& config) {
  auto remote = rayx::detail::CurrentClusterStatus(5000);
  bool found = false;
  if (remote.ok()) {
    for (const auto& n : remote->nodes) found = found || (n.alive && n.total.count("bench_remote"));
  }
  if (!found) {
    Fail("no node offers the bench_remote resource: start one (rayx start --address HEAD "
         "--node-ip-address 127.0.0.2 --resources '{\"bench_remote\": 1}') so the transfer "
         "crosses an object server");
  }
  auto one = [&](int64_t seed) {
    auto ref = rayx::Task(BenchBlob).SetResources({{"bench_remote", 0.01}}).Remote(kTransferBytes,
                                                                                    seed);
    Check(rayx::Wait(std::vector<rayx::ObjectRef<rayx::Bytes>>{ref}, 1, kCallTimeoutMs)
                  .ready.size() == 1,
          "BenchBlob did not finish");
    auto t0 = Clock::now();
    auto value = ref.Get(kCallTimeoutMs);
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    Check(value->data.size() == static_cast<size_t>(kTransferBytes) &&
              value->data[4096] == static_cast<uint8_t>(seed + 4096),
          "a pulled object differs from what its task made");
    return kTransferBytes / s * 1e-9;
  };
  one(0);  // warm-up: the remote worker starts
  std::vector<double> runs;
  for (int r = 0; r < config.runs; ++r) runs.push_back(one(r + 1));
  return FromSamples(runs);
}

// "0.93x".
std::string Ratio(double a, double b) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2fx", b > 0 ? a / b : 0.0);
  return text;
}

// A listening port on 127.0.0.1 that accepts nothing: a filter drops every
// SYN (what the kernel does for an address a server shut out).
class ControlPort {
 public:
  ControlPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    sock_filter drop = BPF_STMT(BPF_RET | BPF_K, 0);
    sock_fprog program{1, &drop};
    // The filter first: no connection is ever queued, and nothing accepts.
    Check(fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
              ::setsockopt(fd_, SOL_SOCKET, SO_ATTACH_FILTER, &program, sizeof program) == 0 &&
              ::listen(fd_, 16) == 0 &&
              ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0,
          "cannot make the control port");
    port_ = ntohs(addr.sin_port);
  }
  ~ControlPort() { ::close(fd_); }
  std::string address() const { return "tcp://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// Sync actor calls while a separate process (FloodProcess) opens connections
// that present a wrong credential to the actor's worker, every node's object
// server and the head at `flood_rate` a second, against the same calls while
// the same flood goes to a control port that drops every SYN (what it costs
// is the flooding process's own, on this machine's CPUs: an attacker's are
// its own), and without any flood, alternating run by run.
double flood_rate = 100;
std::string flood_only;  // "", "worker", "head" or "objects"
std::string flood_from = "127.0.0.9";  // an address, or "many"

Stats ActorCallsSyncDuringAuthFlood(const Config& config) {
  return WithActors(1, [&](auto& actors, auto& calls) {
    auto info = rayx::protocol::Decode<rayx::protocol::ActorInfo>(rayx::detail::SerializeActor(actors[0].ptr()));
    Check(info.ok(), "cannot describe the actor");
    auto status = rayx::detail::CurrentClusterStatus(5000);
    Check(status.ok(), "no cluster status");
    const bool data_curve =
        rayx::detail::CurrentObjectServerSecurity().mode == rayx::transport::WireSecurity::kEncrypted;
    std::vector<rayx::bench::FloodTarget> targets = {
        {info->worker_address, data_curve},
        {"tcp://" + rayx::detail::CurrentHeadAddress(), true}};
    for (const auto& n : status->nodes) {
      if (n.alive) targets.push_back({n.object_address, data_curve});
    }
    if (flood_only == "worker") targets.resize(1);
    if (flood_only == "head") targets = {targets[1]};
    if (flood_only == "objects") targets.erase(targets.begin(), targets.begin() + 2);
    Check(!targets.empty(), "nothing to flood");
    const std::string key = rayx::detail::CurrentHeadSecurity().server_key;
    rayx::bench::FloodProcess flood(flood_rate, key, flood_from, targets);
    ControlPort port;
    rayx::bench::FloodProcess control(flood_rate, key, flood_from, {{port.address(), true}});
    auto step = [&](int) {
      ++calls[0];
      GetChecked(actors[0].Task(&BenchActor::Echo).Remote(calls[0]), calls[0] + 1,
                 "BenchActor::Echo");
      return 1.0;
    };
    std::vector<double> with, controlled, without;
    TimedRun(1, std::max<int64_t>(config.duration_ms / 2, 1), step);  // warm-up
    for (int r = 0; r < config.runs; ++r) {
      without.push_back(TimedRun(1, config.duration_ms, step));
      control.Flood(true);
      controlled.push_back(TimedRun(1, config.duration_ms, step));
      control.Flood(false);
      flood.Flood(true);
      with.push_back(TimedRun(1, config.duration_ms, step));
      flood.Flood(false);
    }
    (void)control.Finish();
    auto totals = flood.Finish();
    Check(totals.attempts > 0, "the flood opened no connection");
    Check(totals.answered == 0, std::to_string(totals.answered) +
                                    " flooding connections got an answer: a door is open");
    std::cout << " [" << totals.attempts << " refused connections from " << flood_from << ", "
              << flood_rate << "/s asked, flooder CPU " << static_cast<int64_t>(totals.cpu_seconds * 1000)
              << " ms; no flood " << static_cast<int64_t>(FromSamples(without).median)
              << " calls/s, the flood " << Ratio(FromSamples(with).median, FromSamples(without).median)
              << " of it]";
    Stats s = FromSamples(with);
    s.baseline_runs = controlled;
    return s;
  });
}

// Ray's definition: submit 1000 small tasks, then drain them with Wait(num_returns=1)
// one at a time. One unit = the whole 1000-ref drain.
Stats Wait1kRefs(const Config& config) {
  int64_t round = 0;
  return Measure(config, 1, [&](int) {
    int64_t base = ++round * 1000000;
    std::vector<rayx::ObjectRef<int64_t>> not_ready;
    not_ready.reserve(kWaitRefs);
    for (int k = 0; k < kWaitRefs; ++k) not_ready.push_back(rayx::Task(BenchSmallValue).Remote(base + k));
    int64_t sum = 0;
    int drained = 0;
    while (!not_ready.empty()) {
      auto r = rayx::Wait(not_ready, 1, kCallTimeoutMs);
      if (r.ready.size() != 1) {
        Fail("Wait(" + std::to_string(not_ready.size()) + " refs, num_returns=1) returned " +
             std::to_string(r.ready.size()) + " ready refs after " +
             std::to_string(kCallTimeoutMs) + " ms");
      }
      sum += *r.ready[0].Get(kCallTimeoutMs);
      ++drained;
      not_ready = std::move(r.unready);
    }
    int64_t want = kWaitRefs * base + int64_t{kWaitRefs} * (kWaitRefs + 1) / 2;
    Check(drained == kWaitRefs && sum == want, "the 1000 waited-on results");
    return 1.0;
  });
}

// ---- Report ------------------------------------------------------------------------

// kBelowBaseline / kAboveBaseline: the median over the baseline's median is
// at most / at least the metric's bound (1 unless set: lower latency, higher
// bandwidth than torch gloo; within 2% of raw NCCL).
enum class Target { kNone, kZmqRatio, kRate, kMaxMs, kBelowBaseline, kAboveBaseline };

// ---- Train: a group's start and its restart after a rank's death ------------

int64_t MonotonicUs() {
  // CLOCK_MONOTONIC: one timeline for every process of this machine.
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct TrainBenchConfig {
  std::string tag;
  bool hold = false;  // attempt 0 keeps reporting until a rank is killed
  MSGPACK_DEFINE_MAP(tag, hold)
};

// Each rank notes when it entered the loop; with `hold`, the first attempt
// reports (a barrier) with a small checkpoint and then keeps reporting until
// the benchmark kills a rank.
void BenchTrainLoop(TrainBenchConfig c) {
  auto ctx = rayx::train::GetContext();
  const std::string prefix = "bench/" + c.tag + "/" + std::to_string(ctx.GetAttempt());
  rayx::kv::Put(prefix + "/in/" + std::to_string(ctx.GetWorldRank()), std::to_string(MonotonicUs()));
  rayx::kv::Put(prefix + "/pid/" + std::to_string(ctx.GetWorldRank()), std::to_string(getpid()));
  if (!c.hold || ctx.GetAttempt() > 0) return;
  std::string dir = "/tmp/rayx-bench-ckpt-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/state") << "epoch 0\n";
  rayx::train::Report({{"epoch", 0}}, rayx::train::Checkpoint::FromDirectory(dir));
  while (true) rayx::train::Report({{"epoch", 1}});
}
RAYX_REMOTE(BenchTrainLoop);

constexpr int kTrainRanks = 4;

rayx::train::ScalingConfig TrainBenchScaling() {
  rayx::train::ScalingConfig s;
  s.num_workers = kTrainRanks;
  s.resources_per_worker = {{"CPU", 0.25}};  // four ranks fit on a 1-CPU node
  return s;
}

// The latest time any rank of attempt `attempt` of run `tag` entered the loop.
int64_t LastEntryUs(const std::string& tag, int attempt) {
  int64_t last = 0;
  for (int r = 0; r < kTrainRanks; ++r) {
    std::string v = rayx::kv::Wait("bench/" + tag + "/" + std::to_string(attempt) + "/in/" +
                                       std::to_string(r),
                                   60000);
    last = std::max<int64_t>(last, std::stoll(v));
  }
  return last;
}

Stats FromSamples(std::vector<double> runs) {
  Stats s;
  s.runs = runs;
  std::sort(runs.begin(), runs.end());
  size_t n = runs.size();
  s.median = n % 2 ? runs[n / 2] : (runs[n / 2 - 1] + runs[n / 2]) / 2;
  s.min = runs.front();
  s.max = runs.back();
  return s;
}

// ---- Allreduce: a Gloo group of rank actors, next to torch gloo -------------------

constexpr int kAllReduceSmall = 500;  // 4-byte allreduces per round
constexpr int kAllReduceBig = 5;      // 64 MiB allreduces per round

rayx::bench::TorchBaseline torch_baseline;  // set from the flags in main
std::string torch_script_error;               // why torch is not measured, if known

using Rounds = std::vector<rayx::bench::AllReduceRound>;

// Rounds measured once per rank count: a latency and a bandwidth metric share them.
const Rounds& MeasuredOnce(std::map<int, Rounds>& cache, int ranks,
                           const std::function<Rounds()>& measure) {
  auto it = cache.find(ranks);
  if (it == cache.end()) it = cache.emplace(ranks, measure()).first;
  return it->second;
}

// One figure of every round, with its baseline's (or why those are missing:
// `baseline_missing` when known before measuring, else the rounds' own error).
Stats RoundsMetric(const Rounds& rounds, bool latency, const std::string& baseline_missing) {
  std::vector<double> ours, baseline;
  std::string baseline_error;
  for (const auto& round : rounds) {
    ours.push_back(latency ? round.rayx.latency_us : round.rayx.gbps);
    if (round.baseline) {
      baseline.push_back(latency ? round.baseline->latency_us : round.baseline->gbps);
    }
    if (!round.baseline_error.empty()) baseline_error = round.baseline_error;
  }
  Stats s = FromSamples(ours);
  s.baseline_runs = baseline;
  s.baseline_error = baseline_missing.empty() ? baseline_error : baseline_missing;
  return s;
}

Stats AllReduceMetric(int ranks, bool latency, const Config& config) {
  static std::map<int, Rounds> measured;
  return RoundsMetric(MeasuredOnce(measured, ranks,
                                   [&] {
                                     return rayx::bench::MeasureAllReduce(
                                         ranks, config.runs, kAllReduceSmall, kAllReduceBig,
                                         torch_baseline);
                                   }),
                      latency, torch_script_error);
}

// ---- NCCL allreduce: an NCCL actor group of GPU ranks, next to raw NCCL --------

constexpr int kNcclSmall = 1000;  // 4-byte allreduces per round
constexpr int kNcclBig = 20;      // 64 MiB allreduces per round

Stats NcclMetric(int gpus, bool latency, const Config& config) {
  static std::map<int, Rounds> measured;
  return RoundsMetric(MeasuredOnce(measured, gpus,
                                   [&] {
                                     return rayx::bench::MeasureNcclAllReduce(
                                         gpus, config.runs, kNcclSmall, kNcclBig);
                                   }),
                      latency, "");
}

// From Fit() to every rank inside the loop: 4 CPU ranks with Gloo, warm cluster.
Stats TrainGroupReady(const Config& config) {
  std::vector<double> ms;
  for (int r = -1; r < config.runs; ++r) {  // run -1 warms the cluster up
    std::string tag = "ready-" + rayx::detail::RandomHex(6);
    int64_t start = MonotonicUs();
    rayx::train::DataParallelTrainer trainer(BenchTrainLoop, TrainBenchConfig{tag, false},
                                             TrainBenchScaling(), {.name = tag});
    auto result = trainer.Fit();
    Check(result.error.empty(), "train run failed: " + result.error);
    if (r >= 0) ms.push_back(static_cast<double>(LastEntryUs(tag, 0) - start) / 1000.0);
  }
  return FromSamples(ms);
}

// From a rank's SIGKILL to every rank back inside the loop (small checkpoint).
Stats TrainRestart(const Config& config) {
  std::vector<double> ms;
  for (int r = 0; r < config.runs; ++r) {
    std::string tag = "restart-" + rayx::detail::RandomHex(6);
    rayx::train::FailureConfig failure;
    failure.max_failures = 1;
    auto fit = std::async(std::launch::async, [&] {
      return rayx::train::DataParallelTrainer(BenchTrainLoop, TrainBenchConfig{tag, true},
                                              TrainBenchScaling(), {.name = tag}, failure)
          .Fit();
    });
    LastEntryUs(tag, 0);
    int victim = std::stoi(rayx::kv::Wait("bench/" + tag + "/0/pid/1", 60000));
    int64_t killed = MonotonicUs();
    ::kill(victim, SIGKILL);
    ms.push_back(static_cast<double>(LastEntryUs(tag, 1) - killed) / 1000.0);
    auto result = fit.get();
    Check(result.error.empty() && result.num_restarts == 1,
          "train restart run: " + result.error);
  }
  return FromSamples(ms);
}

// Ray's placement_group_create/removal: groups of one small bundle created,
// waited for and removed, per second.
Stats PlacementGroupCreateRemoval(const Config& config) {
  return Measure(config, 1, [&](int) {
    constexpr int kGroups = 100;
    std::vector<rayx::PlacementGroup> groups;
    groups.reserve(kGroups);
    for (int i = 0; i < kGroups; ++i) {
      groups.push_back(rayx::CreatePlacementGroup(
          {.bundles = {{{"CPU", 0.01}}}, .strategy = rayx::PlacementStrategy::PACK}));
    }
    for (auto& g : groups) Check(g.Wait(30), "placement group " + g.GetID() + " not ready");
    for (auto& g : groups) rayx::RemovePlacementGroup(g.GetID());
    return static_cast<double>(kGroups);
  });
}

// Ray's many_actors: actors created and answering their first call, per
// second (each is a new worker process).
Stats ActorCreation(const Config& config) {
  return Measure(config, 1, [&](int) {
    constexpr int kActors = 16;
    auto actors = StartActors(kActors);  // waits for every actor's first answer
    KillActors(actors);
    return static_cast<double>(kActors);
  });
}

struct Metric {
  std::string name;
  std::string unit;
  Target target = Target::kNone;
  double min_rate = 0;  // kRate, kMaxMs; the ratio's bound for the baseline targets (0: 1)
  std::function<Stats(const Config&)> run;
  // Metrics run in this order (the table keeps Ray's order). Everything that
  // leases task workers runs last and back to back: a task worker left idle for
  // a second is handed back, and closing its connection can wedge the runtime
  // (see docs/performance.md, "Problems found").
  int run_order = 0;
  bool ran = false;
  Stats stats;
  std::string error;
  std::string baseline_name = "torch gloo";  // kBelowBaseline, kAboveBaseline
  std::string note;                          // printed after the target
};

std::string Fmt(double v, const std::string& unit) {
  char buf[64];
  if (unit == "GB/s") {
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return buf;
  }
  if (v < 100) {
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.0f", v);
  std::string digits = buf, out;
  for (size_t k = 0; k < digits.size(); ++k) {
    if (k > 0 && (digits.size() - k) % 3 == 0) out += ',';
    out += digits[k];
  }
  return out;
}

std::string Pad(std::string s, size_t width, bool right = false) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        return v;
      }
    }
  }
  struct utsname u {};
  return uname(&u) == 0 ? std::string(u.machine) : "unknown";
}

std::string MemTotal() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  long long kb = 0;
  while (in >> key >> kb >> unit) {
    if (key == "MemTotal:") {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(kb) / (1 << 20));
      return buf;
    }
  }
  return "unknown";
}

std::string Now() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S %Z", std::localtime(&t));
  return buf;
}

void PrintTable(const std::vector<Metric>& metrics) {
  const Metric* zmq_floor = nullptr;
  for (const auto& m : metrics) {
    if (m.name == "zmq_req_rep_roundtrip" && m.ran) zmq_floor = &m;
  }
  std::cout << "\n"
            << Pad("metric", 32) << Pad("unit", 11) << Pad("median", 12, true)
            << Pad("min", 12, true) << Pad("max", 12, true) << "   target / verdict\n"
            << std::string(120, '-') << "\n";
  for (const auto& m : metrics) {
    std::cout << Pad(m.name, 32) << Pad(m.unit, 11);
    if (!m.ran) {
      std::cout << "FAILED: " << m.error << "\n";
      continue;
    }
    std::cout << Pad(Fmt(m.stats.median, m.unit), 12, true)
              << Pad(Fmt(m.stats.min, m.unit), 12, true) << Pad(Fmt(m.stats.max, m.unit), 12, true)
              << "   ";
    switch (m.target) {
      case Target::kNone:
        std::cout << (m.name == "zmq_req_rep_roundtrip" ? "floor (raw ZeroMQ, no runtime)"
                                                        : "no target");
        break;
      case Target::kZmqRatio:
        if (zmq_floor) {
          char buf[160];
          double ratio = m.stats.median / zmq_floor->stats.median;
          std::snprintf(buf, sizeof buf, "%.2fx of zmq (target >= 0.33): %s", ratio,
                        ratio >= 1.0 / 3 ? "meets target" : "below target");
          std::cout << buf;
        } else {
          std::cout << "target >= 0.33x of zmq: zmq floor not measured";
        }
        break;
      case Target::kRate:
        std::cout << ">= " << Fmt(m.min_rate, m.unit) << " " << m.unit << ": "
                  << (m.stats.median >= m.min_rate ? "meets target" : "below target");
        break;
      case Target::kMaxMs:
        std::cout << "<= " << Fmt(m.min_rate, m.unit) << " " << m.unit << ": "
                  << (m.stats.median <= m.min_rate ? "meets target" : "over target");
        break;
      case Target::kBelowBaseline:
      case Target::kAboveBaseline: {
        if (m.stats.baseline_runs.empty()) {
          std::cout << m.baseline_name
                    << " not measured: " << m.stats.baseline_error.substr(0, 200);
          break;
        }
        double baseline = FromSamples(m.stats.baseline_runs).median;
        double ratio = m.stats.median / baseline;
        bool below = m.target == Target::kBelowBaseline;
        double bound = m.min_rate > 0 ? m.min_rate : 1.0;
        bool met = below ? ratio <= bound : ratio >= bound;
        char buf[200];
        std::snprintf(buf, sizeof buf, "%s %s, %.2fx (target %s %.3g): %s",
                      m.baseline_name.c_str(), Fmt(baseline, m.unit).c_str(), ratio,
                      below ? "<=" : ">=", bound, met ? "meets target" : "misses target");
        std::cout << buf;
        break;
      }
    }
    std::cout << m.note << "\n";
  }
  std::cout << "\nper-run values (" << "warm-up excluded):\n";
  for (const auto& m : metrics) {
    if (!m.ran) continue;
    std::cout << "  " << Pad(m.name, 32);
    for (double v : m.stats.runs) std::cout << " " << Fmt(v, m.unit);
    std::cout << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  // In a worker process this serves tasks and never returns.
  if (std::getenv("RAYX_WORKER_MODE")) rayx::Init(rayx::Options());
  if (argc > 1 && std::string(argv[1]) == "--flood-child") {
    return rayx::bench::FloodChildMain(argc, argv);
  }

  std::string address, token_file, only;
  int64_t runs = 5, duration_ms = 1000;
  bool help = false;
  rayx::FlagParser flags("rayx microbenchmark");
  flags.AddString("address", &address,
                  "HOST:PORT of the cluster's head (default: $RAYX_ADDRESS, this machine's "
                  "cluster, else a private one)");
  flags.AddString("token-file", &token_file,
                  "a file (mode 0600) holding the cluster token (default: $RAYX_TOKEN, "
                  "$RAYX_TOKEN_FILE, or the session's)");
  flags.AddInt("runs", &runs, 1, 1000, "timed runs per metric; the median is reported (default 5)");
  flags.AddInt("duration-ms", &duration_ms, 1, 600000, "length of one run in ms (default 1000)");
  flags.AddString("only", &only, "run only the metrics whose name contains this");
  int64_t flood_per_second = static_cast<int64_t>(flood_rate);
  flags.AddInt("flood-rate", &flood_per_second, 1, 100000,
               "bad-credential connections a second in actor_calls_sync_auth_flood "
               "(default 100)");
  flags.AddString("flood-only", &flood_only,
                  "flood only the actor's worker, the head or the object servers "
                  "(worker|head|objects; default all of them)");
  flags.AddString("flood-from", &flood_from,
                  "the flood's source address (default 127.0.0.9: one machine of its own), "
                  "or 'many': each connection from another address");
  std::string torch_python = "/usr/bin/python3", torch_script;
  flags.AddString("torch-python", &torch_python,
                  "a Python that sees torch, for the allreduce baseline (default "
                  "/usr/bin/python3: Debian's python3-torch)");
  flags.AddString("torch-script", &torch_script,
                  "bench/torch_allreduce.py (default: the source tree's, else the installed "
                  "share/rayx copy)");
  flags.AddBool("help", &help, "show this help");
  std::vector<std::string> args(argv + 1, argv + argc);
  if (auto st = flags.Parse(args, nullptr); !st.ok()) {
    std::cerr << st.message() << "\n";
    return 2;
  }
  if (help) {
    std::cout << "usage: rayx microbenchmark [--address HOST:PORT] [--token-file F] [--runs N] "
                 "[--duration-ms MS] [--only NAME]\n"
                 "Measures tasks, actor calls and objects (Ray's microbenchmark metrics) and a "
                 "raw ZeroMQ round trip as the floor.\n\n"
              << flags.Usage();
    return 0;
  }
  if (torch_script.empty()) {
    std::vector<std::filesystem::path> candidates = {
        std::filesystem::path(RAYX_SOURCE_DIR) / "bench" / "torch_allreduce.py"};
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
      candidates.push_back(self.parent_path().parent_path() / "share" / "rayx" /
                           "torch_allreduce.py");
    }
    for (const auto& c : candidates) {
      if (!c.empty() && std::filesystem::is_regular_file(c, ec)) {
        torch_script = c.string();
        break;
      }
    }
    if (torch_script.empty()) torch_script_error = "no torch_allreduce.py found (--torch-script)";
  }
  torch_baseline = {torch_python, torch_script};
  flood_rate = static_cast<double>(flood_per_second);
  if (!flood_only.empty() && flood_only != "worker" && flood_only != "head" &&
      flood_only != "objects") {
    std::cerr << "rayx microbenchmark: --flood-only must be worker, head or objects, not '"
              << flood_only << "'\n";
    return 2;
  }
  Config config;
  config.runs = static_cast<int>(runs);
  config.duration_ms = duration_ms;
  int cpus = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  int n_actors = std::max(2, cpus);

  const double kRateTarget = 100000;
  std::vector<Metric> metrics = {
      {"zmq_req_rep_roundtrip", "trips/s", Target::kNone, 0, ZmqReqRep, 0},
      {"single_client_tasks_sync", "tasks/s", Target::kZmqRatio, 0, TasksSync, 8},
      {"single_client_tasks_async", "tasks/s", Target::kRate, kRateTarget, TasksAsync, 9},
      {"multi_client_tasks_async", "tasks/s", Target::kRate, kRateTarget, MultiClientTasksAsync,
       10},
      {"1_1_actor_calls_sync", "calls/s", Target::kZmqRatio, 0, ActorCallsSync, 1},
      {"1_1_actor_calls_async", "calls/s", Target::kRate, kRateTarget, ActorCallsAsync, 2},
      {"1_1_actor_calls_concurrent", "calls/s", Target::kRate, kRateTarget, ActorCallsConcurrent,
       3},
      {"n_n_actor_calls_async", "calls/s", Target::kRate, kRateTarget,
       [n_actors](const Config& c) { return NNActorCallsAsync(c, n_actors); }, 4},
      {"single_client_put_calls", "puts/s", Target::kNone, 0, PutCalls, 5},
      {"single_client_get_calls", "gets/s", Target::kNone, 0, GetCalls, 6},
      {"single_client_put_gigabytes", "GB/s", Target::kRate, 5.0, PutGigabytes, 7},
      {"single_client_wait_1k_refs", "drains/s", Target::kNone, 0, Wait1kRefs, 11},
      {"placement_group_create/removal", "groups/s", Target::kRate, 5000,
       PlacementGroupCreateRemoval, 12},
      {"actor_creation", "actors/s", Target::kNone, 0, ActorCreation, 13},
      {"transfer_100MiB_remote_GBps", "GB/s", Target::kNone, 0, TransferGigabytes, 13},
      {"actor_calls_sync_auth_flood", "calls/s", Target::kAboveBaseline, 0.9,
       ActorCallsSyncDuringAuthFlood, 13, false, {}, "", "the flood at a dead port"},
      {"train_group_ready_ms", "ms", Target::kMaxMs, 150, TrainGroupReady, 14},
      {"train_restart_ms", "ms", Target::kMaxMs, 1000, TrainRestart, 15},
  };
  for (int ranks : {2, 4}) {
    std::string n = std::to_string(ranks);
    metrics.push_back({"allreduce_4B_latency_us_" + n + "ranks", "us", Target::kBelowBaseline, 0,
                       [ranks](const Config& c) { return AllReduceMetric(ranks, true, c); },
                       14 + 2 * ranks});
    metrics.push_back({"allreduce_64MiB_GBps_" + n + "ranks", "GB/s", Target::kAboveBaseline, 0,
                       [ranks](const Config& c) { return AllReduceMetric(ranks, false, c); },
                       15 + 2 * ranks});
  }
  // NCCL: every GPU this process sees as one actor group, against raw NCCL in
  // the same rank processes ("at least 0.98x": bandwidth >= 0.98x, latency
  // <= 1/0.98x).
  std::string no_gpu;
  const int gpus = rayx::bench::NcclBenchGpus(&no_gpu);
  if (gpus > 0) {
    std::string n = std::to_string(gpus);
    // One rank's in-place allreduce launches no NCCL kernel: both sides time
    // the call alone, so the figure is rayx's overhead per call, not a rate.
    const std::string one_gpu =
        gpus == 1 ? " (one GPU: no NCCL kernel runs, so this compares call overhead only; the "
                    "target is for 2+ GPUs)"
                  : "";
    metrics.push_back({"nccl_allreduce_4B_latency_us_" + n + "gpus", "us",
                       Target::kBelowBaseline, 1 / 0.98,
                       [gpus](const Config& c) { return NcclMetric(gpus, true, c); }, 30});
    metrics.back().baseline_name = "raw NCCL";
    metrics.back().note = one_gpu;
    metrics.push_back({"nccl_allreduce_64MiB_GBps_" + n + "gpus", "GB/s", Target::kAboveBaseline,
                       0.98, [gpus](const Config& c) { return NcclMetric(gpus, false, c); }, 31});
    metrics.back().baseline_name = "raw NCCL";
    metrics.back().note = one_gpu;
  }
  if (!only.empty()) {
    std::vector<Metric> chosen;
    bool needs_zmq = false;
    for (auto& m : metrics) {
      if (m.name.find(only) != std::string::npos) {
        chosen.push_back(m);
        needs_zmq = needs_zmq || m.target == Target::kZmqRatio;
      }
    }
    if (chosen.empty()) {
      std::string names;
      for (auto& m : metrics) names += (names.empty() ? "" : ", ") + m.name;
      std::cerr << "rayx microbenchmark: --only '" << only << "' matches no metric (" << names
                << ")";
      if (gpus == 0) std::cerr << "; the nccl_* metrics need a GPU: " << no_gpu;
      std::cerr << "\n";
      return 2;
    }
    // The sync metrics are reported against the zmq floor: measure it too.
    if (needs_zmq && chosen.front().name != metrics.front().name) {
      chosen.insert(chosen.begin(), metrics.front());
    }
    metrics = std::move(chosen);
  }

  std::cout << "rayx microbenchmark\n"
            << "  date:     " << Now() << "\n"
            << "  machine:  " << cpus << " CPUs (nproc), " << CpuModel() << ", " << MemTotal()
            << " RAM\n"
            << "  cluster:  "
            << (!address.empty()                 ? "--address " + address
                : std::getenv("RAYX_ADDRESS")    ? std::string("$RAYX_ADDRESS=") +
                                                    std::getenv("RAYX_ADDRESS")
                                                 : std::string("this machine's `rayx start` "
                                                               "cluster, else a private one"))
            << "\n"
            << "  settings: " << config.runs << " runs x " << config.duration_ms
            << " ms per metric after a warm-up run; batches of " << kBatch << " calls; "
            << kClientThreads << " client threads; " << n_actors << " actors for n_n; "
            << (kLargeBytes >> 20) << " MiB per large Put (GB = 1e9 bytes)\n"
            << "  nccl:     "
            << (gpus > 0 ? std::to_string(gpus) +
                               " GPU(s): one NCCL actor group against raw NCCL in its ranks"
                         : "not measured (" + no_gpu + ")")
            << "\n"
            << std::flush;

  std::vector<Metric*> schedule;
  for (auto& m : metrics) schedule.push_back(&m);
  std::stable_sort(schedule.begin(), schedule.end(),
                   [](const Metric* a, const Metric* b) { return a->run_order < b->run_order; });

  int rc = 0;
  rayx::Options options;
  options.address = address;
  auto token = rayx::detail::TokenFromFileOrEnvironment(token_file);
  if (!token.ok()) {
    std::cerr << "rayx microbenchmark: " << token.status().message() << "\n";
    return 2;
  }
  options.token = *token;
  try {
    rayx::Init(options);
    for (Metric* m : schedule) {
      std::cout << "  running " << Pad(m->name, 29) << std::flush;
      auto t0 = Clock::now();
      bool failed = false;
      try {
        m->stats = m->run(config);
        m->ran = true;
        std::cout << " median " << Fmt(m->stats.median, m->unit) << " " << m->unit;
      } catch (const std::exception& e) {
        m->error = e.what();
        rc = 1;
        failed = true;
        std::cout << " FAILED: " << m->error;
      }
      std::cout << "  ("
                << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()
                << " ms)\n"
                << std::flush;
      if (failed) {
        // The runtime may be wedged (a call that never completes): start afresh
        // so the remaining metrics still measure something.
        std::cout << "  restarting the rayx runtime after the failure\n" << std::flush;
        rayx::Shutdown();
        rayx::Init(options);
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "rayx microbenchmark: " << e.what() << "\n";
    rayx::Shutdown();
    return 1;
  }
  rayx::Shutdown();
  PrintTable(metrics);
  std::cout << "\nRay's published numbers (64-vCPU machine, not measured here): tasks sync 981/s, "
               "tasks async 8,040/s, actor calls sync 2,012/s, actor calls async 8,664/s, "
               "put 19.9 GB/s.\n";
  return rc;
}
