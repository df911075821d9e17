// A thread of the agent's own that runs queued jobs one at a time: work that
// takes seconds (spilling the object store, copying checkpoint shards) and
// must not stop the agent's event loop. Its results go back to the loop by
// the job's own means (boost::asio::post).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace rayx::worker {

class WorkThread {
 public:
  // At most `max_jobs` wait; more are refused (Post returns false).
  explicit WorkThread(size_t max_jobs) : max_jobs_(max_jobs), thread_([this] { Loop(); }) {}
  // Stops once the running job ends; waiting jobs are dropped.
  ~WorkThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  WorkThread(const WorkThread&) = delete;
  WorkThread& operator=(const WorkThread&) = delete;

  bool Post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (jobs_.size() >= max_jobs_) return false;
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }

  const size_t max_jobs_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  bool stop_ = false;                       // guarded by mu_
  std::thread thread_;                      // last: starts once the rest is made
};

}  // namespace rayx::worker
