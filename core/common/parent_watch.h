// Lets a daemon end with the process that started it (the embedded cluster of
// rayx::Init ends with its driver, even when the driver is killed).
#pragma once

#include <functional>
#include <memory>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

namespace rayx {

// When $RAYX_EXIT_WITH_PID names a process, polls it every 250 ms and calls
// `on_gone` once it no longer runs. Does nothing when the variable is unset.
class ParentWatch {
 public:
  ParentWatch(boost::asio::io_context& io, std::function<void()> on_gone);

 private:
  void Schedule();
  boost::asio::steady_timer timer_;
  std::function<void()> on_gone_;
  int pid_ = 0;
  unsigned long long start_time_ = 0;
};

}  // namespace rayx
