// Watching the process a daemon must not outlive.
#include "common/parent_watch.h"

#include <cstdlib>

#include "common/process_control.h"

namespace rayx {

ParentWatch::ParentWatch(boost::asio::io_context& io, std::function<void()> on_gone)
    : timer_(io), on_gone_(std::move(on_gone)) {
  const char* text = std::getenv("RAYX_EXIT_WITH_PID");
  if (text == nullptr || *text == '\0') return;
  pid_ = std::atoi(text);
  auto start = detail::ProcessStartTime(pid_);
  if (!start.ok()) {
    on_gone_();
    return;
  }
  start_time_ = *start;
  Schedule();
}

void ParentWatch::Schedule() {
  timer_.expires_after(std::chrono::milliseconds(250));
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    if (!detail::IsRunning({pid_, start_time_})) {
      on_gone_();
      return;
    }
    Schedule();
  });
}

}  // namespace rayx
