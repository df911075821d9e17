// The start-up handshake between a daemon and its starter.
#include "common/ready_pipe.h"

#include <unistd.h>

#include <sstream>

namespace rayx {

ReadyPipe::~ReadyPipe() {
  if (fd_ >= 0) ::close(fd_);
}

void ReadyPipe::WriteLine(const std::string& line) {
  if (fd_ < 0) return;
  std::string data = line + "\n";
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void ReadyPipe::WriteAndClose(const std::string& line) {
  if (fd_ < 0) return;
  WriteLine(line);
  ::close(fd_);
  fd_ = -1;
}

void ReadyPipe::Constructing() { WriteLine(kConstructingLine); }

void ReadyPipe::Ready(const std::map<std::string, std::string>& fields) {
  std::string line = "READY";
  for (const auto& [k, v] : fields) line += " " + k + "=" + v;
  WriteAndClose(line);
}

void ReadyPipe::Fail(const std::string& message) {
  std::string one_line = message;
  for (char& c : one_line) {
    if (c == '\n') c = ' ';
  }
  WriteAndClose("ERROR " + one_line);
}

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
