// Progress bars and lines for long transfers.
#include "common/progress.h"

#include <cstdio>

namespace rayx {

namespace {
std::string Mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", static_cast<double>(bytes) / (1 << 20));
  return text;
}
}  // namespace

Progress::Progress(std::ostream& out, std::string what, uint64_t total, bool terminal)
    : out_(out), what_(std::move(what)), total_(total), terminal_(terminal) {}

void Progress::Update(uint64_t done) {
  if (total_ < kMinBytes) return;
  if (done > total_) done = total_;
  int percent = static_cast<int>(done * 100 / total_);
  if (terminal_) {
    constexpr int kWidth = 30;
    int filled = percent * kWidth / 100;
    out_ << "\r" << what_ << " [" << std::string(static_cast<size_t>(filled), '#')
         << std::string(static_cast<size_t>(kWidth - filled), '.') << "] " << percent << "% "
         << Mib(done) << "/" << Mib(total_) << " MiB" << std::flush;
    shown_ = true;
    return;
  }
  int quarter = percent / 25;
  if (quarter > last_quarter_) {
    last_quarter_ = quarter;
    out_ << what_ << ": " << quarter * 25 << "% (" << Mib(done) << " of " << Mib(total_)
         << " MiB)\n"
         << std::flush;
  }
}

void Progress::Finish() {
  if (shown_) out_ << "\n" << std::flush;
  shown_ = false;
}

}  // namespace rayx
