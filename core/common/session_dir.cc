// Session directory bookkeeping: creating, listing and reading sessions, and
// finding the local cluster.
#include "common/session_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "common/address.h"

namespace fs = std::filesystem;

namespace rayx::detail {

std::string DefaultTempDir() {
  const char* env = std::getenv("RAYX_TEMP_DIR");
  return env && *env ? env : "/tmp/rayx";
}

Result<Session> Session::Create(const std::string& temp_dir) {
  std::error_code ec;
  fs::create_directories(temp_dir, ec);
  if (ec) {
    return Status::Unavailable("cannot create the temp dir " + temp_dir + ": " + ec.message() +
                               " (choose another with --temp-dir)");
  }
  // The directory holds tokens and pid files that `rayx stop` signals: it must
  // be ours and private.
  struct stat st {};
  if (::stat(temp_dir.c_str(), &st) != 0 || st.st_uid != geteuid()) {
    return Status::Unavailable("the temp dir " + temp_dir +
                               " belongs to another user: choose another with --temp-dir");
  }
  ::chmod(temp_dir.c_str(), 0700);
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d_%H-%M-%S", &tm);
  std::string path = temp_dir + "/session_" + stamp + "_" + std::to_string(getpid());
  fs::create_directories(path + "/pids", ec);
  if (!ec) fs::create_directories(path + "/logs", ec);
  if (ec) return Status::Unavailable("cannot create " + path + ": " + ec.message());
  return Session(path);
}

std::vector<Session> Session::List(const std::string& temp_dir) {
  // Names start with a sortable time stamp.
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(temp_dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("session_", 0) != 0 || !entry.is_directory()) continue;
    found.push_back(entry.path().string());
  }
  std::sort(found.rbegin(), found.rend());
  std::vector<Session> out;
  for (auto& path : found) out.push_back(Session(path));
  return out;
}

Status Session::WriteConfig(const std::map<std::string, std::string>& config) const {
  std::string file = path_ + "/session.conf";
  std::string text;
  for (const auto& [k, v] : config) text += k + "=" + v + "\n";
  // Created 0600 from the start: it holds the cluster token.
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Unavailable("cannot write " + file);
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!ok) return Status::Unavailable("cannot write " + file);
  return Status::OK();
}

std::map<std::string, std::string> Session::ReadConfig() const {
  std::map<std::string, std::string> config;
  std::ifstream in(path_ + "/session.conf");
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos) config[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return config;
}

Status Session::RecordProcess(const std::string& name, const ProcessRecord& record) const {
  std::string file = path_ + "/pids/" + name + ".pid";
  std::ofstream out(file, std::ios::trunc);
  out << record.ToString() << "\n";
  if (!out) return Status::Unavailable("cannot write " + file);
  return Status::OK();
}

std::map<std::string, ProcessRecord> Session::Processes() const {
  std::map<std::string, ProcessRecord> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path_ + "/pids", ec)) {
    if (entry.path().extension() != ".pid") continue;
    std::ifstream in(entry.path());
    std::string text;
    std::getline(in, text);
    auto record = ProcessRecord::Parse(text);
    if (record.ok()) out[entry.path().stem().string()] = *record;
  }
  return out;
}

void Session::ForgetProcess(const std::string& name) const {
  std::error_code ec;
  fs::remove(path_ + "/pids/" + name + ".pid", ec);
}

bool Session::HasRunningProcess() const {
  for (const auto& [name, record] : Processes()) {
    if (IsRunning(record)) return true;
  }
  return false;
}

