// Log line formatting.
#include "common/logging.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace rayx::detail {
namespace {
std::string& ProgramName() {
  static std::string name = "rayx";
  return name;
}
const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "D";
    case LogLevel::kInfo: return "I";
    case LogLevel::kWarning: return "W";
    case LogLevel::kError: return "E";
    case LogLevel::kFatal: return "F";
  }
  return "?";
}
}  // namespace

void SetLogProgramName(const std::string& name) { ProgramName() = name; }

LogLine::LogLine(LogLevel level, const char* file, int line) : level_(level) {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() %
      1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  const char* base = file;
  for (const char* p = file; *p; ++p) {
    if (*p == '/') base = p + 1;
  }
  stream_ << LevelName(level) << " " << buf << "." << (ms / 100) << ((ms / 10) % 10) << (ms % 10)
          << " " << ProgramName() << "[" << getpid() << "] " << base << ":" << line << "] ";
}

LogLine::~LogLine() {
  stream_ << "\n";
  std::string s = stream_.str();
  // One write() per line keeps lines whole when several threads log.
  ssize_t ignored = ::write(STDERR_FILENO, s.data(), s.size());
  (void)ignored;
  if (level_ == LogLevel::kFatal) std::abort();
}

bool LogRateLimiter::Allow(std::chrono::steady_clock::time_point now, uint64_t* suppressed) {
  if (now - window_start_ >= period_) {
    window_start_ = now;
    used_ = 0;
  }
  if (used_ < burst_) {
    ++used_;
    *suppressed = suppressed_;
    suppressed_ = 0;
    return true;
  }
  ++suppressed_;
  return false;
}

}  // namespace rayx::detail
