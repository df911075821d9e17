// Minimal leveled logging to stderr (daemons redirect stderr to their log file),
// plus RAYX_CHECK for programmer errors.
#pragma once

#include <chrono>
#include <cstdint>
#include <sstream>
#include <string>

namespace rayx::detail {

enum class LogLevel { kDebug, kInfo, kWarning, kError, kFatal };

// Builds one line and writes it atomically on destruction; aborts after kFatal.
class LogLine {
 public:
  LogLine(LogLevel level, const char* file, int line);
  ~LogLine();
  template <typename T>
  LogLine& operator<<(const T& v) {
    stream_ << v;
    return *this;
  }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

// Sets the program name printed on each line ("rayx-head").
void SetLogProgramName(const std::string& name);

// Allows at most `burst` log lines per `period`; counts what it suppressed so the
// next allowed line can say so. Used where a peer controls how often we log
// (garbage from the network must not fill the disk). Not thread-safe.
class LogRateLimiter {
 public:
  LogRateLimiter(int burst, std::chrono::milliseconds period) : burst_(burst), period_(period) {}
  // True when a line may be written now; `suppressed` is set to the number of
  // lines dropped since the last allowed one.
  bool Allow(std::chrono::steady_clock::time_point now, uint64_t* suppressed);

 private:
  int burst_;
  std::chrono::milliseconds period_;
  std::chrono::steady_clock::time_point window_start_{};
  int used_ = 0;
  uint64_t suppressed_ = 0;
};

}  // namespace rayx::detail

#define RAYX_LOG(level) \
  ::rayx::detail::LogLine(::rayx::detail::LogLevel::k##level, __FILE__, __LINE__)

// Aborts with a message when `cond` is false: for broken invariants, never for
// bad input.
#define RAYX_CHECK(cond) \
  if (cond) {            \
  } else                 \
    RAYX_LOG(Fatal) << "Check failed: " #cond " "

#ifdef NDEBUG
#define RAYX_DCHECK(cond) \
  while (false) RAYX_CHECK(cond)
#else
#define RAYX_DCHECK(cond) RAYX_CHECK(cond)
#endif
