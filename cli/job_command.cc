// `rayx job submit|status|logs|stop|list`: jobs that the cluster runs and keeps.
#include "job_command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <thread>

#include "cluster_client.h"
#include "common/address.h"
#include "common/content_hash.h"
#include "common/directory_archive.h"
#include "common/flags.h"
#include "common/process_spawn.h"
#include "common/progress.h"
#include "common/session_dir.h"
#include "launch_command.h"
#include "protocol/job_messages.h"
#include "status_format.h"
#include "protocol/process_messages.h"
#include "transport/sync_client.h"

namespace rayx::cli {
namespace {

namespace fs = std::filesystem;
using transport::SyncClient;

volatile std::sig_atomic_t g_interrupted = 0;
void OnInterrupt(int) { g_interrupted = 1; }

// Intermediate build products and VCS data stay home; final programs travel.
const std::vector<std::string> kDefaultExcludes = {
    ".git", "__pycache__", "*.pyc", ".venv", "CMakeFiles", "CMakeCache.txt", "*.o", "*.obj",
    ".ninja_deps", ".ninja_log"};

int JobFail(const std::string& sub, const std::string& message, int code = 1) {
  std::cerr << "rayx job " << sub << ": " << message << "\n";
  return code;
}

struct Common {
  std::string address, temp_dir = detail::DefaultTempDir();
  TokenFlags token;
  bool help = false;
  void Add(FlagParser& flags) {
    flags.AddString("address", &address, "the head, HOST:PORT (default: $RAYX_ADDRESS, else "
                                         "this machine's cluster)");
    token.Add(flags);
    flags.AddString("temp-dir", &temp_dir, "session directory root (default /tmp/rayx)");
    flags.AddBool("help", &help, "show this help");
  }
};

// Packs `dir` as a deterministic tar archive (sorted, zero mtimes and owners),
// so the same content always has the same hash. At most `limit` bytes.
Result<std::string> Pack(const std::string& dir, const std::vector<std::string>& excludes,
                         uint64_t limit) {
  std::vector<std::string> args = {"tar", "--sort=name", "--mtime=@0", "--owner=0", "--group=0",
                                   "--numeric-owner"};
  for (const auto& e : excludes) args.push_back("--exclude=" + e);
  args.insert(args.end(), {"-cf", "-", "-C", dir, "."});
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::Internal("pipe failed");
  detail::SpawnOptions launch;
  launch.argv = args;
  launch.search_path = true;
  launch.stdout_fd = fds[1];
  launch.stderr_fd = detail::SpawnOptions::kDevNull;  // its complaints when cut off are noise
  Result<pid_t> spawned = detail::Spawn(launch);
  ::close(fds[1]);
  if (!spawned.ok()) {
    ::close(fds[0]);
    return spawned.status();
  }
  const pid_t pid = *spawned;
  std::string out;
  char buf[1 << 16];
  bool too_big = false;
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) {
    if (out.size() + static_cast<size_t>(n) > limit) {
      too_big = true;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  if (too_big) ::kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  if (too_big) {
    // Measure it for the message.
    uintmax_t total = 0;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_regular_file(ec)) total += it->file_size(ec);
    }
    return Status::InvalidArgument(
        "the working directory " + dir + " holds " + FormatBytes(static_cast<double>(total)) +
        ", over the limit of " + FormatBytes(static_cast<double>(limit)) +
        ": leave large files out with --exclude PATTERN, or keep data outside it");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::Internal("tar could not pack " + dir + " (run `tar -cf /dev/null -C " + dir +
                            " .` to see why)");
  }
  return out;
}


// Streams a job's output from `offset`; returns when the job ended and all of
// its output was printed, or (without `follow`) when what exists was printed.
// Returns the last JobInfo.
Result<protocol::JobInfo> StreamLogs(SyncClient& head, const std::string& token,
                                     const std::string& id, bool follow) {
  uint64_t offset = 0;
  std::unique_ptr<SyncClient> agent;
  std::string agent_address;
  // A head that stops answering may be restarting: jobs survive it, so the
  // job is followed again once it is back (up to kHeadGoneMs).
  constexpr int64_t kHeadGoneMs = 60000;
  bool head_silent = false;
  auto head_silent_since = std::chrono::steady_clock::now();
  while (true) {
    protocol::GetJobRequest get;
    get.token = token;
    get.submission_id = id;
    auto job = head.Call<protocol::GetJobReply>(get, 5000);
    if (!job.ok() && job.status().code() == StatusCode::kUnavailable && follow &&
        !g_interrupted) {
      auto now = std::chrono::steady_clock::now();
      if (!head_silent) {
        head_silent = true;
        head_silent_since = now;
        std::cerr << "rayx job: the head does not answer (it may be restarting); following job "
                  << id << " again once it is back (waiting up to " << kHeadGoneMs / 1000
                  << " s)" << std::endl;
      }
      if (now - head_silent_since < std::chrono::milliseconds(kHeadGoneMs)) continue;
    }
    if (!job.ok()) return job.status();
    head_silent = false;
    const protocol::JobInfo& info = job->job;
    bool drained = info.lease_id.IsNil() && protocol::Ended(info.state);
    if (!info.lease_id.IsNil()) {
      if (agent_address != info.object_address) {
        std::string hostport = info.object_address;
        if (hostport.rfind("tcp://", 0) == 0) hostport = hostport.substr(6);
        auto hp = ParseHostPort(hostport);
        if (!hp.ok()) return hp.status();
        auto security = AgentSecurityOf(head, token);
        if (!security.ok()) return security.status();
        auto c = SyncClient::Connect(*hp, *security);
        if (!c.ok()) return c.status();
        agent = std::move(*c);
        agent_address = info.object_address;
      }
      while (true) {
        protocol::ReadLogRequest read;
        read.lease_id = info.lease_id;
        read.offset = offset;
        auto chunk = agent->CallWithPayload<protocol::ReadLogReply>(read, "", 5000);
        if (!chunk.ok()) {
          drained = protocol::Ended(info.state);  // the node is gone: nothing more to read
          break;
        }
        offset += chunk->second.size();
        std::cout << chunk->second << std::flush;
        if (offset >= chunk->first.size) {
          drained = chunk->first.exited && protocol::Ended(info.state);
          break;
        }
      }
    }
    if (drained || (!follow && (!info.lease_id.IsNil() || protocol::Ended(info.state)))) return info;
    if (g_interrupted) return info;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int ExitCodeOf(const protocol::JobInfo& job) {
  if (job.state == protocol::JobState::kSucceeded) return 0;
  if (job.state == protocol::JobState::kFailed && job.exit_code > 0 && job.exit_code < 256) return job.exit_code;
  return 1;
}

int Submit(const std::vector<std::string>& all) {
  auto [args, command] = SplitAtDoubleDash(all);
  Common c;
  std::string working_dir, submission_id;
  std::vector<std::string> env, excludes;
  bool no_wait = false;
  FlagParser flags("rayx job submit");
  c.Add(flags);
  flags.AddString("working-dir", &working_dir,
                  "a directory to upload and run in (.git, CMakeFiles, *.o, __pycache__ and "
                  "similar build intermediates are left out)");
  flags.AddStringList("exclude", &excludes, "leave out files matching this pattern (repeatable)");
  flags.AddStringList("env", &env, "K=V set for the entrypoint (repeatable)");
  flags.AddString("submission-id", &submission_id, "the job's id (default: generated)");
  flags.AddBool("no-wait", &no_wait, "print the job's id and return without following it");
  if (Status s = flags.Parse(args, nullptr); !s.ok()) {
    return JobFail("submit", s.message() + " (the command goes after `--`)", 2);
  }
  if (c.help) {
    std::cout << "usage: rayx job submit [FLAGS] -- COMMAND [ARGS...]\n" << flags.Usage();
    return 0;
  }
  if (command.empty()) {
    return JobFail("submit", "no entrypoint: rayx job submit --working-dir . -- ./build/my_job", 2);
  }
  protocol::SubmitJobRequest req;
  for (const auto& kv : env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return JobFail("submit", "--env '" + kv + "': expected K=V", 2);
    }
    req.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!working_dir.empty() && !fs::is_directory(working_dir)) {
    return JobFail("submit", "--working-dir " + working_dir + " is not a directory", 2);
  }
  auto cluster = ResolveCluster(c.address, c.token, c.temp_dir);
  if (!cluster.ok()) return JobFail("submit", cluster.status().message());
  const std::string& token = cluster->second;
  auto head = ConnectToHead(cluster->first, cluster->second);
  if (!head.ok()) return JobFail("submit", head.status().message());

  if (!working_dir.empty()) {
    protocol::HasPackageRequest has;
    has.token = token;
    auto limits = (*head)->Call<protocol::HasPackageReply>(has, 5000);
    if (!limits.ok()) return JobFail("submit", limits.status().message());
    std::vector<std::string> all_excludes = kDefaultExcludes;
    all_excludes.insert(all_excludes.end(), excludes.begin(), excludes.end());
    auto package = Pack(working_dir, all_excludes, limits->max_bytes);
    if (!package.ok()) return JobFail("submit", package.status().message());
    std::string hash = ContentHashHex(*package);
    has.hash = hash;
    auto present = (*head)->Call<protocol::HasPackageReply>(has, 5000);
    if (!present.ok()) return JobFail("submit", present.status().message());
    if (!present->present) {
      Progress progress(std::cout, "Uploading the working directory", package->size(),
                        isatty(STDOUT_FILENO) != 0);
      auto uploaded = UploadPackage(**head, token, *package, 30000,
                                    [&](uint64_t sent, uint64_t) { progress.Update(sent); });
      if (!uploaded.ok()) {
        progress.Finish();
        return JobFail("submit",
                       "uploading the working directory: " + uploaded.status().message());
      }
      progress.Finish();
      std::cout << "Uploaded the working directory " << working_dir << " ("
                << FormatBytes(static_cast<double>(package->size())) << ", package "
                << hash.substr(0, 12) << ").\n";
    } else {
      std::cout << "The head has the working directory already (package " << hash.substr(0, 12)
                << ").\n";
    }
    req.package_hash = hash;
  }
  req.token = token;
  req.submission_id = submission_id;
  req.entrypoint = command;
  auto submitted = (*head)->Call<protocol::SubmitJobReply>(req, 10000);
  if (!submitted.ok()) return JobFail("submit", submitted.status().message());
  const std::string id = submitted->job.submission_id;
  std::cout << "Job '" << id << "' submitted.\n" << std::flush;
  if (no_wait) {
    std::cout << "  rayx job status " << id << "\n  rayx job logs " << id << " --follow\n"
              << "  rayx job stop " << id << "\n";
    return 0;
  }
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigaction(SIGINT, &sa, nullptr);
  auto final_info = StreamLogs(**head, token, id, /*follow=*/true);
  if (!final_info.ok()) return JobFail("submit", final_info.status().message());
  if (g_interrupted && !protocol::Ended(final_info->state)) {
    std::cerr << "\nStopped following; job '" << id << "' still runs. `rayx job stop " << id
              << "` stops it.\n";
    return 130;
  }
  std::cout << "Job '" << id << "' " << protocol::Name(final_info->state)
            << (final_info->message.empty() ? "" : ": " + final_info->message) << "\n";
  return ExitCodeOf(*final_info);
}

int Simple(const std::string& sub, const std::vector<std::string>& args) {
  Common c;
  bool follow = false;
  FlagParser flags("rayx job " + sub);
  c.Add(flags);
  if (sub == "logs") flags.AddBool("follow", &follow, "keep printing until the job ends");
  std::vector<std::string> positional;
  if (Status s = flags.Parse(args, &positional); !s.ok()) return JobFail(sub, s.message(), 2);
  if (c.help) {
    std::cout << "usage: rayx job " << sub << (sub == "list" ? "" : " ID") << " [FLAGS]\n"
              << flags.Usage();
    return 0;
  }
  if (sub == "list" ? !positional.empty() : positional.size() != 1) {
    return JobFail(sub,
                   sub == "list" ? "takes no arguments" : "name one job: rayx job " + sub + " ID", 2);
  }
  auto cluster = ResolveCluster(c.address, c.token, c.temp_dir);
  if (!cluster.ok()) return JobFail(sub, cluster.status().message());
  const std::string& token = cluster->second;
  auto head = ConnectToHead(cluster->first, cluster->second);
  if (!head.ok()) return JobFail(sub, head.status().message());
  if (sub == "list") {
    protocol::ListJobsRequest req;
    req.token = token;
    auto reply = (*head)->Call<protocol::ListJobsReply>(req, 5000);
    if (!reply.ok()) return JobFail(sub, reply.status().message());
    std::cout << "SUBMISSION_ID  STATE  SUBMITTED  ENTRYPOINT\n";
    for (const auto& j : reply->jobs) {
      std::string cmd;
      for (const auto& a : j.entrypoint) cmd += (cmd.empty() ? "" : " ") + a;
      std::cout << j.submission_id << "  " << protocol::Name(j.state) << "  " << FormatWallTime(j.submitted_at_ms)
                << "  " << cmd << "\n";
    }
    return 0;
  }
  const std::string& id = positional[0];
  if (sub == "status") {
    protocol::GetJobRequest req;
    req.token = token;
    req.submission_id = id;
    auto reply = (*head)->Call<protocol::GetJobReply>(req, 5000);
    if (!reply.ok()) return JobFail(sub, reply.status().message());
    const auto& j = reply->job;
    std::string cmd;
    for (const auto& a : j.entrypoint) cmd += (cmd.empty() ? "" : " ") + a;
    std::cout << "Job '" << j.submission_id << "': " << protocol::Name(j.state) << "\n"
              << "  entrypoint: " << cmd << "\n"
              << "  job id: " << j.job_id << "\n"
              << "  submitted: " << FormatWallTime(j.submitted_at_ms) << "\n";
    if (j.ended_at_ms) std::cout << "  ended: " << FormatWallTime(j.ended_at_ms) << "\n";
    if (!j.node_address.empty()) {
      std::cout << "  runs on: " << j.node_address << " (pid " << j.pid << ")\n";
    }
    if (protocol::Ended(j.state) && j.state != protocol::JobState::kStopped) std::cout << "  exit code: " << j.exit_code << "\n";
    if (!j.message.empty()) std::cout << "  " << j.message << "\n";
    return 0;
  }
  if (sub == "stop") {
    protocol::StopJobRequest req;
    req.token = token;
    req.submission_id = id;
    auto reply = (*head)->Call<protocol::StopJobReply>(req, 10000);
    if (!reply.ok()) return JobFail(sub, reply.status().message());
    std::cout << "Job '" << id << "': " << protocol::Name(reply->job.state) << "\n";
    return 0;
  }
  // logs
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigaction(SIGINT, &sa, nullptr);
  auto info = StreamLogs(**head, token, id, follow);
  if (!info.ok()) return JobFail(sub, info.status().message());
  return 0;
}

}  // namespace

int JobCommand(const std::vector<std::string>& args) {
  const char* usage =
      "usage: rayx job (submit | status | logs | stop | list) ...\n"
      "  submit [--working-dir DIR] [--env K=V] [--submission-id ID] [--no-wait] -- CMD ARGS...\n"
      "  status ID | logs ID [--follow] | stop ID | list\n";
  if (args.empty() || args[0] == "--help") {
    std::cout << usage;
    return args.empty() ? 2 : 0;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "submit") return Submit(rest);
  if (args[0] == "status" || args[0] == "logs" || args[0] == "stop" || args[0] == "list") {
    return Simple(args[0], rest);
  }
  std::cerr << "rayx job: unknown subcommand '" << args[0] << "'\n" << usage;
  return 2;
}

}  // namespace rayx::cli
