// How a daemon tells the process that started it whether start-up worked.
//
// The starter passes the write end of a pipe as --ready-fd N. The daemon writes
// exactly one line, "READY key=value ..." or "ERROR message", then closes it.
// A worker that runs an actor's constructor before it is ready (a detached
// actor the head creates) first writes "CONSTRUCTING": it is up, and no start
// limit applies to the constructor.
// A worker told to report its constructor (WorkerEnv::report_construction)
// keeps the pipe open after READY and writes "CONSTRUCTOR BEGAN" when its
// owner's constructor call starts, then "CONSTRUCTOR SUCCEEDED" or
// "CONSTRUCTOR FAILED message"; the pipe closes when the worker exits.
// The starter reads until EOF: a daemon that dies before writing shows up as EOF
// with no line, never as a hang.
#pragma once

#include <map>
#include <string>

namespace rayx {

inline constexpr const char* kConstructingLine = "CONSTRUCTING";
inline constexpr const char* kConstructorBeganLine = "CONSTRUCTOR BEGAN";
inline constexpr const char* kConstructorSucceededLine = "CONSTRUCTOR SUCCEEDED";
inline constexpr const char* kConstructorFailedPrefix = "CONSTRUCTOR FAILED ";

class ReadyPipe {
 public:
  // fd < 0 means nobody is listening: every call is a no-op.
  explicit ReadyPipe(int fd) : fd_(fd) {}
  ~ReadyPipe();
  ReadyPipe(const ReadyPipe&) = delete;
  ReadyPipe& operator=(const ReadyPipe&) = delete;

  // `keep_open`: the pipe stays open for Report, close-on-exec and moved to a
  // descriptor at or above kReportFdFloor.
  static constexpr int kReportFdFloor = 200;
  void Ready(const std::map<std::string, std::string>& fields, bool keep_open = false);
  int fd() const { return fd_; }
  void Fail(const std::string& message);
  // Writes the CONSTRUCTING line; Ready or Fail follows.
  void Constructing();
  // After Ready(..., true): one more line (newlines in it become spaces). A
  // reader that is gone makes it a no-op, never a SIGPIPE.
  void Report(const std::string& line);

 private:
  void WriteLine(const std::string& line);
  void WriteAndClose(const std::string& line);
  int fd_;
};

// Parses "READY k=v k2=v2" into fields; returns false for anything else.
bool ParseReadyLine(const std::string& line, std::map<std::string, std::string>* fields);

}  // namespace rayx