void Session::Remove() const {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void Session::MarkLatest() const {
  std::string temp_dir = path_.substr(0, path_.rfind('/'));
  std::ofstream out(temp_dir + "/latest", std::ios::trunc);
  out << path_.substr(path_.rfind('/') + 1) << "\n";
}

Result<LocalCluster> FindLocalCluster(const std::string& temp_dir) {
  // The latest session first, then any other with a live process.
  std::vector<Session> sessions = Session::List(temp_dir);
  std::ifstream latest_file(temp_dir + "/latest");
  std::string latest;
  std::getline(latest_file, latest);
  std::stable_partition(sessions.begin(), sessions.end(), [&](const Session& s) {
    return !latest.empty() && s.path().substr(s.path().rfind('/') + 1) == latest;
  });
  for (const auto& session : sessions) {
    if (!session.HasRunningProcess()) continue;
    auto config = session.ReadConfig();
    if (config.count("address") && config.count("token")) {
      return LocalCluster{config["address"], config["token"]};
    }
  }
  return Status::NotFound("no running rayx cluster found on this machine (temp dir " + temp_dir +
                          "): start one with `rayx start --head`, or pass --address HOST:PORT "
                          "(with RAYX_TOKEN or --token-file)");
}

std::optional<std::string> FindTokenFor(const std::string& temp_dir, const std::string& address) {
  for (const auto& session : Session::List(temp_dir)) {
    auto config = session.ReadConfig();
    if (config.count("token") && config.count("address") && SameHead(config["address"], address)) {
      return config["token"];
    }
  }
  return std::nullopt;
}

Result<std::string> ReadTokenFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return Status::InvalidArgument("cannot read the token file " + path + ": " +
                                   std::strerror(errno) +
                                   " (a regular file, not a link, holding the cluster token)");
  }
  struct stat st {};
  std::string why;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "it is not a regular file";
  } else if (st.st_uid != ::geteuid()) {
    why = "it belongs to another user (uid " + std::to_string(st.st_uid) + ")";
  } else if (st.st_mode & 077) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 0777));
    why = std::string("others may read it (mode ") + mode + "): run `chmod 600 " + path + "`";
  } else if (st.st_size > 4096) {
    why = "it is larger than 4 KiB: is it the token file?";
  }
  std::string text;
  if (why.empty()) {
    text.resize(static_cast<size_t>(st.st_size));
    ssize_t n = ::read(fd, text.data(), text.size());
    if (n < 0) why = std::string("reading it failed: ") + std::strerror(errno);
    text.resize(n < 0 ? 0 : static_cast<size_t>(n));
  }
  ::close(fd);
  if (!why.empty()) return Status::InvalidArgument("the token file " + path + " is refused: " + why);
  size_t begin = text.find_first_not_of(" \t\r\n");
  size_t end = text.find_last_not_of(" \t\r\n");
  if (begin == std::string::npos) {
    return Status::InvalidArgument("the token file " + path + " is empty");
  }
  return text.substr(begin, end - begin + 1);
}

Status WriteTokenFile(const std::string& path, const std::string& token) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::Unavailable("cannot write " + tmp + ": " + std::strerror(errno));
  std::string text = token + "\n";
  bool ok = ::fchmod(fd, 0600) == 0 &&
            ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Status::Unavailable("cannot write " + path);
  }
  return Status::OK();
}

Result<std::string> TokenFromFileOrEnvironment(const std::string& token_file) {
  if (!token_file.empty()) return ReadTokenFile(token_file);
  if (const char* t = std::getenv("RAYX_TOKEN"); t && *t) return std::string(t);
  if (const char* f = std::getenv("RAYX_TOKEN_FILE"); f && *f) return ReadTokenFile(f);
  return std::string();
}

bool SameHead(const std::string& a, const std::string& b) {
  auto ha = ParseHostPort(a);
  auto hb = ParseHostPort(b);
  if (!ha.ok() || !hb.ok() || ha->port != hb->port) return false;
  if (ha->host == hb->host) return true;
  auto ia = ResolveIpv4(ha->host);
  auto ib = ResolveIpv4(hb->host);
  if (!ia.ok() || !ib.ok()) return false;
  return *ia == *ib || (IsLocalAddress(*ia) && IsLocalAddress(*ib));
}

}  // namespace rayx::detail
