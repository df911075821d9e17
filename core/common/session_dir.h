// The session directory: what `rayx start` started on this machine, so `rayx
// stop` can stop exactly those processes and `rayx status`, the other CLI
// commands and rayx::Init (core/runtime/api.cc) can find the local cluster and
// its token. Internal to rayx (namespace rayx::detail): not part of the public API.
//
// Layout under the temp dir (default /tmp/rayx, or --temp-dir, or $RAYX_TEMP_DIR):
//   session_<time>_<pid>/session.conf   role, head address, port, cluster id, token (0600)
//   session_<time>_<pid>/pids/<name>.pid "pid start-time" per daemon started
//   session_<time>_<pid>/logs/<name>.log  each daemon's stdout and stderr
//   session_<time>_<pid>/groups/<pid>     "pid start-time" per lease process group
//                                        the node agent runs (RecordGroup)
//   latest                               name of the newest session
// One session per `rayx start` invocation; `rayx stop` removes the pid files of
// what it stopped and keeps the logs.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/process_control.h"
#include "rayx/status.h"

namespace rayx::detail {

// The default temp dir: $RAYX_TEMP_DIR, else /tmp/rayx.
std::string DefaultTempDir();

// One session directory: a value that names it (copyable); every method reads
// or writes the files directly, so two Session objects for the same path see
// each other's changes. Not synchronized: concurrent writers to one session
// (two `rayx start` never share one) would race.
class Session {
 public:
  // Creates a new, empty session under `temp_dir` (made 0700 if absent).
  static Result<Session> Create(const std::string& temp_dir);
  // All sessions under `temp_dir`, newest first.
  static std::vector<Session> List(const std::string& temp_dir);

  const std::string& path() const { return path_; }
  std::string LogPath(const std::string& name) const { return path_ + "/logs/" + name + ".log"; }
  // Where the session's node agent records its lease process groups.
  std::string GroupDir() const { return path_ + "/groups"; }

  // session.conf as key=value pairs.
  Status WriteConfig(const std::map<std::string, std::string>& config) const;
  std::map<std::string, std::string> ReadConfig() const;

  Status RecordProcess(const std::string& name, const ProcessRecord& record) const;
  // name -> record for each pid file.
  std::map<std::string, ProcessRecord> Processes() const;
  void ForgetProcess(const std::string& name) const;

  // True when some recorded process still runs.
  bool HasRunningProcess() const;

  // Deletes the session directory, logs included.
  void Remove() const;

  // Makes this the session `rayx status` uses by default.
  void MarkLatest() const;

 private:
  explicit Session(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// The head address and token of the cluster this machine belongs to: the newest
// session with a running process. NotFound (with advice) when there is none.
struct LocalCluster {
  std::string address;
  std::string token;
};
Result<LocalCluster> FindLocalCluster(const std::string& temp_dir);

// The token recorded for the cluster at `address` by a session on this machine.
std::optional<std::string> FindTokenFor(const std::string& temp_dir, const std::string& address);

// Reads a cluster token from `path`: a regular file of this user that no one
// else may read (mode 0600 or narrower), holding the token (surrounding
// whitespace ignored; at most 4 KiB). InvalidArgument saying what is wrong and
// how to fix it (e.g. "chmod 600 FILE") otherwise.
Result<std::string> ReadTokenFile(const std::string& path);

// Writes `token` to `path` (0600, created or replaced).
Status WriteTokenFile(const std::string& path, const std::string& token);

// The token a command was given without it appearing on a command line:
// `token_file` (--token-file) when set, else $RAYX_TOKEN, else
// $RAYX_TOKEN_FILE; "" when none is set.
Result<std::string> TokenFromFileOrEnvironment(const std::string& token_file);

// True when `a` and `b` ("host:port") name the same head as seen from this
// machine: same port, and the same host or both hosts local.
bool SameHead(const std::string& a, const std::string& b);

}  // namespace rayx::detail
