// The start-up handshake between a daemon and its starter.
#include "common/ready_pipe.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <sstream>

namespace rayx {

ReadyPipe::~ReadyPipe() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {
std::string OneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}
}  // namespace

void ReadyPipe::WriteLine(const std::string& line) {
  if (fd_ < 0) return;
  std::string data = line + "\n";
  // A reader that is gone must not kill this process (SIGPIPE's default):
  // the signal is blocked on this thread while writing, and one it raised is
  // taken back before unblocking.
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  bool broken = false;
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      broken = n < 0 && errno == EPIPE;
      break;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (broken && !sigismember(&old, SIGPIPE)) {
    const timespec now{0, 0};
    while (sigtimedwait(&pipe_only, nullptr, &now) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void ReadyPipe::WriteAndClose(const std::string& line) {
  if (fd_ < 0) return;
  WriteLine(line);
  ::close(fd_);
  fd_ = -1;
}

void ReadyPipe::Constructing() { WriteLine(kConstructingLine); }

void ReadyPipe::Ready(const std::map<std::string, std::string>& fields, bool keep_open) {
  std::string line = "READY";
  for (const auto& [k, v] : fields) line += " " + k + "=" + v;
  if (!keep_open) {
    WriteAndClose(line);
    return;
  }
  WriteLine(line);
  if (fd_ < 0) return;
  // Out of the way of the program's own descriptors (one that closes fd 3 and
  // opens a file must not get these lines), and not inherited by what it
  // starts: the pipe's end is this process's exit.
  int high = ::fcntl(fd_, F_DUPFD_CLOEXEC, kReportFdFloor);
  if (high >= 0) {
    ::close(fd_);
    fd_ = high;
  } else {
    ::fcntl(fd_, F_SETFD, FD_CLOEXEC);
  }
}

void ReadyPipe::Fail(const std::string& message) { WriteAndClose("ERROR " + OneLine(message)); }

void ReadyPipe::Report(const std::string& line) { WriteLine(OneLine(line)); }

bool ParseReadyLine(const std::string& line, std::map<std::string, std::string>* fields) {
  std::istringstream in(line);
  std::string word;
  if (!(in >> word) || word != "READY") return false;
  while (in >> word) {
    auto eq = word.find('=');
    if (eq == std::string::npos) return false;
    (*fields)[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return true;
}

}  // namespace rayx
